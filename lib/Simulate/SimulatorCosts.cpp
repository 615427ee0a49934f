//===- SimulatorCosts.cpp - What commands cost on a cluster ---------------===//
//
// The compute seconds of each command of a plan on a device, a
// collective's cost on the cluster's links (ring, tree, one-shot or
// hierarchical, whichever is fastest), and the utilization (MFU, HFU) of a
// simulated step.
//
//===----------------------------------------------------------------------===//

#include "SimulatorInternal.h"

#include <algorithm>
#include <cstdlib>

namespace cleave::sim {

using plan::CollectiveOp;
using plan::Command;
using plan::CommandKind;

/// Model flops are the hardware flops without recompute's extra. The
/// plan's recompute_extra_flops is the global program's (before it was
/// partitioned and cut into stages), so it comes off the sum over all
/// ranks, and each rank keeps its share.
void detail::subtractRecompute(SimResult &out, double extra) {
  out.modelFlops = std::max(0.0, out.flops - extra);
  double keep = out.flops > 0 ? out.modelFlops / out.flops : 1;
  for (RankResult &r : out.ranks)
    r.modelFlops = r.flops * keep;
}

/// MFU and HFU of `out` over `world` devices against the peak of the
/// element type of the plan's GEMMs (bf16 or fp16 if any GEMM uses it).
void detail::setUtilization(SimResult &out, const plan::Plan &plan,
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
  out.peakType = gemmType == plan::DType::BF16              ? "bf16"
                 : gemmType == plan::DType::F16             ? "fp16"
                 : device.tf32Gemms && device.tf32Flops > 0 ? "tf32"
                                                            : "fp32";
  double capacity = out.peakFlops * out.stepSeconds * double(world);
  if (capacity > 0) {
    out.mfu = out.modelFlops / capacity;
    out.hfu = out.flops / capacity;
  }
}

detail::PlanCosts detail::costPlan(const plan::Plan &p, const Device &device) {
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
        s = gemmSeconds(device, cmd.params[plan::kGemmM],
                        cmd.params[plan::kGemmN], cmd.params[plan::kGemmK],
                        cmd.params[plan::kGemmBatch],
                        static_cast<plan::DType>(cmd.params[plan::kGemmDType]),
                        static_cast<plan::DType>(plan::gemmOutDTypeOf(cmd)));
      else
        s = device.kernelOverhead;
      break;
    case CommandKind::Attention:
    case CommandKind::AttentionBackward:
      s = attentionSeconds(device, cmd);
      break;
    case CommandKind::GroupedGemm:
      s = groupedGemmSeconds(device, cmd);
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
  c.flops = metadataNumber(p, plan::meta::kFlops);
  c.modelFlops = c.flops;
  for (const plan::StateTensor &s : p.states)
    c.stateBytes += s.info.byteSize();
  c.stepNames = plan::pipelineSteps(p);
  return c;
}

double metadataNumber(const plan::Plan &p, plan::IntegerKey key) {
  return static_cast<double>(plan::getMetadata(p, key).value_or(0));
}
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
    CommCost two =
        hierarchicalCost(info.op, bytes, nodeCount, g, intra, inter, overhead);
    if (two.seconds < best.seconds)
      best = two;
  }
  return best;
}
} // namespace cleave::sim
