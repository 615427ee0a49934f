//===- Cluster.cpp - Cluster descriptions: presets and JSON ---------------===//
//
// The built-in presets hold vendors' published figures (dense peaks, no
// sparsity) and, for `cpu`, figures measured on the development machine by
// test/benchmarks/calibrate_cpu.py. JSON descriptions are read with
// llvm::json; every field is checked and an error names the field.
//
//===----------------------------------------------------------------------===//

#include "cleave/Simulate/Cluster.h"

#include "cleave/PlanFormat.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

namespace cleave::sim {

static constexpr double kTera = 1e12, kGiga = 1e9, kMicro = 1e-6;
static constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
static constexpr double kMiB = 1024.0 * 1024.0;
static constexpr double kKiB = 1024.0;

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

/// Defaults for NVIDIA GPUs until the GPU calibration: cuBLAS(Lt) GEMMs
/// reach about 80% of the dense peak on large shapes and half of that
/// around 0.5 GFLOP (f32) / 2 GFLOP (16-bit: tensor cores need more work
/// to fill); fused kernels reach 70% of HBM bandwidth; 5 us per launch.
static void gpuDefaults(Device &d) {
  d.gemmFp32 = {0.85, 0.5e9};
  d.gemmHalf = {0.8, 2e9};
  d.kernelBandwidthFraction = 0.7;
  d.kernelOverhead = 5e-6;
  d.gemmOverhead = 5e-6;
  d.collectiveOverhead = 10e-6;
}

static Cluster dgxA100() {
  // NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM, 2021): FP32 19.5
  // TFLOPS, TF32 156, BF16/FP16 312 (dense), 80 GB HBM2e at 2,039 GB/s,
  // 400 W; NVLink 3 at 600 GB/s per GPU (both directions) through
  // NVSwitch. NVIDIA DGX A100 datasheet: 8 GPUs, 8 ConnectX-6 HDR
  // InfiniBand 200 Gb/s compute ports (25 GB/s per GPU per direction).
  Cluster c;
  c.name = "dgx-a100-80gb";
  c.source = "NVIDIA A100 80GB SXM and DGX A100 datasheets";
  c.devicesPerNode = 8;
  Device &d = c.device;
  d.name = "A100-SXM4-80GB";
  d.fp32Flops = 19.5 * kTera;
  d.tf32Flops = 156 * kTera;
  d.bf16Flops = d.fp16Flops = 312 * kTera;
  d.memoryBytes = 80 * kGiB;
  d.memoryBandwidth = 2039 * kGiga;
  d.powerWatts = 400;
  gpuDefaults(d);
  // Fitted to Narayanan et al. (SC'21) Table 1 as its runs were launched
  // (sc21_calibration.py --fit: the bf16 GEMMs' maximum efficiency against
  // the fused kernels' share of HBM bandwidth): 87.5% of the bf16 peak on
  // large shapes, kernels at 60% of the bandwidth (the lowest share the
  // fit tries).
  d.gemmHalf.max = 0.875;
  d.kernelBandwidthFraction = 0.6;
  c.intraNode = {300 * kGiga, 3e-6};
  c.interNode = {25 * kGiga, 5e-6};
  // Prices are not published by the vendor: typical 2026 cloud on-demand
  // rates, to be replaced by a description of the cluster at hand.
  c.pricePerDeviceHour = 1.8;
  c.pricePerKWh = 0.12;
  return c;
}

static Cluster hopper(const char *name, const char *gpu, double memoryGiB,
                      double bandwidthGBs, double price, const char *source) {
  // NVIDIA H100 / H200 Tensor Core GPU datasheets (SXM): FP32 67 TFLOPS,
  // TF32 494.7, BF16/FP16 989.4 (dense), up to 700 W; NVLink 4 at 900 GB/s
  // per GPU (both directions). DGX H100 / HGX H200: 8 GPUs, ConnectX-7 NDR
  // 400 Gb/s per GPU (50 GB/s per direction).
  Cluster c;
  c.name = name;
  c.source = source;
  c.devicesPerNode = 8;
  Device &d = c.device;
  d.name = gpu;
  d.fp32Flops = 67 * kTera;
  d.tf32Flops = 494.7 * kTera;
  d.bf16Flops = d.fp16Flops = 989.4 * kTera;
  d.memoryBytes = memoryGiB * kGiB;
  d.memoryBandwidth = bandwidthGBs * kGiga;
  d.powerWatts = 700;
  gpuDefaults(d);
  c.intraNode = {450 * kGiga, 3e-6};
  c.interNode = {50 * kGiga, 5e-6};
  c.pricePerDeviceHour = price;
  c.pricePerKWh = 0.12;
  return c;
}

/// The development machine's figures: the medians of three runs of
/// test/benchmarks/calibrate_cpu.py on 2026-12-05, 16:48-16:51 UTC (2
/// cores of an Intel Xeon VM, Emerald Rapids by LLVM's host detection, 2
/// MiB of L2 per core; one thread per rank, OPENBLAS_NUM_THREADS and
/// OMP_NUM_THREADS 1, rank threads bound to cores), the range in brackets:
///   GEMMs (the runtime's: oneDNN 2.6 sgemm; this machine's OpenBLAS 0.3.21
///     does not know the CPU and runs SSE3 kernels at a fifth of the
///     speed): 172 GFLOP/s [171, 181] from 32x64x64 to 1024^3, no curve
///     worth fitting; two at once 2.00 cores' worth [1.94, 2.03];
///   generated kernels: 28.4 GB/s [28.3, 29.5] up to the 2 MiB L2 (their
///     working sets leave it between runs: this is the next level's rate),
///     0.64 [0.55, 0.87] of a 20 GB/s copy from memory, 0.12 us each;
///     two softmax chains at once 1.93 cores' worth [1.92, 1.95];
///   the runtime's copies (memmove): 88.7 GB/s [85.5, 91.1] in cache;
///   1.83 G serial additions/s [1.73, 1.85], 4.76 G transcendental
///     functions/s [4.49, 5.07]; 5.62 GB/s permuted [5.42, 5.71] (an
///     element transpose and a gather; the medians of five calibrations
///     at 17:17-17:23 UTC);
///   local all-reduce of 2 ranks: 6.6 us per step [6.4, 6.9], 8.15 GB/s
///     per rank [7.84, 8.34]; over 2 of 4 ranks (threads outnumber cores)
///     each thread spends 4.07 us per message step [3.88, 4.08].
/// The host's speed moves by about a fifth from one few minutes to the
/// next and over ~0.7 s within them (calibrate_cpu.py runs every
/// measurement 1.5 s); until 12-05 the development machine was an AMD EPYC
/// VM, with other figures (in this file's history).
static Cluster cpuPreset() {
  Cluster c;
  c.name = "cpu";
  c.source = "measured by test/benchmarks/calibrate_cpu.py on the 2-core "
             "development machine";
  c.devicesPerNode = 2;
  c.coresPerNode = 2;
  c.computeCapacity = 2.0;
  c.kernelCapacity = 1.93;
  Device &d = c.device;
  d.name = "x86-64 core";
  d.fp32Flops = 172 * kGiga;
  d.tf32Flops = 0;
  d.bf16Flops = d.fp16Flops = 0; // no 16-bit GEMM units: the f32 rate
  d.gemmFp32 = {1.0, 0};
  d.gemmHalf = d.gemmFp32;
  d.memoryBytes = 16 * kGiB;
  d.memoryBandwidth = 20.1 * kGiga;
  d.powerWatts = 15;
  d.kernelBandwidthFraction = 0.64;
  d.cacheBytes = 2 * kMiB;
  d.cacheBandwidth = 28.4 * kGiga;
  d.copyBandwidth = 88.7 * kGiga;
  d.serialAddRate = 1.83 * kGiga;
  d.permutedBandwidth = 5.62 * kGiga;
  d.transcendentalRate = 4.76 * kGiga;
  d.attentionTileGemms = true;
  d.kernelOverhead = 0.12e-6;
  d.gemmOverhead = 1e-6;
  d.collectiveOverhead = 0;
  d.switchOverhead = 0;
  // Ranks as threads (local communicator): shared memory inside the
  // machine; between machines, MPI over TCP (an assumption, unmeasured).
  c.intraNode = {8.15 * kGiga, 6.6e-6, 4.07e-6,
                 double(plan::kLocalCommStagedBytes)};
  c.interNode = {1 * kGiga, 50e-6, 0};
  c.pricePerDeviceHour = 0.02;
  c.pricePerKWh = 0.12;
  return c;
}

std::vector<std::string> clusterPresetNames() {
  return {"dgx-a100-80gb", "dgx-h100", "hgx-h200", "cpu"};
}

bool clusterPreset(const std::string &name, Cluster &out, int64_t nodes) {
  if (name == "dgx-a100-80gb")
    out = dgxA100();
  else if (name == "dgx-h100")
    out = hopper("dgx-h100", "H100-SXM5-80GB", 80, 3350, 2.5,
                 "NVIDIA H100 Tensor Core GPU and DGX H100 datasheets");
  else if (name == "hgx-h200")
    out = hopper("hgx-h200", "H200-SXM-141GB", 141, 4800, 3.0,
                 "NVIDIA H200 Tensor Core GPU and HGX H200 datasheets");
  else if (name == "cpu")
    out = cpuPreset();
  else
    return false;
  out.nodes = nodes < 1 ? 1 : nodes;
  return true;
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

namespace {

/// Reads one JSON object's fields into `Cluster` members, each with a unit
/// factor; an unknown key or a value of the wrong type is an error naming
/// its path.
class Reader {
public:
  explicit Reader(std::string &error) : error(error) {}

  using Field =
      std::function<bool(const llvm::json::Value &, const std::string &)>;

  bool object(const llvm::json::Value &value, const std::string &path,
              const std::map<std::string, Field> &fields) {
    const llvm::json::Object *obj = value.getAsObject();
    if (!obj)
      return fail(path, "must be an object");
    for (const auto &[key, v] : *obj) {
      std::string name = path.empty() ? key.str() : path + "." + key.str();
      auto it = fields.find(key.str());
      if (it == fields.end())
        return fail(name, "is not a field of a cluster description");
      if (!it->second(v, name))
        return false;
    }
    return true;
  }

  Field number(double &out, double unit, bool positive = false) {
    return [this, &out, unit, positive](const llvm::json::Value &v,
                                        const std::string &path) {
      std::optional<double> d = v.getAsNumber();
      if (!d || !std::isfinite(*d) || *d < 0 || (positive && *d == 0))
        return fail(path, positive ? "must be a positive number"
                                   : "must be a number at least 0");
      out = *d * unit;
      return true;
    };
  }
  Field integer(int64_t &out) {
    return [this, &out](const llvm::json::Value &v, const std::string &path) {
      std::optional<int64_t> i = v.getAsInteger();
      if (!i || *i < 1)
        return fail(path, "must be an integer at least 1");
      out = *i;
      return true;
    };
  }
  Field string(std::string &out) {
    return [this, &out](const llvm::json::Value &v, const std::string &path) {
      std::optional<llvm::StringRef> s = v.getAsString();
      if (!s)
        return fail(path, "must be a string");
      out = s->str();
      return true;
    };
  }
  Field boolean(bool &out) {
    return [this, &out](const llvm::json::Value &v, const std::string &path) {
      std::optional<bool> b = v.getAsBoolean();
      if (!b)
        return fail(path, "must be true or false");
      out = *b;
      return true;
    };
  }
  Field curve(EfficiencyCurve &c) {
    return [this, &c](const llvm::json::Value &v, const std::string &path) {
      return object(v, path,
                    {{"max", number(c.max, 1.0, true)},
                     {"half_gflops", number(c.halfFlops, kGiga)}});
    };
  }
  Field link(Link &l) {
    return [this, &l](const llvm::json::Value &v, const std::string &path) {
      return object(v, path,
                    {{"gbps", number(l.bandwidth, kGiga, true)},
                     {"latency_us", number(l.latency, kMicro)},
                     {"shared_latency_us", number(l.sharedLatency, kMicro)},
                     {"one_shot_kib", number(l.oneShotBytes, kKiB)}});
    };
  }

  bool fail(const std::string &path, const std::string &what) {
    error = "cluster description: '" + path + "' " + what;
    return false;
  }

private:
  std::string &error;
};

} // namespace

std::string parseCluster(const std::string &json, Cluster &out) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value)
    return "cluster description: not JSON: " +
           llvm::toString(value.takeError());
  const llvm::json::Object *obj = value->getAsObject();
  if (!obj)
    return "cluster description: must be a JSON object";
  Cluster c;
  int64_t nodes = 1;
  if (const llvm::json::Value *preset = obj->get("preset")) {
    std::optional<llvm::StringRef> name = preset->getAsString();
    if (!name || !clusterPreset(name->str(), c))
      return "cluster description: 'preset' must be one of dgx-a100-80gb, "
             "dgx-h100, hgx-h200, cpu";
  }
  std::string error, presetName;
  Reader r(error);
  Device &d = c.device;
  auto gpu = [&](const llvm::json::Value &v, const std::string &path) {
    return r.object(
        v, path,
        {{"name", r.string(d.name)},
         {"peak_tflops",
          [&](const llvm::json::Value &p, const std::string &pp) {
            return r.object(p, pp,
                            {{"fp32", r.number(d.fp32Flops, kTera, true)},
                             {"tf32", r.number(d.tf32Flops, kTera)},
                             {"bf16", r.number(d.bf16Flops, kTera)},
                             {"fp16", r.number(d.fp16Flops, kTera)}});
          }},
         {"memory_gib", r.number(d.memoryBytes, kGiB, true)},
         {"memory_gbps", r.number(d.memoryBandwidth, kGiga, true)},
         {"power_w", r.number(d.powerWatts, 1.0)},
         {"gemm_efficiency",
          [&](const llvm::json::Value &p, const std::string &pp) {
            return r.object(
                p, pp,
                {{"fp32", r.curve(d.gemmFp32)}, {"half", r.curve(d.gemmHalf)}});
          }},
         {"tf32_gemms", r.boolean(d.tf32Gemms)},
         {"kernel_bandwidth_fraction",
          r.number(d.kernelBandwidthFraction, 1.0, true)},
         {"cache_mib", r.number(d.cacheBytes, kMiB)},
         {"cache_gbps", r.number(d.cacheBandwidth, kGiga)},
         {"copy_gbps", r.number(d.copyBandwidth, kGiga)},
         {"serial_gadds", r.number(d.serialAddRate, kGiga)},
         {"permuted_gbps", r.number(d.permutedBandwidth, kGiga)},
         {"transcendental_gops", r.number(d.transcendentalRate, kGiga)},
         {"attention_tile_gemms", r.boolean(d.attentionTileGemms)},
         {"kernel_overhead_us", r.number(d.kernelOverhead, kMicro)},
         {"gemm_overhead_us", r.number(d.gemmOverhead, kMicro)},
         {"collective_overhead_us", r.number(d.collectiveOverhead, kMicro)},
         {"switch_overhead_us", r.number(d.switchOverhead, kMicro)}});
  };
  auto price = [&](const llvm::json::Value &v, const std::string &path) {
    return r.object(v, path,
                    {{"per_gpu_hour", r.number(c.pricePerDeviceHour, 1.0)},
                     {"per_kwh", r.number(c.pricePerKWh, 1.0)}});
  };
  if (!r.object(*value, "",
                {{"preset", r.string(presetName)},
                 {"name", r.string(c.name)},
                 {"source", r.string(c.source)},
                 {"nodes", r.integer(nodes)},
                 {"gpus_per_node", r.integer(c.devicesPerNode)},
                 {"cores_per_node", r.integer(c.coresPerNode)},
                 {"compute_capacity", r.number(c.computeCapacity, 1.0, true)},
                 {"kernel_capacity", r.number(c.kernelCapacity, 1.0, true)},
                 {"gpu", gpu},
                 {"intra_node", r.link(c.intraNode)},
                 {"inter_node", r.link(c.interNode)},
                 {"price", price}}))
    return error;
  c.nodes = nodes;
  // What a description without a preset must give.
  struct Required {
    const char *path;
    double value;
  } required[] = {{"gpu.peak_tflops.fp32", d.fp32Flops},
                  {"gpu.memory_gib", d.memoryBytes},
                  {"gpu.memory_gbps", d.memoryBandwidth},
                  {"intra_node.gbps", c.intraNode.bandwidth},
                  {"inter_node.gbps", c.interNode.bandwidth}};
  for (const Required &f : required)
    if (!(f.value > 0))
      return std::string("cluster description: '") + f.path +
             "' is missing (give it, or start from a \"preset\")";
  if (d.kernelBandwidthFraction > 1 || d.gemmFp32.max > 1 || d.gemmHalf.max > 1)
    return "cluster description: efficiencies ('gpu.gemm_efficiency.*.max', "
           "'gpu.kernel_bandwidth_fraction') must be at most 1";
  if (d.cacheBytes > 0 && !(d.cacheBandwidth > 0))
    return "cluster description: 'gpu.cache_mib' is given without "
           "'gpu.cache_gbps'";
  if (c.name.empty())
    c.name = "custom";
  out = c;
  return "";
}

std::string loadCluster(const std::string &spec, Cluster &out) {
  std::string name = spec;
  int64_t nodes = 1;
  if (size_t colon = spec.rfind(':'); colon != std::string::npos) {
    std::string count = spec.substr(colon + 1);
    char *end = nullptr;
    long long n = std::strtoll(count.c_str(), &end, 10);
    if (!count.empty() && *end == '\0') {
      if (n < 1)
        return "cluster '" + spec + "': the node count must be at least 1";
      name = spec.substr(0, colon);
      nodes = n;
    }
  }
  if (clusterPreset(name, out, nodes))
    return "";
  auto buffer = llvm::MemoryBuffer::getFile(spec);
  if (!buffer) {
    std::string presets;
    for (const std::string &p : clusterPresetNames())
      presets += (presets.empty() ? "" : ", ") + p;
    return "cluster '" + spec + "' is neither a preset (" + presets +
           ", optionally with :<nodes>) nor a readable file: " +
           buffer.getError().message();
  }
  std::string error = parseCluster((*buffer)->getBuffer().str(), out);
  if (!error.empty())
    return spec + ": " + error;
  return "";
}

/// A number as the figures were written (%.9g: 0.85, not
/// 0.84999999999999998 as llvm::json would print it).
static std::string num(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", x);
  return buffer;
}

static std::string str(const std::string &s) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(s);
  return out;
}

std::string clusterJson(const Cluster &c) {
  const Device &d = c.device;
  auto curve = [](const EfficiencyCurve &e) {
    return "{\"max\": " + num(e.max) +
           ", \"half_gflops\": " + num(e.halfFlops / kGiga) + "}";
  };
  auto link = [](const Link &l) {
    return "{\"gbps\": " + num(l.bandwidth / kGiga) +
           ", \"latency_us\": " + num(l.latency / kMicro) +
           (l.sharedLatency > 0
                ? ", \"shared_latency_us\": " + num(l.sharedLatency / kMicro)
                : std::string()) +
           (l.oneShotBytes > 0
                ? ", \"one_shot_kib\": " + num(l.oneShotBytes / kKiB)
                : std::string()) +
           "}";
  };
  std::string o;
  o += "{\n  \"name\": " + str(c.name) + ",\n";
  o += "  \"source\": " + str(c.source) + ",\n";
  o += "  \"nodes\": " + std::to_string(c.nodes) + ",\n";
  o += "  \"gpus_per_node\": " + std::to_string(c.devicesPerNode) + ",\n";
  if (c.coresPerNode > 0)
    o += "  \"cores_per_node\": " + std::to_string(c.coresPerNode) + ",\n";
  if (c.computeCapacity > 0)
    o += "  \"compute_capacity\": " + num(c.computeCapacity) + ",\n";
  if (c.kernelCapacity > 0)
    o += "  \"kernel_capacity\": " + num(c.kernelCapacity) + ",\n";
  o += "  \"gpu\": {\n";
  o += "    \"name\": " + str(d.name) + ",\n";
  o += "    \"peak_tflops\": {\"fp32\": " + num(d.fp32Flops / kTera) +
       ", \"tf32\": " + num(d.tf32Flops / kTera) +
       ", \"bf16\": " + num(d.bf16Flops / kTera) +
       ", \"fp16\": " + num(d.fp16Flops / kTera) + "},\n";
  o += "    \"memory_gib\": " + num(d.memoryBytes / kGiB) + ",\n";
  o += "    \"memory_gbps\": " + num(d.memoryBandwidth / kGiga) + ",\n";
  o += "    \"power_w\": " + num(d.powerWatts) + ",\n";
  o += "    \"gemm_efficiency\": {\"fp32\": " + curve(d.gemmFp32) +
       ", \"half\": " + curve(d.gemmHalf) + "},\n";
  o += std::string("    \"tf32_gemms\": ") + (d.tf32Gemms ? "true" : "false") +
       ",\n";
  o += "    \"kernel_bandwidth_fraction\": " + num(d.kernelBandwidthFraction) +
       ",\n";
  o += "    \"cache_mib\": " + num(d.cacheBytes / kMiB) + ",\n";
  o += "    \"cache_gbps\": " + num(d.cacheBandwidth / kGiga) + ",\n";
  o += "    \"copy_gbps\": " + num(d.copyBandwidth / kGiga) + ",\n";
  o += "    \"serial_gadds\": " + num(d.serialAddRate / kGiga) + ",\n";
  o += "    \"permuted_gbps\": " + num(d.permutedBandwidth / kGiga) + ",\n";
  o += "    \"transcendental_gops\": " + num(d.transcendentalRate / kGiga) +
       ",\n";
  o += std::string("    \"attention_tile_gemms\": ") +
       (d.attentionTileGemms ? "true" : "false") + ",\n";
  o += "    \"kernel_overhead_us\": " + num(d.kernelOverhead / kMicro) + ",\n";
  o += "    \"gemm_overhead_us\": " + num(d.gemmOverhead / kMicro) + ",\n";
  o += "    \"collective_overhead_us\": " + num(d.collectiveOverhead / kMicro) +
       ",\n";
  o += "    \"switch_overhead_us\": " + num(d.switchOverhead / kMicro) +
       "\n  },\n";
  o += "  \"intra_node\": " + link(c.intraNode) + ",\n";
  o += "  \"inter_node\": " + link(c.interNode) + ",\n";
  o += "  \"price\": {\"per_gpu_hour\": " + num(c.pricePerDeviceHour) +
       ", \"per_kwh\": " + num(c.pricePerKWh) + "}\n}\n";
  return o;
}

} // namespace cleave::sim
