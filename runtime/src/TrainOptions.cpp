//===- TrainOptions.cpp - The training options of cleave-run --------------===//
//
// One table of the training options (--steps, --data, --log-every, ...):
// cleave-run parses its command line through it, and the Python module its
// keyword arguments, so both check every value the same way.
//
//===----------------------------------------------------------------------===//

#include "cleave/TrainingLoop.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cleave::training {

namespace {
struct TrainOptionSpec {
  const char *name;
  bool takesValue;
};
constexpr TrainOptionSpec kTrainOptions[] = {
    {"steps", true},
    {"data", true},
    {"tokens", true},
    {"token-dtype", true},
    {"synthetic", false},
    {"synthetic-vocab", true},
    {"seed", true},
    {"log-every", true},
    {"log-json", true},
    {"save-every", true},
    {"checkpoint-dir", true},
    {"async-checkpoint", false},
    {"resume", true},
    {"export-safetensors", true},
    {"export-onnx", true},
    {"onnx-model", true},
    {"measure-memory", false},
    {"trace", true},
    {"slow-rank", true},
    {"debug-fault", true},
    {"profile", false},
    {"profile-json", true},
};
} // namespace

bool parseCount(const char *text, long *out) {
  char *end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end || v < 0 || v > 1000000000)
    return false;
  *out = v;
  return true;
}

bool isTrainOption(const std::string &name, bool *takesValue) {
  for (const TrainOptionSpec &spec : kTrainOptions)
    if (name == spec.name) {
      if (takesValue)
        *takesValue = spec.takesValue;
      return true;
    }
  return false;
}

const std::vector<std::string> &trainOptionNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const TrainOptionSpec &spec : kTrainOptions)
      all.push_back(spec.name);
    return all;
  }();
  return names;
}

bool applyTrainOption(const std::string &name, const char *v, TrainOptions &t,
                      std::string *error) {
  bool takesValue = false;
  if (!isTrainOption(name, &takesValue)) {
    *error = "unknown option '--" + name + "'";
    return false;
  }
  std::string arg = "--" + name;
  if (takesValue && !v) {
    *error = "option " + arg + " needs a value";
    return false;
  }
  if (!takesValue) {
    if (name == "synthetic")
      t.synthetic = true;
    else if (name == "profile")
      t.profile = true;
    else if (name == "async-checkpoint")
      t.asyncCheckpoint = true;
    else
      t.measureMemory = true;
    return true;
  }
  if (name == "slow-rank") {
    long r = 0;
    double f = 0;
    int used = 0;
    if (std::sscanf(v, "%ld:%lf%n", &r, &f, &used) != 2 || v[used] != '\0' ||
        r < 0 || !(f >= 1.0) || f > 1000.0) {
      *error = "--slow-rank expects RANK:FACTOR with FACTOR from 1 to 1000 "
               "(e.g. 1:2), got '" +
               std::string(v) + "'";
      return false;
    }
    t.slowRank = r;
    t.slowFactor = f;
    return true;
  }
  if (name == "debug-fault") {
    long r = 0, step = 0;
    char mode[24] = {0};
    if (std::sscanf(v, "%ld:%ld:%23s", &r, &step, mode) != 3 || r < 0 ||
        step < 1 ||
        (std::strcmp(mode, "exit") && std::strcmp(mode, "hang") &&
         std::strcmp(mode, "stop") && std::strcmp(mode, "crash") &&
         std::strcmp(mode, "crash-during-save") &&
         std::strcmp(mode, "fail-during-save"))) {
      *error = "--debug-fault expects RANK:STEP:exit|hang|stop|crash|"
               "crash-during-save|fail-during-save, got '" +
               std::string(v) + "'";
      return false;
    }
    t.faultRank = r;
    t.faultStep = step;
    t.faultMode = mode;
    return true;
  }
  long n = 0;
  bool numeric = name == "steps" || name == "synthetic-vocab" ||
                 name == "log-every" || name == "save-every";
  if (numeric && !parseCount(v, &n)) {
    *error =
        arg + " expects a non-negative integer, got '" + std::string(v) + "'";
    return false;
  }
  if (name == "steps") {
    t.steps = n;
  } else if (name == "synthetic-vocab") {
    t.syntheticVocab = n;
  } else if (name == "log-every") {
    t.logEvery = n;
  } else if (name == "save-every") {
    t.saveEvery = n;
  } else if (name == "seed") {
    char *end = nullptr;
    errno = 0;
    unsigned long long seed = std::strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-') {
      *error =
          "--seed expects a non-negative integer, got '" + std::string(v) + "'";
      return false;
    }
    t.seed = seed;
    t.seedGiven = true;
  } else if (name == "data") {
    const char *eq = std::strchr(v, '=');
    if (!eq || eq == v || !eq[1]) {
      *error = "--data expects NAME=FILE, got '" + std::string(v) + "'";
      return false;
    }
    t.data.emplace_back(std::string(v, eq), std::string(eq + 1));
  } else if (name == "tokens") {
    t.tokens = v;
  } else if (name == "token-dtype") {
    t.tokenDType = v;
  } else if (name == "log-json") {
    t.logJson = v;
  } else if (name == "checkpoint-dir") {
    t.checkpointDir = v;
  } else if (name == "resume") {
    t.resume = v;
  } else if (name == "export-onnx") {
    t.exportOnnx = v;
  } else if (name == "onnx-model") {
    t.onnxModel = v;
  } else if (name == "trace") {
    t.tracePath = v;
  } else if (name == "profile-json") {
    t.profile = true;
    t.profileJson = v;
  } else {
    t.exportPath = v;
  }
  return true;
}

} // namespace cleave::training
