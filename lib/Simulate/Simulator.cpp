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
#include "SimulatorInternal.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
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
using namespace detail;

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
         commandName(*r.plan, cmd) + " (" + algorithmName(inst.cost.algorithm) +
             ")",
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
  /// A Send or Recv as seen from `rank`.
  struct PointToPoint {
    int64_t sender, receiver;
    /// One program serves every rank: only the sender sends and only the
    /// receiver receives.
    bool mine;
    CommCost cost;
  };
  /// The Send or Recv `cmd` as seen from `rank`; none for group indices
  /// outside the group.
  std::optional<PointToPoint> pointToPoint(const Command &cmd, int64_t rank) {
    const plan::CollectiveInfo &info = cmd.collective;
    plan::Group g = plan::groupOf(plan.mesh, info.axes, rank);
    int64_t size = static_cast<int64_t>(g.ranks.size());
    if (info.root < 0 || info.peer < 0 || info.root >= size ||
        info.peer >= size)
      return std::nullopt;
    int64_t sender = g.ranks[info.root], receiver = g.ranks[info.peer];
    bool mine =
        info.op == CollectiveOp::Send ? rank == sender : rank == receiver;
    return PointToPoint{sender, receiver, mine,
                        costOf(cmd, {sender, receiver})};
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
        std::optional<PointToPoint> p2p = pointToPoint(cmd, r.rank);
        if (!p2p)
          return moved;
        auto [sender, receiver, mine, cost] = *p2p;
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
                 cmd.kind == CommandKind::GroupedGemm ||
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
      std::optional<PointToPoint> p2p = pointToPoint(cmd, r.rank);
      if (!p2p)
        return moved;
      auto [sender, receiver, mine, cost] = *p2p;
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
  const char *cat =
      cmd.kind == CommandKind::Gemm || cmd.kind == CommandKind::GroupedGemm
          ? "gemm"
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
  subtractRecompute(out,
                    metadataNumber(plan.isPipelined() ? plan.stages[0] : plan,
                                   plan::meta::kRecomputeExtraFlops));

  // The bubble over the pipeline ranks of the first data/tensor coordinate.
  int64_t ppAxis = plan::pipelineAxis(plan.mesh);
  if (auto expected = plan::getMetadata(plan, plan::meta::kPipelineExpected))
    out.expectedBubble = *expected;
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
} // namespace

std::string simulatePlan(const plan::Plan &plan, const Cluster &cluster,
                         const SimulateOptions &options, SimResult &out) {
  return Simulator(plan, cluster, options, out).run();
}

} // namespace cleave::sim
