//===- Cluster.h - The machines a plan runs on ------------------*- C++ -*-===//
//
// A cluster description: nodes of identical devices (GPUs, or CPU cores for
// the `cpu` preset), each with its peak throughput by element type, memory
// and power, the fabric inside a node and the network between nodes, and
// prices. The cost model (CostModel.h) and the simulator (Simulator.h) read
// it. Descriptions are JSON files (parseCluster) or built-in presets
// (clusterPreset); loadCluster takes either.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SIMULATE_CLUSTER_H
#define CLEAVE_SIMULATE_CLUSTER_H

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::sim {

/// A GEMM's efficiency against the device's peak, by the work it does:
/// efficiency(flops) = max * flops / (flops + halfFlops), so a GEMM of
/// `halfFlops` floating-point operations reaches half of `max`. Small GEMMs
/// are far from the peak (launch, tiling and memory traffic dominate), large
/// ones approach `max`.
struct EfficiencyCurve {
  double max = 0.8;
  double halfFlops = 5e8;
};

/// One device (a GPU; for the `cpu` preset, one core running one rank).
struct Device {
  std::string name;
  /// Dense peak throughput, FLOP/s, by element type of the operands: fp32
  /// (CUDA cores, or the CPU's vector units), tf32 (f32 GEMMs on tensor
  /// cores), bf16, fp16.
  double fp32Flops = 0, tf32Flops = 0, bf16Flops = 0, fp16Flops = 0;
  /// Memory: bytes and bandwidth (bytes/s).
  double memoryBytes = 0, memoryBandwidth = 0;
  /// Board power at full load, watts.
  double powerWatts = 0;
  /// GEMM efficiency curves: f32 GEMMs and 16-bit ones.
  EfficiencyCurve gemmFp32, gemmHalf;
  /// f32 GEMMs use tf32 tensor cores (cuBLAS's default for PyTorch-style
  /// training on A100/H100 is off; Cleave's cuBLASLt GEMMs are f32).
  bool tf32Gemms = false;
  /// The share of memoryBandwidth that a fused (generated) kernel reaches.
  double kernelBandwidthFraction = 0.7;
  /// A kernel, copy or fill whose arguments take at most cacheBytes moves
  /// them at cacheBandwidth (bytes/s): they stay in the cache between the
  /// commands that write and read them. 0: no cache (every command streams
  /// from memory; the GPU presets, whose kernels are far larger than L2).
  double cacheBytes = 0, cacheBandwidth = 0;
  /// Bandwidth (bytes read + written per second) of a copy command whose
  /// bytes fit in the cache: the CPU runtime's copies are the C library's
  /// memmove, about three times a generated kernel's rate on the
  /// development machine. 0: copies move at the kernels' rate.
  double copyBandwidth = 0;
  /// Additions per second along one loop-carried chain: what a sum over a
  /// kernel's innermost dimension runs at when the code generator keeps
  /// the additions in order (the CPU kernels: LLVM does not reassociate
  /// floating-point sums). Such a kernel costs its chain's additions at
  /// this rate on top of its bytes. 0: reductions are parallel trees (GPU
  /// kernels) and cost their bytes only.
  double serialAddRate = 0;
  /// Bandwidth (bytes/s) of the bytes a kernel moves out of its loops'
  /// order (transposes, gathers, scatters). 0: they stream like the others.
  double permutedBandwidth = 0;
  /// Transcendental functions (exp, log, tanh, erf, ...) per second in
  /// generated kernels: the CPU evaluates them as polynomials of tens of
  /// operations. 0: free beside the kernel's bytes (GPUs' special function
  /// units).
  double transcendentalRate = 0;
  /// Attention runs as tiles whose products are calls of the GEMM library
  /// (the CPU runtime, runtime/src/Attention.cpp): each tile's GEMMs cost
  /// what gemmSeconds gives their shapes, overhead included. Otherwise it
  /// is one kernel costed by its products at the per-head efficiency.
  bool attentionTileGemms = false;
  /// Fixed cost per command (launch, dispatch), seconds: kernels, GEMMs,
  /// copies, and the extra cost per collective call.
  double kernelOverhead = 5e-6, gemmOverhead = 5e-6, collectiveOverhead = 0;
  /// Compute time a rank loses each time it blocks in a Recv or a Wait on
  /// a node whose ranks outnumber its cores (seconds): the context switches
  /// and the caches the other ranks' work has emptied. (A blocking
  /// collective's are in the link's shared latency.) 0 elsewhere.
  double switchOverhead = 0;
};

/// A link: bandwidth per device per direction (bytes/s) and the latency of
/// one message (seconds).
struct Link {
  double bandwidth = 0;
  double latency = 0;
  /// When the node runs more ranks than cores (ranks as threads): the time
  /// a member's thread spends per message step of a blocking collective
  /// (staging, waking and switching; the simulator runs the collective as
  /// the members' work on the shared cores, while a member waiting for its
  /// peers leaves its core to other ranks); 0: the latency (see
  /// stepLatency in Simulator.h).
  double sharedLatency = 0;
  /// Collectives whose operand takes at most this many bytes per member run
  /// as one rendezvous after which each member reads the others' operands
  /// (shared memory: the local communicator's staged collectives); 0: none.
  double oneShotBytes = 0;
};

struct Cluster {
  std::string name;
  /// Where the figures come from (a vendor datasheet, a measurement).
  std::string source;
  int64_t nodes = 1;
  /// Devices per node (GPUs; for the `cpu` preset, what the machine's cores
  /// compute together, in cores' worth). A mesh larger than the cluster
  /// puts several ranks on a node's devices: they share them (see
  /// Simulator.h: processor sharing).
  int64_t devicesPerNode = 8;
  /// Host cores per node that run the ranks' threads (0: one per device).
  /// With more ranks on a node than cores, a rank waiting for a message
  /// must first be scheduled: each message step's latency is multiplied by
  /// ranks / cores.
  int64_t coresPerNode = 0;
  /// Devices' worth of compute a node gives the ranks computing on it at
  /// once (0: devicesPerNode). Below devicesPerNode when the devices share
  /// execution units (the `cpu` preset: two cores of a virtual machine
  /// that together compute about what one does while the host is busy).
  double computeCapacity = 0;
  /// The same for fused kernels, copies and fills (0: computeCapacity).
  /// Cores that share their floating-point units (SMT siblings) halve each
  /// other's GEMMs but not their memory-bound kernels.
  double kernelCapacity = 0;
  Device device;
  Link intraNode; ///< NVLink/NVSwitch (or shared memory on a CPU).
  Link interNode; ///< InfiniBand/RoCE per device.
  double pricePerDeviceHour = 0; ///< Currency per device-hour.
  double pricePerKWh = 0;        ///< Currency per kWh.

  /// All devices.
  int64_t devices() const { return nodes * devicesPerNode; }
  /// Devices' worth of compute per node (computeCapacity or devicesPerNode).
  double capacity() const {
    return computeCapacity > 0 ? computeCapacity : double(devicesPerNode);
  }
  /// Devices' worth of kernel work per node (kernelCapacity or capacity()).
  double kernelCapacityOrDefault() const {
    return kernelCapacity > 0 ? kernelCapacity : capacity();
  }
};

/// The names of the built-in presets: dgx-a100-80gb, dgx-h100, hgx-h200,
/// cpu.
std::vector<std::string> clusterPresetNames();

/// A built-in preset, with `nodes` nodes (at least one). Returns false for an
/// unknown name.
bool clusterPreset(const std::string &name, Cluster &out, int64_t nodes = 1);

/// Reads a JSON description (see docs/guide/cleave-sim.md). A description
/// may start from a preset ("preset": "dgx-a100-80gb") and override any
/// field. Returns an error naming the field, or "".
std::string parseCluster(const std::string &json, Cluster &out);

/// `spec` is a preset name, optionally with ":<nodes>" ("dgx-h100:4"), or a
/// JSON file. Returns an error, or "".
std::string loadCluster(const std::string &spec, Cluster &out);

/// The description as JSON (every field, in parseCluster's schema).
std::string clusterJson(const Cluster &cluster);

} // namespace cleave::sim

#endif // CLEAVE_SIMULATE_CLUSTER_H
