//===- Compile.h - Compile a model as cleave-compile does -------*- C++ -*-===//
//
// cleave::compile runs one compile described by a CompileOptions value:
// import, the phase pipelines (cleave/Pipelines/Pipelines.h), the layout
// search of --auto, the reports, and the output. cleave-compile and the
// Python module both call it; compiles are independent of each other and
// may run at the same time.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_COMPILE_H
#define CLEAVE_COMPILER_COMPILE_H

#include "cleave/Compiler/CompileOptions.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm
namespace mlir {
class PassManager;
} // namespace mlir

namespace cleave {

/// Where one compile reads and writes besides its files.
struct CompileIO {
  /// Where errors, warnings, notes and the printed reports go (what
  /// cleave-compile prints on stderr); null: stderr.
  llvm::raw_ostream *messages = nullptr;
  /// Where --emit=mlir (or asm) with the output '-' prints; null: stdout.
  llvm::raw_ostream *output = nullptr;
  /// If set, receives the serialized plan instead of the output file
  /// (--emit=plan).
  std::function<void(std::vector<uint8_t>)> planSink;
  /// If set, receives what --report prints (whether or not it is given).
  llvm::raw_ostream *report = nullptr;
  /// Stop once the options are checked, before the model is read: every
  /// value and combination that needs no model (--mesh, --shard,
  /// --max-memory, --init-parameters, --recompute, --schedule, --cluster
  /// with --simulate, ...). compile returns 0 for good options.
  bool stopAfterOptions = false;
  /// If set, applied to every pass manager of the compile (cleave-compile:
  /// MLIR's pass manager options, --mlir-print-ir-after-all and the like).
  std::function<void(mlir::PassManager &)> configurePassManager;
  /// The running program's argv[0], to find cleave-run beside it for
  /// --emit=exe; empty: this process's executable.
  std::string argv0;
};

/// Runs one compile; returns 0, or 1 after printing the errors (as
/// `cleave-compile: error: <where>: <what>`). No output file is written
/// unless the compile succeeded.
int compile(const CompileOptions &options, const CompileIO &io = {});

/// Adds to `pm` (on builtin.module) the passes that take a program imported
/// under `options` to `phase` (train-step, partitioned, prepared, kernels or
/// llvm): what
/// `cleave-compile` with these options and `--print-pipeline=PHASE` prints.
/// Checks the options as a compile does; fails after printing the errors to
/// `io.messages`.
mlir::LogicalResult addPhasePipeline(mlir::OpPassManager &pm,
                                     const CompileOptions &options,
                                     CompilePhase phase,
                                     const CompileIO &io = {});

/// Registers --cleave-train-step-pipeline, --cleave-partitioned-pipeline and
/// --cleave-prepared-pipeline, whose options are cleave-compile's
/// (PhasePipelines.cpp).
void registerPhasePipelines();

} // namespace cleave

#endif // CLEAVE_COMPILER_COMPILE_H
