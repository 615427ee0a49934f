//===- TestPasses.h - Passes for testing Cleave's libraries -----*- C++ -*-===//

#ifndef CLEAVE_TEST_LIB_TESTPASSES_H
#define CLEAVE_TEST_LIB_TESTPASSES_H

#include "Cleave/IR/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace cleave::test {

#define GEN_PASS_DECL
#include "TestPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "TestPasses.h.inc"

/// Registers the test passes (test/lib/Passes.td) for cleave-opt.
void registerTestPasses();

} // namespace cleave::test

#endif // CLEAVE_TEST_LIB_TESTPASSES_H
