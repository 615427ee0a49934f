//===- Schedule.h - Pipeline schedules and their simulation ----*- C++ -*-===//
//
// The static, unrolled order in which each pipeline rank runs the forward
// and backward steps of every microbatch on its stages (GPipe, 1F1B,
// interleaved 1F1B with virtual stages, and a zero-bubble schedule that
// splits backward into its input-gradient and weight-gradient halves), and
// a simulator that replays those orders with their dependencies to give
// the step time, the bubble and the microbatches in flight per rank.
// Plain C++ (no LLVM), so that the runtime can read the same structures.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SCHEDULE_SCHEDULE_H
#define CLEAVE_SCHEDULE_SCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::schedule {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubble };

/// What one step of a rank does: the forward pass of a microbatch through
/// a stage, its backward pass (input and weight gradients), or, split for
/// the zero-bubble schedule, the input-gradient half (what the previous
/// stage waits for) and the weight-gradient half (which can wait).
enum class StepKind { Forward, Backward, BackwardInput, BackwardWeight };

struct Step {
  StepKind kind;
  /// The virtual stage: chunk * ranks + rank with `chunks` model chunks
  /// per rank (Megatron's layout); the rank's stage without chunks.
  int64_t stage;
  int64_t microbatch;
};

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int64_t ranks = 1;        ///< Pipeline ranks (p).
  int64_t microbatches = 1; ///< m.
  int64_t chunks = 1;       ///< Virtual stages per rank (v), interleaved only.
};

/// Reads "gpipe", "1f1b", "interleaved:<chunks per rank>" or "zero-bubble"
/// into `options` (kind and chunks). Returns an error message, or "".
std::string parseScheduleKind(const std::string &text,
                              ScheduleOptions &options);

/// Each rank's steps in the order it runs them. Returns an empty vector and
/// sets `error` for options the schedule cannot take.
std::vector<std::vector<Step>> buildSchedule(const ScheduleOptions &options,
                                             std::string &error);

/// Durations of the steps of one stage (the same on every stage): a
/// backward pass is `backwardInput + backwardWeight` when not split.
struct StepCosts {
  double forward = 1.0, backwardInput = 1.0, backwardWeight = 1.0;
  /// Per (virtual) stage, a factor on the three durations (a stage with
  /// more work takes longer); empty: every stage the same.
  std::vector<double> stageWeight;
  /// Per (virtual) stage, its own durations in seconds (a stage program's
  /// costed steps), used instead of the three above when given.
  std::vector<double> forwardOf, backwardInputOf, backwardWeightOf;
  /// The time a step's result takes to reach a stage on another rank (the
  /// activation or its gradient as a message), added to that dependency.
  double transfer = 0;
};

struct TimedStep {
  Step step;
  int64_t rank;
  double start, end;
};

struct Simulation {
  double makespan = 0;
  /// Idle time over the total time of all ranks: 1 - busy / (p * makespan).
  double bubble = 0;
  /// The most microbatches whose forward a rank has run and whose backward
  /// (weight half, when split) it has not finished: the activations it
  /// holds at once.
  std::vector<int64_t> peakInFlight;
  std::vector<TimedStep> steps;
};

/// Replays the ranks' orders: a step starts when its rank is free and its
/// inputs exist (a forward after the previous stage's forward of the same
/// microbatch, a backward after the next stage's backward and its own
/// forward, a weight gradient after its input gradient). Communication is
/// free. Sets `error` (and returns an empty simulation) when an order
/// waits on a step that can never run.
Simulation simulate(const std::vector<std::vector<Step>> &order,
                    const ScheduleOptions &options, const StepCosts &costs,
                    std::string &error);

/// The textbook bubble fraction of a schedule (Narayanan et al. 2021; Qi
/// et al. 2023 for zero-bubble): (p - 1) / (m + p - 1) for GPipe and 1F1B,
/// (p - 1) / (v m + p - 1) interleaved, and for the zero-bubble schedule
/// the share of (p - 1)(F + B - W) in the step.
double formulaBubble(const ScheduleOptions &options, const StepCosts &costs);

/// The simulated timeline as Chrome trace JSON (chrome://tracing,
/// Perfetto): one complete event per step, one row (tid) per rank, one
/// time unit of the costs as 1 ms.
std::string chromeTrace(const Simulation &simulation,
                        const ScheduleOptions &options);

/// "F", "B", "Bi" or "W" followed by the microbatch, with ".c<chunk>" when
/// a rank has several chunks.
std::string stepName(const Step &step, const ScheduleOptions &options);

} // namespace cleave::schedule

#endif // CLEAVE_SCHEDULE_SCHEDULE_H
