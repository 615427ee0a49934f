//===- PipelineTrace.h - The measured timeline of a pipelined step -*- C++ -*-//
//
// A plan's Marker commands bracket the steps of its pipeline schedule
// (F0, B0, ...). With tracing on, each rank's executor records when they
// ran; writePipelineTrace gathers the ranks' records of one run to rank 0,
// which writes them as a Chrome trace (the format cleave-schedule writes
// for the simulated timeline, so the two open side by side) and prints the
// measured bubble.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINETRACE_H
#define CLEAVE_PIPELINETRACE_H

#include "cleave/TrainingLoop.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::training {

/// One step one rank ran, in microseconds from the start of the run.
struct StepSpan {
  int64_t rank = 0;
  std::string name;
  double startUs = 0, endUs = 0;
};

/// The bubble of a measured step: 1 - (time all ranks spent inside steps)
/// / (ranks x makespan), the makespan running from the earliest begin to
/// the latest end over all ranks.
struct MeasuredBubble {
  int64_t ranks = 0;
  double busyMsPerRank = 0; ///< The mean time a rank spent inside steps.
  double makespanMs = 0;
  double bubble = 0;
};

/// The bubble of `spans` over `ranks` ranks (ranks without spans count as
/// idle); zero makespan gives a bubble of 0.
MeasuredBubble measureBubble(const std::vector<StepSpan> &spans, int64_t ranks);

/// "pipeline: measured bubble 31.2% over 4 ranks (busy 12.3 ms of 17.9 ms
/// per rank)".
std::string bubbleLine(const MeasuredBubble &m);

/// Chrome trace JSON (chrome://tracing, Perfetto): one complete ("ph": "X")
/// event per span, pid 0, one tid per rank, ts and dur in microseconds; the
/// category is "forward" for names starting with F, "backward" for B and W,
/// "step" otherwise.
std::string chromeTraceJson(const std::vector<StepSpan> &spans);

/// Every rank calls this after a run its executor traced
/// (cleave_rt_executor_set_tracing): each rank's markers are paired into
/// spans, named by the steps of the plan it runs (metadata
/// "pipeline_steps" of its stage) and gathered to rank 0 over ctx.comm.
/// Times are relative to the earliest start of the run over all ranks;
/// ranks share one steady clock on one host, and ranks on another host than
/// rank 0 are aligned by the moment they leave a gather (to within its
/// latency). Rank 0 writes `path` atomically and prints bubbleLine() on
/// stdout. `program` is the plan as loaded. Returns an exit code on
/// failure, -1 on success.
int writePipelineTrace(cleave_rt_program program, cleave_rt_executor e,
                       const std::string &path, const RankContext &ctx);

} // namespace cleave::training

#endif // CLEAVE_PIPELINETRACE_H
