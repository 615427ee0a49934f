//===- Planner.cpp - Search the parallel layouts of a training step -------===//
//
// See Planner.h: profiles of three layers, extrapolated to each candidate's
// stages, replayed on its schedule.
//
//===----------------------------------------------------------------------===//

#include "cleave/Simulate/Planner.h"

#include "cleave/Pipeline/Schedule.h"
#include "cleave/Simulate/CostModel.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <thread>

namespace cleave::sim {
namespace {

namespace pl = pipeline;

/// Candidates whose bubble-free work is beyond this factor of the best
/// found so far are not replayed (they cannot come near it).
constexpr double kNearBest = 1.25;

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       since)
      .count();
}

std::string ms(double s) {
  char text[32];
  std::snprintf(text, sizeof text, s < 10 ? "%.1f ms" : "%.0f ms", s * 1e3);
  return text;
}

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

/// What a profile's stage program holds: memory (bytes per rank) and
/// flops (per microbatch). `kept` is the low-precision parameter copies
/// made once per step (mixed precision under ZeRO-1 and -2).
struct StageMemory {
  double parameters = 0, kept = 0, optimizerStates = 0, accumulators = 0,
         activations = 0, temporaries = 0, flops = 0;
  /// What lives through the step.
  double fixed() const {
    return parameters + kept + optimizerStates + accumulators;
  }
};

/// What ZeRO stage `stage` splits over dp: 1 the optimizer states, 2 the
/// gradient accumulators, 3 the parameters.
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
  m.accumulators = metadataNumber(stage, "accumulator_bytes");
  m.activations = metadataNumber(stage, "activation_bytes");
  // Low-precision parameter copies kept for the step: they grow with the
  // layers, as the states do.
  m.kept = metadataNumber(stage, "kept_bytes");
  int64_t held = heldMicrobatches(plan::pipelineSteps(stage));
  m.temporaries =
      std::max(0.0, double(stage.arenaBytes) - states - m.kept -
                        m.accumulators - double(held) * m.activations);
  m.flops = metadataNumber(stage, "flops") / double(kProfileMicrobatches);
  return m;
}

/// a + k * b, field by field.
StageCost axpy(const StageCost &a, double k, const StageCost &b) {
  StageCost c;
  c.forward = a.forward + k * b.forward;
  c.backward = a.backward + k * b.backward;
  c.head = a.head + k * b.head;
  c.tail = a.tail + k * b.tail;
  c.stepComm = a.stepComm + k * b.stepComm;
  c.stepCompute = a.stepCompute + k * b.stepCompute;
  c.backwardComm = a.backwardComm + k * b.backwardComm;
  c.otherComm = a.otherComm + k * b.otherComm;
  c.otherCompute = a.otherCompute + k * b.otherCompute;
  c.tailCompute = a.tailCompute + k * b.tailCompute;
  c.transfer = std::max(a.transfer, b.transfer);
  c.reduceBytes = a.reduceBytes + k * b.reduceBytes;
  c.reduces = a.reduces + k * b.reduces;
  c.reduceSeconds = a.reduceSeconds + k * b.reduceSeconds;
  return c;
}
StageMemory axpy(const StageMemory &a, double k, const StageMemory &b) {
  StageMemory c;
  c.parameters = a.parameters + k * b.parameters;
  c.kept = a.kept + k * b.kept;
  c.optimizerStates = a.optimizerStates + k * b.optimizerStates;
  c.accumulators = a.accumulators + k * b.accumulators;
  c.activations = a.activations + k * b.activations;
  c.flops = a.flops + k * b.flops;
  c.temporaries = std::max(a.temporaries, b.temporaries);
  return c;
}

/// A profile: its plan, or why it did not compile, and its three stage
/// programs' memory as one layer, the embedding's extra and the head's.
struct Profile {
  ProfileKey key;
  plan::Plan plan;
  std::string error;
  StageMemory layer, embedding, head;
  /// Per (dp, pp) of a candidate mesh: the stage programs' costs.
  std::map<std::pair<int64_t, int64_t>, std::vector<StageCost>> costs;
};

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

std::string costProfile(Profile &profile, const Cluster &cluster,
                        const SimulateOptions &options, int64_t dp,
                        int64_t pp, const std::vector<StageCost> *&out) {
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
  int64_t dpAxis = -1;
  for (size_t a = 0; a < mesh.axisNames.size(); ++a)
    if (mesh.axisNames[a] == "dp")
      dpAxis = int64_t(a);
  for (const plan::Plan &compiled : profile.plan.stages) {
    // Under ZeRO, what a rank all-gathers over dp is its 1/dp share.
    plan::Plan scaled;
    const plan::Plan *stageOf = &compiled;
    if (profile.key.zero > 0 && dp != kProfileDataParallel && dpAxis >= 0) {
      scaled = compiled;
      for (plan::Command &cmd : scaled.commands)
        if (cmd.kind == plan::CommandKind::Collective &&
            cmd.collective.op == plan::CollectiveOp::AllGather &&
            std::count(cmd.collective.axes.begin(), cmd.collective.axes.end(),
                       uint32_t(dpAxis)))
          cmd.collective.count = std::max<int64_t>(
              1, cmd.collective.count * kProfileDataParallel / dp);
      stageOf = &scaled;
    }
    const plan::Plan &stage = *stageOf;
    StageCost cost;
    if (std::string e = costStage(stage, cluster, placement, options, mesh,
                                  pairOf(it->second.size()), cost);
        !e.empty())
      return "the profile's stage " + std::to_string(it->second.size()) +
             " " + e;
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

/// Evaluates one candidate on its profile; sets its prediction, or
/// `rejected`.
void evaluate(Candidate &c, Profile &profile, const PlannerOptions &options,
              const Cluster &cluster, double incumbent) {
  const std::vector<StageCost> *costs = nullptr;
  if (std::string e =
          costProfile(profile, cluster, options.simulate, c.dp, c.pp, costs);
      !e.empty()) {
    c.rejected = e;
    return;
  }
  const StageCost &s0 = (*costs)[0], &s1 = (*costs)[1], &s2 = (*costs)[2];
  StageCost layer = s1, embedding = axpy(s0, -1, s1), head = axpy(s2, -1, s1);
  int64_t p = c.pp, v = c.chunks, stages = p * v;
  double perStage = double(options.layers) / double(stages);
  auto stageCost = [&](int64_t j) {
    StageCost cost = axpy(StageCost(), perStage, layer);
    if (j == 0)
      cost = axpy(cost, 1, embedding);
    if (j == stages - 1)
      cost = axpy(cost, 1, head);
    if (c.zero >= 1) {
      // The optimizer updates a 1/dp share (the profile's: 1/2).
      double saved = cost.tailCompute *
                     (1 - double(kProfileDataParallel) / double(c.dp));
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

  std::vector<StageCost> stageCosts;
  std::vector<StageMemory> stageMemories;
  for (int64_t j = 0; j < stages; ++j) {
    stageCosts.push_back(stageCost(j));
    stageMemories.push_back(stageMemory(j));
  }
  if (c.overlap && stages == 1) {
    // The buckets over the candidate's dp group, each packed and sliced
    // back by copies when it holds several all-reduces.
    plan::Mesh mesh = meshFor(profile.plan, c.dp, c.pp);
    Placement placement = placeRanks(cluster, mesh.worldSize());
    plan::Command bucket;
    bucket.kind = plan::CommandKind::Collective;
    bucket.collective.op = plan::CollectiveOp::AllReduce;
    bucket.collective.dtype = plan::DType::F32;
    for (size_t a = 0; a < mesh.axisNames.size(); ++a)
      if (mesh.axisNames[a] == "dp")
        bucket.collective.axes = {uint32_t(a)};
    std::vector<int64_t> group =
        plan::groupOf(mesh, bucket.collective.axes, 0).ranks;
    // Buckets repeat sizes (a layer's gradients each): each size is
    // costed once.
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
    std::vector<const StageCost *> units = {&head};
    for (int64_t i = 0; i < options.layers; ++i)
      units.push_back(&layer);
    units.push_back(&embedding);
    StageCost &sc = stageCosts[0];
    double tail =
        overlappedTail(sc, units, c.bucketMB * 1024 * 1024, bucketSeconds);
    sc.otherComm += tail - sc.tail;
    sc.tail = tail;
    // A bucket, its reduced copy and the members sliced back out of it
    // live at once, beside the gradients it packed.
    stageMemories[0].temporaries +=
        3 * std::min(c.bucketMB * 1024 * 1024, sc.reduceBytes);
  }
  // Before replaying the schedule: what needs no schedule to know. The
  // states alone (and the least a recompute policy or ZeRO stage leaves),
  // and the busiest rank's work without any bubble.
  double m = double(c.microbatches), busiest = 0, busiestOther = 0;
  c.stateBytes = c.minimumBytes = 0;
  c.zeroSaves.fill(0);
  for (int64_t r = 0; r < p; ++r) {
    double fixed = 0, temporaries = 0, work = 0, other = 0, oneMicrobatch = 0;
    // What each ZeRO stage beyond the candidate's would take off: its
    // part, whole on every rank now, to a 1/dp share.
    std::array<double, 4> saves = {0, 0, 0, 0};
    for (int64_t k = 0; k < v; ++k) {
      StageMemory sm = stageMemories[k * p + r];
      const StageCost &sc = stageCosts[k * p + r];
      fixed += sm.fixed();
      double saved = 0;
      for (int z = c.zero + 1; z <= 3; ++z) {
        saved += zeroPart(sm, z) * (1 - 1 / double(c.dp));
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
    if (work > busiest) {
      busiest = work;
      busiestOther = other;
    }
  }
  if (options.memoryLimit > 0 && c.stateBytes > options.memoryLimit) {
    c.memoryBytes = c.stateBytes;
    c.stepSeconds = busiest;
    c.otherSeconds = busiestOther;
    c.rejected = "over memory: at least " + formatMemory(c.stateBytes) +
                 " per device (its states and one microbatch), over " +
                 formatMemory(options.memoryLimit);
    return;
  }
  if (busiest > kNearBest * incumbent) {
    c.stepSeconds = busiest;
    c.otherSeconds = busiestOther;
    c.rejected = "slower: its busiest rank computes and communicates " +
                 ms(busiest) + " without a bubble, beyond the best " +
                 ms(incumbent);
    return;
  }

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
    stepCosts.forwardOf.push_back(stageCosts[j].forward);
    stepCosts.backwardInputOf.push_back(stageCosts[j].backward);
    stepCosts.backwardWeightOf.push_back(0);
    transfer = std::max(transfer, stageCosts[j].transfer);
    head0 = std::max(head0, stageCosts[j].head);
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
      const StageCost &sc = stageCosts[k * p + r];
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
      const StageMemory &sm = stageMemories[k * p + r];
      fixed += sm.fixed();
      temporaries = std::max(temporaries, sm.temporaries);
    }
    for (const pl::Step &step : order[r]) {
      double act = stageMemories[step.stage].activations;
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

std::string formatMemory(double bytes) {
  char text[32];
  if (bytes < 1024.0 * 1024 * 1024)
    std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1024.0 * 1024));
  else
    std::snprintf(text, sizeof text, "%.2f GiB",
                  bytes / (1024.0 * 1024 * 1024));
  return text;
}

std::string ProfileKey::str() const {
  std::string s = "tp=" + std::to_string(tp);
  if (sequenceParallel)
    s += " +sp";
  s += ", microbatch " + std::to_string(microbatchSize) + ", recompute " +
       recompute + ", zero " + std::to_string(zero);
  return s;
}

std::string Candidate::schedule() const {
  return chunks > 1 ? "interleaved:" + std::to_string(chunks) : "1f1b";
}

std::string Candidate::options() const {
  std::string mesh;
  for (auto [name, size] : {std::pair<const char *, int64_t>{"dp", dp},
                            {"pp", pp},
                            {"tp", tp}})
    if (size > 1)
      mesh += (mesh.empty() ? "" : ",") + std::string(name) + "=" +
              std::to_string(size);
  std::string s;
  if (!mesh.empty())
    s += "--mesh " + mesh + " ";
  s += "--microbatches=" + std::to_string(microbatches);
  if (pp > 1)
    s += " --schedule=" + schedule();
  if (recompute != "none")
    s += " --recompute=" + recompute;
  if (sequenceParallel)
    s += " --sequence-parallel";
  if (zero)
    s += " --zero=" + std::to_string(zero);
  if (overlap) {
    char text[64];
    std::snprintf(text, sizeof text, " --overlap-collectives --bucket-mb=%g",
                  bucketMB);
    s += text;
  }
  return s;
}

std::string Candidate::layout() const {
  char text[192];
  int n =
      std::snprintf(text, sizeof text,
                    "dp=%lld tp=%lld%s pp=%lld v=%lld b=%lld m=%lld zero=%d %s",
                    (long long)dp, (long long)tp, sequenceParallel ? "+sp" : "",
                    (long long)pp, (long long)chunks, (long long)microbatchSize,
                    (long long)microbatches, zero, recompute.c_str());
  if (overlap && n > 0 && size_t(n) < sizeof text)
    std::snprintf(text + n, sizeof text - n, " overlap:%gM", bucketMB);
  return text;
}

std::string searchPlans(const PlannerOptions &options, const Cluster &cluster,
                        PlanSearch &out) {
  auto start = std::chrono::steady_clock::now();
  out = PlanSearch();
  int64_t g = options.devices, l = options.layers;
  if (g < 1 || options.globalBatch < 1)
    return "the planner needs the devices and the global batch";
  if (l < kProfileLayers)
    return "the planner costs a model by its repeated layers; this one has " +
           std::to_string(l) + ", fewer than " +
           std::to_string(kProfileLayers);
  if (!options.compileProfile)
    return "the planner has no compiler";
  std::vector<int64_t> tps = options.tensorParallel;
  if (tps.empty())
    for (int64_t t = 1; t <= std::min(g, cluster.devicesPerNode); t *= 2)
      tps.push_back(t);

  // Compiles a profile (on a worker thread) and reads its stage programs.
  auto compileProfile = [&](Profile &p) {
    p.error = options.compileProfile(p.key, p.plan);
    if (p.error.empty() && p.plan.stages.size() != size_t(kProfileLayers))
      p.error = "the profile has " + std::to_string(p.plan.stages.size()) +
                " stage programs, not " + std::to_string(kProfileLayers);
    if (!p.error.empty())
      return;
    StageMemory s0 = memoryOf(p.plan.stages[0]),
                s1 = memoryOf(p.plan.stages[1]),
                s2 = memoryOf(p.plan.stages[2]);
    p.layer = s1;
    p.embedding = axpy(s0, -1, s1);
    p.head = axpy(s2, -1, s1);
    p.embedding.temporaries = s0.temporaries;
    p.head.temporaries = s2.temporaries;
  };

  // The fastest feasible step found so far.
  double incumbent = HUGE_VAL;
  // The candidates of one profile: every dp x pp over the devices, 1F1B
  // and interleaved with up to maxChunks chunks.
  struct Outcome {
    bool anyFits = false, allFit = true, statesFit = false;
    double best = HUGE_VAL;
    /// The fastest of its layouts over memory that a variant saving more
    /// memory could make fit, without what runs outside the steps: no such
    /// variant beats it.
    double bound = HUGE_VAL;
    /// Per ZeRO stage: some layout over memory would fit with it and might
    /// beat the best found.
    std::array<bool, 4> zeroHelps = {false, false, false, false};
  };
  auto candidatesOf = [&](Profile &profile) {
    Outcome o;
    std::vector<Candidate> pending;
    const ProfileKey &key = profile.key;
    for (int64_t pp = 1; pp <= l && key.tp * pp <= g; ++pp) {
      if (g % (key.tp * pp))
        continue;
      Candidate c;
      c.tp = key.tp;
      c.pp = pp;
      c.dp = g / (key.tp * pp);
      c.sequenceParallel = key.sequenceParallel;
      c.microbatchSize = key.microbatchSize;
      c.recompute = key.recompute;
      c.zero = key.zero;
      if (c.zero > 0 && c.dp < 2)
        continue;
      for (int64_t v = 1; v <= (pp > 1 ? options.maxChunks : 1); ++v) {
        c.chunks = v;
        Candidate d = c;
        bool divisible = false;
        if (!profile.error.empty()) {
          d.rejected = "its profile (" + key.str() +
                       ") did not compile: " + profile.error;
        } else if (l % (pp * v)) {
          d.rejected = "the " + std::to_string(l) +
                       " layers do not split into " + std::to_string(pp * v) +
                       " equal stages";
        } else if (options.globalBatch % (c.dp * c.microbatchSize)) {
          d.rejected = "the global batch " +
                       std::to_string(options.globalBatch) +
                       " does not split into dp x microbatch = " +
                       std::to_string(c.dp * c.microbatchSize);
        } else if (options.globalBatch / (c.dp * c.microbatchSize) < pp) {
          d.microbatches = options.globalBatch / (c.dp * c.microbatchSize);
          d.rejected = "fewer microbatches (" +
                       std::to_string(d.microbatches) +
                       ") than pipeline ranks (" + std::to_string(pp) + ")";
        } else {
          // What needs no schedule first (an incumbent of 0 stops there).
          d.microbatches = options.globalBatch / (c.dp * c.microbatchSize);
          evaluate(d, profile, options, cluster, 0.0);
          divisible = true;
        }
        (divisible ? pending : out.rejected).push_back(d);
        // Without a pipeline and ZeRO: each bucket size with overlap. A
        // layout over memory by its states and one microbatch is with
        // buckets too (they add memory).
        if (!divisible || pp > 1 || c.zero > 0 || c.dp < 2)
          continue;
        bool overStates = d.rejected.rfind("over memory", 0) == 0;
        for (double bucket : options.bucketMB) {
          Candidate e = d;
          e.overlap = true;
          e.bucketMB = bucket;
          if (!overStates) {
            e.rejected.clear();
            evaluate(e, profile, options, cluster, 0.0);
          }
          pending.push_back(e);
        }
      }
    }
    // Replay the schedules of those that fit their states, the least busy
    // first, so that the best found prunes the rest early.
    std::stable_sort(pending.begin(), pending.end(),
                     [](const Candidate &a, const Candidate &b) {
                       return a.stepSeconds < b.stepSeconds;
                     });
    for (Candidate &d : pending) {
      if (d.rejected.rfind("slower", 0) == 0) {
        d.rejected.clear();
        evaluate(d, profile, options, cluster, incumbent);
      }
      // Whether a recompute policy or ZeRO-1 could make it fit.
      bool mayFit =
          d.minimumBytes <= options.memoryLimit || options.memoryLimit <= 0;
      bool overMemory = d.rejected.rfind("over memory", 0) == 0;
      o.statesFit |= mayFit;
      // What a more memory-saving variant could rescue: a layout over
      // memory that may fit, no faster than this without its optimizer.
      if (mayFit && overMemory) {
        o.allFit = false;
        o.bound = std::min(o.bound, d.stepSeconds - d.otherSeconds);
      }
      // A ZeRO stage is worth a profile where it makes a layout fit that
      // could beat the best found (ZeRO-1 and -2 take only optimizer work
      // off the step, ZeRO-3 adds gathers in the steps).
      for (int z = d.zero + 1; z <= 3; ++z)
        o.zeroHelps[z] =
            o.zeroHelps[z] ||
            (overMemory &&
             d.memoryBytes - d.zeroSaves[z] <= options.memoryLimit &&
             d.stepSeconds - d.otherSeconds < incumbent);
      if (d.rejected.empty()) {
        o.anyFits = true;
        o.best = std::min(o.best, d.stepSeconds);
        incumbent = std::min(incumbent, d.stepSeconds);
      }
      (d.rejected.empty() ? out.feasible : out.rejected).push_back(d);
    }
    return o;
  };

  // One chain per tensor-parallel layout (tp, with and without sequence
  // parallelism). For each microbatch size from the smallest, a chain
  // tries the variants (recompute policy, ZeRO stage) from the fastest on,
  // until every layout fits, or the fastest of them (memory aside, without
  // the optimizer) cannot beat the best found: the rest would only add
  // time. Microbatches grow until none fits or the best step stops getting
  // faster. Each round compiles one profile per live chain, on as many
  // threads as the machine has cores.
  struct Chain {
    int64_t tp = 1;
    bool sp = false;
    size_t size = 0, variant = 0;
    double previous = HUGE_VAL;
    Outcome sized;
    bool done = false;
    /// A lower bound on what its next profile can give (valid within a
    /// microbatch size; a priority only across sizes).
    double bound = -HUGE_VAL;
    bool boundValid = false;
    /// Per variant, at this microbatch size and the one before: 0 compiled
    /// and no layout fits, 1 some layout fits, -1 not compiled.
    std::vector<int> fits, fitsBefore;
  };
  std::vector<int64_t> sizes;
  for (int64_t b : options.microbatchSizes)
    if (b > 0 && options.globalBatch % b == 0)
      sizes.push_back(b);
  std::sort(sizes.begin(), sizes.end());
  std::vector<int> zeros;
  for (int z : options.zero) {
    if (z < 0 || z > 3)
      return "ZeRO stage " + std::to_string(z) + " is not 0, 1, 2 or 3";
    zeros.push_back(z);
  }
  std::sort(zeros.begin(), zeros.end());
  zeros.erase(std::unique(zeros.begin(), zeros.end()), zeros.end());
  if (sizes.empty() || zeros.empty() || options.recompute.empty())
    return "no microbatch size, ZeRO stage or recompute policy to try";
  // The variants in the order they cost time: every recompute policy with
  // ZeRO-0 and -1 (which add no communication in the steps), then with
  // ZeRO-2 (a reduce-scatter per microbatch under a pipeline), then with
  // ZeRO-3 (all-gathers of the parameters in every step).
  struct Variant {
    size_t policy;
    int zero;
  };
  std::vector<Variant> variants;
  for (auto [low, high] : {std::pair{0, 1}, {2, 2}, {3, 3}})
    for (size_t policy = 0; policy < options.recompute.size(); ++policy)
      for (int z : zeros)
        if (z >= low && z <= high)
          variants.push_back({policy, z});
  std::vector<Chain> chains;
  for (int64_t tp : tps)
    for (bool sp : {false, true})
      if (g % tp == 0 && (!sp || (tp > 1 && options.sequenceParallel))) {
        Chain chain;
        chain.tp = tp;
        chain.sp = sp;
        chain.fits.assign(variants.size(), -1);
        chain.fitsBefore.assign(variants.size(), -1);
        chains.push_back(chain);
      }
  auto keyOf = [&](const Chain &c) {
    const Variant &v = variants[c.variant];
    return ProfileKey{c.tp, c.sp, sizes[c.size], options.recompute[v.policy],
                      v.zero};
  };
  // Skips ZeRO stages a layout without data parallelism cannot take, and
  // the variants no layout fit with at the microbatch size before: a
  // larger microbatch only adds memory. (A layout at size 2b is one at
  // size b with the same dp, pp and chunks, holding the same count of
  // microbatches in flight, each twice as large, on the same states.)
  auto settle = [&](Chain &c) {
    while (c.variant < variants.size() &&
           ((variants[c.variant].zero > 0 && g / c.tp < 2) ||
            c.fitsBefore[c.variant] == 0))
      ++c.variant;
    c.done |= c.variant == variants.size();
  };
  for (Chain &c : chains)
    settle(c);
  // The next microbatch size, or the chain's end.
  auto nextSize = [&](Chain &c) {
    if (!c.sized.anyFits || c.sized.best >= c.previous ||
        ++c.size == sizes.size()) {
      c.done = true;
      return;
    }
    c.previous = c.sized.best;
    // Larger microbatches: no bound, the best so far as a priority.
    c.bound = c.sized.best;
    c.boundValid = false;
    c.sized = Outcome();
    c.variant = 0;
    c.fitsBefore = std::move(c.fits);
    c.fits.assign(variants.size(), -1);
    settle(c);
  };
  std::vector<std::unique_ptr<Profile>> profiles;
  std::set<int64_t> deadTp;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  while (true) {
    // Best first: the live chains whose next profiles promise the most,
    // one per thread; a chain that cannot beat the best found ends.
    std::vector<Chain *> live;
    for (Chain &c : chains) {
      if (!c.done && c.boundValid && c.bound >= incumbent)
        c.done = true;
      if (!c.done)
        live.push_back(&c);
    }
    if (live.empty())
      break;
    std::stable_sort(live.begin(), live.end(), [](Chain *a, Chain *b) {
      return a->bound < b->bound;
    });
    if (live.size() > threads)
      live.resize(threads);
    size_t first = profiles.size();
    for (Chain *c : live) {
      profiles.push_back(std::make_unique<Profile>());
      profiles.back()->key = keyOf(*c);
    }
    auto t0 = std::chrono::steady_clock::now();
    std::atomic<size_t> next{first};
    auto work = [&] {
      for (size_t i; (i = next++) < profiles.size();)
        compileProfile(*profiles[i]);
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < std::min<size_t>(threads, live.size()); ++t)
      pool.emplace_back(work);
    work();
    for (std::thread &t : pool)
      t.join();
    out.profileSeconds += seconds(t0);
    out.profilesCompiled += int64_t(live.size());
    for (size_t i = 0; i < live.size(); ++i) {
      Chain &c = *live[i];
      Profile &profile = *profiles[first + i];
      Outcome o = candidatesOf(profile);
      if (!profile.error.empty() || deadTp.count(c.tp)) {
        c.done = true; // this layout does not compile, or cannot fit
        continue;
      }
      if (!o.statesFit) {
        // Its parameters and optimizer states alone fit no layout.
        deadTp.insert(c.tp);
        c.done = true;
        continue;
      }
      c.fits[c.variant] = o.anyFits ? 1 : 0;
      c.sized.anyFits |= o.anyFits;
      c.sized.best = std::min(c.sized.best, o.best);
      incumbent = std::min(incumbent, o.best);
      bool sizeDone = (o.anyFits && o.allFit) || o.bound >= incumbent;
      c.bound = o.bound;
      c.boundValid = true;
      // The next variant: a higher ZeRO stage only where it would make a
      // layout fit.
      if (!sizeDone) {
        int zero = variants[c.variant].zero;
        // ZeRO-2 and -3 add communication to every step: only where no
        // variant without them made a layout of this size fit.
        do
          ++c.variant;
        while (c.variant < variants.size() &&
               ((variants[c.variant].zero > zero &&
                 !o.zeroHelps[variants[c.variant].zero]) ||
                (variants[c.variant].zero >= 2 && c.sized.anyFits)));
        sizeDone = c.variant == variants.size();
      }
      if (!sizeDone)
        settle(c);
      if (sizeDone || c.done) {
        c.done = false;
        nextSize(c);
      }
    }
  }
  std::stable_sort(out.feasible.begin(), out.feasible.end(),
                   [](const Candidate &a, const Candidate &b) {
                     return a.stepSeconds < b.stepSeconds;
                   });
  if (out.profilesCompiled && out.feasible.empty() && out.rejected.empty())
    return "no candidate layout";
  out.searchSeconds = seconds(start);
  return "";
}

std::string explainSearch(const PlanSearch &search, const Cluster &cluster,
                          const PlannerOptions &options, size_t top) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line,
                "planner: %lld devices (%s), global batch %lld, %lld layers, "
                "memory limit %s\n"
                "planner: %zu candidates (%zu feasible) from %lld profiles "
                "compiled in %.2f s; search %.2f s\n",
                (long long)options.devices, cluster.name.c_str(),
                (long long)options.globalBatch, (long long)options.layers,
                formatMemory(options.memoryLimit).c_str(),
                search.feasible.size() + search.rejected.size(),
                search.feasible.size(), (long long)search.profilesCompiled,
                search.profileSeconds, search.searchSeconds);
  s += line;
  if (search.feasible.empty()) {
    s += "planner: no candidate fits\n";
  } else {
    s += "  #  layout                                                    "
         "step       compute    comm      other     bubble  memory     "
         "kWh/step  cost/step\n";
    const Candidate &best = search.feasible.front();
    for (size_t i = 0; i < std::min(top, search.feasible.size()); ++i) {
      const Candidate &c = search.feasible[i];
      SimResult r;
      r.stepSeconds = c.stepSeconds;
      r.placement.world = options.devices;
      StepCost cost = stepCost(r, cluster);
      std::snprintf(line, sizeof line,
                    "  %-2zu %-57s %-10s %-10s %-9s %-9s %5.1f%%  %-10s %-9.3g "
                    "%.3g\n",
                    i + 1, c.layout().c_str(), ms(c.stepSeconds).c_str(),
                    ms(c.stepCompute).c_str(), ms(c.stepComm).c_str(),
                    ms(c.otherSeconds).c_str(), c.bubble * 100,
                    formatMemory(c.memoryBytes).c_str(), cost.kWh,
                    cost.total());
      s += line;
      if (i == 0)
        continue;
      // Why it lost: the largest of its parts beyond the winner's.
      struct Part {
        const char *what;
        double delta;
      } parts[] = {
          {"more compute", c.stepCompute - best.stepCompute},
          {"more communication in the steps", c.stepComm - best.stepComm},
          {"more gradient reduction and optimizer time",
           c.otherSeconds - best.otherSeconds},
          {"a larger bubble",
           (c.stepSeconds - c.stepCompute - c.stepComm - c.otherSeconds) -
               (best.stepSeconds - best.stepCompute - best.stepComm -
                best.otherSeconds)}};
      const Part *worst = &parts[0], *gain = &parts[0];
      for (const Part &p : parts) {
        if (p.delta > worst->delta)
          worst = &p;
        if (p.delta < gain->delta)
          gain = &p;
      }
      std::snprintf(line, sizeof line, "       %+.1f%% step time: %s (+%s)",
                    100 * (c.stepSeconds / best.stepSeconds - 1), worst->what,
                    ms(worst->delta).c_str());
      s += line;
      // What it gains back, when something.
      if (gain->delta < -1e-4 * best.stepSeconds) {
        std::string what = gain->what;
        what = what.rfind("more ", 0) == 0 ? "less " + what.substr(5)
               : what == "a larger bubble" ? std::string("a smaller bubble")
                                           : what;
        std::snprintf(line, sizeof line, ", against %s (-%s)", what.c_str(),
                      ms(-gain->delta).c_str());
        s += line;
      }
      s += "\n";
    }
    s += "chosen: " + best.options() + "\n";
  }
  // Pruned candidates, grouped by the start of their reason.
  std::map<std::string, std::pair<size_t, const Candidate *>> reasons;
  for (const Candidate &c : search.rejected) {
    // The kind of reason: its words before any detail, numbers elided.
    std::string why;
    for (char ch : c.rejected.substr(0, c.rejected.find(':')))
      if (!std::isdigit(static_cast<unsigned char>(ch)))
        why += ch;
      else if (why.empty() || why.back() != 'N')
        why += 'N';
    auto &entry = reasons[why];
    if (!entry.second)
      entry.second = &c;
    ++entry.first;
  }
  for (const auto &[why, entry] : reasons) {
    std::snprintf(line, sizeof line, "rejected %zu: %s; e.g. %s: %s\n",
                  entry.first, why.c_str(), entry.second->layout().c_str(),
                  entry.second->rejected.c_str());
    s += line;
  }
  return s;
}

std::string candidatesCsv(const PlanSearch &search, const Cluster &cluster,
                          const PlannerOptions &options,
                          double tokensPerStep) {
  std::string s = "devices,dp,tp,sp,pp,chunks,microbatch_size,microbatches,zero,"
                  "recompute,options,step_s,memory_bytes,kwh_per_step,"
                  "cost_per_step,tokens_per_step,rejected\n";
  auto quoted = [](const std::string &text) {
    std::string q = "\"";
    for (char c : text)
      q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const std::vector<Candidate> *list :
       {&search.feasible, &search.rejected})
    for (const Candidate &c : *list) {
      SimResult r;
      r.stepSeconds = c.stepSeconds;
      r.placement.world = options.devices;
      StepCost cost = stepCost(r, cluster);
      char line[256];
      std::snprintf(line, sizeof line,
                    "%lld,%lld,%lld,%d,%lld,%lld,%lld,%lld,%d,%s,",
                    (long long)options.devices, (long long)c.dp, (long long)c.tp, c.sequenceParallel ? 1 : 0,
                    (long long)c.pp, (long long)c.chunks,
                    (long long)c.microbatchSize, (long long)c.microbatches,
                    c.zero, c.recompute.c_str());
      s += line + quoted(c.options());
      std::snprintf(line, sizeof line, ",%.6g,%.0f,%.6g,%.6g,%.6g,",
                    c.stepSeconds, c.memoryBytes, cost.kWh, cost.total(),
                    tokensPerStep);
      s += line + quoted(c.rejected) + "\n";
    }
  return s;
}

} // namespace cleave::sim
