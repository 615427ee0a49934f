//===- Simulator.h - Replay a compiled plan on a cluster --------*- C++ -*-===//
//
// Replays one step of a plan on every rank of its mesh: each rank runs its
// commands (its stage's, for a pipelined plan) on a compute stream and a
// communication stream, with the cost model's durations and the plan's
// dependencies: an asynchronous collective runs on the communication
// stream and completes the event a Wait waits for; a collective ends when
// the last member of its group arrives plus its cost; a Recv waits for its
// Send (messages between two ranks match in order). Gives the step time,
// the exposed communication, the pipeline bubble (from Marker commands),
// MFU and HFU, each rank's memory, and the timeline as a Chrome trace.
// Plain C++ over the plan's structures (no LLVM).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SIMULATE_SIMULATOR_H
#define CLEAVE_SIMULATE_SIMULATOR_H

#include "cleave/PlanFormat.h"
#include "cleave/Simulate/Cluster.h"
#include "cleave/Simulate/CostModel.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cleave::sim {

struct SimulateOptions {
  /// The collective algorithm; none: the faster of ring and tree for each
  /// all-reduce and broadcast (as NCCL chooses by size).
  std::optional<Algorithm> algorithm;
  /// Record every command's span for the trace (steps are always kept).
  bool traceCommands = true;
};

/// A span of the simulated timeline, in seconds from the step's start.
struct Span {
  int64_t rank = 0;
  /// 0: compute stream, 1: communication stream, 2: a pipeline step
  /// (between its Marker commands).
  int stream = 0;
  std::string name;
  std::string category; ///< gemm, kernel, copy, collective, wait, forward,
                        ///< backward, ...
  double start = 0, end = 0;
};

struct RankResult {
  int64_t rank = 0, stage = 0;
  double end = 0;            ///< When its last command ends.
  double computeSeconds = 0; ///< Compute commands (kernels, GEMMs, copies).
  double commSeconds = 0;    ///< Collectives' own cost, either stream.
  /// Time the compute stream waited for communication: blocking
  /// collectives' cost, Waits for an async collective, a Recv's transfer.
  double exposedCommSeconds = 0;
  /// Time the compute stream waited for peers: other members of a
  /// collective, or a Recv's sender (the pipeline bubble, imbalance).
  double peerWaitSeconds = 0;
  uint64_t arenaBytes = 0, stateBytes = 0;
  double flops = 0, modelFlops = 0; ///< Its plan's, per step.
};

struct SimResult {
  double stepSeconds = 0;
  std::vector<RankResult> ranks;
  /// Pipelined plans with markers: idle time in the pipeline ranks of the
  /// first data/tensor coordinate over p times the makespan of their steps
  /// (as cleave-run --trace measures it); -1 otherwise.
  double bubble = -1;
  /// The compiler's expectation (metadata "pipeline_expected": the
  /// schedule's bubble by the formula and with equal stages), or "".
  std::string expectedBubble;
  /// Over all ranks: hardware flops (every op, recompute included) and
  /// model flops (without recompute's extra), per step.
  double flops = 0, modelFlops = 0;
  /// The peak a device's GEMMs run at (FLOP/s) and its element type.
  double peakFlops = 0;
  std::string peakType;
  double mfu = 0, hfu = 0;
  Placement placement;
  /// Kernel commands costed by bytes from the plan's metadata (false: the
  /// plan has no kernel_costs, and kernels cost only their overhead).
  bool kernelCostsKnown = true;
  std::vector<Span> spans;
};

/// Simulates one step of `plan` on `cluster`. Returns an error (a deadlock
/// names the rank and the command it waits at), or "".
std::string simulatePlan(const plan::Plan &plan, const Cluster &cluster,
                         const SimulateOptions &options, SimResult &out);

/// A number in `plan`'s metadata (flops, activation_bytes, ...); 0 when
/// absent.
double metadataNumber(const plan::Plan &plan, plan::IntegerKey key);

/// What one stage program of a pipelined plan costs in a replayed schedule
/// (simulateReplay, and the planner's extrapolation): its first
/// microbatch's forward and backward steps, what runs before the steps
/// (head) and after them (tail: gradient reductions, the optimizer, what
/// another microbatch's step does beyond the first's), in seconds.
struct StageCost {
  double forward = 0, backward = 0, head = 0, tail = 0;
  /// Of forward + backward, and of head + tail: communication and compute.
  double stepComm = 0, stepCompute = 0, otherComm = 0, otherCompute = 0;
  /// Of backward: communication.
  double backwardComm = 0;
  /// Of tail: compute.
  double tailCompute = 0;
  /// The transfer of the largest message it receives.
  double transfer = 0;
  /// Of tail: the all-reduces over the data-parallel axis (the gradients',
  /// which --overlap-collectives packs into buckets): their operand bytes,
  /// number and seconds.
  double reduceBytes = 0, reduces = 0, reduceSeconds = 0;
  /// Its kernels' costs come from the plan's kernel_costs metadata.
  bool kernelCostsKnown = true;
};

/// The latency of one message step on `link` for ranks placed by
/// `placement`. With more ranks than cores: the link's shared latency, or
/// without one, its latency times ranks per core (the peer must be
/// scheduled first), but only its latency for a collective run as its
/// members' threads' work (`threadWork`: the simulator's blocking
/// collectives there, stretched by processor sharing already).
double stepLatency(const Link &link, const Placement &placement,
                   bool threadWork = false);

/// The cost of collective command `cmd` over `group` (ranks of a mesh
/// placed by `placement`): the fabric's one-shot algorithm for what it
/// stages, else the faster of ring, tree and (across nodes with several
/// members on each) the two-level algorithm, unless options.algorithm
/// says. `threadWork` as for stepLatency.
CommCost commandCost(const Cluster &cluster, const Placement &placement,
                     const SimulateOptions &options, const plan::Command &cmd,
                     const std::vector<int64_t> &group,
                     bool threadWork = false);

/// Costs `stage` (a stage program) as rank pair[0] of `mesh` whose next
/// pipeline rank is pair[1] (Send and Recv); an empty `pair`: rank 0 and
/// messages that cost nothing (one pipeline rank). Returns an error
/// (a stage without pipeline steps), or "".
std::string costStage(const plan::Plan &stage, const Cluster &cluster,
                      const Placement &placement,
                      const SimulateOptions &options, const plan::Mesh &mesh,
                      const std::vector<int64_t> &pair, StageCost &out);

/// A pipelined plan compiled at few microbatches, replayed as the virtual
/// stages of a longer schedule: `schedule.ranks` pipeline ranks, each
/// running `schedule.chunks` of the plan's stage programs (virtual stage j
/// = chunk * ranks + rank, so the plan has ranks * chunks stages, compiled
/// with 1F1B or GPipe), over `schedule.microbatches` microbatches.
///
/// Each stage program is costed once, by the cost model over the ranks of
/// the replayed mesh (the plan's, with `ranks` on the pp axis): its first
/// microbatch's forward and backward steps (between their Marker commands;
/// collectives, synchronous or not, at their full cost, messages sent at
/// the sender's), and what runs before and after the steps (gradient
/// reductions, the optimizer). The schedule is then replayed with those
/// durations (schedule::simulate), each message between ranks adding its
/// transfer. Ranks of one tensor- or data-parallel group run alike, so one
/// per pipeline rank is replayed: large meshes (thousands of ranks, hundreds
/// of microbatches) take milliseconds. The memory reported is the stage
/// programs' as compiled; flops scale with the microbatches.
struct ReplaySchedule {
  std::string kind = "1f1b"; ///< As --schedule: gpipe, 1f1b, interleaved:<v>.
  int64_t ranks = 0;         ///< Pipeline ranks p (0: the plan's stages / v).
  int64_t microbatches = 0;  ///< m (0: the plan's).
};
/// Reads "KIND[,pp=P][,microbatches=M]" (e.g. "interleaved:2,pp=64,
/// microbatches=512"). Returns an error message, or "".
std::string parseReplaySchedule(const std::string &text, ReplaySchedule &out);
std::string simulateReplay(const plan::Plan &plan, const Cluster &cluster,
                           const SimulateOptions &options,
                           const ReplaySchedule &schedule, SimResult &out);

/// The simulated timeline as Chrome trace JSON (the shape cleave-run
/// --trace and cleave-schedule --trace write): pipeline steps as pid 0,
/// one tid per rank; every command as pid 1, tid 2 * rank (compute) and
/// 2 * rank + 1 (communication); times in microseconds.
std::string simulationTrace(const SimResult &result);

/// The report cleave-sim prints: step time, exposed communication, bubble,
/// MFU/HFU, energy and cost, and each rank's memory.
std::string simulationReport(const SimResult &result, const Cluster &cluster);

/// One simulated step's energy (every device at board power for the whole
/// step: an upper bound) and price.
struct StepCost {
  double kWh = 0, deviceCost = 0, energyCost = 0;
  double total() const { return deviceCost + energyCost; }
};
StepCost stepCost(const SimResult &result, const Cluster &cluster);

/// The tokens one step of `plan` trains on: the global element count of its
/// first integer data input of rank 2 or more (B x T token ids); 0 when it
/// has none. `source` names the input and its shape.
double tokensPerStep(const plan::Plan &plan, std::string &source);

/// A whole run of `tokens` tokens at `tokensPerStep` a step: the steps
/// (rounded up), wall-clock time, energy and price.
std::string runBudgetReport(const SimResult &result, const Cluster &cluster,
                            double tokens, double tokensPerStep);

} // namespace cleave::sim

#endif // CLEAVE_SIMULATE_SIMULATOR_H
