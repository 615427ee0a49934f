//===- StageReplay.cpp - A pipeline replayed by its stages ----------------===//
//
// The replay of a pipelined plan from the costs of its stages: each
// stage's forward, backward and weight-gradient steps and what runs
// between them, laid out by a pipeline schedule (--replay-schedule), and
// the result's spans, memory and utilization.
//
//===----------------------------------------------------------------------===//

#include "SimulatorInternal.h"
#include "cleave/Schedule/Schedule.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace cleave::sim {

using plan::CollectiveOp;
using plan::Command;
using plan::CommandKind;
using namespace detail;

std::string parseReplaySchedule(const std::string &text, ReplaySchedule &out) {
  out = ReplaySchedule();
  size_t start = 0;
  for (bool first = true; start <= text.size(); first = false) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (first) {
      schedule::ScheduleOptions o;
      if (std::string e = schedule::parseScheduleKind(part, o); !e.empty())
        return e;
      if (o.kind == schedule::ScheduleKind::ZeroBubble)
        return "replaying the zero-bubble schedule is not supported (its "
               "stage programs split the backward pass)";
      out.kind = part;
      continue;
    }
    size_t eq = part.find('=');
    std::string key = part.substr(0, eq);
    char *end = nullptr;
    long long value = eq == std::string::npos
                          ? 0
                          : std::strtoll(part.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || !end || *end || value < 1 ||
        value > (1 << 20) || (key != "pp" && key != "microbatches"))
      return "bad replayed schedule field '" + part +
             "' (expected pp=<ranks> or microbatches=<m>, positive)";
    (key == "pp" ? out.ranks : out.microbatches) = value;
  }
  return "";
}
std::string costStage(const plan::Plan &stage, const Cluster &cluster,
                      const Placement &placement,
                      const SimulateOptions &options, const plan::Mesh &mesh,
                      const std::vector<int64_t> &pair, StageCost &sc) {
  sc = StageCost();
  std::vector<std::string> names = plan::pipelineSteps(stage);
  if (std::none_of(names.begin(), names.end(), [](const std::string &n) {
        return !n.empty() && n[0] == 'F';
      }))
    return "has no pipeline steps (metadata " +
           std::string(plan::meta::kPipelineSteps.name) + ")";
  PlanCosts costs = costPlan(stage, cluster.device);
  sc.kernelCostsKnown = costs.kernelCostsKnown;
  int64_t rank = pair.empty() ? 0 : pair.front();
  // Ranks sharing a node's compute (more ranks than its devices' worth):
  // each computes at its share, as processor sharing gives while all are
  // busy.
  double gemmShare = placement.computeShare;
  double onNode = double(std::min(
      (placement.world + cluster.nodes - 1) / cluster.nodes, placement.world));
  double kernelShare =
      std::max(1.0, onNode / cluster.kernelCapacityOrDefault());
  // Seconds (communication, compute) of each step, and outside them.
  struct Part {
    double comm = 0, compute = 0;
    double total() const { return comm + compute; }
  };
  std::map<int64_t, Part> steps; // marker index -> its commands
  Part before, after;
  int64_t current = -1;
  bool started = false;
  // Messages that come once per microbatch (an activation, its gradient)
  // delay the step that reads them; one that comes once per step (a tied
  // weight, its gradient's share) is communication of its own: told apart
  // by how often a message of its size arrives.
  int64_t forwards =
      std::count_if(names.begin(), names.end(), [](const std::string &n) {
        return !n.empty() && n[0] == 'F';
      });
  std::map<std::pair<int64_t, int>, int64_t> receives;
  int64_t dpAxis = -1;
  for (size_t a = 0; a < mesh.axisNames.size(); ++a)
    if (mesh.axisNames[a] == "dp")
      dpAxis = int64_t(a);
  for (const Command &cmd : stage.commands)
    if (cmd.kind == CommandKind::Collective &&
        cmd.collective.op == CollectiveOp::Recv)
      ++receives[{cmd.collective.count, int(cmd.collective.dtype)}];
  for (size_t i = 0; i < stage.commands.size(); ++i) {
    const Command &cmd = stage.commands[i];
    if (cmd.kind == CommandKind::Marker && cmd.params.size() >= 2) {
      current = cmd.params[1] == 0 ? cmd.params[0] : -1;
      started = true;
      continue;
    }
    double seconds = costs.seconds[i];
    bool comm = false;
    if (cmd.kind != CommandKind::Collective)
      seconds *= cmd.kind == CommandKind::Gemm ? gemmShare : kernelShare;
    if (cmd.kind == CommandKind::Collective) {
      const plan::CollectiveInfo &info = cmd.collective;
      comm = true;
      if (info.op == CollectiveOp::Send || info.op == CollectiveOp::Recv) {
        // Neighbouring pipeline ranks of the replayed mesh (none: one
        // pipeline rank, whose stages pass nothing).
        seconds =
            pair.size() == 2
                ? commandCost(cluster, placement, options, cmd, pair).seconds
                : 0;
        // A microbatch's message's transfer delays its receiver (the
        // replay's dependency); the sender pays for sending it.
        if (info.op == CollectiveOp::Recv &&
            receives[{info.count, int(info.dtype)}] >= forwards) {
          sc.transfer = std::max(sc.transfer, seconds);
          seconds = 0;
        }
      } else {
        plan::Group g = plan::groupOf(mesh, info.axes, rank);
        seconds =
            commandCost(cluster, placement, options, cmd, g.ranks).seconds;
        // The gradients' reductions (once per step: after the steps, or
        // in the last backward step, which then costs more than the
        // others and its excess counts after the steps).
        if (info.op == CollectiveOp::AllReduce &&
            std::count(info.axes.begin(), info.axes.end(), uint32_t(dpAxis))) {
          sc.reduceBytes +=
              double(info.count) * double(plan::dtypeSize(info.dtype));
          sc.reduces += 1;
          sc.reduceSeconds += seconds;
        }
      }
    }
    Part &part = current >= 0 ? steps[current] : started ? after : before;
    (comm ? part.comm : part.compute) += seconds;
  }
  // A forward and a backward cost what the cheapest of their kind does;
  // what another one does beyond that (the last backward finishing the
  // weight gradients, say) happens once per step, after the steps.
  auto isForward = [&](int64_t index) {
    return index < int64_t(names.size()) && !names[index].empty() &&
           names[index][0] == 'F';
  };
  std::optional<Part> forward, backward;
  for (const auto &[index, part] : steps) {
    std::optional<Part> &base = isForward(index) ? forward : backward;
    if (!base || part.total() < base->total())
      base = part;
  }
  for (const auto &[index, part] : steps) {
    const Part &base = isForward(index) ? *forward : *backward;
    after.comm += std::max(0.0, part.comm - base.comm);
    after.compute += std::max(0.0, part.compute - base.compute);
  }
  Part none;
  sc.forward = forward.value_or(none).total();
  sc.backward = backward.value_or(none).total();
  sc.backwardComm = backward.value_or(none).comm;
  sc.stepComm = forward.value_or(none).comm + backward.value_or(none).comm;
  sc.stepCompute =
      forward.value_or(none).compute + backward.value_or(none).compute;
  sc.head = before.total();
  sc.tail = after.total();
  sc.tailCompute = after.compute;
  sc.otherComm = before.comm + after.comm;
  sc.otherCompute = before.compute + after.compute;
  return "";
}

std::string simulateReplay(const plan::Plan &plan, const Cluster &cluster,
                           const SimulateOptions &options,
                           const ReplaySchedule &replay, SimResult &out) {
  namespace pl = schedule;
  out = SimResult();
  int64_t ppAxis = plan::pipelineAxis(plan.mesh);
  if (!plan.isPipelined() || ppAxis < 0)
    return "replaying a schedule needs a pipelined plan (a mesh with a '" +
           std::string(plan::kPipelineAxis) + "' axis)";
  pl::ScheduleOptions so;
  if (std::string e = pl::parseScheduleKind(replay.kind, so); !e.empty())
    return e;
  int64_t stages = static_cast<int64_t>(plan.stages.size());
  int64_t v = so.chunks;
  int64_t p = replay.ranks ? replay.ranks : stages / v;
  if (p * v != stages)
    return "the plan has " + std::to_string(stages) +
           " stage programs; replaying " + std::to_string(p) +
           " pipeline ranks with " + std::to_string(v) + " chunks each needs " +
           std::to_string(p * v);
  // Each stage program's first microbatch is what it replays.
  std::vector<std::vector<std::string>> names;
  int64_t compiledMicrobatches = 0;
  for (const plan::Plan &stage : plan.stages) {
    names.push_back(plan::pipelineSteps(stage));
    int64_t forwards = std::count_if(
        names.back().begin(), names.back().end(),
        [](const std::string &n) { return !n.empty() && n[0] == 'F'; });
    if (forwards == 0)
      return "stage " + std::to_string(names.size() - 1) +
             " has no pipeline steps (metadata " +
             std::string(plan::meta::kPipelineSteps.name) + ")";
    compiledMicrobatches = forwards;
  }
  so.ranks = p;
  so.microbatches =
      replay.microbatches ? replay.microbatches : compiledMicrobatches;

  // The replayed mesh: the plan's, with p ranks on the pp axis.
  plan::Mesh mesh = plan.mesh;
  mesh.shape[ppAxis] = p;
  int64_t world = mesh.worldSize();
  Placement placement = placeRanks(cluster, world);
  out.placement = placement;
  // The rank of virtual stage j's pipeline rank whose other coordinates
  // are 0, and the replayed rank of a compiled pp coordinate.
  auto rankAt = [&](int64_t pp) {
    int64_t rank = 0;
    for (size_t a = 0; a < mesh.shape.size(); ++a)
      rank = rank * mesh.shape[a] + (int64_t(a) == ppAxis ? pp : 0);
    return rank;
  };

  std::vector<StageCost> stageCosts(stages);
  double transfer = 0;
  for (int64_t j = 0; j < stages; ++j) {
    if (std::string e =
            costStage(plan.stages[j], cluster, placement, options, mesh,
                      {rankAt(j % p), rankAt((j + 1) % p)}, stageCosts[j]);
        !e.empty())
      return "stage " + std::to_string(j) + " " + e;
    out.kernelCostsKnown &= stageCosts[j].kernelCostsKnown;
    transfer = std::max(transfer, stageCosts[j].transfer);
  }

  pl::StepCosts stepCosts;
  for (const StageCost &sc : stageCosts) {
    stepCosts.forwardOf.push_back(sc.forward);
    stepCosts.backwardInputOf.push_back(sc.backward);
    stepCosts.backwardWeightOf.push_back(0);
  }
  stepCosts.transfer = transfer;
  std::string error;
  std::vector<std::vector<pl::Step>> order = pl::buildSchedule(so, error);
  if (!error.empty())
    return "the replayed schedule: " + error;
  pl::Simulation sim = pl::simulate(order, so, stepCosts, error);
  if (!error.empty())
    return "the replayed schedule: " + error;

  double head = 0;
  for (const StageCost &sc : stageCosts)
    head = std::max(head, sc.head);
  std::vector<double> last(p, 0), busy(p, 0);
  for (const pl::TimedStep &t : sim.steps) {
    last[t.rank] = std::max(last[t.rank], t.end);
    busy[t.rank] += t.end - t.start;
  }
  double scale = double(so.microbatches) / double(compiledMicrobatches);
  int64_t others = world / p;
  for (int64_t r = 0; r < p; ++r) {
    RankResult rr;
    rr.rank = rankAt(r);
    rr.stage = r;
    double tail = 0;
    for (int64_t c = 0; c < v; ++c) {
      int64_t j = c * p + r;
      const StageCost &sc = stageCosts[j];
      const plan::Plan &stage = plan.stages[j];
      tail += sc.tail;
      double m = double(so.microbatches);
      rr.commSeconds += sc.stepComm * m + sc.otherComm;
      rr.computeSeconds += sc.stepCompute * m + sc.otherCompute;
      rr.arenaBytes = std::max<uint64_t>(rr.arenaBytes, stage.arenaBytes);
      for (const plan::StateTensor &st : stage.states)
        rr.stateBytes += st.info.byteSize();
      rr.flops += metadataNumber(stage, plan::meta::kFlops) * scale;
    }
    rr.end = head + last[r] + tail;
    // Every collective blocks the compute stream here.
    rr.exposedCommSeconds = rr.commSeconds;
    rr.peerWaitSeconds = std::max(0.0, last[r] - busy[r]);
    out.stepSeconds = std::max(out.stepSeconds, rr.end);
    out.flops += rr.flops * double(others);
    out.ranks.push_back(rr);
  }
  subtractRecompute(
      out,
      metadataNumber(plan.stages[0], plan::meta::kRecomputeExtraFlops) * scale);
  out.bubble = sim.bubble;
  char expected[128];
  std::snprintf(expected, sizeof(expected),
                "%s at p = %lld, m = %lld: bubble %.1f%% by the formula",
                replay.kind.c_str(), (long long)p, (long long)so.microbatches,
                pl::formulaBubble(so, pl::StepCosts()) * 100);
  out.expectedBubble = expected;
  for (const pl::TimedStep &t : sim.steps)
    out.spans.push_back(
        {rankAt(t.rank), 2, pl::stepName(t.step, so),
         t.step.kind == pl::StepKind::Forward ? "forward" : "backward",
         head + t.start, head + t.end});

  setUtilization(out, plan, cluster.device, world);
  return "";
}
} // namespace cleave::sim
