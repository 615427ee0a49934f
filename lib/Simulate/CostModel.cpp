//===- CostModel.cpp - What each plan command costs on a cluster ---------===//

#include "cleave/Simulate/CostModel.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace cleave::sim {

using plan::CollectiveOp;
using plan::CommandKind;
using plan::DType;

Placement placeRanks(const Cluster &cluster, int64_t world) {
  Placement p;
  p.world = std::max<int64_t>(world, 1);
  int64_t perNode = (p.world + cluster.nodes - 1) / cluster.nodes;
  p.ranksPerNode = std::max(cluster.devicesPerNode, perNode);
  double onNode = double(std::min(perNode, p.world));
  int64_t devices = std::max<int64_t>(cluster.devicesPerNode, 1);
  int64_t cores = cluster.coresPerNode > 0 ? cluster.coresPerNode : devices;
  p.computeShare = std::max(1.0, onNode / cluster.capacity());
  p.latencyShare = std::max(1.0, onNode / double(cores));
  return p;
}

const char *algorithmName(Algorithm a) {
  return a == Algorithm::Ring   ? "ring"
         : a == Algorithm::Tree ? "tree"
                                : "hierarchical";
}

static int64_t ceilLog2(int64_t n) {
  int64_t steps = 0;
  while ((int64_t(1) << steps) < n)
    ++steps;
  return steps;
}

CommCost collectiveCost(CollectiveOp op, double bytes, int64_t n,
                        const Link &link, Algorithm algorithm,
                        double overhead) {
  CommCost c;
  c.algorithm = Algorithm::Ring;
  double fraction = n > 0 ? double(n - 1) / double(n) : 0;
  switch (op) {
  case CollectiveOp::AllReduce:
    if (algorithm == Algorithm::Tree) {
      c.algorithm = Algorithm::Tree;
      c.steps = 2 * ceilLog2(n);
      c.bytesSent = n > 1 ? 2 * bytes : 0;
    } else {
      c.steps = 2 * (n - 1);
      c.bytesSent = 2 * fraction * bytes;
    }
    break;
  case CollectiveOp::AllGather:
  case CollectiveOp::ReduceScatter:
  case CollectiveOp::AllToAll:
    c.steps = n - 1;
    c.bytesSent = fraction * bytes;
    break;
  case CollectiveOp::Broadcast:
    if (algorithm == Algorithm::Tree) {
      c.algorithm = Algorithm::Tree;
      c.steps = ceilLog2(n);
    } else {
      c.steps = n - 1;
    }
    c.bytesSent = n > 1 ? bytes : 0;
    break;
  case CollectiveOp::Permute:
  case CollectiveOp::Send:
  case CollectiveOp::Recv:
    c.steps = 1;
    c.bytesSent = bytes;
    break;
  case CollectiveOp::AllSlice:
    break;
  }
  if (n <= 1) {
    c.steps = 0;
    c.bytesSent = 0;
  }
  c.seconds = double(c.steps) * link.latency +
              (link.bandwidth > 0 ? c.bytesSent / link.bandwidth : 0);
  if (op != CollectiveOp::AllSlice && n > 1)
    c.seconds += overhead;
  return c;
}

CommCost hierarchicalCost(CollectiveOp op, double bytes, int64_t nodes,
                          int64_t perNode, const Link &intra,
                          const Link &inter, double overhead) {
  double share = perNode > 0 ? bytes / double(perNode) : bytes;
  CommCost c;
  auto add = [&](CollectiveOp phase, double s, int64_t n, const Link &link) {
    CommCost part = collectiveCost(phase, s, n, link, Algorithm::Ring);
    c.seconds += part.seconds;
    c.bytesSent += part.bytesSent;
    c.steps += part.steps;
  };
  switch (op) {
  case CollectiveOp::AllReduce:
    add(CollectiveOp::ReduceScatter, bytes, perNode, intra);
    add(CollectiveOp::AllReduce, share, nodes, inter);
    add(CollectiveOp::AllGather, bytes, perNode, intra);
    break;
  case CollectiveOp::AllGather:
    // Each node gathers the other nodes' shares, then within itself.
    add(CollectiveOp::AllGather, share, nodes, inter);
    add(CollectiveOp::AllGather, bytes, perNode, intra);
    break;
  case CollectiveOp::ReduceScatter:
    add(CollectiveOp::ReduceScatter, bytes, perNode, intra);
    add(CollectiveOp::ReduceScatter, share, nodes, inter);
    break;
  default:
    return collectiveCost(op, bytes, nodes * perNode, inter, Algorithm::Ring,
                          overhead);
  }
  c.algorithm = Algorithm::Hierarchical;
  if (nodes * perNode > 1)
    c.seconds += overhead;
  return c;
}

const Link &linkFor(const Cluster &cluster, const Placement &placement,
                    const std::vector<int64_t> &ranks) {
  for (int64_t r : ranks)
    if (placement.nodeOf(r) != placement.nodeOf(ranks.front()))
      return cluster.interNode;
  return cluster.intraNode;
}

double collectiveBytes(const plan::CollectiveInfo &info, int64_t groupSize) {
  double element = double(plan::dtypeSize(info.dtype));
  double operand = double(info.count) * element;
  if (info.op == CollectiveOp::AllGather)
    return operand * double(groupSize);
  return operand;
}

double gemmPeak(const Device &d, DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return d.bf16Flops > 0 ? d.bf16Flops : d.fp32Flops;
  case DType::F16:
    return d.fp16Flops > 0 ? d.fp16Flops : d.fp32Flops;
  case DType::F64:
    return d.fp32Flops / 2;
  default:
    return d.tf32Gemms && d.tf32Flops > 0 ? d.tf32Flops : d.fp32Flops;
  }
}

double gemmSeconds(const Device &d, int64_t m, int64_t n, int64_t k,
                   int64_t batch, DType dtype, DType out) {
  double flops = 2.0 * double(m) * double(n) * double(k) * double(batch);
  bool half = dtype == DType::BF16 || dtype == DType::F16;
  const EfficiencyCurve &curve = half ? d.gemmHalf : d.gemmFp32;
  double efficiency =
      flops > 0 ? curve.max * flops / (flops + curve.halfFlops) : 1;
  double peak = gemmPeak(d, dtype);
  double compute = flops > 0 && peak > 0 ? flops / (peak * efficiency) : 0;
  double element = double(plan::dtypeSize(dtype));
  double bytes = (double(m) * double(k) + double(k) * double(n)) * element *
                     double(batch) +
                 double(m) * double(n) * double(batch) *
                     double(plan::dtypeSize(out));
  double memory = d.memoryBandwidth > 0 ? bytes / d.memoryBandwidth : 0;
  return std::max(compute, memory) + d.gemmOverhead;
}

double attentionSeconds(const Device &d, const plan::Command &c) {
  const std::vector<int64_t> &p = c.params;
  if (p.size() != plan::kAttnNumParams)
    return d.kernelOverhead;
  double bh = double(p[plan::kAttnBatch]) * double(p[plan::kAttnQHeads]);
  double sq = double(p[plan::kAttnQLen]), skv = double(p[plan::kAttnKVLen]);
  double dk = double(p[plan::kAttnHeadDim]), dv = double(p[plan::kAttnValueDim]);
  // The share of scores a causal mask leaves: keys j <= i + offset.
  double live = 1;
  if (p[plan::kAttnCausal] && sq > 0 && skv > 0) {
    double kept = 0;
    for (int64_t i = 0; i < p[plan::kAttnQLen]; ++i)
      kept += std::clamp<double>(double(i + p[plan::kAttnCausalOffset] + 1), 0,
                                 skv);
    live = kept / (sq * skv);
  }
  bool backward = c.kind == CommandKind::AttentionBackward;
  double scores = bh * sq * skv * live;
  double productFlops =
      scores * (backward ? 2 * (4 * dk + 2 * dv) : 2 * (dk + dv));
  auto dtype = static_cast<DType>(p[plan::kAttnDType]);
  // Both runtimes compute attention in f32 whatever the operands' type (the
  // CPU's tile products are sgemm; the CUDA kernels use the CUDA cores, not
  // tensor cores): the f32 peak and curve.
  const EfficiencyCurve &curve = d.gemmFp32;
  // The efficiency of one head's products (the kernel's unit of work).
  double perHead = bh > 0 ? productFlops / bh : 0;
  double efficiency =
      perHead > 0 ? curve.max * perHead / (perHead + curve.halfFlops) : 1;
  double peak = d.fp32Flops;
  double compute =
      productFlops > 0 && peak > 0 ? productFlops / (peak * efficiency) : 0;
  double softmax = d.fp32Flops > 0
                       ? scores * (backward ? 16 : 8) / d.fp32Flops
                       : 0;
  double element = double(plan::dtypeSize(dtype));
  double bytes = bh * (sq * dk + sq * dv) * element +
                 double(p[plan::kAttnBatch]) * double(p[plan::kAttnKVHeads]) *
                     skv * (dk + dv) * element;
  if (backward)
    bytes *= 2.5; // out, dout and the three gradients
  double bandwidth = d.memoryBandwidth * d.kernelBandwidthFraction;
  double memory = bandwidth > 0 ? bytes / bandwidth : 0;
  return std::max(compute + softmax, memory) + d.kernelOverhead;
}

double kernelSeconds(const Device &d, double flops, double bytes) {
  double bandwidth = d.memoryBandwidth * d.kernelBandwidthFraction;
  double memory = bandwidth > 0 ? bytes / bandwidth : 0;
  double compute = d.fp32Flops > 0 ? flops / d.fp32Flops : 0;
  return std::max(memory, compute) + d.kernelOverhead;
}

double copySeconds(const Device &d, double bytes) {
  return (d.memoryBandwidth > 0 ? 2 * bytes / d.memoryBandwidth : 0) +
         d.kernelOverhead;
}

double fillSeconds(const Device &d, double bytes) {
  return (d.memoryBandwidth > 0 ? bytes / d.memoryBandwidth : 0) +
         d.kernelOverhead;
}

std::vector<KernelCost> kernelCosts(const plan::Plan &plan) {
  std::vector<KernelCost> costs;
  for (const auto &[key, value] : plan.metadata) {
    if (key != "kernel_costs")
      continue;
    const char *p = value.c_str();
    while (*p) {
      char *end = nullptr;
      KernelCost c;
      c.flops = std::strtod(p, &end);
      if (*end != ':')
        return {};
      c.bytes = std::strtod(end + 1, &end);
      costs.push_back(c);
      if (*end == ',')
        ++end;
      else if (*end)
        return {};
      p = end;
    }
  }
  return costs;
}

} // namespace cleave::sim
