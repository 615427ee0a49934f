//===- RunOptions.cpp - cleave-run's command line -------------------------===//
//
// The options of cleave-run's help, in order: inputs, outputs, execution,
// ranks; the training options go through the runtime's table
// (training::applyTrainOption), which the Python module shares.
//
//===----------------------------------------------------------------------===//

#include "RunOptions.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace cleave {

RunArgs parseRunArgs(int argc, const char *const *argv, bool embedded,
                     RunOptions *o, std::string *error) {
  auto usage = [&](const std::string &message) {
    *error = message;
    return RunArgs::Usage;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char **out) {
      if (i + 1 >= argc)
        return false;
      *out = argv[++i];
      return true;
    };
    const char *v = nullptr;
    if (arg == "--help" || arg == "-h") {
      return RunArgs::Help;
    } else if (arg == "--no-output") {
      o->noOutput = true;
    } else if (arg == "--print-outputs") {
      o->printOutputs = true;
    } else if (arg == "--print-stats") {
      o->printStats = true;

    } else if (arg == "--output-dir" || arg == "--backend" ||
               arg == "--input" || arg == "--warmup" || arg == "--repeat" ||
               arg == "--weights-dir") {
      if (!value(&v))
        return usage("option " + arg + " needs a value");
      if (arg == "--weights-dir") {
        o->weightsDir = v;
      } else if (arg == "--output-dir") {
        o->outputDir = v;
        o->outputDirGiven = true;
      } else if (arg == "--backend") {
        o->backend = v;
      } else if (arg == "--input") {
        const char *eq = std::strchr(v, '=');
        if (!eq || eq == v || !eq[1])
          return usage("--input expects NAME=FILE, got '" + std::string(v) +
                       "'");
        o->named.emplace_back(std::string(v, eq), std::string(eq + 1));
      } else if (!training::parseCount(v, arg == "--warmup" ? &o->warmup
                                                            : &o->repeat)) {
        return usage(arg + " expects a non-negative integer, got '" +
                     std::string(v) + "'");
      }
    } else if (arg == "--ranks") {
      if (!value(&v))
        return usage("option " + arg + " needs a value");
      if (!training::parseCount(v, &o->ranks) || o->ranks < 1 ||
          o->ranks > 4096)
        return usage("--ranks expects a rank count from 1 to 4096, got '" +
                     std::string(v) + "'");
    } else if (arg == "--threads") {
      if (!value(&v))
        return usage("option " + arg + " needs a value");
      if (!training::parseCount(v, &o->threads) || o->threads < 1 ||
          o->threads > 4096)
        return usage("--threads expects a thread count from 1 to 4096, got '" +
                     std::string(v) + "'");
    } else if (arg == "--bind") {
      if (!value(&v))
        return usage("option " + arg + " needs a value");
      if (std::string(v) != "core" && std::string(v) != "none")
        return usage("--bind expects 'core' or 'none', got '" + std::string(v) +
                     "'");
      o->bindRanks = std::string(v) == "core";
    } else if (arg == "--comm-timeout") {
      if (!value(&v))
        return usage("option " + arg + " needs a value");
      char *end = nullptr;
      errno = 0;
      double t = std::strtod(v, &end);
      if (errno || end == v || *end || !(t > 0) || t > 1e7)
        return usage("--comm-timeout expects a positive number of seconds, "
                     "got '" + std::string(v) + "'");
      o->commTimeout = t;
    } else if (bool takesValue = false;
               arg.rfind("--", 0) == 0 &&
               training::isTrainOption(arg.substr(2), &takesValue)) {
      // The training options: one table with the Python module's.
      if (takesValue && !value(&v))
        return usage("option " + arg + " needs a value");
      std::string problem;
      if (!training::applyTrainOption(arg.substr(2), takesValue ? v : nullptr,
                                      o->train, &problem))
        return usage(problem);
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usage("unknown option '" + arg + "'");
    } else if (o->model.empty() && !embedded) {
      o->model = arg;
    } else {
      o->positional.push_back(arg);
    }
  }
  if (o->model.empty() && !embedded)
    return usage("no model given");
  if (o->repeat < 1)
    return usage("--repeat must be at least 1");
  if (o->train.profile && o->backend != "cpu")
    return usage("--profile times commands on the cpu backend only, not on "
                 "--backend " + o->backend);
  if (o->train.measureMemory && o->backend != "cpu")
    return usage("--measure-memory fills and reads back the arena in host "
                 "memory, so it runs on the cpu backend only, not on "
                 "--backend " + o->backend);
  return RunArgs::Run;
}

} // namespace cleave
