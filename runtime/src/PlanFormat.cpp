//===- PlanFormat.cpp - Encoding and decoding of .cleave plan files -------===//
//
// Layout: a 32-byte header (magic "CLEAVEPL", u32 version, u32 headerSize,
// u64 payloadSize, u64 FNV-1a-64 of the payload) then the payload, all
// little-endian. Strings are u32 length + bytes, blobs u64 length + bytes,
// lists u32 count + elements, doubles as their u64 bit patterns. Version 2
// appends, after the metadata: the init commands, the state tensors and the
// training record; version 4 a file reference (path, offset, file size)
// after each constant's data; version 5, after the event count, the stage
// plans: a u32 count, then each stage's payload (encoded like the top
// level's, with a stage count of 0) as a blob. A stage is decoded from its
// blob alone, so a damaged stage never reads past its own bytes. Version 6
// appends, after the stages: each state's varying axes (a u32 list per
// state), the training record's syncEvery (i64) and the named entries: a
// u32 count, then each entry's name and payload (like a stage's, with no
// stages or entries of its own) as a blob. Version 7 appends the host
// kernel object (a blob) and its argument table (a u32 count of kernels,
// then per kernel a u32 count of arguments and per argument a u64 byte
// size and a u8 written flag).
//
// Hand-written rather than a schema'd container (FlatBuffers, Debian's
// libflatbuffers-dev): the runtime reads every earlier version of this
// layout and the compiler writes it byte for byte reproducibly, so moving
// to another container is a new plan format, not a refactor. The checksum
// (FNV-1a-64, a few lines) only detects damage, not tampering.
//
//===----------------------------------------------------------------------===//

#include "cleave/PlanFormat.h"
#include "cleave/FileUtil.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace cleave::plan {

static const char kMagic[8] = {'C', 'L', 'E', 'A', 'V', 'E', 'P', 'L'};

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
    return 4;
  case DType::U8:
    return 1;
  case DType::I8:
    return 1;
  case DType::U16:
    return 2;
  case DType::I16:
    return 2;
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  case DType::Bool:
    return 1;
  case DType::F16:
    return 2;
  case DType::F64:
    return 8;
  case DType::U32:
    return 4;
  case DType::U64:
    return 8;
  case DType::BF16:
    return 2;
  case DType::F8E4M3FN:
  case DType::F8E4M3FNUZ:
  case DType::F8E5M2:
  case DType::F8E5M2FNUZ:
  case DType::U4:
  case DType::I4:
  case DType::F4E2M1:
  case DType::F8E8M0:
  case DType::U2:
  case DType::I2:
    return 1;
  }
  return 0;
}

unsigned dtypeBits(DType t) {
  switch (t) {
  case DType::U4:
  case DType::I4:
  case DType::F4E2M1:
    return 4;
  case DType::U2:
  case DType::I2:
    return 2;
  default:
    return static_cast<unsigned>(8 * dtypeSize(t));
  }
}

bool isNarrowFloat(DType t) {
  switch (t) {
  case DType::F8E4M3FN:
  case DType::F8E4M3FNUZ:
  case DType::F8E5M2:
  case DType::F8E5M2FNUZ:
  case DType::F4E2M1:
  case DType::F8E8M0:
    return true;
  default:
    return false;
  }
}

namespace {
/// The layout of a small binary float: exponent and mantissa widths, the
/// exponent bias, and how it spells infinities and NaNs.
struct SmallFloat {
  int expBits, manBits, bias;
  enum Special { IEEE, NanAllOnes, NanNegZero, None } special;
};
} // namespace

/// Decodes sign, exponent and mantissa; exact in a double.
static double decodeSmallFloat(SmallFloat f, uint8_t bits) {
  int total = 1 + f.expBits + f.manBits;
  bool neg = (bits >> (total - 1)) & 1;
  int e = (bits >> f.manBits) & ((1 << f.expBits) - 1);
  int m = bits & ((1 << f.manBits) - 1);
  int expMax = (1 << f.expBits) - 1;
  switch (f.special) {
  case SmallFloat::IEEE: // float8e5m2: all-ones exponent is inf or NaN.
    if (e == expMax)
      return m ? std::nan("") : (neg ? -HUGE_VAL : HUGE_VAL);
    break;
  case SmallFloat::NanAllOnes: // float8e4m3fn: S.1111.111 is NaN.
    if (e == expMax && m == (1 << f.manBits) - 1)
      return std::nan("");
    break;
  case SmallFloat::NanNegZero: // The fnuz types: the negative zero is NaN.
    if (neg && e == 0 && m == 0)
      return std::nan("");
    break;
  case SmallFloat::None:
    break;
  }
  double v = e == 0 ? std::ldexp(m, 1 - f.bias - f.manBits)
                    : std::ldexp((1 << f.manBits) | m, e - f.bias - f.manBits);
  return neg ? -v : v;
}

double narrowValue(DType t, uint8_t bits) {
  switch (t) {
  case DType::F8E4M3FN:
    return decodeSmallFloat({4, 3, 7, SmallFloat::NanAllOnes}, bits);
  case DType::F8E4M3FNUZ:
    return decodeSmallFloat({4, 3, 8, SmallFloat::NanNegZero}, bits);
  case DType::F8E5M2:
    return decodeSmallFloat({5, 2, 15, SmallFloat::IEEE}, bits);
  case DType::F8E5M2FNUZ:
    return decodeSmallFloat({5, 2, 16, SmallFloat::NanNegZero}, bits);
  case DType::F4E2M1:
    return decodeSmallFloat({2, 1, 1, SmallFloat::None}, bits & 0xf);
  case DType::F8E8M0: // A bare exponent: 2^(bits - 127); 0xff is NaN.
    return bits == 0xff ? std::nan("") : std::ldexp(1.0, int(bits) - 127);
  case DType::U4:
    return bits & 0xf;
  case DType::I4:
    return static_cast<int8_t>(uint8_t(bits << 4)) >> 4;
  case DType::U2:
    return bits & 0x3;
  case DType::I2:
    return static_cast<int8_t>(uint8_t(bits << 6)) >> 6;
  default:
    return bits;
  }
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "float32";
  case DType::U8:
    return "uint8";
  case DType::I8:
    return "int8";
  case DType::U16:
    return "uint16";
  case DType::I16:
    return "int16";
  case DType::I32:
    return "int32";
  case DType::I64:
    return "int64";
  case DType::Bool:
    return "bool";
  case DType::F16:
    return "float16";
  case DType::F64:
    return "float64";
  case DType::U32:
    return "uint32";
  case DType::U64:
    return "uint64";
  case DType::BF16:
    return "bfloat16";
  case DType::F8E4M3FN:
    return "float8e4m3fn";
  case DType::F8E4M3FNUZ:
    return "float8e4m3fnuz";
  case DType::F8E5M2:
    return "float8e5m2";
  case DType::F8E5M2FNUZ:
    return "float8e5m2fnuz";
  case DType::U4:
    return "uint4";
  case DType::I4:
    return "int4";
  case DType::F4E2M1:
    return "float4e2m1";
  case DType::F8E8M0:
    return "float8e8m0";
  case DType::U2:
    return "uint2";
  case DType::I2:
    return "int2";
  }
  return "unknown";
}

bool isKnownDType(uint32_t code) {
  return dtypeSize(static_cast<DType>(code)) != 0;
}

const char *commandKindName(CommandKind k) {
  switch (k) {
  case CommandKind::Kernel:
    return "kernel";
  case CommandKind::Gemm:
    return "gemm";
  case CommandKind::Attention:
    return "attention";
  case CommandKind::AttentionBackward:
    return "attention_backward";
  case CommandKind::GroupedGemm:
    return "grouped_gemm";
  case CommandKind::Copy:
    return "copy";
  case CommandKind::Fill:
    return "fill";
  case CommandKind::GpuLaunch:
    return "gpu_launch";
  case CommandKind::RandomNormal:
    return "random_normal";
  case CommandKind::Collective:
    return "collective";
  case CommandKind::Wait:
    return "wait";
  case CommandKind::Marker:
    return "marker";
  }
  return "unknown";
}

const char *collectiveOpName(CollectiveOp op) {
  switch (op) {
  case CollectiveOp::AllReduce:
    return "all_reduce";
  case CollectiveOp::AllGather:
    return "all_gather";
  case CollectiveOp::ReduceScatter:
    return "reduce_scatter";
  case CollectiveOp::AllToAll:
    return "all_to_all";
  case CollectiveOp::Broadcast:
    return "broadcast";
  case CollectiveOp::Permute:
    return "collective_permute";
  case CollectiveOp::Send:
    return "send";
  case CollectiveOp::Recv:
    return "recv";
  case CollectiveOp::AllSlice:
    return "all_slice";
  }
  return "unknown";
}

const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Avg:
    return "avg";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Min:
    return "min";
  case ReduceOp::Prod:
    return "prod";
  }
  return "unknown";
}

const char *gemmEpilogueName(GemmEpilogue e) {
  switch (e) {
  case GemmEpilogue::None:
    return "none";
  case GemmEpilogue::Bias:
    return "bias";
  case GemmEpilogue::GeluBias:
    return "gelu_bias";
  case GemmEpilogue::Gelu:
    return "gelu";
  }
  return "unknown";
}

const char *stateKindName(StateKind k) {
  switch (k) {
  case StateKind::Parameter:
    return "parameter";
  case StateKind::OptimizerState:
    return "optimizer_state";
  case StateKind::Buffer:
    return "buffer";
  }
  return "unknown";
}

const char *lrScheduleName(LRSchedule s) {
  switch (s) {
  case LRSchedule::Constant:
    return "constant";
  case LRSchedule::LinearWarmup:
    return "linear_warmup";
  case LRSchedule::Cosine:
    return "cosine";
  }
  return "unknown";
}

int64_t TensorInfo::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && n > INT64_MAX / d))
      return -1;
    n *= d;
  }
  return n;
}

uint64_t TensorInfo::byteSize() const {
  int64_t n = numElements();
  uint64_t size = dtypeSize(dtype);
  if (n < 0 || size == 0 || static_cast<uint64_t>(n) > UINT64_MAX / size)
    return 0;
  return static_cast<uint64_t>(n) * size;
}

uint64_t fnv1a64(const uint8_t *data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {
class Writer {
public:
  std::vector<uint8_t> out;
  void u8(uint8_t v) { le(v, 1); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void str(const std::string &s) {
    u32(static_cast<uint32_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
  void blob(const std::vector<uint8_t> &b) {
    u64(b.size());
    out.insert(out.end(), b.begin(), b.end());
  }
  void tensor(const TensorInfo &t) {
    str(t.name);
    u32(static_cast<uint32_t>(t.dtype));
    u32(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape)
      i64(d);
    u64(t.offset);
    u32(static_cast<uint32_t>(t.sharding.size()));
    for (const auto &axes : t.sharding)
      u32s(axes);
  }
  void u32s(const std::vector<uint32_t> &v) {
    u32(static_cast<uint32_t>(v.size()));
    for (uint32_t x : v)
      u32(x);
  }
  void i64s(const std::vector<int64_t> &v) {
    u32(static_cast<uint32_t>(v.size()));
    for (int64_t x : v)
      i64(x);
  }
  void f64(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    u64(bits);
  }
  void commands(const std::vector<Command> &list) {
    u32(static_cast<uint32_t>(list.size()));
    for (const Command &c : list) {
      u32(static_cast<uint32_t>(c.kind));
      u32(static_cast<uint32_t>(c.params.size()));
      for (int64_t p : c.params)
        i64(p);
      u32(static_cast<uint32_t>(c.buffers.size()));
      for (uint64_t b : c.buffers)
        u64(b);
      u32(c.stream);
      i64(c.event);
      if (c.kind != CommandKind::Collective)
        continue;
      const CollectiveInfo &k = c.collective;
      u32(static_cast<uint32_t>(k.op));
      u32(static_cast<uint32_t>(k.reduce));
      u32(static_cast<uint32_t>(k.dtype));
      u32s(k.axes);
      for (int64_t v : {k.count, k.splitOuter, k.splitInner, k.concatOuter,
                        k.concatInner, k.root, k.peer})
        i64(v);
      i64s(k.pairs);
      u32(k.id);
      str(k.source);
    }
  }

private:
  void le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
};
} // namespace

/// The payload of `plan` (its stages nested).
static std::vector<uint8_t> encodePayload(const Plan &plan) {
  Writer w;
  w.str(plan.target);
  w.u64(plan.arenaBytes);
  w.u64(plan.alignment);
  for (const auto *list : {&plan.inputs, &plan.outputs}) {
    w.u32(static_cast<uint32_t>(list->size()));
    for (const TensorInfo &t : *list)
      w.tensor(t);
  }
  w.u32(static_cast<uint32_t>(plan.constants.size()));
  for (const Constant &c : plan.constants) {
    w.tensor(c.info);
    w.blob(c.data);
    w.str(c.file);
    w.u64(c.fileOffset);
    w.u64(c.fileSize);
  }
  w.u32(static_cast<uint32_t>(plan.kernelNames.size()));
  for (const std::string &name : plan.kernelNames)
    w.str(name);
  w.blob(plan.kernelObject);
  w.commands(plan.commands);
  w.u32(static_cast<uint32_t>(plan.metadata.size()));
  for (const auto &kv : plan.metadata) {
    w.str(kv.first);
    w.str(kv.second);
  }
  w.commands(plan.initCommands);
  w.u32(static_cast<uint32_t>(plan.states.size()));
  for (const StateTensor &st : plan.states) {
    w.tensor(st.info);
    w.u32(static_cast<uint32_t>(st.kind));
    w.str(st.parameter);
    w.str(st.slot);
  }
  const TrainingInfo &t = plan.training;
  w.u32(t.enabled ? 1 : 0);
  w.str(t.optimizer);
  for (int64_t v : {t.lrInput, t.stepInput, t.lossOutput, t.gradNormOutput})
    w.i64(v);
  w.u32(static_cast<uint32_t>(t.schedule));
  w.f64(t.baseLR);
  w.f64(t.minLR);
  for (int64_t v : {t.warmupSteps, t.totalSteps, t.referenceBatch, t.batchSize,
                    t.sequenceLength})
    w.i64(v);
  w.u32(static_cast<uint32_t>(t.dataInputs.size()));
  for (int64_t v : t.dataInputs)
    w.i64(v);
  w.u32(static_cast<uint32_t>(plan.mesh.shape.size()));
  for (size_t i = 0; i < plan.mesh.shape.size(); ++i) {
    w.str(i < plan.mesh.axisNames.size() ? plan.mesh.axisNames[i] : "");
    w.i64(plan.mesh.shape[i]);
  }
  w.i64(plan.numEvents);
  w.u32(static_cast<uint32_t>(plan.stages.size()));
  for (const Plan &stage : plan.stages)
    w.blob(encodePayload(stage));
  for (const StateTensor &st : plan.states) {
    w.u32(static_cast<uint32_t>(st.varyingAxes.size()));
    for (uint32_t a : st.varyingAxes)
      w.u32(a);
  }
  w.i64(plan.training.syncEvery);
  w.u32(static_cast<uint32_t>(plan.entries.size()));
  for (const Plan &entry : plan.entries) {
    w.str(entry.entryName);
    w.blob(encodePayload(entry));
  }
  w.blob(plan.hostKernelObject);
  w.u32(static_cast<uint32_t>(plan.hostKernelArgs.size()));
  for (const std::vector<HostKernelArg> &args : plan.hostKernelArgs) {
    w.u32(static_cast<uint32_t>(args.size()));
    for (const HostKernelArg &a : args) {
      w.u64(a.bytes);
      w.u8(a.written ? 1 : 0);
    }
  }
  return std::move(w.out);
}

std::vector<uint8_t> serialize(const Plan &plan) {
  std::vector<uint8_t> payload = encodePayload(plan);
  Writer file;
  file.out.insert(file.out.end(), kMagic, kMagic + 8);
  file.u32(kFormatVersion);
  file.u32(kHeaderSize);
  file.u64(payload.size());
  file.u64(fnv1a64(payload.data(), payload.size()));
  file.out.insert(file.out.end(), payload.begin(), payload.end());
  return file.out;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {
/// A bounds-checked cursor. After the first failure every read returns
/// zero/empty and `ok()` stays false; the first error message is kept.
class Reader {
public:
  Reader(const uint8_t *data, size_t size) : p(data), left(size) {}
  bool ok() const { return error.empty(); }
  size_t remaining() const { return left; }
  std::string error;

  uint64_t le(size_t bytes, const char *what) {
    if (!need(bytes, what))
      return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i)
      v |= static_cast<uint64_t>(p[i]) << (8 * i);
    p += bytes;
    left -= bytes;
    return v;
  }
  uint8_t u8(const char *what) { return static_cast<uint8_t>(le(1, what)); }
  uint32_t u32(const char *what) { return static_cast<uint32_t>(le(4, what)); }
  uint64_t u64(const char *what) { return le(8, what); }
  int64_t i64(const char *what) { return static_cast<int64_t>(le(8, what)); }

  /// Reads a list count; each element takes at least `minElemBytes`, so a
  /// count the remaining bytes cannot hold is reported as truncation.
  uint32_t count(const char *what, size_t minElemBytes) {
    uint32_t n = u32(what);
    if (ok() && minElemBytes != 0 && n > left / minElemBytes) {
      fail(std::string("truncated: ") + what + " says " + std::to_string(n) +
           " entries but only " + std::to_string(left) + " bytes remain");
      return 0;
    }
    return n;
  }
  std::string str(const char *what) {
    uint32_t n = u32(what);
    if (!need(n, what))
      return {};
    std::string s(reinterpret_cast<const char *>(p), n);
    p += n;
    left -= n;
    return s;
  }
  /// A reader over the next `n` bytes (a u64 length read first), which
  /// this one skips; a length past the end fails this reader and returns
  /// an empty one.
  Reader sub(const char *what) {
    uint64_t n = u64(what);
    if (!need(n, what))
      return Reader(p, 0);
    Reader r(p, n);
    p += n;
    left -= n;
    return r;
  }
  std::vector<uint8_t> blob(const char *what) {
    uint64_t n = u64(what);
    if (!need(n, what))
      return {};
    std::vector<uint8_t> b(p, p + n);
    p += n;
    left -= n;
    return b;
  }
  void tensor(TensorInfo *t, const std::string &ctx) {
    t->name = str((ctx + " name").c_str());
    t->dtype = static_cast<DType>(u32((ctx + " dtype").c_str()));
    uint32_t rank = count((ctx + " rank").c_str(), 8);
    t->shape.resize(rank);
    for (uint32_t i = 0; i < rank; ++i)
      t->shape[i] = i64((ctx + " dims").c_str());
    t->offset = u64((ctx + " offset").c_str());
    uint32_t sharded = count((ctx + " sharding").c_str(), 4);
    t->sharding.resize(sharded);
    for (uint32_t i = 0; i < sharded; ++i)
      u32s(&t->sharding[i], "sharding axes");
  }
  void u32s(std::vector<uint32_t> *v, const char *what) {
    uint32_t n = count(what, 4);
    v->resize(n);
    for (uint32_t i = 0; i < n; ++i)
      (*v)[i] = u32(what);
  }
  void i64s(std::vector<int64_t> *v, const char *what) {
    uint32_t n = count(what, 8);
    v->resize(n);
    for (uint32_t i = 0; i < n; ++i)
      (*v)[i] = i64(what);
  }
  double f64(const char *what) {
    uint64_t bits = u64(what);
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  void commands(std::vector<Command> *list, const char *what) {
    uint32_t n = count(what, 24);
    list->resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      Command &c = (*list)[i];
      c.kind = static_cast<CommandKind>(u32("command kind"));
      uint32_t np = count("command params", 8);
      c.params.resize(np);
      for (uint32_t j = 0; j < np; ++j)
        c.params[j] = i64("command param");
      uint32_t nb = count("command buffers", 8);
      c.buffers.resize(nb);
      for (uint32_t j = 0; j < nb; ++j)
        c.buffers[j] = u64("command buffer");
      c.stream = u32("command stream");
      c.event = i64("command event");
      if (c.kind != CommandKind::Collective)
        continue;
      CollectiveInfo &k = c.collective;
      k.op = static_cast<CollectiveOp>(u32("collective op"));
      k.reduce = static_cast<ReduceOp>(u32("collective reduction"));
      k.dtype = static_cast<DType>(u32("collective dtype"));
      u32s(&k.axes, "collective axes");
      for (int64_t *v : {&k.count, &k.splitOuter, &k.splitInner, &k.concatOuter,
                         &k.concatInner, &k.root, &k.peer})
        *v = i64("collective parameter");
      i64s(&k.pairs, "collective pairs");
      k.id = u32("collective id");
      k.source = str("collective source");
    }
  }
  void fail(const std::string &msg) {
    if (ok())
      error = msg;
    left = 0;
  }

private:
  bool need(uint64_t bytes, const char *what) {
    if (!ok())
      return false;
    if (bytes > left) {
      fail(std::string("truncated: ") + what + " needs " +
           std::to_string(bytes) + " bytes but only " + std::to_string(left) +
           " remain");
      return false;
    }
    return true;
  }
  const uint8_t *p;
  size_t left;
};
} // namespace

/// Decodes a payload of format `version` into *plan. A stage plan's or an
/// entry's payload (`isStage`) must hold no stages or entries of its own.
/// On failure r.error says why.
static void decodePayload(Reader &r, uint32_t version, bool isStage,
                          Plan *plan) {
  plan->target = r.str("target");
  plan->arenaBytes = r.u64("arena size");
  plan->alignment = r.u64("alignment");
  // Each tensor record is at least name(4) + dtype(4) + rank(4) + offset(8)
  // + sharding(4).
  const size_t kMinTensor = 24;
  uint32_t n = r.count("input list", kMinTensor);
  plan->inputs.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    r.tensor(&plan->inputs[i], "input " + std::to_string(i));
  n = r.count("output list", kMinTensor);
  plan->outputs.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    r.tensor(&plan->outputs[i], "output " + std::to_string(i));
  n = r.count("constant list", kMinTensor + 8 + 4 + 16);
  plan->constants.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    std::string ctx = "constant " + std::to_string(i);
    r.tensor(&plan->constants[i].info, ctx);
    plan->constants[i].data = r.blob((ctx + " data").c_str());
    plan->constants[i].file = r.str((ctx + " file").c_str());
    plan->constants[i].fileOffset = r.u64((ctx + " file offset").c_str());
    plan->constants[i].fileSize = r.u64((ctx + " file size").c_str());
  }
  n = r.count("kernel name list", 4);
  plan->kernelNames.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    plan->kernelNames[i] = r.str("kernel name");
  plan->kernelObject = r.blob("kernel object");
  r.commands(&plan->commands, "command list");
  n = r.count("metadata list", 8);
  plan->metadata.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    plan->metadata[i].first = r.str("metadata key");
    plan->metadata[i].second = r.str("metadata value");
  }
  r.commands(&plan->initCommands, "init command list");
  n = r.count("state list", kMinTensor + 12);
  plan->states.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    StateTensor &st = plan->states[i];
    r.tensor(&st.info, "state " + std::to_string(i));
    st.kind = static_cast<StateKind>(r.u32("state kind"));
    st.parameter = r.str("state parameter");
    st.slot = r.str("state slot");
  }
  TrainingInfo &t = plan->training;
  t.enabled = r.u32("training flag") != 0;
  t.optimizer = r.str("training optimizer");
  for (int64_t *v :
       {&t.lrInput, &t.stepInput, &t.lossOutput, &t.gradNormOutput})
    *v = r.i64("training index");
  t.schedule = static_cast<LRSchedule>(r.u32("training schedule"));
  t.baseLR = r.f64("training base lr");
  t.minLR = r.f64("training min lr");
  for (int64_t *v : {&t.warmupSteps, &t.totalSteps, &t.referenceBatch,
                     &t.batchSize, &t.sequenceLength})
    *v = r.i64("training parameter");
  n = r.count("training data inputs", 8);
  t.dataInputs.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    t.dataInputs[i] = r.i64("training data input");
  n = r.count("mesh axes", 12);
  plan->mesh.axisNames.resize(n);
  plan->mesh.shape.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    plan->mesh.axisNames[i] = r.str("mesh axis name");
    plan->mesh.shape[i] = r.i64("mesh axis size");
  }
  plan->numEvents = r.i64("event count");
  if (version < 5)
    return;
  uint32_t stages = r.count("stage list", 8);
  if (isStage && stages != 0) {
    r.fail("holds stage plans of its own (stage plans do not nest)");
    return;
  }
  for (uint32_t c = 0; c < stages && r.ok(); ++c) {
    std::string what = "stage " + std::to_string(c);
    Reader sub = r.sub((what + " length").c_str());
    if (!r.ok())
      return;
    // Decoded one at a time, so memory grows only with stages that
    // decode.
    plan->stages.emplace_back();
    decodePayload(sub, version, /*isStage=*/true, &plan->stages.back());
    if (!sub.ok())
      r.fail(what + ": " + sub.error);
    else if (sub.remaining() != 0)
      r.fail(what + ": malformed payload: " + std::to_string(sub.remaining()) +
             " unread bytes at its end");
  }
  if (version < 6 || !r.ok())
    return;
  for (size_t i = 0; i < plan->states.size() && r.ok(); ++i) {
    uint32_t axes = r.count("state varying axes", 4);
    for (uint32_t k = 0; k < axes && r.ok(); ++k)
      plan->states[i].varyingAxes.push_back(r.u32("state varying axis"));
  }
  plan->training.syncEvery = r.i64("training sync interval");
  uint32_t entries = r.count("entry list", 12);
  if (isStage && entries != 0) {
    r.fail("holds entries of its own (entries do not nest)");
    return;
  }
  for (uint32_t c = 0; c < entries && r.ok(); ++c) {
    std::string name = r.str("entry name");
    std::string what = "entry '" + name + "'";
    Reader sub = r.sub((what + " length").c_str());
    if (!r.ok())
      return;
    plan->entries.emplace_back();
    decodePayload(sub, version, /*isStage=*/true, &plan->entries.back());
    plan->entries.back().entryName = name;
    if (!sub.ok())
      r.fail(what + ": " + sub.error);
    else if (sub.remaining() != 0)
      r.fail(what + ": malformed payload: " + std::to_string(sub.remaining()) +
             " unread bytes at its end");
  }
  if (version < 7 || !r.ok())
    return;
  plan->hostKernelObject = r.blob("host kernel object");
  uint32_t kernels = r.count("host kernel argument table", 4);
  for (uint32_t k = 0; k < kernels && r.ok(); ++k) {
    uint32_t args = r.count("host kernel arguments", 9);
    plan->hostKernelArgs.emplace_back();
    for (uint32_t a = 0; a < args && r.ok(); ++a) {
      HostKernelArg arg;
      arg.bytes = r.u64("host kernel argument size");
      arg.written = r.u8("host kernel argument flag") != 0;
      plan->hostKernelArgs.back().push_back(arg);
    }
  }
}

bool deserialize(const uint8_t *data, size_t size, Plan *out,
                 std::string *error) {
  if (size < kHeaderSize) {
    *error = "truncated: the file has " + std::to_string(size) +
             " bytes, fewer than the " + std::to_string(kHeaderSize) +
             "-byte header";
    return false;
  }
  if (std::memcmp(data, kMagic, 8) != 0) {
    *error = "bad magic: not a Cleave plan file (expected it to start with "
             "\"CLEAVEPL\")";
    return false;
  }
  Reader header(data + 8, kHeaderSize - 8);
  uint32_t version = header.u32("version");
  uint32_t headerSize = header.u32("header size");
  uint64_t payloadSize = header.u64("payload size");
  uint64_t checksum = header.u64("checksum");
  if (version < kOldestReadableVersion || version > kFormatVersion) {
    *error = "unsupported version " + std::to_string(version) +
             " (this runtime reads versions " +
             std::to_string(kOldestReadableVersion) + " to " +
             std::to_string(kFormatVersion) + ")";
    return false;
  }
  if (headerSize != kHeaderSize) {
    *error = "bad header size " + std::to_string(headerSize) + " (expected " +
             std::to_string(kHeaderSize) + ")";
    return false;
  }
  size_t available = size - kHeaderSize;
  if (payloadSize > available) {
    *error = "truncated: the header announces a payload of " +
             std::to_string(payloadSize) + " bytes but the file holds only " +
             std::to_string(available);
    return false;
  }
  if (payloadSize < available) {
    *error = "trailing data: " + std::to_string(available - payloadSize) +
             " bytes after the payload";
    return false;
  }
  const uint8_t *payload = data + kHeaderSize;
  if (fnv1a64(payload, payloadSize) != checksum) {
    *error = "checksum mismatch: file is corrupted";
    return false;
  }

  Plan plan;
  Reader r(payload, payloadSize);
  decodePayload(r, version, /*isStage=*/false, &plan);
  if (!r.ok()) {
    *error = r.error;
    return false;
  }
  if (r.remaining() != 0) {
    *error = "malformed payload: " + std::to_string(r.remaining()) +
             " unread bytes at its end";
    return false;
  }
  if (!validate(plan, error))
    return false;
  *out = std::move(plan);
  return true;
}

bool writeFile(const std::string &path, const Plan &plan, std::string *error) {
  if (!validate(plan, error))
    return false;
  std::vector<uint8_t> bytes = serialize(plan);
  return writeFileAtomically(path, bytes.data(), bytes.size(), error);
}

std::vector<uint8_t> exeTrailer(uint64_t planSize) {
  std::vector<uint8_t> t(kExeTrailerSize);
  for (int i = 0; i < 8; ++i)
    t[i] = static_cast<uint8_t>(planSize >> (8 * i));
  std::memcpy(t.data() + 8, kExeMagic, 8);
  return t;
}

bool readEmbeddedPlan(const std::string &path, std::vector<uint8_t> *plan,
                      bool *found, std::string *error) {
  *found = false;
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return true; // nothing to read (no /proc): not a compiled binary
  struct Closer {
    FILE *f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  uint8_t trailer[kExeTrailerSize];
  if (std::fseek(f, 0, SEEK_END) != 0)
    return true;
  long size = std::ftell(f);
  if (size < static_cast<long>(kExeTrailerSize) ||
      std::fseek(f, size - static_cast<long>(kExeTrailerSize), SEEK_SET) != 0 ||
      std::fread(trailer, 1, kExeTrailerSize, f) != kExeTrailerSize ||
      std::memcmp(trailer + 8, kExeMagic, 8) != 0)
    return true;
  uint64_t planSize = 0;
  for (int i = 0; i < 8; ++i)
    planSize |= static_cast<uint64_t>(trailer[i]) << (8 * i);
  uint64_t available = static_cast<uint64_t>(size) - kExeTrailerSize;
  if (planSize > available) {
    *error = "'" + path +
             "': the embedded plan is truncated (the trailer "
             "announces " +
             std::to_string(planSize) + " bytes)";
    return false;
  }
  plan->resize(planSize);
  if (std::fseek(f, static_cast<long>(available - planSize), SEEK_SET) != 0 ||
      std::fread(plan->data(), 1, planSize, f) != planSize) {
    *error = "'" + path + "': cannot read the embedded plan";
    return false;
  }
  *found = true;
  return true;
}

bool readFile(const std::string &path, Plan *out, std::string *error) {
  std::vector<uint8_t> bytes;
  if (!readWholeFile(path, &bytes, error))
    return false;
  if (!deserialize(bytes.data(), bytes.size(), out, error)) {
    *error = "'" + path + "': " + *error;
    return false;
  }
  return true;
}

} // namespace cleave::plan
