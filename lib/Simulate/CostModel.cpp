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
  switch (a) {
  case Algorithm::Ring:
    return "ring";
  case Algorithm::Tree:
    return "tree";
  case Algorithm::Hierarchical:
    return "hierarchical";
  case Algorithm::OneShot:
    return "one-shot";
  }
  return "ring";
}

static int64_t ceilLog2(int64_t n) {
  int64_t steps = 0;
  while ((int64_t(1) << steps) < n)
    ++steps;
  return steps;
}

/// Steps and bytes of a one-shot collective (see collectiveCost).
static void oneShot(CollectiveOp op, double bytes, int64_t n, CommCost &c) {
  c.algorithm = Algorithm::OneShot;
  c.steps = 1;
  if (op == CollectiveOp::AllReduce)
    c.bytesSent = double(n - 1) * bytes;
  else if (op == CollectiveOp::Broadcast || op == CollectiveOp::Permute)
    c.bytesSent = bytes;
  else
    c.bytesSent = double(n - 1) / double(n) * bytes;
}

CommCost collectiveCost(CollectiveOp op, double bytes, int64_t n,
                        const Link &link, Algorithm algorithm,
                        double overhead) {
  CommCost c;
  c.algorithm = Algorithm::Ring;
  double fraction = n > 0 ? double(n - 1) / double(n) : 0;
  switch (op) {
  case CollectiveOp::AllReduce:
    if (algorithm == Algorithm::OneShot) {
      oneShot(op, bytes, n, c);
    } else if (algorithm == Algorithm::Tree) {
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
    if (algorithm == Algorithm::OneShot) {
      oneShot(op, bytes, n, c);
    } else {
      c.steps = n - 1;
      c.bytesSent = fraction * bytes;
    }
    break;
  case CollectiveOp::Broadcast:
    if (algorithm == Algorithm::OneShot) {
      oneShot(op, bytes, n, c);
    } else if (algorithm == Algorithm::Tree) {
      c.algorithm = Algorithm::Tree;
      c.steps = ceilLog2(n);
    } else {
      c.steps = n - 1;
    }
    c.bytesSent = n > 1 ? bytes : 0;
    break;
  case CollectiveOp::Permute:
    if (algorithm == Algorithm::OneShot)
      c.algorithm = Algorithm::OneShot; // one step either way
    [[fallthrough]];
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
                          int64_t perNode, const Link &intra, const Link &inter,
                          double overhead) {
  double share = perNode > 0 ? bytes / double(perNode) : bytes;
  CommCost c;
  // NCCL streams a collective through its phases in chunks: every phase
  // pays its steps' latency, but the bytes move on the node's fabric and
  // the network at once, so the slowest phase's transfer sets the time.
  double transfer = 0;
  auto add = [&](CollectiveOp phase, double s, int64_t n, const Link &link) {
    CommCost part = collectiveCost(phase, s, n, link, Algorithm::Ring);
    double bandwidthSeconds =
        link.bandwidth > 0 ? part.bytesSent / link.bandwidth : 0;
    c.seconds += part.seconds - bandwidthSeconds;
    transfer = std::max(transfer, bandwidthSeconds);
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
  c.seconds += transfer;
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
  double bytes =
      (double(m) * double(k) + double(k) * double(n)) * element *
          double(batch) +
      double(m) * double(n) * double(batch) * double(plan::dtypeSize(out));
  double memory = d.memoryBandwidth > 0 ? bytes / d.memoryBandwidth : 0;
  return std::max(compute, memory) + d.gemmOverhead;
}

double groupedGemmSeconds(const Device &d, const plan::Command &c) {
  const std::vector<int64_t> &p = c.params;
  if (p.size() < plan::kGroupedNumParams)
    return d.kernelOverhead;
  int64_t m = p[plan::kGroupedRows], k = p[plan::kGroupedK],
          n = p[plan::kGroupedN],
          e = std::max<int64_t>(1, p[plan::kGroupedExperts]);
  auto dtype = static_cast<DType>(p[plan::kGroupedDType]);
  int64_t perExpert = (m + e - 1) / e;
  double gemms =
      double(e) * (p[plan::kGroupedWeightGrad]
                       ? gemmSeconds(d, k, n, perExpert, 1, dtype, dtype)
                       : gemmSeconds(d, perExpert, n, k, 1, dtype, dtype));
  // The rows gathered into expert order (x, and dy or the result) and
  // written back: read and written once each.
  double bytes =
      2.0 * double(m) * double(k + n) * double(plan::dtypeSize(dtype));
  double memory = d.memoryBandwidth > 0 ? bytes / d.memoryBandwidth : 0;
  return gemms + memory;
}

/// The GEMM calls of the CPU runtime's attention (runtime/src/Attention.cpp)
/// for parameters `p`: per (batch, query head) and tile of queries x keys
/// that causal masking leaves, forward q k^T and p v; backward the
/// log-sum-exp pass's q k^T, then q k^T, dv += p^T dout, dp = dout v^T,
/// dq += ds k and dk += ds^T q. In f32 whatever the operands' type.
static double tileAttentionSeconds(const Device &d, const plan::Command &c,
                                   bool backward) {
  const std::vector<int64_t> &p = c.params;
  const int64_t sq = p[plan::kAttnQLen], skv = p[plan::kAttnKVLen];
  const int64_t dk = p[plan::kAttnHeadDim], dv = p[plan::kAttnValueDim];
  // A block's positions are data: its tiles are all counted (the most
  // that masking can leave).
  const bool causal = p[plan::kAttnCausal] != 0 && !plan::attentionIsBlock(c);
  const int64_t offset = p[plan::kAttnCausalOffset];
  auto gemm = [&](int64_t m, int64_t n, int64_t k) {
    return gemmSeconds(d, m, n, k, 1, DType::F32, DType::F32);
  };
  double perHead = 0;
  for (int64_t i0 = 0; i0 < sq; i0 += plan::kCpuAttentionQueryTile) {
    int64_t rows = std::min(plan::kCpuAttentionQueryTile, sq - i0);
    for (int64_t j0 = 0; j0 < skv; j0 += plan::kCpuAttentionKeyTile) {
      if (causal && j0 > i0 + rows - 1 + offset)
        break;
      int64_t cols = std::min(plan::kCpuAttentionKeyTile, skv - j0);
      if (backward)
        perHead += 2 * gemm(rows, cols, dk) + gemm(cols, dv, rows) +
                   gemm(rows, cols, dv) + gemm(rows, dk, cols) +
                   gemm(cols, dk, rows);
      else
        perHead += gemm(rows, cols, dk) + gemm(rows, dv, cols);
    }
  }
  return perHead * double(p[plan::kAttnBatch]) * double(p[plan::kAttnQHeads]);
}

double attentionSeconds(const Device &d, const plan::Command &c) {
  const std::vector<int64_t> &p = c.params;
  // Plans written before the block flag have one parameter less.
  if (p.size() != plan::kAttnNumParams && p.size() != plan::kAttnNumParams - 1)
    return d.kernelOverhead;
  double bh = double(p[plan::kAttnBatch]) * double(p[plan::kAttnQHeads]);
  double sq = double(p[plan::kAttnQLen]), skv = double(p[plan::kAttnKVLen]);
  double dk = double(p[plan::kAttnHeadDim]),
         dv = double(p[plan::kAttnValueDim]);
  // The share of scores a causal mask leaves: keys j <= i + offset.
  double live = 1;
  // A block's positions are data: every score counts (the most that
  // masking can leave).
  if (p[plan::kAttnCausal] && !plan::attentionIsBlock(c) && sq > 0 && skv > 0) {
    double kept = 0;
    for (int64_t i = 0; i < p[plan::kAttnQLen]; ++i)
      kept += std::clamp<double>(double(i + p[plan::kAttnCausalOffset] + 1), 0,
                                 skv);
    live = kept / (sq * skv);
  }
  bool backward = c.kind == CommandKind::AttentionBackward;
  double scores = bh * sq * skv * live;
  // The softmax's element-wise work per score (scale, mask, max, exp, sum;
  // backward: exp again and ds = p (dp - D)).
  double softmax =
      d.fp32Flops > 0 ? scores * (backward ? 16 : 8) / d.fp32Flops : 0;
  if (d.attentionTileGemms)
    return tileAttentionSeconds(d, c, backward) + softmax + d.kernelOverhead;
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

double streamBandwidth(const Device &d, double bytes, double fraction) {
  if (d.cacheBytes > 0 && bytes <= d.cacheBytes)
    return d.cacheBandwidth;
  return d.memoryBandwidth * fraction;
}

double kernelSeconds(const Device &d, const KernelCost &cost) {
  double bandwidth = streamBandwidth(d, cost.bytes, d.kernelBandwidthFraction);
  double permuted =
      d.permutedBandwidth > 0 ? std::min(cost.permutedBytes, cost.bytes) : 0;
  double memory = (bandwidth > 0 ? (cost.bytes - permuted) / bandwidth : 0) +
                  (permuted > 0 ? permuted / d.permutedBandwidth : 0);
  double compute =
      (d.fp32Flops > 0 ? cost.flops / d.fp32Flops : 0) +
      (d.transcendentalRate > 0 ? cost.transcendentals / d.transcendentalRate
                                : 0);
  double chain = d.serialAddRate > 0 ? cost.serialAdds / d.serialAddRate : 0;
  return std::max({memory, compute, chain}) + d.kernelOverhead;
}

double copySeconds(const Device &d, double bytes) {
  double bandwidth =
      d.copyBandwidth > 0 && d.cacheBytes > 0 && 2 * bytes <= d.cacheBytes
          ? d.copyBandwidth
          : streamBandwidth(d, 2 * bytes, 1.0);
  return (bandwidth > 0 ? 2 * bytes / bandwidth : 0) + d.kernelOverhead;
}

double fillSeconds(const Device &d, double bytes) {
  double bandwidth = streamBandwidth(d, bytes, 1.0);
  return (bandwidth > 0 ? bytes / bandwidth : 0) + d.kernelOverhead;
}

std::vector<KernelCost> kernelCosts(const plan::Plan &plan) {
  // Each item "flops:bytes[:serial_adds[:permuted_bytes[:transcendentals]]]".
  std::vector<KernelCost> costs;
  for (const std::string &item :
       plan::getMetadata(plan, plan::meta::kKernelCosts)) {
    char *end = nullptr;
    KernelCost c;
    c.flops = std::strtod(item.c_str(), &end);
    if (*end != ':')
      return {};
    c.bytes = std::strtod(end + 1, &end);
    if (*end == ':')
      c.serialAdds = std::strtod(end + 1, &end);
    if (*end == ':')
      c.permutedBytes = std::strtod(end + 1, &end);
    if (*end == ':')
      c.transcendentals = std::strtod(end + 1, &end);
    if (*end)
      return {};
    costs.push_back(c);
  }
  return costs;
}

} // namespace cleave::sim
