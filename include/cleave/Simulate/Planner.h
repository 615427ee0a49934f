//===- Planner.h - Search the parallel layouts of a step --------*- C++ -*-===//
//
// cleave-compile --auto: which dp x ep x pp x tp x cp (with cp's attention
// partitioning), pipeline schedule and chunks, microbatch size, sequence
// parallelism, ZeRO stage and recompute policy train a model fastest on a
// cluster within its devices' memory.
//
// A model of L repeated layers costs what its layers cost: the planner
// compiles *profiles*, the model cut down to its first three layers
// (ImportOptions::keepLayers) as a pipeline of three stage programs (the
// embedding with layer 0, layer 1, layer 2 with the head) over dp = 2 at
// two microbatches, one per tensor-parallel layout, context-parallel size
// and mode (the profile's mesh has the candidate's cp axis: its stage
// programs hold a 1/cp slice of each sequence's activations and its
// attentions' exchanges over cp), expert-parallel size (likewise: a 1/ep
// share of the experts and their states, the dispatch and combine over ep,
// the batch split over dp x ep), microbatch size and recompute policy.
// Layer 1's stage program is one layer; the other two are a layer plus the
// embedding or the head. Each candidate's virtual stages are then so many
// layers plus the embedding or head, costed over the candidate's mesh
// (costStage: its collectives, cp's exchanges among them, over its groups
// and links), and its schedule is replayed on those durations as
// simulateReplay does for a compiled plan. Memory per rank comes from
// the same stage programs: parameters and optimizer states, gradient
// accumulators (plan metadata accumulator_bytes), one microbatch's saved
// activations (activation_bytes) times the microbatches the schedule holds
// at once, and the rest of the profile's arena (temporaries). What the
// candidate's ZeRO stage splits over dp x cp (1: optimizer states, 2: also
// the accumulators, 3: also the parameters) is scaled from the profile's
// dp = 2 to the candidate's, as are its all-gathers over dp. A layout
// without a pipeline is also tried with --overlap-collectives at each
// bucket size: its gradient all-reduces, packed into buckets as the last
// backward makes them ready, run while that backward goes on.
//
// The driver supplies the compiler as a callback (compileProfile), which
// the search calls on several threads at once.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SIMULATE_PLANNER_H
#define CLEAVE_SIMULATE_PLANNER_H

#include "cleave/PlanFormat.h"
#include "cleave/Simulate/Cluster.h"
#include "cleave/Simulate/Simulator.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cleave::sim {

/// What a profile is compiled at.
struct ProfileKey {
  int64_t tp = 1;
  bool sequenceParallel = false;
  /// Context parallelism: the cp axis's size and, with cp > 1, how the
  /// attentions work on the split sequence (--context-parallel's value).
  int64_t cp = 1;
  std::string contextParallel;
  /// Expert parallelism: the ep axis's size.
  int64_t ep = 1;
  int64_t microbatchSize = 1;
  std::string recompute = "none";
  int zero = 0;
  std::string str() const;
};

/// The data-parallel size, stage programs and layers of a profile.
constexpr int64_t kProfileDataParallel = 2;
constexpr int64_t kProfileLayers = 3;
constexpr int64_t kProfileMicrobatches = 2;

struct PlannerOptions {
  int64_t devices = 0;     ///< Ranks to plan for (one per device).
  int64_t globalBatch = 0; ///< Sequences (rows of the batch) per step.
  int64_t layers = 0;      ///< The model's repeated layers.
  double memoryLimit = 0;  ///< Bytes per device.
  /// Tensor-parallel sizes to try (empty: the powers of two up to the
  /// devices per node).
  std::vector<int64_t> tensorParallel;
  /// Context-parallel sizes to try (empty: 1 and the powers of two up to
  /// the devices per node that divide the devices and `sequence`), each
  /// above 1 with every mode of contextParallelModes.
  std::vector<int64_t> contextParallel;
  std::vector<std::string> contextParallelModes = {"all-to-all", "ring"};
  /// The data inputs' sequence (dimension 1) that cp splits; 0: none, so
  /// no cp above 1 by default.
  int64_t sequence = 0;
  /// Expert-parallel sizes to try (empty: 1 alone). The driver gives the
  /// sizes that divide the devices and the model's experts, where it has
  /// any.
  std::vector<int64_t> expertParallel;
  std::vector<int64_t> microbatchSizes = {1, 2, 4};
  /// Recompute policies and ZeRO stages (0 to 3), tried in this order for
  /// each tensor-parallel layout and microbatch size until every layout
  /// fits: what saves more memory costs more time. A ZeRO stage is tried
  /// only where it would make a layout over memory fit.
  std::vector<std::string> recompute = {"none", "selective", "full"};
  std::vector<int> zero = {0, 1, 2, 3};
  int maxZero() const {
    return zero.empty() ? 0 : *std::max_element(zero.begin(), zero.end());
  }
  /// All-reduce bucket sizes (MiB) tried with --overlap-collectives on
  /// the layouts that take it (no pipeline, no ZeRO, dp x cp > 1), beside
  /// the layout without (empty: none).
  std::vector<double> bucketMB = {1, 5, 25, 100};
  /// Try sequence parallelism (with tp > 1) as well as without.
  bool sequenceParallel = true;
  /// The most chunks per pipeline rank of an interleaved schedule.
  int64_t maxChunks = 4;
  SimulateOptions simulate;
  /// Compiles the profile of `key` into `plan` (a pipelined plan of three
  /// stage programs over dp = 2, ep, pp = 3, tp and cp at two
  /// microbatches, with the key's ZeRO stage and attention partitioning);
  /// returns "" or why it cannot be (a tp, or an all-to-all cp, that does
  /// not divide the heads).
  std::function<std::string(const ProfileKey &, plan::Plan &)> compileProfile;
};

struct Candidate {
  int64_t dp = 1, tp = 1, pp = 1, chunks = 1, microbatchSize = 1,
          microbatches = 1;
  bool sequenceParallel = false;
  /// The cp axis's size and, with cp > 1, --context-parallel's mode.
  int64_t cp = 1;
  std::string contextParallel;
  /// The ep axis's size: the experts split over it, the batch over dp x ep.
  int64_t ep = 1;
  int zero = 0;
  std::string recompute = "none";
  /// --overlap-collectives with buckets of bucketMB MiB.
  bool overlap = false;
  double bucketMB = 0;
  /// Predicted: the step, its parts on the slowest pipeline rank (compute
  /// and communication in the steps, the rest of the step: gradient
  /// reductions and the optimizer), the bubble, the most bytes a rank needs.
  double stepSeconds = 0, stepCompute = 0, stepComm = 0, otherSeconds = 0,
         bubble = 0, memoryBytes = 0;
  /// The least memoryBytes can be, known before replaying the schedule:
  /// parameters, optimizer states, gradient accumulators, temporaries and
  /// one microbatch's activations of its chunks.
  double stateBytes = 0;
  /// The least memory any recompute policy or ZeRO stage the search tries
  /// could bring its layout to: its states with what the highest ZeRO
  /// stage splits cut to a 1/dp share (a bound the search prunes by).
  double minimumBytes = 0;
  /// Per ZeRO stage above its own: the bytes that stage would take off
  /// its fullest rank (optimizer states, then gradient accumulators, then
  /// parameters, each to a 1/dp share).
  std::array<double, 4> zeroSaves = {0, 0, 0, 0};
  /// Why it was not chosen: pruned (divisibility, memory, a profile that
  /// did not compile) or "" for a feasible one.
  std::string rejected;
  /// --schedule's value: 1f1b, or interleaved:<chunks>.
  std::string schedule() const;
  /// The cleave-compile options that compile it.
  std::string options() const;
  /// The ranks that hold the same parameters and see different data: dp
  /// x cp (what ZeRO splits over and the gradients are reduced over; the
  /// dense parameters' gradients are reduced over ep as well, but ZeRO
  /// splits over dp x cp only).
  int64_t replicas() const { return dp * cp; }
  /// "dp=4 tp=2 pp=1 ..." for tables (cp=N:mode after tp where cp > 1,
  /// ep=N after dp where ep > 1).
  std::string layout() const;
};

struct PlanSearch {
  /// Feasible candidates, fastest first.
  std::vector<Candidate> feasible;
  /// Pruned candidates, with why.
  std::vector<Candidate> rejected;
  int64_t profilesCompiled = 0;
  double profileSeconds = 0, searchSeconds = 0;
  /// The tensor-, context- and expert-parallel sizes searched.
  std::vector<int64_t> tensorParallel, contextParallel, expertParallel;
};

/// A layout's mesh axes of more than one rank, in the order --mesh lays
/// them out (cp, dp, pp, ep, tp: Driver::configurePartitioning's rank
/// placement), so that a profile and the chosen options compile to the
/// placement the planner costs.
std::vector<std::pair<std::string, int64_t>>
layoutMesh(int64_t dp, int64_t ep, int64_t pp, int64_t tp, int64_t cp);

/// `bytes` as MiB or GiB with two decimals, as the planner prints memory.
std::string formatMemory(double bytes);

/// Searches `options`' layouts on `cluster`. Returns an error (no profile
/// compiled, bad options), or "" (`out.feasible` may still be empty).
std::string searchPlans(const PlannerOptions &options, const Cluster &cluster,
                        PlanSearch &out);

/// The --explain report: the axes searched, the search's size and time,
/// the `top` fastest candidates with step time, memory, energy and cost
/// per step, and for the runners-up and pruned ones why they lost.
std::string explainSearch(const PlanSearch &search, const Cluster &cluster,
                          const PlannerOptions &options, size_t top);

/// Every candidate as CSV, one per line after a header: its layout (cp and
/// its mode among it), the --auto options that compile it, predicted step
/// seconds, memory bytes, kWh and cost per step on `cluster`,
/// `tokensPerStep`, and why it was rejected ("" for a feasible one).
std::string candidatesCsv(const PlanSearch &search, const Cluster &cluster,
                          const PlannerOptions &options, double tokensPerStep);

} // namespace cleave::sim

#endif // CLEAVE_SIMULATE_PLANNER_H
