//===- TrainOptions.cpp - The training options of cleave-run --------------===//
//
// One table of the training options (--steps, --data, --log-every, ...):
// cleave-run parses its command line through it, and the Python module its
// keyword arguments, so both check every value the same way.
//
//===----------------------------------------------------------------------===//

#include "FaultInjection.h"

#include "cleave/TrainingLoop.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

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
    {"inject-fault", true},
    {"profile", false},
    {"profile-json", true},
};
struct KindName {
  InjectedFault::Kind kind;
  const char *name;
};
constexpr KindName kKinds[] = {
    {InjectedFault::Kind::Crash, "crash"},
    {InjectedFault::Kind::Hang, "hang"},
    {InjectedFault::Kind::Stop, "stop"},
    {InjectedFault::Kind::Slow, "slow"},
    {InjectedFault::Kind::CorruptCheckpoint, "corrupt-checkpoint"},
    {InjectedFault::Kind::CrashDuringSave, "crash-during-save"},
    {InjectedFault::Kind::FailDuringSave, "fail-during-save"},
};

} // namespace

const char *faultKindName(InjectedFault::Kind kind) {
  for (const KindName &k : kKinds)
    if (k.kind == kind)
      return k.name;
  return "?";
}

bool parseInjectedFault(const std::string &text, InjectedFault *out,
                        std::string *error) {
  std::string kinds;
  for (const KindName &k : kKinds)
    kinds += (kinds.empty() ? "" : "|") + std::string(k.name);
  *error = "--inject-fault expects rank=R,step=S,kind=" + kinds +
           " (S from 1), got '" + text + "'";
  bool rank = false, step = false, kind = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = std::min(text.find(',', pos), text.size());
    std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      return false;
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "kind" && !kind) {
      auto it =
          std::find_if(std::begin(kKinds), std::end(kKinds),
                       [&](const KindName &k) { return value == k.name; });
      if (it == std::end(kKinds))
        return false;
      out->kind = it->kind;
      kind = true;
      continue;
    }
    long n = 0;
    if (!parseCount(value.c_str(), &n))
      return false;
    if (key == "rank" && !rank) {
      out->rank = n;
      rank = true;
    } else if (key == "step" && !step && n >= 1) {
      out->step = n;
      step = true;
    } else {
      return false;
    }
  }
  if (!rank || !step || !kind)
    return false;
  error->clear();
  return true;
}

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
  if (name == "inject-fault") {
    InjectedFault f;
    if (!parseInjectedFault(v, &f, error))
      return false;
    t.faults.push_back(f);
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
