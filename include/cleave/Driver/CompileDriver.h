//===- CompileDriver.h - The cleave-compile command line --------*- C++ -*-===//

#ifndef CLEAVE_DRIVER_COMPILEDRIVER_H
#define CLEAVE_DRIVER_COMPILEDRIVER_H

namespace cleave {
/// Runs cleave-compile with the given command line; returns the exit code.
int compileMain(int argc, char **argv);
} // namespace cleave

#endif // CLEAVE_DRIVER_COMPILEDRIVER_H
