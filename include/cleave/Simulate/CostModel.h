//===- CostModel.h - What each plan command costs on a cluster -*- C++ -*-===//
//
// The time of each command of a plan (runtime/include/cleave/PlanFormat.h)
// on a device of a cluster: GEMMs by a roofline with an efficiency curve
// by work and element type, fused kernels by the bytes they move (the
// plan's "kernel_costs" metadata), copies and fills by bandwidth,
// collectives by the alpha-beta model of the ring or tree algorithm over
// the link their group spans (NVLink inside a node, the network across
// nodes), and pipeline messages by latency and bandwidth. Plain C++ over
// the plan's structures (no LLVM).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SIMULATE_COSTMODEL_H
#define CLEAVE_SIMULATE_COSTMODEL_H

#include "cleave/PlanFormat.h"
#include "cleave/Simulate/Cluster.h"

#include <cstdint>
#include <vector>

namespace cleave::sim {

/// Where a mesh's ranks run: rank r on node r / ranksPerNode (rank = the
/// row-major index of its mesh coordinates, tp fastest, so a tp group is
/// inside a node). A mesh larger than the cluster's devices puts
/// ranksPerNode > devicesPerNode ranks on a node: they share its devices
/// (computeShare ranks per device's worth of compute, at most). With more
/// ranks than cores (latencyShare ranks per core) a message step costs
/// what stepLatency (Simulator.h) says: the simulator runs a blocking
/// collective there as its members' threads' work, sharing the cores with
/// the other ranks' kernels.
struct Placement {
  int64_t world = 1;
  int64_t ranksPerNode = 1;
  double computeShare = 1;
  double latencyShare = 1;
  int64_t nodeOf(int64_t rank) const { return rank / ranksPerNode; }
};
Placement placeRanks(const Cluster &cluster, int64_t world);

enum class Algorithm { Ring, Tree, Hierarchical, OneShot };
const char *algorithmName(Algorithm);

/// A collective's cost: seconds, the bytes each member sends, and the
/// number of sequential message steps (each paying the link's latency).
struct CommCost {
  double seconds = 0;
  double bytesSent = 0;
  int64_t steps = 0;
  Algorithm algorithm = Algorithm::Ring;
};

/// The alpha-beta cost of collective `op` over `n` members joined by `link`
/// with `algorithm` (ring: the textbook ring of ../shared/REFERENCE.md;
/// tree: a pipelined binary tree, 2 log2(n) latency steps for all-reduce).
/// `bytes` is S of the reference: the operand of all-reduce, broadcast,
/// reduce-scatter, all-to-all, permute and send; the gathered result of
/// all-gather.
///   ring all-reduce:      2(n-1) steps, 2(n-1)/n S bytes sent
///   ring all-gather,
///   reduce-scatter,
///   all-to-all:           n-1 steps, (n-1)/n S
///   ring broadcast:       n-1 steps, S
///   tree all-reduce:      2 ceil(log2 n) steps, 2 S
///   tree broadcast:       ceil(log2 n) steps, S
///   permute, send:        1 step, S
///   one-shot (shared memory, one rendezvous, each member reading the
///   others' operands): 1 step; all-reduce (n-1) S read, all-gather,
///   reduce-scatter and all-to-all (n-1)/n S, broadcast and permute S
/// seconds = steps * latency + bytesSent / bandwidth + overhead. Tree exists
/// only for all-reduce and broadcast (the others take the ring).
CommCost collectiveCost(plan::CollectiveOp op, double bytes, int64_t n,
                        const Link &link, Algorithm algorithm,
                        double overhead = 0);

/// The two-level algorithm of a group spread evenly over `nodes` nodes,
/// `perNode` members on each (as NCCL runs one ring per NIC across nodes):
/// all-reduce is a reduce-scatter inside each node, an all-reduce of each
/// member's S / perNode share across the nodes (every member over its own
/// network link, in parallel), and an all-gather inside each node;
/// all-gather and reduce-scatter are their halves (the network phase on
/// S / perNode). Other collectives cost their ring over the network.
/// The phases are pipelined, as NCCL streams chunks through them: each
/// pays its steps' latency, and the slowest phase's transfer sets the rest.
///   all-reduce: 2(g-1) + 2(k-1) steps; max((g-1)/g S over the node's
///               fabric, 2(k-1)/k S/g over the network) (k nodes, g per node)
CommCost hierarchicalCost(plan::CollectiveOp op, double bytes, int64_t nodes,
                          int64_t perNode, const Link &intra, const Link &inter,
                          double overhead = 0);

/// The link a group of ranks communicates over: the node's fabric when all
/// are on one node, the network otherwise.
const Link &linkFor(const Cluster &cluster, const Placement &placement,
                    const std::vector<int64_t> &ranks);

/// The bytes S of a Collective command (see collectiveCost).
double collectiveBytes(const plan::CollectiveInfo &info, int64_t groupSize);

/// Seconds of a GEMM of `batch` products of (m x k) by (k x n) with operands
/// of `dtype` and a result of `out` (bf16/f16 operands: f32 unless the
/// command rounds its result): max(flops / (peak * efficiency(flops)),
/// bytes / memory bandwidth) + the GEMM overhead, on one unshared device.
double gemmSeconds(const Device &device, int64_t m, int64_t n, int64_t k,
                   int64_t batch, plan::DType dtype, plan::DType out);

/// Seconds of an Attention or AttentionBackward command: its products (2
/// forward: q k^T and p v; 6 backward: q k^T twice, dv, dp, dq, dk) over
/// the scores that causal masking leaves, at the fp32 peak and GEMM
/// efficiency (both runtimes' kernels compute in f32 whatever the operands'
/// type), plus the softmax work at the fp32 peak, or its
/// operands' and results' bytes over the kernels' bandwidth, whichever is
/// longer (the scores stay in on-chip memory), plus one kernel overhead.
/// On a device with Device::attentionTileGemms, the products are the CPU
/// runtime's tile GEMMs instead (kCpuAttentionQueryTile x
/// kCpuAttentionKeyTile tiles that causal masking leaves, each product one
/// gemmSeconds call, overhead included) plus the softmax work at the fp32
/// peak and one kernel overhead.
double attentionSeconds(const Device &device, const plan::Command &command);
/// Seconds of a GroupedGemm command (the expert GEMMs of a mixture of
/// experts), with the rows spread evenly over the experts (balanced
/// routing: the router's choices are data): one gemmSeconds per expert of
/// its share of the rows (the forward: rows/E x N x K; the weight
/// gradient: K x N over rows/E), plus copying the rows into expert order
/// and back at the memory bandwidth.
double groupedGemmSeconds(const Device &device, const plan::Command &command);
/// The peak FLOP/s of a device for GEMMs with operands of `dtype` (fp32, or
/// tf32 when the device's f32 GEMMs use it; bf16, fp16; f64 at half fp32).
double gemmPeak(const Device &device, plan::DType dtype);

/// The bandwidth at which a command moving `bytes` (read and written) runs:
/// the cache's when they fit in it (Device::cacheBytes), else `fraction` of
/// the memory bandwidth.
double streamBandwidth(const Device &device, double bytes, double fraction);

/// A fused kernel's work (the plan's "kernel_costs" metadata): flops, the
/// bytes of its arguments, the additions of its sums over the innermost
/// dimension, which a CPU kernel runs as one loop-carried chain per output,
/// the bytes its transposes, gathers and scatters move out of the loops'
/// order, and its transcendental functions (exp, erf, ...) evaluated.
struct KernelCost {
  double flops = 0, bytes = 0, serialAdds = 0, permutedBytes = 0,
         transcendentals = 0;
};

/// Seconds of a fused kernel:
///   max(streamed / bandwidth + permuted / permuted bandwidth,
///       flops / fp32 peak + transcendentals / transcendental rate,
///       serialAdds / serial add rate) + kernel overhead
/// (a chain of additions waits on each addition's latency; the other work
/// runs beside it)
/// where the bandwidth is streamBandwidth's (kernel fraction) for all the
/// bytes, and `permuted` (at most the bytes) is taken out of `streamed` on
/// devices with a permuted bandwidth. Terms whose device figure is 0 are
/// left out.
double kernelSeconds(const Device &device, const KernelCost &cost);

/// Seconds of a Copy (read and write `bytes`) or Fill (write), at
/// streamBandwidth.
double copySeconds(const Device &device, double bytes);
double fillSeconds(const Device &device, double bytes);

/// The cost of each Kernel command of a plan, in command order, from its
/// "kernel_costs" metadata ("flops:bytes[:serial adds:permuted bytes:
/// transcendentals],..."; plans of earlier compilers have two fields). Empty
/// when the plan has none (plans of older compilers) or it does not parse.
std::vector<KernelCost> kernelCosts(const plan::Plan &plan);

} // namespace cleave::sim

#endif // CLEAVE_SIMULATE_COSTMODEL_H
