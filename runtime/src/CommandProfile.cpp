//===- CommandProfile.cpp - Where a run's time went, by command -----------===//

#include "cleave/CommandProfile.h"

#include "TrainingSupport.h"
#include "cleave/FileUtil.h"
#include "cleave/Json.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <vector>

namespace cleave::training {

namespace {
/// The executor's profile: its records and the runs they cover.
struct Profile {
  const cleave_rt_command_profile_t *records = nullptr;
  size_t count = 0;
  int64_t runs = 0;

  /// `seconds` over all runs as milliseconds per run.
  double msPerRun(double seconds) const {
    return 1e3 * seconds / static_cast<double>(runs);
  }
};

/// Reads `executor`'s profile into `p`: 0, or -1 when no run was profiled
/// (nothing to report), or an exit code on failure.
int readProfile(cleave_rt_executor executor, Profile &p) {
  if (cleave_rt_status s =
          cleave_rt_executor_profile(executor, &p.records, &p.count, &p.runs))
    return statusFail(s);
  return p.runs == 0 ? -1 : 0;
}
} // namespace

int printProfile(cleave_rt_executor executor, const std::string &what) {
  Profile profile;
  if (int rc = readProfile(executor, profile); rc != 0)
    return rc;
  const cleave_rt_command_profile_t *records = profile.records;
  const int64_t runs = profile.runs;
  double total = 0;
  std::map<std::string, std::pair<double, int>> byKind;
  std::vector<size_t> order;
  for (size_t i = 0; i < profile.count; ++i) {
    total += records[i].seconds;
    auto &k = byKind[records[i].kind];
    k.first += records[i].seconds;
    ++k.second;
    order.push_back(i);
  }
  std::printf("profile: %.3f ms per %s in commands (mean over %" PRId64
              " %s%s):",
              profile.msPerRun(total), what.c_str(), runs, what.c_str(),
              runs == 1 ? "" : "s");
  const char *separator = " ";
  for (const auto &[kind, k] : byKind) {
    std::printf("%s%s %.3f ms (%d)", separator, kind.c_str(),
                profile.msPerRun(k.first), k.second);
    separator = ", ";
  }
  std::printf("\n");
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return records[a].seconds > records[b].seconds;
  });
  std::printf("  ms/%-4s  share  command\n", what.c_str());
  for (size_t j = 0; j < std::min<size_t>(order.size(), 20); ++j) {
    const cleave_rt_command_profile_t &r = records[order[j]];
    std::printf("%8.3f  %5.1f%%  #%zu %s %s\n", profile.msPerRun(r.seconds),
                total > 0 ? 100.0 * r.seconds / total : 0.0, order[j], r.kind,
                r.label);
  }
  return -1;
}

std::string profileJsonPath(const std::string &file, int64_t rank) {
  if (rank == 0)
    return file;
  size_t slash = file.find_last_of('/');
  size_t dot = file.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    dot = file.size();
  return file.substr(0, dot) + ".rank" + std::to_string(rank) +
         file.substr(dot);
}

int writeProfileJson(cleave_rt_executor executor, const std::string &what,
                     const std::string &path) {
  Profile profile;
  if (int rc = readProfile(executor, profile); rc != 0)
    return rc;
  json::Value commands = json::Value::array();
  for (size_t i = 0; i < profile.count; ++i) {
    const cleave_rt_command_profile_t &r = profile.records[i];
    commands.push_back(
        {{"index", i},
         {"kind", r.kind},
         {"label", r.label},
         {"ms", json::number(profile.msPerRun(r.seconds), "%.6g")}});
  }
  json::Value doc = {{what + "s", profile.runs},
                     {"commands", std::move(commands)}};
  std::string out = json::dump(doc) + "\n";
  std::string error;
  if (!writeFileAtomically(path, out.data(), out.size(), &error))
    return fail("--profile-json: " + error);
  return -1;
}

} // namespace cleave::training
