//===- fuzz_options.cpp - libFuzzer target: the command-line options ------===//
//
// Whatever a user types on a command line must be refused with an error or
// accepted, never crash. The input is an argv split at NUL bytes, program
// name first: "cleave-compile" runs cleave-compile's command line and
// every check of option values and combinations (cleave::compile with
// stopAfterOptions: no model is read, nothing is written); "cleave-run"
// cleave-run's parser and the runtime's training options; any other name
// the same parser as a binary from cleave-compile --emit=exe (plan inside,
// every positional argument an input).
//
// llvm::cl also takes LLVM's own options and response files (@FILE);
// --help and --version end the process, and LLVM's options are not
// Cleave's, so an input naming an option outside cleave-compile's table,
// or a response file, is skipped.
//
//===----------------------------------------------------------------------===//

#include "RunOptions.h"

#ifdef CLEAVE_FUZZ_COMPILE_OPTIONS
#include "CommandLine.h"
#include "cleave/Compiler/Compile.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <set>
#endif

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#ifdef CLEAVE_FUZZ_COMPILE_OPTIONS
/// Whether llvm::cl would take `arg` as cleave-compile's own: a positional
/// argument or value, a number, "-" or "--", or the name of an option of
/// cleave-compile's table (with one or two dashes, maybe "=value").
static bool isCompileArgument(const std::string &arg) {
  static const std::set<std::string> names = [] {
    std::set<std::string> all;
    for (const cleave::CompileOptionInfo &info : cleave::compileOptionTable())
      all.insert(info.name);
    return all;
  }();
  if (!arg.empty() && arg[0] == '@')
    return false; // A response file: llvm::cl reads it.
  if (arg.empty() || arg[0] != '-' || arg == "-" || arg == "--")
    return true;
  char *end = nullptr;
  (void)std::strtod(arg.c_str(), &end);
  if (*end == '\0')
    return true;
  std::string name = arg.substr(arg.rfind("--", 0) == 0 ? 2 : 1);
  return names.count(name.substr(0, name.find('='))) != 0;
}

static int fuzzCompile(const std::vector<std::string> &args) {
  static cleave::CompileCommandLine *commandLine =
      new cleave::CompileCommandLine;
  std::vector<const char *> argv{"cleave-compile"};
  for (size_t i = 1; i < args.size(); ++i) {
    if (!isCompileArgument(args[i]))
      return -1;
    argv.push_back(args[i].c_str());
  }
  llvm::raw_null_ostream sink;
  if (!commandLine->parse(static_cast<int>(argv.size()), argv.data(), sink))
    return 0;
  cleave::CompileIO io;
  io.messages = &sink;
  io.output = &sink;
  io.stopAfterOptions = true;
  (void)cleave::compile(commandLine->options(), io);
  return 0;
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> args(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0)
      args.emplace_back();
    else
      args.back().push_back(static_cast<char>(data[i]));
  }
  if (args[0] == "cleave-compile") {
#ifdef CLEAVE_FUZZ_COMPILE_OPTIONS
    return fuzzCompile(args);
#else
    return -1;
#endif
  }
  std::vector<const char *> argv;
  for (const std::string &arg : args)
    argv.push_back(arg.c_str());
  cleave::RunOptions options;
  std::string error;
  (void)cleave::parseRunArgs(static_cast<int>(argv.size()), argv.data(),
                             /*embedded=*/args[0] != "cleave-run", &options,
                             &error);
  return 0;
}
