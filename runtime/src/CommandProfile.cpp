//===- CommandProfile.cpp - Where a run's time went, by command -----------===//

#include "cleave/CommandProfile.h"

#include "TrainingSupport.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <vector>

namespace cleave::training {

int printProfile(cleave_rt_executor executor, const std::string &what) {
  const cleave_rt_command_profile_t *records = nullptr;
  size_t count = 0;
  int64_t runs = 0;
  if (cleave_rt_status s =
          cleave_rt_executor_profile(executor, &records, &count, &runs))
    return statusFail(s);
  if (runs == 0)
    return -1;
  double total = 0;
  std::map<std::string, std::pair<double, int>> byKind;
  std::vector<size_t> order;
  for (size_t i = 0; i < count; ++i) {
    total += records[i].seconds;
    auto &k = byKind[records[i].kind];
    k.first += records[i].seconds;
    ++k.second;
    order.push_back(i);
  }
  auto msPerRun = [&](double seconds) {
    return 1e3 * seconds / static_cast<double>(runs);
  };
  std::printf("profile: %.3f ms per %s in commands (mean over %" PRId64
              " %s%s):",
              msPerRun(total), what.c_str(), runs, what.c_str(),
              runs == 1 ? "" : "s");
  const char *separator = " ";
  for (const auto &[kind, k] : byKind) {
    std::printf("%s%s %.3f ms (%d)", separator, kind.c_str(),
                msPerRun(k.first), k.second);
    separator = ", ";
  }
  std::printf("\n");
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return records[a].seconds > records[b].seconds;
  });
  std::printf("  ms/%-4s  share  command\n", what.c_str());
  for (size_t j = 0; j < std::min<size_t>(order.size(), 20); ++j) {
    const cleave_rt_command_profile_t &r = records[order[j]];
    std::printf("%8.3f  %5.1f%%  #%zu %s %s\n", msPerRun(r.seconds),
                total > 0 ? 100.0 * r.seconds / total : 0.0, order[j], r.kind,
                r.label);
  }
  return -1;
}

} // namespace cleave::training
