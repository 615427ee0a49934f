//===- CompileDriver.h - The cleave-compile command line --------*- C++ -*-===//
//
// cleave-compile's options are one table (llvm::cl options in
// CompileDriver.cpp). The tool parses its command line into it; the Python
// module passes keyword arguments as the same options through runCompile,
// so both take every option with the same name, checks and meaning.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DRIVER_COMPILEDRIVER_H
#define CLEAVE_DRIVER_COMPILEDRIVER_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace cleave {
/// Runs cleave-compile with the given command line; returns the exit code.
int compileMain(int argc, char **argv);

/// One compile with cleave-compile's arguments, in this process.
struct CompileInvocation {
  /// The command line without the program name: the model and options,
  /// exactly as cleave-compile takes them.
  std::vector<std::string> args;
  /// Where errors, warnings, notes and the printed reports go (what
  /// cleave-compile prints on stderr); null: stderr.
  llvm::raw_ostream *messages = nullptr;
  /// Where --emit=mlir -o - prints; null: stdout.
  llvm::raw_ostream *output = nullptr;
  /// If set, receives the serialized plan instead of the -o file
  /// (--emit=plan).
  std::function<void(std::vector<uint8_t>)> planSink;
  /// If set, receives what --report prints (whether or not it is given).
  llvm::raw_ostream *report = nullptr;
  /// Stop once the options are parsed and checked, before the model is
  /// read: every value and combination that needs no model (--mesh,
  /// --shard, --max-memory, --init-parameters, --recompute, --schedule,
  /// --cluster with --simulate, ...). runCompile returns 0 for a good
  /// command line.
  bool stopAfterOptions = false;
};

/// Runs one compile; returns cleave-compile's exit code (0, 1 for an error,
/// 2 for a bad command line). Never exits the process: give no --help or
/// --version. Compiles run one at a time (the option table is global).
int runCompile(const CompileInvocation &invocation);

/// One entry of cleave-compile's option table.
struct CompileOptionInfo {
  enum Kind { Flag, Value, List };
  std::string name; ///< Without the dashes: "input-shape".
  Kind kind = Value;
  std::string valueName; ///< "name=d0xd1...", or empty.
  std::string help;
};

/// cleave-compile's options (not LLVM's own), sorted by name.
std::vector<CompileOptionInfo> compileOptionTable();
} // namespace cleave

#endif // CLEAVE_DRIVER_COMPILEDRIVER_H
