//===- cleave-compile.cpp - Compile an ONNX model into a Cleave plan -------===//

#include "cleave/Driver/CompileDriver.h"

int main(int argc, char **argv) { return cleave::compileMain(argc, argv); }
