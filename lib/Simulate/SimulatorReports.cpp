//===- SimulatorReports.cpp - Reports and trace of a run ------------------===//
//
// What a simulated step reports: its cost in device-hours and money, the
// tokens it trains, the budget of a run, and the text report cleave-sim
// prints. The trace is SimulationTrace.cpp's.
//
//===----------------------------------------------------------------------===//

#include "cleave/Simulate/Simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cleave::sim {

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
                steps * cost.kWh, steps * cost.total(), steps * cost.deviceCost,
                steps * cost.energyCost);
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
