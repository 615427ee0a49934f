//===- PlannerEvaluate.cpp - Cost one candidate layout from a profile -----===//
//
// The planner's evaluation of a candidate: a profile's three stage programs
// read as a layer, the embedding's extra and the head's, extrapolated to the
// candidate's virtual stages, costed over its mesh (with its gradient
// buckets under --overlap-collectives), bounded before any schedule, then
// replayed on its pipeline schedule for its step time, bubble and memory.
//
//===----------------------------------------------------------------------===//

#include "PlannerInternal.h"

#include "cleave/Schedule/Schedule.h"
#include "cleave/Simulate/CostModel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <initializer_list>

namespace cleave::sim::detail {

namespace pl = schedule;

namespace {

/// Candidates whose bubble-free work is beyond this factor of the best
/// found so far are not replayed (they cannot come near it).
constexpr double kNearBest = 1.25;

/// The most microbatches a stage program holds between a forward step and
/// its backward step, from its step names in order.
int64_t heldMicrobatches(const std::vector<std::string> &steps) {
  int64_t held = 0, peak = 0;
  for (const std::string &s : steps) {
    if (s.empty())
      continue;
    held += s[0] == 'F' ? 1 : s[0] == 'B' ? -1 : 0;
    peak = std::max(peak, held);
  }
  return peak;
}

/// What ZeRO stage `stage` splits over dp x cp: 1 the optimizer states, 2
/// the gradient accumulators, 3 the parameters.
double &zeroPart(StageMemory &m, int stage) {
  return stage == 1   ? m.optimizerStates
         : stage == 2 ? m.accumulators
                      : m.parameters;
}

StageMemory memoryOf(const plan::Plan &stage) {
  StageMemory m;
  plan::PlanStats stats = plan::statistics(stage);
  double states = 0;
  for (const plan::StateTensor &st : stage.states)
    states += double(st.info.byteSize());
  m.optimizerStates = double(stats.optimizerStateBytes);
  m.parameters = states - m.optimizerStates;
  m.accumulators = metadataNumber(stage, plan::meta::kAccumulatorBytes);
  m.activations = metadataNumber(stage, plan::meta::kActivationBytes);
  // Low-precision parameter copies kept for the step: they grow with the
  // layers, as the states do.
  m.kept = metadataNumber(stage, plan::meta::kKeptBytes);
  int64_t held = heldMicrobatches(plan::pipelineSteps(stage));
  m.temporaries =
      std::max(0.0, double(stage.arenaBytes) - states - m.kept -
                        m.accumulators - double(held) * m.activations);
  m.flops =
      metadataNumber(stage, plan::meta::kFlops) / double(kProfileMicrobatches);
  return m;
}

/// a + k * b over the fields that add up with the layers (`scaled`), the
/// larger of a's and b's over those that do not (`largest`); any other
/// field keeps its default.
template <typename T>
T axpy(const T &a, double k, const T &b,
       std::initializer_list<double T::*> scaled,
       std::initializer_list<double T::*> largest) {
  T c;
  for (double T::*field : scaled)
    c.*field = a.*field + k * b.*field;
  for (double T::*field : largest)
    c.*field = std::max(a.*field, b.*field);
  return c;
}

/// A stage's costs add up with its layers, but for the largest message it
/// receives.
StageCost axpy(const StageCost &a, double k, const StageCost &b) {
  return axpy<StageCost>(
      a, k, b,
      {&StageCost::forward, &StageCost::backward, &StageCost::head,
       &StageCost::tail, &StageCost::stepComm, &StageCost::stepCompute,
       &StageCost::backwardComm, &StageCost::otherComm,
       &StageCost::otherCompute, &StageCost::tailCompute,
       &StageCost::reduceBytes, &StageCost::reduces, &StageCost::reduceSeconds},
      {&StageCost::transfer});
}

/// A stage's memory adds up with its layers, but for its temporaries (the
/// largest layer's are live at once).
StageMemory axpy(const StageMemory &a, double k, const StageMemory &b) {
  return axpy<StageMemory>(a, k, b,
                           {&StageMemory::parameters, &StageMemory::kept,
                            &StageMemory::optimizerStates,
                            &StageMemory::accumulators,
                            &StageMemory::activations, &StageMemory::flops},
                           {&StageMemory::temporaries});
}

/// The index of `mesh`'s data-parallel axis, or -1.
int64_t dataParallelAxis(const plan::Mesh &mesh) {
  int64_t dpAxis = -1;
  for (size_t a = 0; a < mesh.axisNames.size(); ++a)
    if (mesh.axisNames[a] == "dp")
      dpAxis = int64_t(a);
  return dpAxis;
}

/// The axes of `mesh` whose ranks hold the same parameters and see
/// different data (dp, and cp's slices of the sequence), in mesh order:
/// the gradients' all-reduces run over them.
std::vector<uint32_t> replicaAxes(const plan::Mesh &mesh) {
  std::vector<uint32_t> axes;
  for (size_t a = 0; a < mesh.axisNames.size(); ++a)
    if (mesh.axisNames[a] == "dp" || mesh.axisNames[a] == "cp")
      axes.push_back(uint32_t(a));
  return axes;
}

/// The profile's mesh with `dp` and `pp` on its axes.
plan::Mesh meshFor(const plan::Plan &profile, int64_t dp, int64_t pp) {
  plan::Mesh mesh = profile.mesh;
  for (size_t a = 0; a < mesh.axisNames.size(); ++a) {
    if (mesh.axisNames[a] == "dp")
      mesh.shape[a] = dp;
    else if (mesh.axisNames[a] == plan::kPipelineAxis)
      mesh.shape[a] = pp;
  }
  return mesh;
}

/// The rank of pipeline coordinate `pp` whose other coordinates are 0.
int64_t pipelineRank(const plan::Mesh &mesh, int64_t pp) {
  int64_t ppAxis = plan::pipelineAxis(mesh), rank = 0;
  for (size_t a = 0; a < mesh.shape.size(); ++a)
    rank = rank * mesh.shape[a] + (int64_t(a) == ppAxis ? pp : 0);
  return rank;
}

/// `compiled` with its all-gathers over dp (axis `dpAxis`) cut from the
/// profile's 1/2 share to a 1/dp one: under ZeRO, what a rank all-gathers
/// over dp is its share.
plan::Plan scaleGathers(const plan::Plan &compiled, int64_t dpAxis,
                        int64_t dp) {
  plan::Plan scaled = compiled;
  for (plan::Command &cmd : scaled.commands)
    if (cmd.kind == plan::CommandKind::Collective &&
        cmd.collective.op == plan::CollectiveOp::AllGather &&
        std::count(cmd.collective.axes.begin(), cmd.collective.axes.end(),
                   uint32_t(dpAxis)))
      cmd.collective.count = std::max<int64_t>(
          1, cmd.collective.count * kProfileDataParallel / dp);
  return scaled;
}

/// The profile's stage programs costed over a mesh of `dp` x `pp` (once:
/// later calls find them in `profile.costs`); `out` points at them.
std::string costProfile(Profile &profile, const Cluster &cluster,
                        const SimulateOptions &options, int64_t dp, int64_t pp,
                        const std::vector<StageCost> *&out) {
  auto [it, inserted] = profile.costs.try_emplace({dp, pp});
  out = &it->second;
  if (!inserted)
    return "";
  plan::Mesh mesh = meshFor(profile.plan, dp, pp);
  Placement placement = placeRanks(cluster, mesh.worldSize());
  // Each stage program's rank and the next pipeline rank: the first's,
  // a middle one's, the last's (whose next is the first: the messages
  // between them, such as a tied weight's, cross the whole pipeline).
  auto pairOf = [&](size_t stage) -> std::vector<int64_t> {
    if (pp < 2)
      return {};
    int64_t at = stage == 0 ? 0 : stage + 1 < kProfileLayers ? 1 : pp - 1;
    return {pipelineRank(mesh, at), pipelineRank(mesh, (at + 1) % pp)};
  };
  int64_t dpAxis = dataParallelAxis(mesh);
  for (const plan::Plan &compiled : profile.plan.stages) {
    plan::Plan scaled;
    const plan::Plan *stageOf = &compiled;
    if (profile.key.zero > 0 && dp != kProfileDataParallel && dpAxis >= 0) {
      scaled = scaleGathers(compiled, dpAxis, dp);
      stageOf = &scaled;
    }
    const plan::Plan &stage = *stageOf;
    StageCost cost;
    if (std::string e = costStage(stage, cluster, placement, options, mesh,
                                  pairOf(it->second.size()), cost);
        !e.empty())
      return "the profile's stage " + std::to_string(it->second.size()) + " " +
             e;
    it->second.push_back(cost);
  }
  return "";
}

/// The tail (what runs after the steps) of a one-stage candidate with
/// --overlap-collectives, `whole` being its stage and `units` its parts in
/// the order the last backward makes their gradients ready (the head's,
/// the layers' from the last, the embedding's). The gradient all-reduces
/// are packed into buckets of `bucketBytes` (0: one per all-reduce) a unit
/// at a time; each bucket runs on the communication stream while the
/// backward goes on, and its wait, with its share of the optimizer, comes
/// right before the next bucket starts (as ScheduleCollectives places
/// them). The backward's own collectives (tensor parallelism's) share the
/// communication stream: they wait for the buckets ahead of them, and the
/// backward for them from the first one, taken at the unit's start (so a
/// tensor-parallel layer's backward hardly overlaps the buckets before
/// it). `bucketSeconds(bytes, members)` costs one bucket.
double
overlappedTail(const StageCost &whole,
               const std::vector<const StageCost *> &units, double bucketBytes,
               const std::function<double(double, double)> &bucketSeconds) {
  double total = whole.reduceBytes;
  if (total <= 0)
    return whole.tail;
  double clock = 0, backward = 0, commEnd = 0, owed = 0, pending = 0,
         members = 0;
  bool started = false;
  auto flush = [&](double buckets) {
    for (double i = 0; i < buckets; ++i) {
      double bytes = pending / buckets;
      if (started)
        clock = std::max(clock, commEnd) + owed;
      commEnd = clock + bucketSeconds(bytes, members / buckets);
      owed = whole.tailCompute * bytes / total;
      started = true;
    }
    pending = members = 0;
  };
  for (const StageCost *u : units) {
    double comm = std::max(0.0, u->backwardComm),
           compute = std::max(0.0, u->backward - comm);
    // A unit with collectives of its own (tensor parallelism's) meets the
    // first near its start: from there it waits for the buckets ahead.
    if (comm > 0) {
      clock = std::max(clock, commEnd) + compute + comm;
      commEnd = clock;
    } else {
      clock += compute;
    }
    backward += compute + comm;
    pending += std::max(0.0, u->reduceBytes);
    members += std::max(0.0, u->reduces);
    if (members < 1)
      continue;
    if (bucketBytes <= 0)
      flush(std::round(members));
    else if (pending >= bucketBytes)
      flush(std::clamp(std::floor(pending / bucketBytes), 1.0,
                       std::round(members)));
  }
  if (pending > 0)
    flush(1);
  clock = std::max(clock, commEnd) + owed;
  return whole.tail - whole.reduceSeconds - whole.tailCompute + clock -
         backward;
}

/// A candidate's virtual stages (pp x chunks of them, stage k * pp + r on
/// pipeline rank r): each so many layers, the first with the embedding and
/// the last with the head.
struct VirtualStages {
  /// The profile's stage costs as one layer, the embedding's extra and the
  /// head's, over the candidate's mesh.
  StageCost layer, embedding, head;
  std::vector<StageCost> costs;
  std::vector<StageMemory> memories;
};

VirtualStages virtualStages(const Candidate &c, const Profile &profile,
                            const PlannerOptions &options,
                            const std::vector<StageCost> &costs) {
  VirtualStages vs;
  const StageCost &s0 = costs[0], &s1 = costs[1], &s2 = costs[2];
  vs.layer = s1;
  vs.embedding = axpy(s0, -1, s1);
  vs.head = axpy(s2, -1, s1);
  int64_t stages = c.pp * c.chunks;
  double perStage = double(options.layers) / double(stages);
  auto stageCost = [&](int64_t j) {
    StageCost cost = axpy(StageCost(), perStage, vs.layer);
    if (j == 0)
      cost = axpy(cost, 1, vs.embedding);
    if (j == stages - 1)
      cost = axpy(cost, 1, vs.head);
    if (c.zero >= 1) {
      // The optimizer updates a 1/dp share (the profile's: 1/2).
      double saved =
          cost.tailCompute * (1 - double(kProfileDataParallel) / double(c.dp));
      cost.tail -= saved;
      cost.otherCompute -= saved;
    }
    return cost;
  };
  auto stageMemory = [&](int64_t j) {
    StageMemory m = axpy(StageMemory(), perStage, profile.layer);
    m.temporaries = profile.layer.temporaries;
    if (j == 0)
      m = axpy(m, 1, profile.embedding);
    if (j == stages - 1)
      m = axpy(m, 1, profile.head);
    // What the candidate's ZeRO stage splits is split over its dp, not
    // the profile's.
    for (int z = 1; z <= c.zero; ++z)
      zeroPart(m, z) *= double(kProfileDataParallel) / double(c.dp);
    return m;
  };
  for (int64_t j = 0; j < stages; ++j) {
    vs.costs.push_back(stageCost(j));
    vs.memories.push_back(stageMemory(j));
  }
  return vs;
}

/// Under --overlap-collectives (one virtual stage): its tail with the
/// gradient all-reduces packed into buckets over the candidate's dp x cp
/// group, each packed and sliced back by copies when it holds several
/// all-reduces, and the buckets' memory.
void overlapBuckets(const Candidate &c, const Profile &profile,
                    const PlannerOptions &options, const Cluster &cluster,
                    VirtualStages &vs) {
  plan::Mesh mesh = meshFor(profile.plan, c.dp, c.pp);
  Placement placement = placeRanks(cluster, mesh.worldSize());
  plan::Command bucket;
  bucket.kind = plan::CommandKind::Collective;
  bucket.collective.op = plan::CollectiveOp::AllReduce;
  bucket.collective.dtype = plan::DType::F32;
  bucket.collective.axes = replicaAxes(mesh);
  std::vector<int64_t> group =
      plan::groupOf(mesh, bucket.collective.axes, 0).ranks;
  // Buckets repeat sizes (a layer's gradients each): each size is costed
  // once.
  std::map<int64_t, double> reduceSeconds;
  auto bucketSeconds = [&](double bytes, double members) {
    int64_t count = std::max<int64_t>(1, int64_t(bytes / 4));
    auto [it, added] = reduceSeconds.try_emplace(count, 0.0);
    if (added) {
      bucket.collective.count = count;
      it->second =
          commandCost(cluster, placement, options.simulate, bucket, group)
              .seconds;
    }
    return it->second +
           (members > 1.5 ? 2 * copySeconds(cluster.device, bytes) : 0);
  };
  std::vector<const StageCost *> units = {&vs.head};
  for (int64_t i = 0; i < options.layers; ++i)
    units.push_back(&vs.layer);
  units.push_back(&vs.embedding);
  StageCost &sc = vs.costs[0];
  double tail =
      overlappedTail(sc, units, c.bucketMB * 1024 * 1024, bucketSeconds);
  sc.otherComm += tail - sc.tail;
  sc.tail = tail;
  // A bucket, its reduced copy and the members sliced back out of it live
  // at once, beside the gradients it packed.
  vs.memories[0].temporaries +=
      3 * std::min(c.bucketMB * 1024 * 1024, sc.reduceBytes);
}

/// The busiest pipeline rank's work without any bubble, and of it what
/// runs outside the steps.
struct Busiest {
  double work = 0, other = 0;
};

/// What needs no schedule to know: sets the candidate's states (and the
/// least a recompute policy or ZeRO stage leaves, and what each ZeRO stage
/// above its own would save), and returns its busiest rank's work.
Busiest boundBeforeReplay(Candidate &c, const VirtualStages &vs,
                          const PlannerOptions &options) {
  int64_t p = c.pp, v = c.chunks;
  double m = double(c.microbatches);
  Busiest busiest;
  c.stateBytes = c.minimumBytes = 0;
  c.zeroSaves.fill(0);
  for (int64_t r = 0; r < p; ++r) {
    double fixed = 0, temporaries = 0, work = 0, other = 0, oneMicrobatch = 0;
    // What each ZeRO stage beyond the candidate's would take off: its
    // part, whole on every rank now, to a 1/(dp x cp) share.
    std::array<double, 4> saves = {0, 0, 0, 0};
    for (int64_t k = 0; k < v; ++k) {
      StageMemory sm = vs.memories[k * p + r];
      const StageCost &sc = vs.costs[k * p + r];
      fixed += sm.fixed();
      double saved = 0;
      for (int z = c.zero + 1; z <= 3; ++z) {
        saved += zeroPart(sm, z) * (1 - 1 / double(c.replicas()));
        saves[z] += saved;
      }
      temporaries = std::max(temporaries, sm.temporaries);
      oneMicrobatch += sm.activations;
      work += (sc.forward + sc.backward) * m + sc.head + sc.tail;
      other += sc.head + sc.tail;
    }
    // Every schedule holds at least one microbatch's activations of each
    // of its chunks at some point (its first backward's).
    c.stateBytes = std::max(c.stateBytes, fixed + temporaries + oneMicrobatch);
    c.minimumBytes = std::max(
        c.minimumBytes, fixed - saves[std::max(c.zero, options.maxZero())]);
    for (int z = 0; z <= 3; ++z)
      c.zeroSaves[z] = std::max(c.zeroSaves[z], saves[z]);
    if (work > busiest.work) {
      busiest.work = work;
      busiest.other = other;
    }
  }
  return busiest;
}

/// Replays the candidate's schedule on its virtual stages' durations: its
/// step time and parts on its slowest pipeline rank, its bubble, and the
/// most memory a rank needs at its schedule's peak of held activations.
void replaySchedule(Candidate &c, const VirtualStages &vs,
                    const PlannerOptions &options) {
  int64_t p = c.pp, v = c.chunks, stages = p * v;
  double m = double(c.microbatches);
  pl::ScheduleOptions so;
  if (std::string e = pl::parseScheduleKind(c.schedule(), so); !e.empty()) {
    c.rejected = e;
    return;
  }
  so.ranks = p;
  so.microbatches = c.microbatches;
  std::string error;
  std::vector<std::vector<pl::Step>> order = pl::buildSchedule(so, error);
  if (!error.empty()) {
    c.rejected = "schedule: " + error;
    return;
  }
  pl::StepCosts stepCosts;
  double transfer = 0, head0 = 0;
  for (int64_t j = 0; j < stages; ++j) {
    stepCosts.forwardOf.push_back(vs.costs[j].forward);
    stepCosts.backwardInputOf.push_back(vs.costs[j].backward);
    stepCosts.backwardWeightOf.push_back(0);
    transfer = std::max(transfer, vs.costs[j].transfer);
    head0 = std::max(head0, vs.costs[j].head);
  }
  stepCosts.transfer = p > 1 ? transfer : 0;
  pl::Simulation sim = pl::simulate(order, so, stepCosts, error);
  if (!error.empty()) {
    c.rejected = "schedule: " + error;
    return;
  }
  std::vector<double> last(p, 0);
  for (const pl::TimedStep &t : sim.steps)
    last[t.rank] = std::max(last[t.rank], t.end);
  c.stepSeconds = 0;
  c.memoryBytes = 0;
  for (int64_t r = 0; r < p; ++r) {
    double tail = 0, compute = 0, comm = 0, other = 0;
    for (int64_t k = 0; k < v; ++k) {
      const StageCost &sc = vs.costs[k * p + r];
      tail += sc.tail;
      compute += sc.stepCompute * m;
      comm += sc.stepComm * m;
      other += sc.otherComm + sc.otherCompute;
    }
    double end = head0 + last[r] + tail;
    if (end > c.stepSeconds) {
      c.stepSeconds = end;
      c.stepCompute = compute;
      c.stepComm = comm;
      c.otherSeconds = other;
    }
    // Memory: states and accumulators of its chunks, the activations its
    // schedule holds at its peak, its largest temporaries.
    double fixed = 0, temporaries = 0, held = 0, peak = 0;
    for (int64_t k = 0; k < v; ++k) {
      const StageMemory &sm = vs.memories[k * p + r];
      fixed += sm.fixed();
      temporaries = std::max(temporaries, sm.temporaries);
    }
    for (const pl::Step &step : order[r]) {
      double act = vs.memories[step.stage].activations;
      if (step.kind == pl::StepKind::Forward) {
        held += act;
        peak = std::max(peak, held);
      } else if (step.kind != pl::StepKind::BackwardWeight) {
        held -= act;
      }
    }
    c.memoryBytes = std::max(c.memoryBytes, fixed + peak + temporaries);
  }
  c.bubble = sim.bubble;
  if (options.memoryLimit > 0 && c.memoryBytes > options.memoryLimit)
    c.rejected = "over memory: " + formatMemory(c.memoryBytes) +
                 " per device, over " + formatMemory(options.memoryLimit);
}

} // namespace

void compileProfile(Profile &p, const PlannerOptions &options) {
  p.error = options.compileProfile(p.key, p.plan);
  if (p.error.empty() && p.plan.stages.size() != size_t(kProfileLayers))
    p.error = "the profile has " + std::to_string(p.plan.stages.size()) +
              " stage programs, not " + std::to_string(kProfileLayers);
  if (!p.error.empty())
    return;
  StageMemory s0 = memoryOf(p.plan.stages[0]), s1 = memoryOf(p.plan.stages[1]),
              s2 = memoryOf(p.plan.stages[2]);
  p.layer = s1;
  p.embedding = axpy(s0, -1, s1);
  p.head = axpy(s2, -1, s1);
  p.embedding.temporaries = s0.temporaries;
  p.head.temporaries = s2.temporaries;
}

void evaluate(Candidate &c, Profile &profile, const PlannerOptions &options,
              const Cluster &cluster, double incumbent) {
  const std::vector<StageCost> *costs = nullptr;
  if (std::string e =
          costProfile(profile, cluster, options.simulate, c.dp, c.pp, costs);
      !e.empty()) {
    c.rejected = e;
    return;
  }
  VirtualStages vs = virtualStages(c, profile, options, *costs);
  if (c.overlap && vs.costs.size() == 1)
    overlapBuckets(c, profile, options, cluster, vs);
  // Before replaying the schedule: what needs no schedule to know. The
  // states alone, and the busiest rank's work without any bubble.
  Busiest busiest = boundBeforeReplay(c, vs, options);
  if (options.memoryLimit > 0 && c.stateBytes > options.memoryLimit) {
    c.memoryBytes = c.stateBytes;
    c.stepSeconds = busiest.work;
    c.otherSeconds = busiest.other;
    c.rejected = "over memory: at least " + formatMemory(c.stateBytes) +
                 " per device (its states and one microbatch), over " +
                 formatMemory(options.memoryLimit);
    return;
  }
  if (busiest.work > kNearBest * incumbent) {
    c.stepSeconds = busiest.work;
    c.otherSeconds = busiest.other;
    c.rejected = "slower: its busiest rank computes and communicates " +
                 ms(busiest.work) + " without a bubble, beyond the best " +
                 ms(incumbent);
    return;
  }
  replaySchedule(c, vs, options);
}

} // namespace cleave::sim::detail
