//===- RunOptions.h - cleave-run's command line -----------------*- C++ -*-===//
//
// cleave-run's options and the parser of its command line (CLI11), apart
// from the tool's main so that they can be tested and fuzzed without
// running a plan or leaving the process.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TOOLS_CLEAVE_RUN_RUNOPTIONS_H
#define CLEAVE_TOOLS_CLEAVE_RUN_RUNOPTIONS_H

#include "cleave/TrainingLoop.h"

#include <string>
#include <utility>
#include <vector>

namespace cleave {

/// What cleave-run's command line asks for.
struct RunOptions {
  std::string model;
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> named;
  std::string outputDir = ".";
  bool outputDirGiven = false;
  std::string backend = "cpu";
  std::string weightsDir; ///< --weights-dir DIR
  bool noOutput = false, printOutputs = false, printStats = false;
  long warmup = 0, repeat = 1;
  long ranks = 0;                 ///< --ranks N (0: not given)
  long threads = 0;               ///< --threads N per rank (0: not given)
  bool bindRanks = true;          ///< --bind core (true) or none
  double commTimeout = 300.0;     ///< --comm-timeout S
  std::string flightRecorder;     ///< --flight-recorder DIR
  long flightRecorderSize = 2048; ///< --flight-recorder-size N
  long maxRestarts = 0;           ///< --max-restarts N
  training::TrainOptions train;
};

/// What a command line amounts to.
enum class RunArgs {
  Run,   ///< Options parsed and checked: run the plan.
  Help,  ///< --help or -h: print the help and stop.
  Usage, ///< A bad command line: *error says why (exit status 2).
};

/// Parses cleave-run's arguments (argv[0] is the program) into *o, checks
/// their values and combinations that need no plan, and prints nothing.
/// With `embedded` (a binary written by cleave-compile --emit=exe) the plan
/// is inside and every positional argument is an input.
RunArgs parseRunArgs(int argc, const char *const *argv, bool embedded,
                     RunOptions *o, std::string *error);

/// cleave-run's usage lines ("usage: cleave-run MODEL.cleave ...").
const char *runUsage();

/// cleave-run --help: the usage, then every option with its help, by group.
std::string runHelp();

} // namespace cleave

#endif // CLEAVE_TOOLS_CLEAVE_RUN_RUNOPTIONS_H
