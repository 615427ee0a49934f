//===- CommandLine.h - cleave-compile's command line over CompileOptions --===//
//
// llvm::cl options bound to the fields of one CompileOptions value, made
// from the option table (visitCompileOptions). The tool and the options
// fuzzer parse with it; the compiler library has no global options.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TOOLS_CLEAVE_COMPILE_COMMANDLINE_H
#define CLEAVE_TOOLS_CLEAVE_COMPILE_COMMANDLINE_H

#include "cleave/Compiler/CompileOptions.h"

#include "llvm/Support/CommandLine.h"

#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace cleave {

/// cleave-compile's options, registered with llvm::cl once per process.
class CompileCommandLine {
public:
  CompileCommandLine();
  CompileCommandLine(const CompileCommandLine &) = delete;
  CompileCommandLine &operator=(const CompileCommandLine &) = delete;

  /// Parses `argv` (program name first) into options(), starting from the
  /// defaults. Returns false after printing the problems to `errs` (some
  /// of llvm::cl's go to stderr whatever the stream).
  bool parse(int argc, const char *const *argv, llvm::raw_ostream &errs);

  /// Hides every option but cleave-compile's from --help.
  void hideOtherOptions();

  const CompileOptions &options() const { return *bound; }

  /// The overview --help prints.
  static const char *overview();

private:
  std::unique_ptr<CompileOptions> bound;
  llvm::cl::OptionCategory general{"cleave-compile options"};
  llvm::cl::OptionCategory training{"cleave-compile training options"};
  std::vector<std::unique_ptr<llvm::cl::Option>> owned;
  std::deque<std::string> strings;
};

} // namespace cleave

#endif // CLEAVE_TOOLS_CLEAVE_COMPILE_COMMANDLINE_H
