//===- TestPasses.cpp - Registration of the test-only passes --------------===//

#include "TestPasses.h"

void cleave::test::registerTestPasses() { registerCleaveTestPasses(); }
