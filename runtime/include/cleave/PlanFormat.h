//===- PlanFormat.h - The .cleave plan file: data model and codec -*- C++ -*-//
//
// The plan is the contract between the compiler (which writes it) and the
// runtime (which reads it). This header has no dependency beyond the STL so
// that both sides can include it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANFORMAT_H
#define CLEAVE_PLANFORMAT_H

#include "cleave/PlanMetadata.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cleave::plan {

/// Element types, using ONNX TensorProto codes.
enum class DType : uint32_t {
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  U32 = 12,
  U64 = 13,
  BF16 = 16,
  // The narrow storage types of ONNX 1.14 and later. In the arena each
  // element takes one byte, its bits in the low bits and the rest zero (as
  // generated code stores an LLVM i4/i2); ONNX's packed files are unpacked
  // on the way in and packed or widened on the way out.
  F8E4M3FN = 17,
  F8E4M3FNUZ = 18,
  F8E5M2 = 19,
  F8E5M2FNUZ = 20,
  U4 = 21,
  I4 = 22,
  F4E2M1 = 23,
  F8E8M0 = 24,
  U2 = 25,
  I2 = 26
};

/// Bytes per element in the arena (Bool and the narrow types = 1); 0 if the
/// type is unknown.
size_t dtypeSize(DType);
/// Bits per element of the type's ONNX encoding: 4 for int4, uint4 and
/// float4e2m1, 2 for int2 and uint2 (packed into bytes, first element in
/// the low bits), 8 * dtypeSize otherwise.
unsigned dtypeBits(DType);
/// True for the float8 and float4 types.
bool isNarrowFloat(DType);
/// True for every narrow type (float8, float4, int4/uint4, int2/uint2): no
/// arithmetic on them in collectives, widened in .npy files.
inline bool isNarrowType(DType t) {
  return isNarrowFloat(t) || dtypeBits(t) < 8;
}
/// The value of one narrow element (its bits as stored in the arena): a
/// float8/float4 as a float, an int4/int2 sign-extended, a uint4/uint2 as
/// it is.
double narrowValue(DType, uint8_t bits);
/// "float32", "int64", "bool", ...; "unknown" for an unknown code.
const char *dtypeName(DType);
/// True if `code` is one of the DType enumerators.
bool isKnownDType(uint32_t code);

/// A tensor living in the arena.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape; ///< This rank's shape (its shard).
  uint64_t offset = 0;        ///< Byte offset in the arena.
  /// How the global tensor is split over the plan's mesh: empty (replicated
  /// on every rank), or one entry per dimension listing the mesh axes
  /// (indices into Mesh::axisNames, major first) that dimension is split
  /// over. The global dimension is the local one times the product of
  /// those axes' sizes; a rank's slice starts at its linearized coordinate
  /// on them times the local size.
  std::vector<std::vector<uint32_t>> sharding;

  /// Product of the dims (1 for a scalar); -1 on a negative dim or overflow.
  int64_t numElements() const;
  /// numElements() * dtypeSize(dtype); 0 if either is invalid.
  uint64_t byteSize() const;
};

/// A constant, copied into the arena at info.offset when an executor is made.
/// Its value is `data`, or, for a large initial parameter, the bytes at
/// `fileOffset` of the file `file` (the ONNX model's external data): the
/// plan then holds only the reference, and each rank reads just its shard.
/// A sharded constant's value is the global tensor (row-major), of which
/// each rank takes its box (TensorInfo::sharding).
struct Constant {
  TensorInfo info;
  std::vector<uint8_t> data; ///< Empty when `file` is set.
  /// Absolute path at compile time; a runtime may look for the file's name
  /// in another folder (cleave_rt_program_set_weights_dir).
  std::string file;
  uint64_t fileOffset = 0;
  /// The file's size when the plan was made; a file of another size is
  /// refused (it is not the data the plan was compiled from).
  uint64_t fileSize = 0;
};

enum class CommandKind : uint32_t {
  Kernel = 1,
  Gemm = 2,
  Copy = 3,
  Fill = 4,
  GpuLaunch = 5,
  RandomNormal = 6,
  Collective = 7,
  Wait = 8,
  Marker = 9,
  Attention = 10,
  AttentionBackward = 11,
  GroupedGemm = 12
};

/// Lower-case name of a command kind ("kernel", "gemm", ...), "unknown" else.
const char *commandKindName(CommandKind);

/// A command has a kind, integer parameters and arena byte offsets.
///  Kernel: params = {kernelIndex}; buffers = arena offsets of each kernel
///          argument, in order. The kernel is called as `void fn(void **args)`
///          with args[i] = arenaBase + buffers[i].
///  Gemm:   params = {dtype, transA, transB, M, N, K, batch, lda, ldb, ldc,
///          strideA, strideB, strideC, alphaBits, betaBits}; row-major,
///          C = alpha*op(A)*op(B) + beta*C repeated `batch` times with element
///          strides between batches (0 = broadcast); alphaBits/betaBits are
///          bit patterns of doubles; buffers = {A, B, C}; dtype F32 or F64.
///          Mixed precision: an optional 16th parameter, outDType, gives C's
///          element type when it differs from A's and B's (absent: the
///          same); dtype BF16 or F16 with outDType F32 (f32 accumulation),
///          or with outDType equal to dtype: a low-precision C, the f32
///          accumulation rounded once (round to nearest even), no epilogue.
///          Epilogue: two more optional parameters (18 in all, outDType
///          then present, equal to dtype for same-type GEMMs), epilogue
///          (GemmEpilogue) and biasDType, replace every element of each
///          batch's C by f(alpha*op(A)*op(B) + beta*C [+ bias[n]]), f the
///          identity or the tanh-form GELU; an epilogue with a bias has a
///          4th buffer, the bias: N packed elements of biasDType (= C's
///          element type), shared by all rows and batches. biasDType is 0
///          for epilogues without a bias.
///  Copy:   params = {bytes}; buffers = {src, dst}.
///  Fill:   params = {bytes, byteValue}; buffers = {dst}.
///  GpuLaunch (CUDA plans only): params = {kernelIndex, gridX, gridY, gridZ,
///          blockX, blockY, blockZ, sharedBytes}; buffers = arena offsets of
///          the kernel's pointer arguments, in order. The kernel is launched
///          with args[i] = arenaBase + buffers[i] (each a device pointer).
///
///  RandomNormal (init commands only): params = {count, seed, meanBits,
///          stdBits}; buffers = {dst}: dst[i] = mean + std * z_i for `count`
///          f32 values, z_i standard normal from a counter-based generator
///          of (seed, i) (fillNormal in the runtime): the same values on
///          every backend, so parameters need no initial data in the plan.
///          A 5th parameter names a sharded state (index into states, at
///          dst): dst then holds the rank's shard, each element drawn with
///          its index in the global tensor (the same values on any mesh).
///
///  Attention: params = AttentionParam (below); buffers = {q, k,
///          v, [bias], out}: cleave.attention's result, q (B x Hq x Sq x D),
///          k (B x Hkv x Skv x D), v (B x Hkv x Skv x Dv) and out
///          (B x Hq x Sq x Dv) packed row-major in dtype (F32, BF16 or F16);
///          the optional bias (biasDType != 0) packed as biasB x biasH x
///          biasSq x Skv, each of the first three 1 (broadcast) or full.
///          One fused kernel: scores a tile at a time with an online
///          softmax, computed in f32. In CUDA plans, head dimensions up to
///          128 (the runtime's kernels keep a row in registers).
///          The block form (kAttnBlock = 1, cleave.attention_block: one
///          step of ring attention) has buffers = {q, k, v, [bias], qpos,
///          kpos, out, lse}: qpos (int64 x Sq) and kpos (int64 x Skv) are
///          the global positions of the block's query and key rows (the
///          plain form's are i and j): when causal, key j is masked for
///          query i iff kpos[j] > qpos[i] + offset. lse (F32, B x Hq x Sq)
///          gets each row's log-sum-exp of its scaled, softcapped, biased
///          and masked scores; a row with no unmasked key gets out = 0 and
///          lse = -FLT_MAX (finite, so that blocks merge with elementwise
///          max, sub, exp and log without NaNs). CPU plans only.
///  AttentionBackward: the same params; buffers = {q, k, v,
///          [bias], out, dout, dq, dk, dv}: cleave.attention_grad, dout in
///          doutDType, dq/dk/dv in gradDType (dtype or F32).
///          The block form (kAttnBlock = 1, cleave.attention_block_grad)
///          has buffers = {q, k, v, [bias], qpos, kpos, lse, out, dout, dq,
///          dk, dv}: lse (F32, B x Hq x Sq) and out are the whole row's,
///          merged over every block, so P = exp(s - lse) is not
///          renormalized here; dq, dk and dv are this block's
///          contributions (written, not accumulated into). CPU plans only.
///
///  GroupedGemm: params = GroupedGemmParam (below): the expert GEMMs of
///          a mixture of experts, row-major and packed. The forward
///          (cleave.grouped_matmul, kGroupedWeightGrad = 0) has buffers =
///          {x, w, ids, out}: x (M x K), w (E x K x N, or E x N x K when
///          kGroupedTransposeW), ids (M integers of idDType, I64 or I32),
///          out (M x N): out[m] = x[m] W[g], g = ids[m] (a negative id
///          counts from the end; one still outside [0, E) gives a row of
///          zeros). The weight gradient (cleave.grouped_matmul_weight_grad,
///          kGroupedWeightGrad = 1) has buffers = {x, dy, ids, dw}: dw[g] =
///          sum over the rows routed to g of x[m]^T dy[m] (transposed with
///          kGroupedTransposeW), zeros for an expert no row reaches. dtype
///          F32, BF16 or F16 for every float buffer; the products
///          accumulate in f32, rows in their order (the result does not
///          depend on the thread count). CPU plans only.
///  Collective: params and buffers empty except {src, dst} buffers (send:
///          {src}; recv: {dst}); the operation is Command::collective. On
///          stream kComputeStream it blocks until done; on kCommStream it
///          starts and completes Command::event, which a later Wait on the
///          compute stream waits for (see Command).
///  Wait:   params and buffers empty; waits for Command::event.
///  Marker: params = {index, phase}, no buffers: step `index` of the plan's
///          pipeline schedule (the names are metadata meta::kPipelineSteps,
///          comma-separated) begins (phase 0) or ends (phase 1). Does
///          nothing unless the executor traces; then it records the index,
///          the phase and the time. Per index, begins and ends alternate,
///          starting with a begin and ending with an end. Commands only
///          (not init commands), on the compute stream.
///
/// CUDA plans: `target` starts with "cuda-" ("cuda-sm_90a"), kernelObject is
/// a cubin (an ELF file) whose kernel symbols are kernelNames, and metadata
/// "kernel_ptx" may carry the PTX for other architectures. They hold no
/// Kernel commands; CPU plans hold no GpuLaunch commands. Gemm commands run
/// through cuBLASLt there.

/// A CPU plan's kernel object with parallel loop nests exports two pointers
/// the runtime sets once it has loaded the object (null until then, when a
/// kernel runs each nest on its calling thread):
///   void (*cleave_parallel_for)(void *runtime,
///                               void (*range)(void *frame, int64_t begin,
///                                             int64_t end),
///                               void *frame, int64_t n);
///   void *cleave_parallel_runtime;   // passed back as `runtime`
/// A kernel calls cleave_parallel_for(cleave_parallel_runtime, range, frame,
/// n) for each nest; it must call `range` on ranges that cover [0, n) once,
/// from any threads, and return when all of them have run. Results do not
/// depend on how [0, n) is split.
constexpr const char *kParallelForSymbol = "cleave_parallel_for";
constexpr const char *kParallelRuntimeSymbol = "cleave_parallel_runtime";
using ParallelRangeFn = void (*)(void *frame, int64_t begin, int64_t end);
using ParallelForFn = void (*)(void *runtime, ParallelRangeFn range,
                               void *frame, int64_t n);

/// The mesh of a partitioned plan: axis i is named axisNames[i] and has
/// shape[i] ranks; rank = row-major index of its coordinates (the last axis
/// varies fastest). A plan without a mesh runs on one rank.
struct Mesh {
  std::vector<std::string> axisNames;
  std::vector<int64_t> shape;

  bool empty() const { return shape.empty(); }
  /// Product of the shape (1 for no mesh).
  int64_t worldSize() const;
  /// The coordinates of `rank`.
  std::vector<int64_t> coordinates(int64_t rank) const;
  /// "dp=2,tp=2" ("" for no mesh).
  std::string str() const;
};

/// The group of ranks a collective over mesh axes `axes` spans for `rank`:
/// every rank whose coordinates agree with rank's off those axes, ordered
/// by their linearized coordinates on `axes` (in the order given, the last
/// fastest). `index` is rank's position in `ranks`.
struct Group {
  std::vector<int64_t> ranks;
  int64_t index = 0;
};
Group groupOf(const Mesh &mesh, const std::vector<uint32_t> &axes,
              int64_t rank);

/// The (color, key) that splits the world into the groups over `axes`
/// (ncclCommSplit, MPI_Comm_split): ranks of one group share a color (the
/// linearized coordinates off `axes`) and are ordered by key (the group
/// index).
std::pair<int64_t, int64_t> splitColorKey(const Mesh &mesh,
                                          const std::vector<uint32_t> &axes,
                                          int64_t rank);

/// The global shape of `t` (its local shape scaled by its sharding).
std::vector<int64_t> globalShape(const TensorInfo &t, const Mesh &mesh);
/// Where rank `rank`'s shard of `t` starts in the global tensor, per
/// dimension (all zeros for a replicated tensor).
std::vector<int64_t> shardOffsets(const TensorInfo &t, const Mesh &mesh,
                                  int64_t rank);
/// Calls fn(globalIndex, localIndex, count) for each run of contiguous
/// elements (a row along the last dimension) of the box of shape `local` at
/// `offsets` in a row-major tensor of shape `global`; indices are element
/// indices into the global tensor and the box.
void forEachShardRow(const std::vector<int64_t> &global,
                     const std::vector<int64_t> &local,
                     const std::vector<int64_t> &offsets,
                     const std::function<void(int64_t, int64_t, int64_t)> &fn);
/// Copies the box of shape `local` at `offsets` between a row-major global
/// tensor of shape `global` and a row-major local buffer: into `localData`
/// (toGlobal false) or into `globalData` (toGlobal true).
void copyShard(const std::vector<int64_t> &global,
               const std::vector<int64_t> &local,
               const std::vector<int64_t> &offsets, size_t elemSize,
               uint8_t *globalData, uint8_t *localData, bool toGlobal);

/// What a Collective command does.
enum class CollectiveOp : uint32_t {
  AllReduce = 1,
  AllGather = 2,
  ReduceScatter = 3,
  AllToAll = 4,
  Broadcast = 5,
  Permute = 6,
  Send = 7,
  Recv = 8,
  AllSlice = 9
};
/// "all_reduce", "all_gather", ...; "unknown" else.
const char *collectiveOpName(CollectiveOp);

/// How AllReduce and ReduceScatter combine; avg is the sum divided by the
/// group size (float types only).
enum class ReduceOp : uint32_t { Sum = 0, Avg = 1, Max = 2, Min = 3, Prod = 4 };
const char *reduceOpName(ReduceOp);

/// The typed record of a Collective command. Element counts are of the
/// operand (`count`); layouts of the split and concatenated dimension are
/// views [outer, G, inner] of a row-major buffer, G the group size:
///  AllReduce, Broadcast, Permute, Send, Recv: count elements, no view.
///  AllGather: the result is [splitOuter, G, splitInner] where the operand
///     is [splitOuter, splitInner] (count = splitOuter * splitInner).
///  ReduceScatter: the operand is [splitOuter, G, splitInner], the result
///     [splitOuter, splitInner].
///  AllSlice: like ReduceScatter's views, but the result is the operand's
///     [:, index, :] (nothing is sent; the rank's group index picks it).
///  AllToAll: the operand is split as [splitOuter, G, splitInner], the
///     result assembled as [concatOuter, G, concatInner]; each slice has
///     splitOuter * splitInner = concatOuter * concatInner elements.
struct CollectiveInfo {
  CollectiveOp op = CollectiveOp::AllReduce;
  ReduceOp reduce = ReduceOp::Sum;
  DType dtype = DType::F32;
  /// The mesh axes the groups span (indices into Mesh::axisNames), in the
  /// order that linearizes a rank's index in its group.
  std::vector<uint32_t> axes;
  int64_t count = 0;
  int64_t splitOuter = 1, splitInner = 0, concatOuter = 1, concatInner = 0;
  /// Broadcast: the root's group index. Send/Recv: the sender's.
  int64_t root = 0;
  /// Send/Recv: the receiver's group index.
  int64_t peer = 0;
  /// Permute: (source, target) group indices, flattened. Send/Recv: empty,
  /// or the message's tag (see messageTag).
  std::vector<int64_t> pairs;
  /// The collective's position among the plan's collectives: every rank
  /// checks that its peers are at the same one.
  uint32_t id = 0;
  /// Where it came from: "all_reduce #3 (node /h.0/MatMul, backward)".
  std::string source;
};

/// The tag of a Send or Recv that carries one (pairs = {tag}): a receive
/// checks that the message it matched, which messages between two ranks
/// do in the order they were sent, is the one it expects.
inline std::optional<int64_t> messageTag(const CollectiveInfo &c) {
  if ((c.op == CollectiveOp::Send || c.op == CollectiveOp::Recv) &&
      c.pairs.size() == 1)
    return c.pairs.front();
  return std::nullopt;
}

/// Streams of a rank: commands on one stream run in order; the streams run
/// beside each other and meet only at Wait commands.
constexpr uint32_t kComputeStream = 0;
constexpr uint32_t kCommStream = 1;

struct Command {
  CommandKind kind = CommandKind::Copy;
  std::vector<int64_t> params;
  std::vector<uint64_t> buffers;
  /// kComputeStream, or kCommStream for asynchronous collectives.
  uint32_t stream = kComputeStream;
  /// Asynchronous collectives: the event they complete; Wait: the event it
  /// waits for; -1 otherwise. Each event is completed by one command and
  /// waited for by exactly one later Wait.
  int64_t event = -1;
  /// Collective commands only.
  CollectiveInfo collective;
};

/// Where collective command `c` reads and writes in the arena at `arena`,
/// as (source, destination): a Recv only writes buffers[0] and a Send only
/// reads it (the other place is `Ptr()`, null); every other collective
/// reads buffers[0] and writes buffers[1].
template <typename Ptr>
std::pair<Ptr, Ptr> collectiveBuffers(const Command &c, Ptr arena) {
  if (c.collective.op == CollectiveOp::Recv)
    return {Ptr(), arena + c.buffers[0]};
  if (c.collective.op == CollectiveOp::Send)
    return {arena + c.buffers[0], Ptr()};
  return {arena + c.buffers[0], arena + c.buffers[1]};
}

/// A compute-stream command of `kind` with `params` and `buffers`.
inline Command makeCommand(CommandKind kind, std::vector<int64_t> params,
                           std::vector<uint64_t> buffers) {
  Command c;
  c.kind = kind;
  c.params = std::move(params);
  c.buffers = std::move(buffers);
  return c;
}

/// The double whose bit pattern a command parameter holds (Gemm alpha/beta,
/// RandomNormal mean/std), and back.
inline double bitsToDouble(int64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}
inline int64_t doubleToBits(double d) {
  int64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

/// Indices into Command::params for Gemm commands.
enum GemmParam : size_t {
  kGemmDType = 0,
  kGemmTransA,
  kGemmTransB,
  kGemmM,
  kGemmN,
  kGemmK,
  kGemmBatch,
  kGemmLda,
  kGemmLdb,
  kGemmLdc,
  kGemmStrideA,
  kGemmStrideB,
  kGemmStrideC,
  kGemmAlphaBits,
  kGemmBetaBits,
  kGemmNumParams,
  /// Optional trailing parameter (params.size() == kGemmNumParams + 1): C's
  /// element type. f32/f64 GEMMs carry it (equal to dtype) only before an
  /// epilogue; bf16/f16 GEMMs always (F32, or their own type for a rounded
  /// result).
  kGemmOutDType = kGemmNumParams,
  /// Optional, after kGemmOutDType (params.size() ==
  /// kGemmNumParamsWithEpilogue): a GemmEpilogue and the bias's element
  /// type (0 without a bias).
  kGemmEpilogue,
  kGemmBiasDType,
  kGemmNumParamsWithEpilogue
};

/// Indices into Command::params for Attention and AttentionBackward
/// commands. Attention commands hold dtype in kAttnDoutDType and
/// kAttnGradDType.
/// The largest head dimension (q/k and v) of an attention command in a CUDA
/// plan: the runtime's kernels keep a row in registers. The compiler spells
/// larger ones out.
constexpr int64_t kCudaAttentionMaxHeadDim = 128;
/// The CPU runtime's attention tiles (runtime/src/Attention.cpp): queries
/// and keys per tile; each tile's products are GEMM library calls. The cost
/// model counts them (lib/Simulate/CostModel.cpp).
constexpr int64_t kCpuAttentionQueryTile = 64;
constexpr int64_t kCpuAttentionKeyTile = 128;
/// The local communicator (ranks as threads) stages collectives of at most
/// this many operand bytes per member: one rendezvous, after which each
/// member reads the others' copies (runtime/src/LocalComm.cpp). The cpu
/// cluster preset costs them so (Link::oneShotBytes).
constexpr int64_t kLocalCommStagedBytes = 64 << 10;

enum AttentionParam : size_t {
  kAttnDType = 0, ///< q, k, v and out
  kAttnDoutDType,
  kAttnGradDType,
  kAttnBatch,
  kAttnQHeads,
  kAttnKVHeads,
  kAttnQLen,
  kAttnKVLen,
  kAttnHeadDim,
  kAttnValueDim,
  kAttnCausal,       ///< 0 or 1: key j is masked for query i if j > i + offset
                     ///< (block form: kpos[j] > qpos[i] + offset)
  kAttnCausalOffset, ///< signed
  kAttnScaleBits,    ///< a double's bits: scores = scale * q . k
  kAttnSoftcapBits,  ///< a double's bits: 0, or s = softcap tanh(s / softcap)
  kAttnBiasDType,    ///< 0: no bias
  kAttnBiasBatch,
  kAttnBiasHeads,
  kAttnBiasQLen,
  /// 0: the plain command; 1: the block form (ring attention's step, see
  /// the command comment). Plans written before it have kAttnNumParams - 1
  /// parameters: a missing kAttnBlock reads as 0 (attentionIsBlock).
  kAttnBlock,
  kAttnNumParams
};

/// Indices into Command::params for GroupedGemm commands.
enum GroupedGemmParam : size_t {
  kGroupedDType = 0, ///< x, w (dw), dy and out
  kGroupedIdDType,   ///< I64 or I32
  kGroupedRows,      ///< M
  kGroupedK,
  kGroupedN,
  kGroupedExperts,    ///< E
  kGroupedTransposeW, ///< 0: w is E x K x N; 1: E x N x K
  kGroupedWeightGrad, ///< 0: the forward; 1: the weights' gradient
  kGroupedNumParams
};

/// Whether an Attention or AttentionBackward command is the block form
/// (false for plans written before kAttnBlock).
inline bool attentionIsBlock(const Command &c) {
  return c.params.size() > kAttnBlock && c.params[kAttnBlock] != 0;
}

/// What a Gemm command applies to C after the product (kGemmEpilogue).
/// GELU is the tanh approximation, computed in f32 (f64 for f64 GEMMs):
/// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
enum class GemmEpilogue : int64_t {
  None = 0,     ///< C unchanged.
  Bias = 1,     ///< C[m][n] += bias[n].
  GeluBias = 2, ///< C[m][n] = gelu(C[m][n] + bias[n]).
  Gelu = 3      ///< C[m][n] = gelu(C[m][n]).
};

/// "none", "bias", "gelu_bias", "gelu"; "unknown" else.
const char *gemmEpilogueName(GemmEpilogue);
/// True for the epilogues that read a bias vector (a 4th buffer).
inline bool gemmEpilogueHasBias(GemmEpilogue e) {
  return e == GemmEpilogue::Bias || e == GemmEpilogue::GeluBias;
}
/// The epilogue of a Gemm command (None when it carries none).
/// A Gemm command's C element type code: the trailing outDType, else the
/// operands' dtype (not validated: a code, not a DType).
inline int64_t gemmOutDTypeOf(const Command &c) {
  return c.params.size() > kGemmOutDType ? c.params[kGemmOutDType]
                                         : c.params[kGemmDType];
}

inline GemmEpilogue gemmEpilogueOf(const Command &c) {
  return c.params.size() > kGemmEpilogue
             ? static_cast<GemmEpilogue>(c.params[kGemmEpilogue])
             : GemmEpilogue::None;
}

/// Indices into Command::params for GpuLaunch commands.
enum GpuLaunchParam : size_t {
  kGpuKernelIndex = 0,
  kGpuGridX,
  kGpuGridY,
  kGpuGridZ,
  kGpuBlockX,
  kGpuBlockY,
  kGpuBlockZ,
  kGpuSharedBytes,
  kGpuLaunchNumParams
};

/// True for a CUDA plan's target ("cuda-sm_90a", ...).
inline bool isCudaTarget(const std::string &target) {
  return target.rfind("cuda-", 0) == 0;
}

/// The `parameter` of optimizer state that belongs to no parameter but to
/// the whole training step (the dynamic loss scaler's scale and counter).
constexpr const char *kTrainerStateParameter = "__trainer__";

/// What a state tensor holds.
/// Parameter: trained. OptimizerState: a slot of a parameter's optimizer.
/// Buffer: model state the step updates without training it (BatchNorm
/// running statistics).
enum class StateKind : uint32_t {
  Parameter = 1,
  OptimizerState = 2,
  Buffer = 3
};

/// "parameter", "optimizer_state"; "unknown" else.
const char *stateKindName(StateKind);

/// A persistent tensor: it lives in the arena across runs and the commands
/// update it in place (the compiler appends Copy commands that write the new
/// values back into its buffer). Nothing resets it between runs.
struct StateTensor {
  TensorInfo info;
  StateKind kind = StateKind::Parameter;
  /// Parameters: the ONNX initializer name ("h0.attn.weight").
  /// Optimizer state: the `parameter` of the Parameter state it belongs to.
  std::string parameter;
  /// "" for parameters; "momentum", "adam_m", "adam_v", ... otherwise.
  std::string slot;
  /// Mesh axes (indices into Mesh::axisNames) over which the state's value
  /// differs from rank to rank although `info.sharding` does not split it:
  /// local SGD's replicas train their own parameters and optimizer states,
  /// a delayed reduction keeps each rank's own gradient. A checkpoint
  /// stores such a state as a global tensor with one leading dimension of
  /// the axes' total size (replica r at index r). Empty: the same on every
  /// rank that holds the same shard.
  std::vector<uint32_t> varyingAxes = {};
  /// Checkpoint key: `parameter`, or "<parameter>.<slot>".
  std::string globalName() const {
    return slot.empty() ? parameter : parameter + "." + slot;
  }
};

/// Learning-rate schedules; see learningRate() in cleave/Training.h.
enum class LRSchedule : uint32_t { Constant = 0, LinearWarmup = 1, Cosine = 2 };

/// "constant", "linear_warmup", "cosine"; "unknown" else.
const char *lrScheduleName(LRSchedule);

/// How a driver runs a training plan: each step it fills the data inputs
/// from a dataset, the learning rate and the step number, runs the plan and
/// reads the loss and the gradient norm.
struct TrainingInfo {
  bool enabled = false;
  std::string optimizer; ///< "sgd", "momentum", "nesterov", "adam", "adamw".
  /// Indices into Plan::inputs of f32 scalars (one element) the driver fills
  /// each step: the learning rate, and the 0-based step number as a float
  /// (-1: the plan takes no step input).
  int64_t lrInput = -1, stepInput = -1;
  /// Indices into Plan::outputs of f32 scalars (-1 for gradNormOutput: the
  /// plan reports no gradient norm).
  int64_t lossOutput = -1, gradNormOutput = -1;
  LRSchedule schedule = LRSchedule::Constant;
  double baseLR = 1e-3, minLR = 0.0;
  int64_t warmupSteps = 0, totalSteps = 0;
  /// > 0: lr *= globalBatch / referenceBatch (linear scaling rule).
  int64_t referenceBatch = 0;
  /// Of the data inputs, for samples/s and tokens/s (0: unknown).
  int64_t batchSize = 0, sequenceLength = 0;
  /// Plan input indices fed from the dataset, in order (input_ids, labels).
  std::vector<int64_t> dataInputs;
  /// > 0: after every syncEvery-th step (steps k with (k + 1) % syncEvery
  /// == 0) the driver runs the plan's entry kSyncEntry (local SGD's
  /// parameter averaging, DiLoCo's outer step). 0: no such entry runs.
  int64_t syncEvery = 0;
};

/// The entry a driver runs every TrainingInfo::syncEvery steps.
constexpr const char *kSyncEntry = "sync";

/// One argument of a GPU launch as the host version of its kernel sees it
/// (Plan::hostKernelArgs).
struct HostKernelArg {
  uint64_t bytes = 0;   ///< The whole buffer the argument points at.
  bool written = false; ///< Whether the kernel may write it.
  bool operator==(const HostKernelArg &o) const {
    return bytes == o.bytes && written == o.written;
  }
};

struct Plan {
  std::string target = "cpu-x86_64";
  uint64_t arenaBytes =
      0; ///< Peak memory: every buffer lies in [0, arenaBytes).
  uint64_t alignment = 64;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<Constant> constants;
  std::vector<std::string> kernelNames; ///< Exported symbols of kernelObject.
  std::vector<uint8_t> kernelObject;    ///< x86-64 ELF shared object, or empty.
  /// CUDA plans compiled with --cuda-host-kernels: the kernels of
  /// kernelObject compiled for the host, an x86-64 ELF shared object
  /// exporting `void name(void **args)` for every name of kernelNames, each
  /// computing what the GPU kernel of that name computes over its whole
  /// grid. For the CUDA host doubles (test/doubles), which run them where a
  /// GPU would run the cubin; the runtime hands them to a driver that asks
  /// for them, and a real driver never sees them. Empty otherwise.
  std::vector<uint8_t> hostKernelObject;
  /// With hostKernelObject: per name of kernelNames, its arguments in
  /// launch order (a GpuLaunch command of that kernel has one buffer each).
  std::vector<std::vector<HostKernelArg>> hostKernelArgs;
  std::vector<Command> commands;
  std::vector<std::pair<std::string, std::string>> metadata;
  /// Run once when an executor is created, after the constants are copied
  /// (e.g. Fill commands zeroing optimizer state).
  std::vector<Command> initCommands;
  /// Persistent tensors. A parameter's initial value is the constant at the
  /// same offset (if any); optimizer state is set up by initCommands.
  std::vector<StateTensor> states;
  TrainingInfo training;
  /// Partitioned plans: the mesh every rank's copy of the plan runs on
  /// (empty: one rank). Without stages the plan is the same for every rank
  /// (SPMD).
  Mesh mesh;
  /// Events of asynchronous collectives: ids are in [0, numEvents).
  int64_t numEvents = 0;
  /// Pipelined plans (MPMD over the mesh axis kPipelineAxis, of size p):
  /// exactly p stage plans, stages[c] being the whole program (target,
  /// arena, kernels, constants, commands, init commands, states, training,
  /// inputs, outputs, events) of every rank whose kPipelineAxis coordinate
  /// is c. The top level then holds only the target, the mesh and the
  /// metadata: no arena, inputs, outputs, constants, kernels, commands,
  /// states, events or training. Every stage has the top level's mesh and
  /// target, no stages of its own, and the same inputs and outputs (names,
  /// dtypes, shapes, shardings; offsets are its own) and training record as
  /// stage 0. A state held by several stages (a tied parameter) has the
  /// same kind, dtype and global shape in each. Empty: not pipelined.
  std::vector<Plan> stages;
  /// Named entries: programs a driver runs besides the step (`commands`),
  /// each a whole plan of its own (arena, kernels, constants, commands,
  /// init commands, states, events) with the top level's mesh and target,
  /// no inputs, and no stages or entries of its own. Every state of an
  /// entry is a state of the top level (same global name, kind, dtype,
  /// shape, sharding and varying axes): the driver copies those states
  /// into the entry's arena before running it and back after, so the top
  /// level holds every state (checkpoints, exports) and an entry only
  /// borrows them. An entry's states carry no initial values.
  std::vector<Plan> entries;
  /// An entry's name (entries only; unique among them).
  std::string entryName;

  /// True if the plan holds stage plans.
  bool isPipelined() const { return !stages.empty(); }
  /// The entry named `name`, or null.
  const Plan *entry(const std::string &name) const {
    for (const Plan &e : entries)
      if (e.entryName == name)
        return &e;
    return nullptr;
  }
};

/// The mesh axis a pipelined plan's stages are laid out over.
constexpr const char *kPipelineAxis = "pp";

/// The index of `mesh`'s kPipelineAxis axis, or -1.
int64_t pipelineAxis(const Mesh &mesh);
/// The stage that rank `rank` of `plan`'s mesh runs: its coordinate on the
/// kPipelineAxis axis for a pipelined plan, 0 otherwise.
int64_t stageOfRank(const Plan &plan, int64_t rank);
/// The plan rank `rank` runs: its stage plan for a pipelined plan, `plan`
/// itself otherwise. `rank` must be below the mesh's world size.
const Plan &stagePlanFor(const Plan &plan, int64_t rank);
/// The step names of metadata meta::kPipelineSteps (empty if the plan has
/// none).
std::vector<std::string> pipelineSteps(const Plan &plan);
/// True if `plan` has meta::kKernelCode = "none" (--emit=sim).
bool withoutKernelCode(const Plan &plan);

/// Version 2 added initCommands, states and training; version 3 the mesh,
/// shardings, streams, events and Collective/Wait commands; version 4 the
/// constants' file references; version 5 the stage plans (appended to the
/// payload as a list of length-prefixed stage payloads) and Marker
/// commands; version 6, at the end of each payload, the states' varying
/// axes, the training record's syncEvery and the named entries (each a
/// name and a length-prefixed payload); version 7, at the end of each
/// payload, the host kernel object and its argument table. Files of
/// versions 4 to 7 are read.
constexpr uint32_t kFormatVersion = 7;
/// The oldest version deserialize reads.
constexpr uint32_t kOldestReadableVersion = 4;
constexpr size_t kHeaderSize = 32;

/// Encodes `plan` as a complete file image (header + payload).
std::vector<uint8_t> serialize(const Plan &plan);

/// Decodes and validates a file image (version 4 to 7). Returns false and
/// sets *error to a message naming the problem (and the stage, inside a
/// stage plan) on any malformed input; never reads out of bounds and never
/// allocates more than the input size justifies.
bool deserialize(const uint8_t *data, size_t size, Plan *out,
                 std::string *error);

/// All structural checks: offsets and sizes within the arena, kernel indices,
/// parameter counts per kind, known dtypes, non-negative dims, GEMM operand
/// extents, GEMM epilogue kinds and bias buffers; init commands like
/// commands; state tensors inside the arena with valid kinds and unique
/// names; training input/output indices in range and f32 scalars; marker
/// indices and their begin/end order; for a pipelined plan, the stage
/// structure (validateStages) and every stage as a plan of its own. Called
/// by deserialize.
bool validate(const Plan &plan, std::string *error);

/// The checks particular to a pipelined plan (PipelineValidate.cpp): the
/// mesh's kPipelineAxis axis has one stage per rank of it, the top level
/// holds no program, and the stages agree with stage 0 on their mesh,
/// target, inputs, outputs and training record and on the states they
/// share. Each stage is checked with validate(); an error starts with
/// "stage C: ". Called by validate for plans with stages.
bool validateStages(const Plan &plan, std::string *error);

/// The checks of a plan's named entries and varying states
/// (EntryValidate.cpp): entries have unique non-empty names, the top
/// level's mesh and target, no inputs, stages or entries of their own, and
/// only states the top level holds alike; a pipelined plan has no entries;
/// syncEvery is not negative and, when positive, names an existing
/// kSyncEntry entry; varying axes are mesh axes that do not shard the
/// state. An error about an entry starts with "entry 'NAME': ". Called by
/// validate.
bool validateEntries(const Plan &plan, std::string *error);

/// What a plan holds, counted (PlanStats.cpp): cleave-compile
/// --print-stats and the Python module's Plan.stats print these.
struct PlanStats {
  size_t commands = 0;
  size_t kernels = 0;      ///< Kernel commands (or GPU launches).
  size_t gemms = 0;        ///< Library GEMM commands.
  size_t attentions = 0;   ///< Fused attention commands (forward, backward).
  size_t groupedGemms = 0; ///< Expert GEMM commands (forward, weight gradient).
  size_t collectives = 0;  ///< Collective commands, sends and receives.
  size_t asyncCollectives = 0; ///< Of them, on the communication stream.
  uint64_t arenaBytes = 0;
  uint64_t constantBytes = 0;   ///< Constant data inside the plan.
  uint64_t referencedBytes = 0; ///< Initial values in files (global sizes).
  std::vector<std::string> referencedFiles; ///< Sorted, unique.
  uint64_t kernelObjectBytes = 0;
  /// Persistent state per rank, by kind.
  uint64_t parameterBytes = 0, optimizerStateBytes = 0, bufferBytes = 0;
  /// GEMMs by epilogue: none, bias, gelu_bias, gelu.
  size_t gemmEpilogues[4] = {0, 0, 0, 0};
  /// The compiler's count of one step's flops (metadata "flops"), or 0.
  uint64_t flops = 0;
};
/// The statistics of `plan` alone (of a pipelined plan: call it per stage).
PlanStats statistics(const Plan &plan);

/// Writes atomically: a temporary file in the same directory, fsync, rename.
bool writeFile(const std::string &path, const Plan &plan, std::string *error);
bool readFile(const std::string &path, Plan *out, std::string *error);

/// A compiled training binary (cleave-compile --emit=exe) is cleave-run's
/// executable with a plan file appended, then a 16-byte trailer: the plan's
/// size (u64, little-endian) and kExeMagic.
constexpr char kExeMagic[9] = "CLEAVEXE";
constexpr size_t kExeTrailerSize = 16;
/// The trailer for a plan of `planSize` bytes.
std::vector<uint8_t> exeTrailer(uint64_t planSize);
/// Reads the plan appended to the executable at `path`: *found is false
/// (and the call succeeds) when the file has no trailer or cannot be
/// opened; a damaged trailer is an error.
bool readEmbeddedPlan(const std::string &path, std::vector<uint8_t> *plan,
                      bool *found, std::string *error);

/// FNV-1a 64-bit hash (the payload checksum).
uint64_t fnv1a64(const uint8_t *data, size_t size);

} // namespace cleave::plan

#endif // CLEAVE_PLANFORMAT_H
