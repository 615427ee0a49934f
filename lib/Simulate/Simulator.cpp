//===- Simulator.cpp - Replay a compiled plan on a cluster ---------------===//
//
// Discrete-event replay on one clock. At each moment every rank moves its
// compute stream as far as it can without time passing: it starts its
// next compute command, or a collective member registers its arrival (and
// once the whole group has arrived, it is held until the collective's
// end), a Recv takes its message once the Send has posted it, a Wait
// takes its event once the communication stream has completed it. The
// communication streams run their collectives in order as soon as they are
// issued. Then the clock moves to the next end of a compute command or of
// a hold. Ranks on one node share its devices: with k ranks computing on
// a node of d devices' worth of compute, each computes at min(1, d / k) of
// a device's rate (processor sharing; d is the node's capacity for GEMMs
// or for other work: the cpu preset's cores share their floating-point
// units but not their memory-bound kernels). Where a node runs more
// ranks than it has cores (ranks as threads), a blocking collective is
// work of its members' threads once the last has arrived, shared like a
// kernel, and a member waiting for the others leaves its core to them.
// When no
// rank can move and none computes or is held, the plan deadlocks (named).
//
//===----------------------------------------------------------------------===//

#include "cleave/Simulate/Simulator.h"
#include "cleave/Pipeline/Schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace cleave::sim {

using plan::CollectiveOp;
using plan::Command;
using plan::CommandKind;

namespace {

constexpr double kPending = -1;

/// One execution of a collective by a group.
struct Instance {
  std::vector<int64_t> ranks;
  std::map<int64_t, double> arrivals;
  bool complete = false;
  double start = 0, end = 0;
  CommCost cost;
};

/// Per plan (a stage, or the SPMD plan): each command's compute seconds on
/// an unshared device.
struct PlanCosts {
  std::vector<double> seconds;
  double flops = 0, modelFlops = 0;
  uint64_t stateBytes = 0;
  bool kernelCostsKnown = true;
  std::vector<std::string> stepNames;
};

struct Stream {
  double t = 0;
  bool registered = false; ///< The head collective has arrived.
};

struct RankState {
  int64_t rank = 0, stage = 0;
  const plan::Plan *plan = nullptr;
  const PlanCosts *costs = nullptr;
  size_t pc = 0;
  Stream compute, comm;
  /// The compute stream runs command pc: `remaining` seconds of work at
  /// the full rate of a device, started at `computeStart`.
  bool computing = false;
  double remaining = 0, computeStart = 0;
  /// The work under way is the switch back after a block (no command).
  bool switching = false;
  /// The work under way is the rank's part of this blocking collective,
  /// the command at pc (ranks as threads on fewer cores: see
  /// advanceCompute); null otherwise.
  const Instance *collective = nullptr;
  /// The work under way is a GEMM (it shares the node's compute capacity;
  /// anything else its kernel capacity).
  bool gemm = false;
  /// The compute stream blocked on communication and, on a node whose
  /// ranks outnumber its cores, owes a switch before its next command.
  bool owesSwitch = false;
  /// The compute stream is held (a collective, a message, a wait) until
  /// this time; the command that held it is done.
  double resumeAt = 0;
  /// When the compute stream reached command arrivedPc (a Recv or Wait it
  /// may reach before it can take it).
  size_t arrivedPc = SIZE_MAX;
  double arrivedAt = 0;
  int64_t node = 0;
  std::deque<std::pair<size_t, double>> commQueue; ///< (command, issued at)
  std::vector<double> eventDone;
  std::map<int64_t, double> markerBegin;
  RankResult result;
};

/// Model flops are the hardware flops without recompute's extra. The
/// plan's recompute_extra_flops is the global program's (before it was
/// partitioned and cut into stages), so it comes off the sum over all
/// ranks, and each rank keeps its share.
void subtractRecompute(SimResult &out, double extra) {
  out.modelFlops = std::max(0.0, out.flops - extra);
  double keep = out.flops > 0 ? out.modelFlops / out.flops : 1;
  for (RankResult &r : out.ranks)
    r.modelFlops = r.flops * keep;
}

/// MFU and HFU of `out` over `world` devices against the peak of the
/// element type of the plan's GEMMs (bf16 or fp16 if any GEMM uses it).
void setUtilization(SimResult &out, const plan::Plan &plan,
                    const Device &device, int64_t world) {
  plan::DType gemmType = plan::DType::F32;
  auto scan = [&](const plan::Plan &p) {
    for (const Command &c : p.commands)
      if (c.kind == CommandKind::Gemm && !c.params.empty()) {
        auto t = static_cast<plan::DType>(c.params[plan::kGemmDType]);
        if (t == plan::DType::BF16 || t == plan::DType::F16)
          gemmType = t;
      }
  };
  scan(plan);
  for (const plan::Plan &stage : plan.stages)
    scan(stage);
  out.peakFlops = gemmPeak(device, gemmType);
  out.peakType = gemmType == plan::DType::BF16  ? "bf16"
                 : gemmType == plan::DType::F16 ? "fp16"
                 : device.tf32Gemms && device.tf32Flops > 0
                     ? "tf32"
                     : "fp32";
  double capacity = out.peakFlops * out.stepSeconds * double(world);
  if (capacity > 0) {
    out.mfu = out.modelFlops / capacity;
    out.hfu = out.flops / capacity;
  }
}

PlanCosts costPlan(const plan::Plan &p, const Device &device) {
  PlanCosts c;
  std::vector<KernelCost> kernels = kernelCosts(p);
  size_t numKernels =
      std::count_if(p.commands.begin(), p.commands.end(), [](const Command &x) {
        return x.kind == CommandKind::Kernel;
      });
  c.kernelCostsKnown = kernels.size() == numKernels;
  size_t kernel = 0;
  for (const Command &cmd : p.commands) {
    double s = 0;
    switch (cmd.kind) {
    case CommandKind::Kernel:
      s = c.kernelCostsKnown ? kernelSeconds(device, kernels[kernel])
                             : device.kernelOverhead;
      ++kernel;
      break;
    case CommandKind::Gemm:
    case CommandKind::GpuLaunch:
      if (cmd.kind == CommandKind::Gemm &&
          cmd.params.size() >= plan::kGemmNumParams)
        s = gemmSeconds(
            device, cmd.params[plan::kGemmM], cmd.params[plan::kGemmN],
            cmd.params[plan::kGemmK], cmd.params[plan::kGemmBatch],
            static_cast<plan::DType>(cmd.params[plan::kGemmDType]),
            static_cast<plan::DType>(plan::gemmOutDTypeOf(cmd)));
      else
        s = device.kernelOverhead;
      break;
    case CommandKind::Attention:
    case CommandKind::AttentionBackward:
      s = attentionSeconds(device, cmd);
      break;
    case CommandKind::Copy:
      s = copySeconds(device, cmd.params.empty() ? 0 : double(cmd.params[0]));
      break;
    case CommandKind::Fill:
      s = fillSeconds(device, cmd.params.empty() ? 0 : double(cmd.params[0]));
      break;
    default:
      break;
    }
    c.seconds.push_back(s);
  }
  c.flops = metadataNumber(p, "flops");
  c.modelFlops = c.flops;
  for (const plan::StateTensor &s : p.states)
    c.stateBytes += s.info.byteSize();
  c.stepNames = plan::pipelineSteps(p);
  return c;
}

/// A command's name in the trace: the collective, the GEMM's shape, or the
/// kernel's name in `plan`.
std::string commandName(const plan::Plan &plan, const Command &c) {
  if (c.kind == CommandKind::Kernel && !c.params.empty() && c.params[0] >= 0 &&
      size_t(c.params[0]) < plan.kernelNames.size())
    return plan.kernelNames[c.params[0]];
  if (c.kind == CommandKind::Collective)
    return plan::collectiveOpName(c.collective.op);
  if (c.kind == CommandKind::Gemm && c.params.size() >= plan::kGemmNumParams)
    return "gemm " + std::to_string(c.params[plan::kGemmM]) + "x" +
           std::to_string(c.params[plan::kGemmN]) + "x" +
           std::to_string(c.params[plan::kGemmK]) +
           (c.params[plan::kGemmBatch] > 1
                ? " x" + std::to_string(c.params[plan::kGemmBatch])
                : "");
  return plan::commandKindName(c.kind);
}

class Simulator {
public:
  Simulator(const plan::Plan &plan, const Cluster &cluster,
            const SimulateOptions &options, SimResult &out)
      : plan(plan), cluster(cluster), options(options), out(out) {}

  std::string run();

private:
  /// Moves the compute stream of `r` as far as it goes at time `now`
  /// (starting a compute command, or holding it on a collective, a message
  /// or a wait); true if it moved.
  bool advanceCompute(RankState &r, double now);
  /// Runs the collectives the compute stream has issued to the
  /// communication stream, in order, as far as their groups allow.
  bool advanceComm(RankState &r);
  /// Ends the compute command `r` runs at time `end`.
  void finishCompute(RankState &r, double end);
  /// Registers `r`'s arrival at collective `cmd` at time `t` (once, guarded
  /// by `registered`) and returns its instance when the group is complete.
  Instance *arrive(RankState &r, const Command &cmd, double t,
                   bool &registered);
  void span(RankState &r, int stream, std::string name, std::string cat,
            double start, double end) {
    if (options.traceCommands && end > start)
      out.spans.push_back(
          {r.rank, stream, std::move(name), std::move(cat), start, end});
  }
  /// A collective's span on `stream`: its name and algorithm.
  void collectiveSpan(RankState &r, int stream, const Command &cmd,
                      const Instance &inst) {
    if (!options.traceCommands)
      return; // no name to build
    span(r, stream,
         commandName(*r.plan, cmd) + " (" +
             algorithmName(inst.cost.algorithm) + ")",
         "collective", inst.start, inst.end);
  }
  CommCost costOf(const Command &cmd, const std::vector<int64_t> &ranks);
  /// A blocking group collective on a node whose ranks outnumber its cores
  /// runs as its members' threads' work (advanceCompute).
  bool threadWork(const Command &cmd) const {
    CollectiveOp op = cmd.collective.op;
    return placement.latencyShare > 1 && cmd.stream != plan::kCommStream &&
           op != CollectiveOp::Send && op != CollectiveOp::Recv;
  }
  /// A Send's or Recv's (sender, receiver) ranks as seen from `rank`; none
  /// for group indices outside the group.
  std::optional<std::pair<int64_t, int64_t>>
  pointToPoint(const plan::CollectiveInfo &info, int64_t rank) const {
    plan::Group g = plan::groupOf(plan.mesh, info.axes, rank);
    int64_t size = static_cast<int64_t>(g.ranks.size());
    if (info.root < 0 || info.peer < 0 || info.root >= size ||
        info.peer >= size)
      return std::nullopt;
    return std::make_pair(g.ranks[info.root], g.ranks[info.peer]);
  }

  const plan::Plan &plan;
  const Cluster &cluster;
  const SimulateOptions &options;
  SimResult &out;
  Placement placement;
  std::vector<RankState> ranks;
  std::map<std::tuple<int64_t, uint32_t, int64_t>, Instance> instances;
  /// (sender, receiver) -> times the posted messages are available.
  std::map<std::pair<int64_t, int64_t>, std::deque<std::pair<double, double>>>
      mailbox;
};

} // namespace

double stepLatency(const Link &link, const Placement &placement,
                   bool threadWork) {
  if (placement.latencyShare <= 1)
    return link.latency;
  if (link.sharedLatency > 0)
    return link.sharedLatency;
  return threadWork ? link.latency : link.latency * placement.latencyShare;
}

CommCost commandCost(const Cluster &cluster, const Placement &placement,
                     const SimulateOptions &options, const Command &cmd,
                     const std::vector<int64_t> &group, bool threadWork) {
  const plan::CollectiveInfo &info = cmd.collective;
  int64_t n = static_cast<int64_t>(group.size());
  double bytes = collectiveBytes(info, n);
  Link link = linkFor(cluster, placement, group);
  link.latency = stepLatency(link, placement, threadWork);
  double overhead = cluster.device.collectiveOverhead;
  if (info.op == CollectiveOp::Send || info.op == CollectiveOp::Recv)
    return collectiveCost(info.op, bytes, 2, link, Algorithm::Ring, overhead);
  if (options.algorithm)
    return collectiveCost(info.op, bytes, n, link, *options.algorithm,
                          overhead);
  // A fabric that stages small collectives runs them so, whatever is faster.
  double operand = double(info.count) * double(plan::dtypeSize(info.dtype));
  if (link.oneShotBytes > 0 && operand <= link.oneShotBytes &&
      info.op != CollectiveOp::AllSlice)
    return collectiveCost(info.op, bytes, n, link, Algorithm::OneShot,
                          overhead);
  CommCost ring =
      collectiveCost(info.op, bytes, n, link, Algorithm::Ring, overhead);
  CommCost tree =
      collectiveCost(info.op, bytes, n, link, Algorithm::Tree, overhead);
  CommCost best = tree.seconds < ring.seconds ? tree : ring;
  // Across nodes with several members on each: the two-level algorithm.
  // Members per node (nodes in order; the planner costs groups of
  // thousands of ranks, so no map).
  std::vector<int64_t> nodes;
  nodes.reserve(group.size());
  for (int64_t r : group)
    nodes.push_back(placement.nodeOf(r));
  std::sort(nodes.begin(), nodes.end());
  int64_t nodeCount = 0, g = -1;
  bool even = true;
  for (size_t i = 0; i < nodes.size();) {
    size_t j = i;
    while (j < nodes.size() && nodes[j] == nodes[i])
      ++j;
    int64_t members = int64_t(j - i);
    even &= g < 0 || members == g;
    g = g < 0 ? members : g;
    ++nodeCount;
    i = j;
  }
  if (nodeCount > 1 && g > 1 && even) {
    Link intra = cluster.intraNode, inter = cluster.interNode;
    for (Link *l : {&intra, &inter})
      l->latency = stepLatency(*l, placement, threadWork);
    CommCost two = hierarchicalCost(info.op, bytes, nodeCount, g,
                                    intra, inter, overhead);
    if (two.seconds < best.seconds)
      best = two;
  }
  return best;
}

namespace {

CommCost Simulator::costOf(const Command &cmd,
                           const std::vector<int64_t> &group) {
  return commandCost(cluster, placement, options, cmd, group, threadWork(cmd));
}

Instance *Simulator::arrive(RankState &r, const Command &cmd, double t,
                            bool &registered) {
  plan::Group group = plan::groupOf(plan.mesh, cmd.collective.axes, r.rank);
  auto key = std::make_tuple(r.stage, cmd.collective.id, group.ranks.front());
  Instance &inst = instances[key];
  if (!registered) {
    inst.ranks = group.ranks;
    inst.arrivals[r.rank] = t;
    registered = true;
  }
  if (!inst.complete && inst.arrivals.size() == inst.ranks.size()) {
    inst.complete = true;
    inst.start = 0;
    for (const auto &[rank, at] : inst.arrivals)
      inst.start = std::max(inst.start, at);
    inst.cost = costOf(cmd, inst.ranks);
    inst.end = inst.start + inst.cost.seconds;
  }
  return inst.complete ? &inst : nullptr;
}

bool Simulator::advanceCompute(RankState &r, double now) {
  const std::vector<Command> &cmds = r.plan->commands;
  bool moved = false;
  while (!r.computing && r.pc < cmds.size() && r.resumeAt <= now) {
    if (r.owesSwitch) {
      r.owesSwitch = false;
      if (cluster.device.switchOverhead > 0 && placement.latencyShare > 1) {
        r.computing = r.switching = true;
        r.gemm = false;
        r.remaining = cluster.device.switchOverhead;
        r.computeStart = now;
        return true;
      }
    }
    const Command &cmd = cmds[r.pc];
    if (r.arrivedPc != r.pc) {
      r.arrivedPc = r.pc;
      r.arrivedAt = std::max(now, r.resumeAt);
    }
    double t = r.arrivedAt;
    r.compute.t = std::max(now, r.resumeAt);
    if (cmd.kind == CommandKind::Collective &&
        cmd.stream == plan::kCommStream) {
      r.commQueue.push_back({r.pc, t});
    } else if (cmd.kind == CommandKind::Collective) {
      const plan::CollectiveInfo &info = cmd.collective;
      if (info.op == CollectiveOp::Send || info.op == CollectiveOp::Recv) {
        std::optional<std::pair<int64_t, int64_t>> ends =
            pointToPoint(info, r.rank);
        if (!ends)
          return moved;
        auto [sender, receiver] = *ends;
        // One program serves every rank: only the sender sends and only
        // the receiver receives.
        bool mine = info.op == CollectiveOp::Send ? r.rank == sender
                                                  : r.rank == receiver;
        CommCost cost = costOf(cmd, {sender, receiver});
        if (!mine) {
        } else if (info.op == CollectiveOp::Send) {
          // Buffered: the sender copies the message out and goes on.
          mailbox[{sender, receiver}].push_back(
              {t + cost.seconds, cost.seconds});
          span(r, 0, "send", "collective", t, t + cost.seconds);
          r.result.commSeconds += cost.seconds;
          r.result.exposedCommSeconds += cost.seconds;
          r.resumeAt = t + cost.seconds;
        } else {
          auto &queue = mailbox[{sender, receiver}];
          if (queue.empty())
            return moved;
          auto [available, transfer] = queue.front();
          queue.pop_front();
          double end = std::max(t, available);
          double stall = end - t;
          double exposed = std::min(stall, transfer);
          r.result.exposedCommSeconds += exposed;
          r.result.peerWaitSeconds += stall - exposed;
          span(r, 0, "recv", "collective", t, end);
          r.resumeAt = end;
          r.owesSwitch = stall > 0;
        }
      } else {
        Instance *inst = arrive(r, cmd, t, r.compute.registered);
        if (!inst)
          return moved;
        r.compute.registered = false;
        double arrived = inst->arrivals[r.rank];
        r.result.peerWaitSeconds += inst->start - arrived;
        if (threadWork(cmd)) {
          // Ranks as threads on fewer cores: each member's thread does its
          // part of the collective (staging, reducing, the futex calls and
          // switches of its rendezvous) once the last member has arrived,
          // sharing the cores like a kernel; while a member waits for the
          // others, its core runs other ranks, so that wait is not the
          // node's idle time. The cost is the link's (its shared latency:
          // the thread's time per message step).
          r.computing = true;
          r.collective = inst;
          r.gemm = false;
          r.remaining = inst->cost.seconds;
          r.computeStart = now;
          return true;
        }
        r.result.commSeconds += inst->cost.seconds;
        r.result.exposedCommSeconds += inst->cost.seconds;
        collectiveSpan(r, 0, cmd, *inst);
        r.resumeAt = inst->end;
        r.owesSwitch = true;
      }
    } else if (cmd.kind == CommandKind::Wait) {
      if (cmd.event < 0 || cmd.event >= int64_t(r.eventDone.size()))
        return moved;
      double done = r.eventDone[cmd.event];
      if (done == kPending)
        return moved;
      if (done > t) {
        r.result.exposedCommSeconds += done - t;
        span(r, 0, "wait", "wait", t, done);
        r.resumeAt = done;
        r.owesSwitch = true;
      }
    } else if (cmd.kind == CommandKind::Marker) {
      if (cmd.params.size() >= 2) {
        int64_t index = cmd.params[0];
        if (cmd.params[1] == 0) {
          r.markerBegin[index] = t;
        } else {
          double begin = r.markerBegin[index];
          std::string name = index < int64_t(r.costs->stepNames.size())
                                 ? r.costs->stepNames[index]
                                 : "step " + std::to_string(index);
          std::string cat = name.empty()                       ? "step"
                            : name[0] == 'F'                   ? "forward"
                            : name[0] == 'B' || name[0] == 'W' ? "backward"
                                                               : "step";
          out.spans.push_back({r.rank, 2, name, cat, begin, t});
        }
      }
    } else {
      double d = r.costs->seconds[r.pc];
      moved = true;
      if (d > 0) {
        // Runs until the clock has given it d seconds of a device.
        r.computing = true;
        // Fused attention is mostly its products.
        r.gemm = cmd.kind == CommandKind::Gemm ||
                 cmd.kind == CommandKind::Attention ||
                 cmd.kind == CommandKind::AttentionBackward;
        r.remaining = d;
        r.computeStart = t;
        return moved;
      }
    }
    ++r.pc;
    moved = true;
  }
  return moved;
}

bool Simulator::advanceComm(RankState &r) {
  bool moved = false;
  while (!r.commQueue.empty()) {
    auto [index, issued] = r.commQueue.front();
    const Command &cmd = r.plan->commands[index];
    double at = std::max(r.comm.t, issued);
    const plan::CollectiveInfo &info = cmd.collective;
    if (info.op == CollectiveOp::Send || info.op == CollectiveOp::Recv) {
      std::optional<std::pair<int64_t, int64_t>> ends =
          pointToPoint(info, r.rank);
      if (!ends)
        return moved;
      auto [sender, receiver] = *ends;
      bool mine =
          info.op == CollectiveOp::Send ? r.rank == sender : r.rank == receiver;
      CommCost cost = costOf(cmd, {sender, receiver});
      if (mine && info.op == CollectiveOp::Send) {
        mailbox[{sender, receiver}].push_back(
            {at + cost.seconds, cost.seconds});
        r.comm.t = at + cost.seconds;
      } else if (mine) {
        auto &queue = mailbox[{sender, receiver}];
        if (queue.empty())
          return moved;
        r.comm.t = std::max(at, queue.front().first);
        queue.pop_front();
      }
      if (mine) {
        r.result.commSeconds += cost.seconds;
        span(r, 1, plan::collectiveOpName(info.op), "collective", at, r.comm.t);
      }
    } else {
      Instance *inst = arrive(r, cmd, at, r.comm.registered);
      if (!inst)
        return moved;
      r.comm.registered = false;
      r.comm.t = inst->end;
      r.result.commSeconds += inst->cost.seconds;
      collectiveSpan(r, 1, cmd, *inst);
    }
    if (cmd.event >= 0 && cmd.event < int64_t(r.eventDone.size()))
      r.eventDone[cmd.event] = r.comm.t;
    r.commQueue.pop_front();
    moved = true;
  }
  return moved;
}

void Simulator::finishCompute(RankState &r, double end) {
  if (r.switching) {
    span(r, 0, "switch", "switch", r.computeStart, end);
    r.result.computeSeconds += end - r.computeStart;
    r.computing = r.switching = false;
    r.remaining = 0;
    r.compute.t = r.resumeAt = end;
    return;
  }
  const Command &cmd = r.plan->commands[r.pc];
  if (r.collective) {
    if (options.traceCommands)
      span(r, 0,
           commandName(*r.plan, cmd) + " (" +
               algorithmName(r.collective->cost.algorithm) + ")",
           "collective", r.computeStart, end);
    r.result.commSeconds += end - r.computeStart;
    r.result.exposedCommSeconds += end - r.computeStart;
    r.computing = false;
    r.collective = nullptr;
    r.remaining = 0;
    r.compute.t = r.resumeAt = end;
    ++r.pc;
    return;
  }
  const char *cat = cmd.kind == CommandKind::Gemm     ? "gemm"
                    : cmd.kind == CommandKind::Kernel ? "kernel"
                    : cmd.kind == CommandKind::Attention ||
                            cmd.kind == CommandKind::AttentionBackward
                        ? "attention"
                        : "copy";
  if (options.traceCommands)
    span(r, 0, commandName(*r.plan, cmd), cat, r.computeStart, end);
  r.result.computeSeconds += end - r.computeStart;
  r.computing = false;
  r.remaining = 0;
  r.compute.t = end;
  r.resumeAt = end;
  ++r.pc;
}

std::string Simulator::run() {
  int64_t world = plan.mesh.worldSize();
  if (world < 1)
    return "the plan's mesh has no ranks";
  if (plan.isPipelined() && plan::pipelineAxis(plan.mesh) < 0)
    return "the plan has stages but no '" + std::string(plan::kPipelineAxis) +
           "' mesh axis";
  placement = placeRanks(cluster, world);
  out = SimResult();
  out.placement = placement;

  // Costs once per distinct plan (every SPMD rank shares one).
  std::map<const plan::Plan *, PlanCosts> costs;
  ranks.resize(world);
  for (int64_t rank = 0; rank < world; ++rank) {
    RankState &r = ranks[rank];
    r.rank = rank;
    r.stage = plan::stageOfRank(plan, rank);
    if (r.stage >= int64_t(std::max<size_t>(plan.stages.size(), 1)))
      return "rank " + std::to_string(rank) + " has no stage plan";
    r.plan = &plan::stagePlanFor(plan, rank);
    auto it = costs.find(r.plan);
    if (it == costs.end())
      it = costs.emplace(r.plan, costPlan(*r.plan, cluster.device)).first;
    r.costs = &it->second;
    r.eventDone.assign(std::max<int64_t>(r.plan->numEvents, 0), kPending);
    r.result.rank = rank;
    r.result.stage = r.stage;
    r.result.arenaBytes = r.plan->arenaBytes;
    r.result.stateBytes = r.costs->stateBytes;
    r.result.flops = r.costs->flops;
    r.result.modelFlops = r.costs->modelFlops;
    out.kernelCostsKnown &= r.costs->kernelCostsKnown;
  }

  for (RankState &r : ranks)
    r.node = placement.nodeOf(r.rank);
  double gemmCapacity = cluster.capacity();
  double kernelCapacity = cluster.kernelCapacityOrDefault();
  double now = 0;
  for (;;) {
    // Everything that happens at `now` without time passing.
    for (bool moved = true; moved;) {
      moved = false;
      for (RankState &r : ranks) {
        moved |= advanceCompute(r, now);
        moved |= advanceComm(r);
      }
    }
    bool done = true;
    std::map<int64_t, int64_t> busy; // node -> ranks computing
    for (const RankState &r : ranks) {
      done &= r.pc == r.plan->commands.size() && r.commQueue.empty();
      if (r.computing)
        ++busy[r.node];
    }
    if (done)
      break;
    auto rate = [&](const RankState &r) {
      return std::min(1.0, (r.gemm ? gemmCapacity : kernelCapacity) /
                               double(busy[r.node]));
    };
    // The next moment anything ends: a compute command or a hold.
    double next = std::numeric_limits<double>::infinity();
    for (const RankState &r : ranks) {
      if (r.computing)
        next = std::min(next, now + r.remaining / rate(r));
      else if (r.resumeAt > now && r.pc < r.plan->commands.size())
        next = std::min(next, r.resumeAt);
    }
    if (!std::isfinite(next)) {
      for (RankState &r : ranks) {
        if (r.pc < r.plan->commands.size()) {
          const Command &c = r.plan->commands[r.pc];
          std::string what =
              c.kind == CommandKind::Collective
                  ? std::string(plan::collectiveOpName(c.collective.op)) +
                        (c.collective.source.empty()
                             ? ""
                             : ", " + c.collective.source)
                  : plan::commandKindName(c.kind);
          return "deadlock: rank " + std::to_string(r.rank) +
                 " waits forever at command " + std::to_string(r.pc) + " (" +
                 what + ")";
        }
      }
      return "deadlock: a communication stream waits forever";
    }
    for (RankState &r : ranks) {
      if (!r.computing)
        continue;
      double left = r.remaining - rate(r) * (next - now);
      if (now + r.remaining / rate(r) <= next)
        finishCompute(r, next);
      else
        r.remaining = left;
    }
    now = next;
  }

  for (RankState &r : ranks) {
    r.result.end = std::max({r.compute.t, r.resumeAt, r.comm.t});
    out.stepSeconds = std::max(out.stepSeconds, r.result.end);
    out.flops += r.result.flops;
    out.ranks.push_back(r.result);
  }
  subtractRecompute(out, metadataNumber(plan.isPipelined() ? plan.stages[0]
                                                             : plan,
                                         "recompute_extra_flops"));

  // The bubble over the pipeline ranks of the first data/tensor coordinate.
  int64_t ppAxis = plan::pipelineAxis(plan.mesh);
  for (const auto &[key, value] : plan.metadata)
    if (key == "pipeline_expected")
      out.expectedBubble = value;
  if (plan.isPipelined() && ppAxis >= 0) {
    double first = std::numeric_limits<double>::infinity(), last = 0, busy = 0;
    int64_t count = 0;
    std::set<int64_t> pipelineRanks;
    for (int64_t rank = 0; rank < world; ++rank) {
      std::vector<int64_t> coords = plan.mesh.coordinates(rank);
      bool firstOthers = true;
      for (size_t a = 0; a < coords.size(); ++a)
        firstOthers &= int64_t(a) == ppAxis || coords[a] == 0;
      if (firstOthers)
        pipelineRanks.insert(rank);
    }
    for (const Span &s : out.spans)
      if (s.stream == 2 && pipelineRanks.count(s.rank)) {
        first = std::min(first, s.start);
        last = std::max(last, s.end);
        busy += s.end - s.start;
        ++count;
      }
    if (count && last > first)
      out.bubble = 1 - busy / (double(pipelineRanks.size()) * (last - first));
  }

  setUtilization(out, plan, cluster.device, world);
  std::sort(out.spans.begin(), out.spans.end(),
            [](const Span &a, const Span &b) {
              return std::tie(a.rank, a.stream, a.start, a.end) <
                     std::tie(b.rank, b.stream, b.start, b.end);
            });
  return "";
}

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20)
      out += c;
  }
  return out;
}

} // namespace

std::string simulatePlan(const plan::Plan &plan, const Cluster &cluster,
                         const SimulateOptions &options, SimResult &out) {
  return Simulator(plan, cluster, options, out).run();
}

std::string parseReplaySchedule(const std::string &text, ReplaySchedule &out) {
  out = ReplaySchedule();
  size_t start = 0;
  for (bool first = true; start <= text.size(); first = false) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (first) {
      pipeline::ScheduleOptions o;
      if (std::string e = pipeline::parseScheduleKind(part, o); !e.empty())
        return e;
      if (o.kind == pipeline::ScheduleKind::ZeroBubble)
        return "replaying the zero-bubble schedule is not supported (its "
               "stage programs split the backward pass)";
      out.kind = part;
      continue;
    }
    size_t eq = part.find('=');
    std::string key = part.substr(0, eq);
    char *end = nullptr;
    long long value =
        eq == std::string::npos ? 0 : std::strtoll(part.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || !end || *end || value < 1 ||
        value > (1 << 20) || (key != "pp" && key != "microbatches"))
      return "bad replayed schedule field '" + part +
             "' (expected pp=<ranks> or microbatches=<m>, positive)";
    (key == "pp" ? out.ranks : out.microbatches) = value;
  }
  return "";
}

double metadataNumber(const plan::Plan &p, const std::string &key) {
  for (const auto &[k, v] : p.metadata)
    if (k == key)
      return std::strtod(v.c_str(), nullptr);
  return 0;
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
           std::string(plan::kPipelineStepsKey) + ")";
  PlanCosts costs = costPlan(stage, cluster.device);
  sc.kernelCostsKnown = costs.kernelCostsKnown;
  int64_t rank = pair.empty() ? 0 : pair.front();
  // Ranks sharing a node's compute (more ranks than its devices' worth):
  // each computes at its share, as processor sharing gives while all are
  // busy.
  double gemmShare = placement.computeShare;
  double onNode = double(
      std::min((placement.world + cluster.nodes - 1) / cluster.nodes,
               placement.world));
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
  int64_t forwards = std::count_if(names.begin(), names.end(),
                                   [](const std::string &n) {
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
        seconds = pair.size() == 2 ? commandCost(cluster, placement, options,
                                                 cmd, pair)
                                         .seconds
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
        seconds = commandCost(cluster, placement, options, cmd, g.ranks).seconds;
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
  namespace pl = pipeline;
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
           " pipeline ranks with " + std::to_string(v) +
           " chunks each needs " + std::to_string(p * v);
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
             std::string(plan::kPipelineStepsKey) + ")";
    compiledMicrobatches = forwards;
  }
  so.ranks = p;
  so.microbatches = replay.microbatches ? replay.microbatches
                                        : compiledMicrobatches;

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
    if (std::string e = costStage(plan.stages[j], cluster, placement, options,
                                  mesh, {rankAt(j % p), rankAt((j + 1) % p)},
                                  stageCosts[j]);
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
      rr.flops += metadataNumber(stage, "flops") * scale;
    }
    rr.end = head + last[r] + tail;
    // Every collective blocks the compute stream here.
    rr.exposedCommSeconds = rr.commSeconds;
    rr.peerWaitSeconds = std::max(0.0, last[r] - busy[r]);
    out.stepSeconds = std::max(out.stepSeconds, rr.end);
    out.flops += rr.flops * double(others);
    out.ranks.push_back(rr);
  }
  subtractRecompute(out, metadataNumber(plan.stages[0],
                                        "recompute_extra_flops") *
                             scale);
  out.bubble = sim.bubble;
  char expected[128];
  std::snprintf(expected, sizeof(expected),
                "%s at p = %lld, m = %lld: bubble %.1f%% by the formula",
                replay.kind.c_str(), (long long)p,
                (long long)so.microbatches,
                pl::formulaBubble(so, pl::StepCosts()) * 100);
  out.expectedBubble = expected;
  for (const pl::TimedStep &t : sim.steps)
    out.spans.push_back({rankAt(t.rank), 2, pl::stepName(t.step, so),
                         t.step.kind == pl::StepKind::Forward ? "forward"
                                                              : "backward",
                         head + t.start, head + t.end});

  setUtilization(out, plan, cluster.device, world);
  return "";
}

std::string simulationTrace(const SimResult &result) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  bool first = true;
  char buffer[512];
  for (const Span &s : result.spans) {
    int pid = s.stream == 2 ? 0 : 1;
    long long tid = s.stream == 2 ? s.rank : 2 * s.rank + s.stream;
    std::snprintf(buffer, sizeof(buffer),
                  "%s\n  {\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", "
                  "\"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %lld}",
                  first ? "" : ",", escape(s.name).c_str(),
                  escape(s.category).c_str(), s.start * 1e6,
                  (s.end - s.start) * 1e6, pid, tid);
    out += buffer;
    first = false;
  }
  return out + "\n]}\n";
}

StepCost stepCost(const SimResult &r, const Cluster &cluster) {
  double devices = double(r.placement.world);
  StepCost c;
  c.kWh = devices * cluster.device.powerWatts * r.stepSeconds / 3.6e6;
  c.deviceCost = devices * cluster.pricePerDeviceHour * r.stepSeconds / 3600;
  c.energyCost = c.kWh * cluster.pricePerKWh;
  return c;
}

double tokensPerStep(const plan::Plan &plan, std::string &source) {
  // A pipelined plan's inputs are its stages' (every stage has the same).
  const plan::Plan &holder =
      plan.inputs.empty() && !plan.stages.empty() ? plan.stages.front() : plan;
  for (const plan::TensorInfo &t : holder.inputs) {
    bool integer = t.dtype == plan::DType::I64 || t.dtype == plan::DType::I32 ||
                   t.dtype == plan::DType::U32 || t.dtype == plan::DType::U64;
    if (!integer || t.shape.size() < 2)
      continue;
    std::vector<int64_t> global = plan::globalShape(t, holder.mesh);
    double n = 1;
    std::string dims;
    for (int64_t d : global) {
      n *= double(d);
      dims += (dims.empty() ? "" : " x ") + std::to_string(d);
    }
    source = "input '" + t.name + "', " + dims;
    return n;
  }
  source.clear();
  return 0;
}

std::string runBudgetReport(const SimResult &r, const Cluster &cluster,
                            double tokens, double perStep) {
  char line[512];
  double steps = std::ceil(tokens / perStep);
  StepCost cost = stepCost(r, cluster);
  double seconds = steps * r.stepSeconds;
  std::snprintf(line, sizeof line,
                "run of %.4g tokens at %.4g a step: %.0f steps, %.4g s "
                "(%.4g days), %.4g kWh, cost %.4g (device-hours %.4g + "
                "energy %.4g)\n",
                tokens, perStep, steps, seconds, seconds / 86400,
                steps * cost.kWh, steps * cost.total(),
                steps * cost.deviceCost, steps * cost.energyCost);
  return line;
}

std::string simulationReport(const SimResult &r, const Cluster &cluster) {
  std::string out;
  char line[512];
  auto add = [&](const char *fmt, auto... args) {
    std::snprintf(line, sizeof(line), fmt, args...);
    out += line;
  };
  add("cluster: %s (%lld node%s x %lld %s%s%s)\n", cluster.name.c_str(),
      (long long)cluster.nodes, cluster.nodes == 1 ? "" : "s",
      (long long)cluster.devicesPerNode, cluster.device.name.c_str(),
      cluster.source.empty() ? "" : "; ", cluster.source.c_str());
  add("placement: %lld ranks, %lld per node", (long long)r.placement.world,
      (long long)std::min(r.placement.ranksPerNode, r.placement.world));
  if (r.placement.computeShare > 1)
    add(" (up to %.2f ranks per device's worth of compute: they share it",
        r.placement.computeShare);
  if (r.placement.latencyShare > 1) {
    const Link &l = cluster.intraNode;
    add("%s%.2f ranks per core: a blocking collective is its members' "
        "threads' work, %.1f us per message step",
        r.placement.computeShare > 1 ? "; " : " (", r.placement.latencyShare,
        stepLatency(l, r.placement, /*threadWork=*/true) * 1e6);
  }
  if (r.placement.computeShare > 1 || r.placement.latencyShare > 1)
    out += ")";
  out += "\n";
  if (!r.kernelCostsKnown)
    out += "warning: the plan has no kernel_costs metadata (compiled by an "
           "older cleave-compile): kernels cost only their launch overhead\n";
  double exposed = 0, wait = 0, comm = 0, compute = 0;
  for (const RankResult &k : r.ranks) {
    exposed = std::max(exposed, k.exposedCommSeconds);
    wait = std::max(wait, k.peerWaitSeconds);
    comm = std::max(comm, k.commSeconds);
    compute = std::max(compute, k.computeSeconds);
  }
  add("step time %.3f ms: compute %.3f ms, communication %.3f ms of which "
      "%.3f ms exposed, waiting for peers %.3f ms (the most of any rank)\n",
      r.stepSeconds * 1e3, compute * 1e3, comm * 1e3, exposed * 1e3,
      wait * 1e3);
  if (r.bubble >= 0) {
    add("pipeline: simulated bubble %.1f%%", r.bubble * 100);
    if (!r.expectedBubble.empty())
      out += "; schedule " + r.expectedBubble;
    out += "\n";
  }
  add("flops per step %.4g (model %.4g); MFU %.2f%%, HFU %.2f%% of %.4g "
      "TFLOP/s %s per device\n",
      r.flops, r.modelFlops, r.mfu * 100, r.hfu * 100, r.peakFlops / 1e12,
      r.peakType.c_str());
  StepCost cost = stepCost(r, cluster);
  add("energy per step %.4g kWh (%.0f devices at %.0f W); cost per step %.4g "
      "(device-hours %.4g + energy %.4g)\n",
      cost.kWh, double(r.placement.world), cluster.device.powerWatts,
      cost.total(), cost.deviceCost, cost.energyCost);
  for (const RankResult &k : r.ranks)
    add("  rank %lld%s: end %.3f ms, compute %.3f ms, exposed communication "
        "%.3f ms, waiting %.3f ms, memory %llu bytes (arena; states %llu)%s\n",
        (long long)k.rank,
        r.bubble >= 0 ? (" (stage " + std::to_string(k.stage) + ")").c_str()
                      : "",
        k.end * 1e3, k.computeSeconds * 1e3, k.exposedCommSeconds * 1e3,
        k.peerWaitSeconds * 1e3, (unsigned long long)k.arenaBytes,
        (unsigned long long)k.stateBytes,
        double(k.arenaBytes) > cluster.device.memoryBytes ? " OVER MEMORY"
                                                          : "");
  return out;
}

} // namespace cleave::sim
