//===- MemoryReport.cpp - Every rank's measured arena use, on rank 0 ------===//

#include "cleave/MemoryReport.h"

#include "TrainingSupport.h"

#include <cstdio>
#include <vector>

namespace cleave::training {

std::string memoryLine(int64_t rank, int64_t stage,
                       const cleave_rt_memory_usage_t &u,
                       const std::string &what) {
  double percent = u.arena_bytes
                       ? 100.0 * static_cast<double>(u.high_water_mark) /
                             static_cast<double>(u.arena_bytes)
                       : 0.0;
  char buf[320];
  std::snprintf(
      buf, sizeof buf,
      "memory: rank %lld%s: %s wrote up to %llu of %llu arena bytes "
      "(%.1f%%); %llu bytes written, %llu held by constants, states "
      "and inputs",
      static_cast<long long>(rank),
      stage >= 0 ? (" (stage " + std::to_string(stage) + ")").c_str() : "",
      what.c_str(), static_cast<unsigned long long>(u.high_water_mark),
      static_cast<unsigned long long>(u.arena_bytes), percent,
      static_cast<unsigned long long>(u.written_bytes),
      static_cast<unsigned long long>(u.held_bytes));
  return buf;
}

namespace {
/// What each rank sends: its figures, and whether it has them (a rank that
/// failed to still takes part in the gather, so no peer waits for it).
struct Wire {
  cleave_rt_memory_usage_t usage = {};
  uint64_t ok = 0;
};
} // namespace

int reportMemory(cleave_rt_program program, cleave_rt_executor e,
                 const std::string &what, const RankContext &ctx) {
  Wire mine;
  cleave_rt_status failed = cleave_rt_executor_memory_usage(e, &mine.usage);
  mine.ok = failed ? 0 : 1;
  const int64_t world = ctx.worldSize > 1 ? ctx.worldSize : 1;
  std::vector<Wire> all(static_cast<size_t>(world), mine);
  if (world > 1) {
    cleave_rt_status s =
        cleave_rt_communicator_gather(ctx.comm, &mine, sizeof mine, all.data());
    if (s) {
      cleave_rt_status_free(failed);
      return statusFail(s);
    }
  }
  if (failed)
    return statusFail(failed);
  if (ctx.rank != 0)
    return -1;
  bool pipelined = cleave_rt_program_stage_count(program) > 0;
  for (int64_t r = 0; r < world; ++r) {
    if (!all[r].ok)
      continue; // that rank reports its own error
    size_t stage = 0;
    TRY(cleave_rt_program_stage_of_rank(program, static_cast<size_t>(r),
                                        &stage));
    std::printf("%s\n",
                memoryLine(r, pipelined ? static_cast<int64_t>(stage) : -1,
                           all[r].usage, what)
                    .c_str());
  }
  std::fflush(stdout);
  return -1;
}

} // namespace cleave::training
