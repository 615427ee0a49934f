//===- PlanBuilder.cpp - Group a cleave program into plan commands ---------===//
//
// Walks @main in program order. Reshapes alias their operand's buffer; f32 and
// f64 contractions (and bf16/f16 ones with an f32 result) become library GEMM
// commands, which absorb a following bias add and tanh-form GELU as their
// epilogue (see GemmEpilogue.h); every other op joins a fused
// kernel: an op joins the group of one of its producers when the op is
// elementwise (epilogue fusion) or the group is purely elementwise (prologue
// fusion), and when none of its other operands comes from a command issued
// after that group started. Groups are outlined into a kernel module; values
// crossing a command boundary get arena buffers placed by planMemory.
//
//===----------------------------------------------------------------------===//

#include "cleave/Plan/PlanBuilder.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"
#include "GemmEpilogue.h"
#include "cleave/Plan/MemoryPlanner.h"
#include "cleave/Transforms/Passes.h"
#include "cleave/Transforms/Training/Recompute.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#define DEBUG_TYPE "cleave-plan-builder"

using namespace mlir;
using namespace mlir::cleave;
using ::cleave::BuiltPlan;
using ::cleave::PlanBuildOptions;
using ::cleave::BufferInterval;
using ::cleave::MemoryPlan;
namespace plan = ::cleave::plan;

//===----------------------------------------------------------------------===//
// Types and constants
//===----------------------------------------------------------------------===//

static FailureOr<plan::DType> toDType(Type t) {
  if (t.isF32()) return plan::DType::F32;
  if (t.isF64()) return plan::DType::F64;
  if (t.isF16()) return plan::DType::F16;
  if (t.isBF16()) return plan::DType::BF16;
  if (isa<Float8E4M3FNType>(t)) return plan::DType::F8E4M3FN;
  if (isa<Float8E4M3FNUZType>(t)) return plan::DType::F8E4M3FNUZ;
  if (isa<Float8E5M2Type>(t)) return plan::DType::F8E5M2;
  if (isa<Float8E5M2FNUZType>(t)) return plan::DType::F8E5M2FNUZ;
  if (isa<Float8E8M0FNUType>(t)) return plan::DType::F8E8M0;
  if (isa<Float4E2M1FNType>(t)) return plan::DType::F4E2M1;
  if (auto it = dyn_cast<IntegerType>(t)) {
    bool u = it.isUnsigned();
    switch (it.getWidth()) {
    case 1: return plan::DType::Bool;
    case 2: return u ? plan::DType::U2 : plan::DType::I2;
    case 4: return u ? plan::DType::U4 : plan::DType::I4;
    case 8: return u ? plan::DType::U8 : plan::DType::I8;
    case 16: return u ? plan::DType::U16 : plan::DType::I16;
    case 32: return u ? plan::DType::U32 : plan::DType::I32;
    case 64: return u ? plan::DType::U64 : plan::DType::I64;
    default: break;
    }
  }
  return failure();
}

/// The additions of `op` that a CPU kernel runs as loop-carried chains: a
/// floating-point sum (or product) whose reduced dimensions include the
/// innermost one adds each element in turn to one accumulator per output
/// (LLVM does not reassociate them into vector lanes). Sums over outer
/// dimensions vectorize across the inner one, and the composites (softmax,
/// normalizations) are row kernels whose sums run beside their other work:
/// they count none. The cost model (kernel_costs metadata) charges the
/// chains at the device's serial add rate.
static int64_t serialAdds(Operation *op) {
  auto reduce = dyn_cast<ReduceOp>(op);
  if (!reduce || (reduce.getKind() != ReduceKind::sum &&
                  reduce.getKind() != ReduceKind::prod))
    return 0;
  auto type = cast<RankedTensorType>(reduce.getOperand().getType());
  if (!type.hasStaticShape() || type.getRank() == 0 ||
      !isa<FloatType>(type.getElementType()) ||
      !llvm::is_contained(reduce.getDimensions(), type.getRank() - 1))
    return 0;
  return type.getNumElements();
}

/// The bytes `op` moves out of its loops' order: the operands and results
/// of transposes, gathers and scatters, whose elements are not read (or
/// written) one after another. The cost model charges them at the device's
/// permuted bandwidth. A transpose that keeps the innermost dimension in
/// place moves whole rows, and rows of a cache line or more stream like
/// any other bytes (the attention heads' [b, s, h, d] -> [b, h, s, d] with
/// rows of 128 bytes runs at the streaming rate on the CPU).
static int64_t permutedBytes(Operation *op) {
  if (!isa<TransposeOp, GatherOp, GatherElementsOp, ScatterOp>(op))
    return 0;
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    auto type = cast<RankedTensorType>(transpose.getOperand().getType());
    ArrayRef<int64_t> perm = transpose.getPermutation();
    constexpr int64_t kCacheLineBytes = 64;
    if (type.hasStaticShape() && !perm.empty() &&
        perm.back() == type.getRank() - 1 &&
        type.getShape().back() * int64_t(type.getElementTypeBitWidth() / 8) >=
            kCacheLineBytes)
      return 0;
  }
  auto cost = dyn_cast<CostOpInterface>(op);
  return cost ? cost.getBytesRead() + cost.getBytesWritten() : 0;
}

/// The transcendental functions `op` evaluates (exp, log, tanh, erf, ...:
/// one per element; softmax's exp per element), which a CPU kernel runs as
/// polynomial approximations tens of operations long. The cost model
/// charges them at the device's transcendental rate.
static int64_t transcendentals(Operation *op) {
  auto elements = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape() &&
                   isa<FloatType>(type.getElementType())
               ? type.getNumElements()
               : int64_t(0);
  };
  if (auto unary = dyn_cast<UnaryOp>(op)) {
    switch (unary.getKind()) {
    case UnaryKind::neg:
    case UnaryKind::abs:
    case UnaryKind::sqrt:
    case UnaryKind::rsqrt:
    case UnaryKind::floor:
    case UnaryKind::ceil:
    case UnaryKind::round:
    case UnaryKind::sign:
    case UnaryKind::reciprocal:
    case UnaryKind::lnot:
      return 0;
    default:
      return elements(unary.getResult());
    }
  }
  if (isa<SoftmaxOp, LogSoftmaxOp>(op))
    return elements(op->getResult(0));
  return 0;
}

static uint64_t byteSize(RankedTensorType t) {
  return static_cast<uint64_t>(mlir::cleave::detail::getSizeInBytes(t));
}

/// The little-endian bytes of a constant, one element after another (i1 as
/// one byte per element).
static FailureOr<std::vector<uint8_t>> constantBytes(ElementsAttr value) {
  auto type = cast<RankedTensorType>(value.getType());
  std::vector<uint8_t> bytes(byteSize(type));
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != bytes.size())
      return failure();
    std::memcpy(bytes.data(), blob->getData().data(), bytes.size());
    return bytes;
  }
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return failure();
  Type et = type.getElementType();
  // bool and the 4- and 2-bit types take a byte, their bits low, the rest
  // zero (plan::DType).
  unsigned width = std::max(8u, et.getIntOrFloatBitWidth());
  size_t elemBytes = width / 8, i = 0;
  auto put = [&](const APInt &v) {
    APInt ext = v.getBitWidth() < 8 ? v.zext(8) : v;
    for (size_t b = 0; b < elemBytes; ++b)
      bytes[i * elemBytes + b] =
          static_cast<uint8_t>(ext.extractBitsAsZExtValue(8, 8 * b));
    ++i;
  };
  if (isa<FloatType>(et)) {
    for (const APFloat &v : dense.getValues<APFloat>())
      put(v.bitcastToAPInt());
  } else {
    for (const APInt &v : dense.getValues<APInt>())
      put(v);
  }
  return bytes;
}

static bool isElementwise(Operation *op) {
  return isa<UnaryOp, BinaryOp, CompareOp, SelectOp, ConvertOp, BitcastOp,
             BroadcastInDimOp>(op);
}

static std::string kernelName(size_t index, Operation *op) {
  std::string name = "k" + std::to_string(index) + "_" +
                     op->getName().stripDialect().str();
  for (char &c : name)
    if (!isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return name;
}

/// The Attention or AttentionBackward command of a cleave.attention or
/// cleave.attention_grad, without its buffers (see plan::AttentionParam).
static plan::Command attentionCommand(Operation *op) {
  auto grad = dyn_cast<AttentionGradOp>(op);
  auto fwd = dyn_cast<AttentionOp>(op);
  Value q = grad ? grad.getQ() : fwd.getQ();
  Value k = grad ? grad.getK() : fwd.getK();
  Value v = grad ? grad.getV() : fwd.getV();
  Value bias = grad ? grad.getBias() : fwd.getBias();
  auto shape = [](Value x) {
    return cast<RankedTensorType>(x.getType()).getShape();
  };
  auto dtype = [](Value x) {
    return static_cast<int64_t>(
        *toDType(cast<RankedTensorType>(x.getType()).getElementType()));
  };
  plan::Command cmd;
  cmd.kind = grad ? plan::CommandKind::AttentionBackward
                  : plan::CommandKind::Attention;
  std::vector<int64_t> &p = cmd.params;
  p.assign(plan::kAttnNumParams, 0);
  p[plan::kAttnDType] = dtype(q);
  p[plan::kAttnDoutDType] = grad ? dtype(grad.getDout()) : dtype(q);
  p[plan::kAttnGradDType] = grad ? dtype(grad.getDq()) : dtype(q);
  p[plan::kAttnBatch] = shape(q)[0];
  p[plan::kAttnQHeads] = shape(q)[1];
  p[plan::kAttnKVHeads] = shape(k)[1];
  p[plan::kAttnQLen] = shape(q)[2];
  p[plan::kAttnKVLen] = shape(k)[2];
  p[plan::kAttnHeadDim] = shape(q)[3];
  p[plan::kAttnValueDim] = shape(v)[3];
  p[plan::kAttnCausal] = grad ? grad.getCausal() : fwd.getCausal();
  // The I64Attr getters are unsigned: read the offset signed.
  p[plan::kAttnCausalOffset] = static_cast<int64_t>(
      grad ? grad.getCausalOffset() : fwd.getCausalOffset());
  p[plan::kAttnScaleBits] = plan::doubleToBits(
      (grad ? grad.getScale() : fwd.getScale()).convertToDouble());
  p[plan::kAttnSoftcapBits] = plan::doubleToBits(
      (grad ? grad.getSoftcap() : fwd.getSoftcap()).convertToDouble());
  if (bias) {
    p[plan::kAttnBiasDType] = dtype(bias);
    p[plan::kAttnBiasBatch] = shape(bias)[0];
    p[plan::kAttnBiasHeads] = shape(bias)[1];
    p[plan::kAttnBiasQLen] = shape(bias)[2];
  }
  return cmd;
}

//===----------------------------------------------------------------------===//
// Grouping ops into commands
//===----------------------------------------------------------------------===//

namespace {

struct Node {
  /// Collective: a communication op (`comm`); Done: the wait for an async
  /// one (`comm` is the cleave.done).
  /// Marker: a pipeline step's begin or end (`comm` is the marker).
  /// Attention: a cleave.attention or cleave.attention_grad (the one op in
  /// `ops`) run by the runtime's fused attention command.
  enum Kind { Kernel, Gemm, Collective, Done, Marker, Attention } kind;
  /// Kernel members in program order; an Attention node's op.
  SmallVector<Operation *> ops;
  ContractOp contract;          ///< For GEMMs.
  /// For GEMMs: the epilogue, its bias (or null) and the value written into
  /// C (the contraction's result without an epilogue).
  plan::GemmEpilogue epilogue = plan::GemmEpilogue::None;
  Value bias, result;
  SmallVector<Value> inputs, outputs;
  std::string name;
  Operation *comm = nullptr;
};

class PlanBuilder {
public:
  PlanBuilder(func::FuncOp main, const PlanBuildOptions &options)
      : main(main), options(options) {}

  FailureOr<BuiltPlan> run();

private:
  /// The value whose buffer `v` lives in (follows reshapes, and a
  /// cleave.done to the asynchronous collective that writes its buffer).
  Value root(Value v) const {
    for (;;) {
      if (auto reshape = v.getDefiningOp<ReshapeOp>())
        v = reshape.getOperand();
      else if (auto done = v.getDefiningOp<DoneOp>())
        v = done.getOperand();
      else
        return v;
    }
  }
  /// Index of the node after which `v` is ready, or -1 for arguments and
  /// constants: the computing node, or for an asynchronous collective's
  /// result its cleave.done.
  int nodeOf(Value v) const {
    while (auto reshape = v.getDefiningOp<ReshapeOp>())
      v = reshape.getOperand();
    if (auto done = v.getDefiningOp<DoneOp>())
      return nodeOfOp.lookup(done);
    auto it = nodeOfOp.find(root(v).getDefiningOp());
    return it == nodeOfOp.end() ? -1 : it->second;
  }
  /// Splats (any size) and small dense constants are rebuilt inside the
  /// kernels that use them instead of taking arena memory.
  bool isInlinableConstant(Value v) const {
    auto cst = v.getDefiningOp<ConstantOp>();
    if (!cst)
      return false;
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    return dense && (dense.isSplat() ||
                     dense.getNumElements() <= options.inlineConstantLimit);
  }
  bool isGemm(Operation *op) const;
  void matchEpilogues();
  void markRematerializedBroadcasts();
  /// What a kernel reads for `op`'s operands: each operand, or for a
  /// rematerialized op what its reader rebuilds it from (the leaves of its
  /// operands' DAG, each once).
  SmallVector<Value, 4> kernelSources(Operation *op) const {
    SmallVector<Value, 4> sources;
    llvm::SmallPtrSet<Operation *, 8> seen;
    SmallVector<Value> stack(llvm::reverse(op->getOperands()));
    while (!stack.empty()) {
      Value v = stack.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (def && rematerialized.count(def)) {
        if (seen.insert(def).second)
          llvm::append_range(stack, llvm::reverse(def->getOperands()));
      } else if (!llvm::is_contained(sources, v)) {
        sources.push_back(v);
      }
    }
    return sources;
  }
  void addGemm(ContractOp contract);
  void addKernelOp(Operation *op);
  void addCommNode(Node::Kind kind, Operation *op);
  LogicalResult lowerCollective(Node &node, plan::Command &cmd);
  LogicalResult outline(ModuleOp kernels);
  LogicalResult assemble(BuiltPlan &result);
  void takeGradientTags();
  int64_t nodeFlops(Node &node);
  ::cleave::MemoryClass classify(Value root, bool &finalGradient);
  void fillReport(BuiltPlan &result, ArrayRef<Value> bufferValues,
                  ArrayRef<BufferInterval> intervals, uint64_t arenaBytes);

  func::FuncOp main;
  const PlanBuildOptions &options;
  std::vector<Node> nodes;
  DenseMap<Operation *, int> nodeOfOp;
  /// GEMM epilogues: per contraction, what it absorbs; per absorbed op, its
  /// contraction. Broadcasts feeding only absorbed bias adds need no code.
  DenseMap<Operation *, ::cleave::GemmEpilogueMatch> epilogueOf;
  DenseMap<Operation *, ContractOp> absorbedBy;
  llvm::SmallPtrSet<Operation *, 8> deadBroadcasts;
  /// Broadcasts, widening converts and index computations that every
  /// reader's kernel rebuilds from their operands
  /// (markRematerializedBroadcasts): no command and no buffer of their own.
  llvm::SmallPtrSet<Operation *, 8> rematerialized;
  /// Printed kernel body -> the name of the kernel compiled for it.
  llvm::StringMap<std::string> kernelByBody;
  /// The module's mesh (null: one rank).
  MeshOp mesh;
  /// Async collective -> the event its cleave.done waits for.
  DenseMap<Operation *, int64_t> eventOf;
  uint32_t numCollectives = 0;
  /// For the report: each value of a parameter gradient's chain (the op
  /// tagged cleave.gradient_of, then its reductions, reshapes, converts,
  /// buckets and slices) -> the parameters it is a gradient of.
  DenseMap<Value, SmallVector<StringAttr, 1>> gradientOf;
  /// For the report: the ops the loss depends on (the forward pass).
  llvm::SmallPtrSet<Operation *, 32> forward;
  /// For the report: the values that own an arena buffer.
  DenseSet<Value> buffered;
  /// For the report: low-precision parameter copies the partitioner
  /// gathered once for the whole step (kReshardOnceAttr).
  llvm::SmallPtrSet<Operation *, 16> keptCopies;
};

} // namespace

bool PlanBuilder::isGemm(Operation *op) const {
  auto contract = dyn_cast<ContractOp>(op);
  if (!contract || !options.useLibraryGemm)
    return false;
  Type et = contract.getType().getElementType();
  Type in = contract.getLhs().getType().getElementType();
  // Same-type f32/f64, or mixed precision: bf16/f16 operands, f32 result.
  bool supported = in == et ? (et.isF32() || et.isF64())
                            : (et.isF32() && (in.isBF16() || in.isF16()));
  return supported && succeeded(::cleave::getGemmShape(contract));
}

void PlanBuilder::matchEpilogues() {
  if (!options.useGemmEpilogues)
    return;
  Block &body = main.getBody().front();
  DenseMap<Attribute, Value> splatBiases;
  for (Operation &op : body) {
    auto contract = dyn_cast<ContractOp>(op);
    if (!contract || !isGemm(contract) ||
        contract.getType().getNumElements() == 0)
      continue;
    ::cleave::GemmEpilogueMatch m = ::cleave::matchGemmEpilogue(
        contract, *::cleave::getGemmShape(contract));
    if (m.kind == plan::GemmEpilogue::None) {
      // A mixed-precision product rounded straight back to its operands'
      // type (bf16 x bf16 -> f32 -> bf16): the command writes the rounded
      // result itself, half the bytes and no kernel to round it.
      Type in = contract.getLhs().getType().getElementType();
      auto convert = contract->hasOneUse()
                         ? dyn_cast<ConvertOp>(*contract->user_begin())
                         : ConvertOp();
      if (!convert || (!in.isBF16() && !in.isF16()) ||
          convert.getType().getElementType() != in)
        continue;
      m.result = convert.getResult();
      m.ops = {convert};
    }
    if (m.splatBias) {
      // A splat addend (a folded zero bias, say) becomes an N-element
      // constant at the top of @main, one per value and N.
      int64_t n = ::cleave::getGemmShape(contract)->n;
      auto type = RankedTensorType::get({n}, m.splatBias.getElementType());
      DenseElementsAttr value = m.splatBias.resizeSplat(type);
      Value &bias = splatBiases[value];
      if (!bias) {
        OpBuilder b(&body, body.begin());
        bias = ConstantOp::create(b, contract.getLoc(), value);
      }
      m.bias = bias;
    }
    for (Operation *absorbed : m.ops)
      absorbedBy[absorbed] = contract;
    epilogueOf[contract] = std::move(m);
  }
  for (Operation &op : body)
    if (isa<BroadcastInDimOp>(op) && !op.use_empty() &&
        llvm::all_of(op.getUsers(),
                     [&](Operation *user) { return absorbedBy.count(user); }))
      deadBroadcasts.insert(&op);
}

void PlanBuilder::markRematerializedBroadcasts() {
  // Readers that become ops of a kernel (addKernelOp): not GEMMs, epilogues,
  // communication, reshapes (aliases), other broadcasts or the return.
  auto inKernel = [&](Operation *user) {
    if (isa<func::ReturnOp, ConstantOp, ReshapeOp, DoneOp, PipelineMarkerOp,
            BroadcastInDimOp, CollectiveOpInterface>(user) ||
        absorbedBy.count(user) || isGemm(user) ||
        user->getDialect() != user->getContext()->getLoadedDialect<CleaveDialect>())
      return false;
    return llvm::any_of(user->getResultTypes(), [](Type t) {
      return cast<RankedTensorType>(t).getNumElements() != 0;
    });
  };
  for (Operation &op : main.getBody().front()) {
    auto broadcast = dyn_cast<BroadcastInDimOp>(op);
    if (!broadcast || op.use_empty() || deadBroadcasts.contains(&op) ||
        absorbedBy.count(&op))
      continue;
    if (llvm::all_of(op.getUsers(), inKernel))
      rematerialized.insert(&op);
  }
  // Likewise a bf16/f16 value widened to f32 for kernels only (a softmax's
  // gradient reading the probabilities saved in bf16): each reader widens
  // it as it loads, instead of one kernel writing an f32 copy. Not when it
  // feeds a broadcast, nor when it widens a rebuilt broadcast.
  for (Operation &op : main.getBody().front()) {
    auto convert = dyn_cast<ConvertOp>(op);
    if (!convert || op.use_empty() || absorbedBy.count(&op))
      continue;
    if (Operation *def = convert.getOperand().getDefiningOp();
        def && rematerialized.contains(def))
      continue;
    Type from = getElementTypeOrSelf(convert.getOperand().getType());
    if ((from.isBF16() || from.isF16()) &&
        getElementTypeOrSelf(convert.getType()).isF32() &&
        llvm::all_of(op.getUsers(), inKernel))
      rematerialized.insert(&op);
  }
  // Index computations: iotas and the elementwise ops on them whose other
  // operands are constants, scalars or rebuilt broadcasts (the random bits
  // of a dropout, hashed from each element's index; a one-hot's compare).
  // A function of the element's position that costs no memory traffic:
  // each reader recomputes it rather than reading an index-sized buffer.
  llvm::SmallPtrSet<Operation *, 16> indexOnly;
  Block &body = main.getBody().front();
  for (Operation &op : body) {
    if (isa<IotaOp>(op)) {
      indexOnly.insert(&op);
      continue;
    }
    if (!isElementwise(&op) || isa<BroadcastInDimOp>(op))
      continue;
    bool readsIndex = false, leaves = true;
    for (Value v : op.getOperands()) {
      Operation *def = v.getDefiningOp();
      if (def && indexOnly.contains(def)) {
        readsIndex = true;
        continue;
      }
      leaves &= isInlinableConstant(v) ||
                cast<RankedTensorType>(v.getType()).getRank() == 0 ||
                (def && rematerialized.contains(def));
    }
    if (readsIndex && leaves)
      indexOnly.insert(&op);
  }
  // Users first: an index op is rebuilt when each of its readers is a
  // kernel op or rebuilt itself.
  for (Operation &op : llvm::reverse(body))
    if (indexOnly.contains(&op) && !op.use_empty() && !absorbedBy.count(&op) &&
        llvm::all_of(op.getUsers(), [&](Operation *user) {
          return rematerialized.contains(user) || inKernel(user);
        }))
      rematerialized.insert(&op);
}

void PlanBuilder::addGemm(ContractOp contract) {
  int index = nodes.size();
  Node node{Node::Gemm, {}, contract, plan::GemmEpilogue::None,
            {},         contract.getResult(), {}, {}, {}};
  nodeOfOp[contract] = index;
  auto it = epilogueOf.find(contract);
  if (it != epilogueOf.end()) {
    node.epilogue = it->second.kind;
    node.bias = it->second.bias;
    node.result = it->second.result;
    for (Operation *absorbed : it->second.ops)
      nodeOfOp[absorbed] = index;
  }
  nodes.push_back(std::move(node));
}

/// The most ops one fused kernel holds.
static constexpr size_t kMaxKernelOps = 256;

void PlanBuilder::addKernelOp(Operation *op) {
  // Try the groups producing an operand, latest first.
  SmallVector<int> candidates;
  SmallVector<Value, 4> sources = kernelSources(op);
  for (Value source : sources)
    if (Operation *def = source.getDefiningOp())
      if (auto it = nodeOfOp.find(def);
          it != nodeOfOp.end() && nodes[it->second].kind == Node::Kernel)
        candidates.push_back(it->second);
  llvm::sort(candidates, std::greater<int>());
  candidates.erase(llvm::unique(candidates), candidates.end());
  // Then the groups reading the same output of a GEMM with an epilogue,
  // latest first: before the fusion the epilogue's last op (a kernel op)
  // gathered its readers into one kernel; they stay together.
  SmallVector<int> siblings;
  for (Value v : op->getOperands()) {
    int n = nodeOf(v);
    if (n < 0 || nodes[n].kind != Node::Gemm ||
        nodes[n].epilogue == plan::GemmEpilogue::None)
      continue;
    for (Operation *user : v.getUsers())
      if (auto it = nodeOfOp.find(user);
          user != op && it != nodeOfOp.end() &&
          nodes[it->second].kind == Node::Kernel &&
          !llvm::is_contained(candidates, it->second))
        siblings.push_back(it->second);
  }
  llvm::sort(siblings, std::greater<int>());
  siblings.erase(llvm::unique(siblings), siblings.end());
  candidates.append(siblings.begin(), siblings.end());
  for (int g : candidates) {
    Node &group = nodes[g];
    // A kernel's code generation grows faster than its ops: a chain of
    // thousands of elementwise ops (a hostile or generated model) becomes
    // several kernels instead of one that takes minutes to compile.
    if (group.ops.size() >= kMaxKernelOps)
      continue;
    bool groupElementwise = llvm::all_of(group.ops, isElementwise);
    if (!isElementwise(op) && !groupElementwise)
      continue;
    bool legal = llvm::all_of(sources, [&](Value v) {
      auto it = nodeOfOp.find(v.getDefiningOp());
      if (it != nodeOfOp.end() && it->second == g)
        return true; // produced inside the group
      int n = nodeOf(v);
      return n < g; // earlier command, argument or constant; not via alias
    });
    if (!legal)
      continue;
    group.ops.push_back(op);
    nodeOfOp[op] = g;
    return;
  }
  Node node{Node::Kernel, {op}, {}, plan::GemmEpilogue::None, {}, {},
            {},           {},   {}};
  nodeOfOp[op] = nodes.size();
  nodes.push_back(std::move(node));
}

void PlanBuilder::addCommNode(Node::Kind kind, Operation *op) {
  Node node{kind, {}, {}, plan::GemmEpilogue::None, {}, {}, {}, {}, {}, op};
  nodeOfOp[op] = nodes.size();
  nodes.push_back(std::move(node));
}

/// Where a collective came from, for messages: the ONNX node (a NameLoc),
/// or file:line.
static std::string sourceOf(Operation *op) {
  std::string s = describeLocation(op->getLoc());
  if (auto phase = op->getAttrOfType<StringAttr>("cleave.phase"))
    s += (s.empty() ? "" : ", ") + phase.getValue().str();
  return s;
}

LogicalResult PlanBuilder::lowerCollective(Node &node, plan::Command &cmd) {
  auto op = cast<CollectiveOpInterface>(node.comm);
  if (!mesh || lookupMesh(op) != mesh)
    return op->emitOpError() << "must communicate over the module's one mesh";
  plan::CollectiveInfo &info = cmd.collective;
  cmd.kind = plan::CommandKind::Collective;
  info.id = numCollectives++;
  for (Attribute a : op.getMeshAxesAttr())
    info.axes.push_back(static_cast<uint32_t>(
        mesh.getAxisIndex(cast<StringAttr>(a).getValue())));
  int64_t g = *getGroupSize(op);
  Value data = node.comm->getNumOperands() ? node.comm->getOperand(0)
                                           : node.comm->getResult(0);
  auto type = cast<RankedTensorType>(data.getType());
  FailureOr<plan::DType> dtype = toDType(type.getElementType());
  if (failed(dtype))
    return op->emitOpError() << "communicates " << type.getElementType()
                             << " elements, which plans cannot hold";
  bool reduces = isa<AllReduceOp, ReduceScatterOp>(op.getOperation());
  if (reduces && plan::isNarrowType(*dtype))
    return op->emitOpError() << "reduces " << type.getElementType()
                             << " elements; reduce in a wider type";
  info.dtype = *dtype;
  info.count = type.getNumElements();
  ArrayRef<int64_t> shape = type.getShape();
  auto reduceOf = [](CollectiveReduceKind k) {
    switch (k) {
    case CollectiveReduceKind::sum: return plan::ReduceOp::Sum;
    case CollectiveReduceKind::avg: return plan::ReduceOp::Avg;
    case CollectiveReduceKind::max: return plan::ReduceOp::Max;
    case CollectiveReduceKind::min: return plan::ReduceOp::Min;
    case CollectiveReduceKind::prod: return plan::ReduceOp::Prod;
    }
    return plan::ReduceOp::Sum;
  };
  TypeSwitch<Operation *>(node.comm)
      .Case([&](AllReduceOp o) {
        info.op = plan::CollectiveOp::AllReduce;
        info.reduce = reduceOf(o.getKind());
      })
      .Case([&](AllGatherOp o) {
        info.op = plan::CollectiveOp::AllGather;
        int64_t d = o.getDim();
        info.splitOuter = ShapedType::getNumElements(shape.take_front(d));
        info.splitInner = ShapedType::getNumElements(shape.drop_front(d));
      })
      .Case([&](AllSliceOp o) {
        info.op = plan::CollectiveOp::AllSlice;
        int64_t d = o.getDim();
        info.splitOuter = ShapedType::getNumElements(shape.take_front(d));
        info.splitInner = ShapedType::getNumElements(shape.drop_front(d)) / g;
      })
      .Case([&](ReduceScatterOp o) {
        info.op = plan::CollectiveOp::ReduceScatter;
        info.reduce = reduceOf(o.getKind());
        int64_t d = o.getDim();
        info.splitOuter = ShapedType::getNumElements(shape.take_front(d));
        info.splitInner = ShapedType::getNumElements(shape.drop_front(d)) / g;
      })
      .Case([&](AllToAllOp o) {
        info.op = plan::CollectiveOp::AllToAll;
        int64_t s = o.getSplitDim(), c = o.getConcatDim();
        ArrayRef<int64_t> out = o.getType().getShape();
        info.splitOuter = ShapedType::getNumElements(shape.take_front(s));
        info.splitInner = ShapedType::getNumElements(shape.drop_front(s)) / g;
        info.concatOuter = ShapedType::getNumElements(out.take_front(c));
        info.concatInner = ShapedType::getNumElements(out.drop_front(c)) / g;
      })
      .Case([&](BroadcastOp o) {
        info.op = plan::CollectiveOp::Broadcast;
        info.root = o.getRoot();
      })
      .Case([&](CollectivePermuteOp o) {
        info.op = plan::CollectiveOp::Permute;
        info.pairs.assign(o.getPairs().begin(), o.getPairs().end());
      })
      .Case([&](SendOp o) {
        info.op = plan::CollectiveOp::Send;
        info.root = o.getSource();
        info.peer = o.getTarget();
      })
      .Case([&](RecvOp o) {
        info.op = plan::CollectiveOp::Recv;
        info.root = o.getSource();
        info.peer = o.getTarget();
      });
  // A pipeline message's tag (cleave::splitPipelineRanks), which the
  // receiving rank checks.
  if (auto tag = node.comm->getAttrOfType<IntegerAttr>("cleave.message"))
    info.pairs = {tag.getInt()};
  info.source = sourceOf(node.comm);
  if (op.getAsync()) {
    cmd.stream = plan::kCommStream;
    cmd.event = eventOf.lookup(node.comm);
  }
  return success();
}

LogicalResult PlanBuilder::outline(ModuleOp kernels) {
  OpBuilder moduleBuilder = OpBuilder::atBlockEnd(kernels.getBody());
  for (auto [index, node] : llvm::enumerate(nodes)) {
    if (node.kind == Node::Marker) {
      node.name = "marker" + std::to_string(index);
      continue;
    }
    if (node.kind == Node::Collective || node.kind == Node::Done) {
      node.inputs.assign(node.comm->operand_begin(), node.comm->operand_end());
      if (node.kind == Node::Collective)
        node.outputs.assign(node.comm->result_begin(), node.comm->result_end());
      node.name = (node.kind == Node::Done ? "done" : "collective") +
                  std::to_string(index);
      continue;
    }
    if (node.kind == Node::Attention) {
      // In the command's buffer order: q, k, v, [bias], then out and dout
      // (the gradient), then the results.
      Operation *op = node.ops.front();
      if (auto a = dyn_cast<AttentionOp>(op)) {
        node.inputs = {a.getQ(), a.getK(), a.getV()};
        if (a.getBias())
          node.inputs.push_back(a.getBias());
      } else {
        auto g = cast<AttentionGradOp>(op);
        node.inputs = {g.getQ(), g.getK(), g.getV()};
        if (g.getBias())
          node.inputs.push_back(g.getBias());
        node.inputs.append({g.getOut(), g.getDout()});
      }
      node.outputs.assign(op->result_begin(), op->result_end());
      node.name = "attention" + std::to_string(index);
      continue;
    }
    if (node.kind == Node::Gemm) {
      node.inputs = {node.contract.getLhs(), node.contract.getRhs()};
      if (node.bias)
        node.inputs.push_back(node.bias);
      node.outputs = {node.result};
      node.name = "gemm" + std::to_string(index);
      continue;
    }
    llvm::SmallPtrSet<Operation *, 16> members(node.ops.begin(), node.ops.end());
    // Whether an op outside the kernel reads `v`, directly or through ops
    // its readers rebuild (a widened copy only this kernel's softmax reads
    // is not an output).
    DenseMap<Value, bool> outside;
    std::function<bool(Value)> readOutside = [&](Value v) {
      if (auto it = outside.find(v); it != outside.end())
        return it->second;
      bool read = llvm::any_of(v.getUsers(), [&](Operation *user) {
        if (rematerialized.contains(user))
          return llvm::any_of(user->getResults(), readOutside);
        return !members.contains(user);
      });
      outside[v] = read;
      return read;
    };
    SmallVector<Value> inlined;
    for (Operation *op : node.ops) {
      for (Value v : kernelSources(op)) {
        Operation *def = v.getDefiningOp();
        if (def && members.contains(def))
          continue;
        if (isInlinableConstant(v)) {
          if (!llvm::is_contained(inlined, v))
            inlined.push_back(v);
        } else if (!llvm::is_contained(node.inputs, v)) {
          node.inputs.push_back(v);
        }
      }
      for (Value r : op->getResults())
        if (readOutside(r))
          node.outputs.push_back(r);
    }
    node.name = kernelName(index, node.ops.front());
    SmallVector<Type> inTypes, outTypes;
    for (Value v : node.inputs)
      inTypes.push_back(v.getType());
    for (Value v : node.outputs)
      outTypes.push_back(v.getType());
    auto fn = func::FuncOp::create(
        moduleBuilder, node.ops.front()->getLoc(), node.name,
        moduleBuilder.getFunctionType(inTypes, outTypes));
    Block *body = fn.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockEnd(body);
    IRMapping mapping;
    for (auto [v, arg] : llvm::zip(node.inputs, body->getArguments()))
      mapping.map(v, arg);
    for (Value v : inlined)
      b.clone(*v.getDefiningOp(), mapping);
    // A rematerialized op is rebuilt before its first reader, once its
    // operands (inputs, members cloned above, or rebuilt in turn) are.
    std::function<void(Value)> rebuild = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (mapping.contains(v) || !def || !rematerialized.count(def))
        return;
      for (Value operand : def->getOperands())
        rebuild(operand);
      b.clone(*def, mapping);
    };
    for (Operation *op : node.ops) {
      for (Value v : op->getOperands())
        rebuild(v);
      b.clone(*op, mapping);
    }
    SmallVector<Value> results;
    for (Value v : node.outputs)
      results.push_back(mapping.lookup(v));
    func::ReturnOp::create(b, fn.getLoc(), results);

    // Repeated layers produce identical kernels: compile each body once.
    std::string key;
    {
      llvm::raw_string_ostream os(key);
      fn.setSymName("kernel");
      // Verified as the module was; printed without its enclosing scope (a
      // full AsmState verifies and numbers the whole module per kernel).
      fn.print(os, OpPrintingFlags()
                       .skipRegions(false)
                       .elideLargeElementsAttrs(0)
                       .assumeVerified()
                       .useLocalScope());
      fn.setSymName(node.name);
    }
    auto [it, inserted] = kernelByBody.try_emplace(key, node.name);
    if (!inserted) {
      fn.erase();
      node.name = it->second;
    }
  }
  return success();
}

LogicalResult PlanBuilder::assemble(BuiltPlan &result) {
  plan::Plan &p = result.plan;
  if (mesh) {
    for (Attribute a : mesh.getAxisNames())
      p.mesh.axisNames.push_back(cast<StringAttr>(a).getValue().str());
    p.mesh.shape.assign(mesh.getShape().begin(), mesh.getShape().end());
  }
  const int64_t end = nodes.size();

  // Buffers: one per root value that crosses a command boundary.
  struct Buffer {
    Value value;
    BufferInterval interval;
  };
  std::vector<Buffer> buffers;
  DenseMap<Value, size_t> bufferOf;
  auto bufferFor = [&](Value v, int64_t first, int64_t last) -> size_t {
    Value r = root(v);
    auto [it, inserted] = bufferOf.try_emplace(r, buffers.size());
    if (inserted)
      buffers.push_back({r, {byteSize(cast<RankedTensorType>(r.getType())),
                             first, last}});
    BufferInterval &iv = buffers[it->second].interval;
    iv.firstUse = std::min(iv.firstUse, first);
    iv.lastUse = std::max(iv.lastUse, last);
    return it->second;
  };

  // Inputs and constants live for the whole plan, so the plan can run again.
  for (BlockArgument arg : main.getArguments())
    bufferFor(arg, 0, end);
  for (auto [index, node] : llvm::enumerate(nodes)) {
    int64_t t = index;
    for (Value v : node.inputs) {
      bool isConstant = root(v).getDefiningOp<ConstantOp>() != nullptr;
      bufferFor(v, isConstant ? 0 : t, isConstant ? end : t);
    }
    for (Value v : node.outputs)
      bufferFor(v, t, t);
  }
  // An asynchronous collective reads its operand and writes its result until
  // its cleave.done: both stay allocated until then.
  for (auto [index, node] : llvm::enumerate(nodes)) {
    if (node.kind != Node::Done)
      continue;
    Operation *start = node.comm->getOperand(0).getDefiningOp();
    int64_t begin = nodeOfOp.lookup(start), t = index;
    for (Value v : start->getOperands()) {
      bool isConstant = root(v).getDefiningOp<ConstantOp>() != nullptr;
      bufferFor(v, isConstant ? 0 : begin, isConstant ? end : t);
    }
  }
  // A new state value is copied into its state buffer as soon as the old
  // value is dead and the new one is complete (after the last command that
  // reads either), so new parameters and optimizer state do not all stay
  // live until the end of the step.
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  DenseMap<Value, int64_t> lastRead;
  for (auto [index, node] : llvm::enumerate(nodes)) {
    for (Value v : node.inputs)
      lastRead[root(v)] = index;
    // An asynchronous collective reads its operand until its wait (a
    // delayed gradient reduction reads the state it then replaces).
    if (node.kind == Node::Done)
      for (Value v :
           node.comm->getOperand(0).getDefiningOp()->getOperands())
        lastRead[root(v)] = index;
  }
  DenseMap<unsigned, int64_t> copyTime; // result index -> after this command
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    bool isConstant = root(v).getDefiningOp<ConstantOp>() != nullptr;
    auto updates = main.getResultAttrOfType<IntegerAttr>(i, "cleave.updates");
    if (!updates || isConstant || updates.getInt() < 0 ||
        updates.getInt() >= main.getNumArguments()) {
      bufferFor(v, isConstant ? 0 : end, end);
      continue;
    }
    Value old = main.getArgument(updates.getInt());
    int64_t t = std::max<int64_t>({nodeOf(v), lastRead.lookup(root(old)),
                                   lastRead.lookup(root(v)), 0});
    copyTime[i] = t;
    bufferFor(v, t, t);
  }

  std::vector<BufferInterval> intervals;
  for (const Buffer &b : buffers) {
    intervals.push_back(b.interval);
    if (options.report || options.reportMemory)
      buffered.insert(b.value);
  }
  MemoryPlan memory = ::cleave::planMemory(intervals, p.alignment);
  // A pipeline stage program: what its first microbatch keeps from its
  // forward step for its backward step (activation_bytes), the gradient
  // sums the optimizer reads (accumulator_bytes) and what is made before
  // the steps for all of them (kept_bytes). The planner extrapolates a
  // stage's memory to other schedules and layer counts from these
  // (sim::planParallelism).
  {
    std::map<std::string, std::pair<int64_t, int64_t>> stepSpan;
    int64_t lastStepEnd = -1;
    std::string firstForward;
    for (auto [index, node] : llvm::enumerate(nodes)) {
      if (node.kind != Node::Marker)
        continue;
      auto marker = cast<PipelineMarkerOp>(node.comm);
      std::string step = marker.getStep().str();
      auto &span = stepSpan.try_emplace(step, int64_t(index), int64_t(index))
                       .first->second;
      if (!marker.getBegin())
        span.second = index;
      lastStepEnd = std::max<int64_t>(lastStepEnd, index);
      if (firstForward.empty() && !step.empty() && step[0] == 'F')
        firstForward = step;
    }
    std::string microbatch =
        firstForward.substr(std::min<size_t>(1, firstForward.size()));
    auto backward = stepSpan.find("B" + microbatch);
    if (!firstForward.empty() && backward != stepSpan.end()) {
      auto [fBegin, fEnd] = stepSpan[firstForward];
      int64_t bBegin = backward->second.first;
      // The weight gradients' sums over microbatches: what the first
      // microbatch's weight-gradient step (W with B split, else B) leaves
      // for the last one, which adds its own (the optimizer may run inside
      // that last step, so what outlives the steps would miss them).
      char weightStep = stepSpan.count("W" + microbatch) ? 'W' : 'B';
      auto [gBegin, gEnd] = stepSpan[weightStep + microbatch];
      int64_t lastGradientBegin = gBegin;
      for (const auto &[step, span] : stepSpan)
        if (!step.empty() && step[0] == weightStep)
          lastGradientBegin = std::max(lastGradientBegin, span.first);
      // With one microbatch nothing is summed: what outlives the steps.
      bool summed = lastGradientBegin > gBegin;
      uint64_t activations = 0, accumulators = 0, kept = 0;
      for (const Buffer &b : buffers) {
        if (isa<BlockArgument>(b.value))
          continue;
        const BufferInterval &iv = b.interval;
        bool accumulator =
            summed ? iv.firstUse > gBegin && iv.firstUse < gEnd &&
                         iv.lastUse > lastGradientBegin
                   : iv.firstUse > fBegin && iv.firstUse < lastStepEnd &&
                         iv.lastUse > lastStepEnd;
        // Made before the first forward ends and read by the last
        // gradient step: made once for every microbatch (the parameters'
        // low-precision copies; under ZeRO-1 and -2 they are made from the
        // all-gathered parameters inside the first forward step), not a
        // microbatch's activation.
        if (summed && iv.firstUse < fEnd && iv.lastUse > lastGradientBegin)
          kept += iv.size;
        else if (iv.firstUse > fBegin && iv.firstUse < fEnd &&
                 iv.lastUse > bBegin)
          activations += iv.size;
        else if (accumulator)
          accumulators += iv.size;
      }
      p.metadata.push_back({"activation_bytes", std::to_string(activations)});
      p.metadata.push_back(
          {"accumulator_bytes", std::to_string(accumulators)});
      // Made before the first step for all of them (low-precision copies of
      // the parameters, kept for the step).
      p.metadata.push_back({"kept_bytes", std::to_string(kept)});
    }
  }
  if (options.report) {
    SmallVector<Value> values;
    for (const Buffer &b : buffers)
      values.push_back(b.value);
    fillReport(result, values, intervals, memory.arenaBytes);
  }
  if (options.reportMemory) {
    llvm::raw_string_ostream os(result.memoryReport);
    for (auto [index, node] : llvm::enumerate(nodes)) {
      os << "node " << index << ": ";
      switch (node.kind) {
      case Node::Kernel: os << "kernel " << node.name; break;
      case Node::Gemm: os << "gemm"; break;
      case Node::Attention: os << node.name; break;
      case Node::Collective:
        os << node.comm->getName().stripDialect();
        if (eventOf.count(node.comm))
          os << " async event " << eventOf.lookup(node.comm);
        break;
      case Node::Done:
        os << "done event "
           << eventOf.lookup(node.comm->getOperand(0).getDefiningOp());
        break;
      case Node::Marker:
        os << "marker " << cast<PipelineMarkerOp>(node.comm).getStep();
        break;
      }
      auto list = [&](StringRef label, ArrayRef<Value> values) {
        os << " " << label << " [";
        llvm::interleaveComma(values, os, [&](Value v) {
          auto it = bufferOf.find(root(v));
          if (it == bufferOf.end())
            os << "-";
          else
            os << it->second;
        });
        os << "]";
      };
      list("in", node.inputs);
      list("out", node.outputs);
      os << "\n";
    }
    for (auto [i, b] : llvm::enumerate(buffers)) {
      os << "buffer " << i << ": offset " << memory.offsets[i] << " bytes "
         << b.interval.size << " live [" << b.interval.firstUse << ", "
         << b.interval.lastUse << "]: ";
      if (auto arg = dyn_cast<BlockArgument>(b.value))
        os << "argument " << arg.getArgNumber();
      else
        os << b.value.getDefiningOp()->getName().stripDialect() << " node "
           << nodeOf(b.value);
      bool final = false;
      ::cleave::MemoryClass cls = classify(b.value, final);
      os << " (" << ::cleave::getMemoryClassName(cls)
         << (cls == ::cleave::MemoryClass::Gradients && !final ? ", partial"
                                                              : "")
         << ")\n";
    }
  }
  p.arenaBytes = memory.arenaBytes;
  auto offsetOf = [&](Value v) { return memory.offsets[bufferOf.lookup(root(v))]; };

  auto tensorInfo = [&](Value v, StringRef name,
                        plan::TensorInfo &info) -> LogicalResult {
    auto type = cast<RankedTensorType>(v.getType());
    FailureOr<plan::DType> dtype = toDType(type.getElementType());
    if (failed(dtype))
      return mlir::emitError(v.getLoc())
             << "tensor '" << name << "' has element type "
             << type.getElementType() << ", which plans cannot hold";
    info.name = name.str();
    info.dtype = *dtype;
    info.shape.assign(type.getShape().begin(), type.getShape().end());
    info.offset = offsetOf(v);
    return success();
  };
  // `cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>` on an
  // argument or result: per dimension, the mesh axes it is split over.
  auto sharding = [&](Attribute attr, plan::TensorInfo &info,
                      Location loc) -> LogicalResult {
    if (!attr)
      return success();
    auto typed = dyn_cast<TensorShardingAttr>(attr);
    if (!typed)
      return mlir::emitError(loc)
             << "tensor '" << info.name << "': cleave.sharding must be a "
             << "#cleave.sharding<@mesh, [...]> attribute, not " << attr;
    if (!mesh)
      return mlir::emitError(loc) << "tensor '" << info.name
                                  << "' has a cleave.sharding but the module "
                                     "has no cleave.mesh";
    if (typed.getMesh().getValue() != mesh.getSymName())
      return mlir::emitError(loc)
             << "tensor '" << info.name << "': cleave.sharding names mesh "
             << typed.getMesh() << ", but the module's mesh is @"
             << mesh.getSymName();
    if (typed.getRank() != (int64_t)info.shape.size())
      return mlir::emitError(loc)
             << "tensor '" << info.name << "': cleave.sharding lists "
             << typed.getRank() << " dimensions for rank "
             << info.shape.size();
    for (DimShardingAttr dim : typed.getDims()) {
      std::vector<uint32_t> indices;
      for (StringAttr name : dim.getAxes()) {
        int64_t axis = mesh.getAxisIndex(name.getValue());
        if (axis < 0)
          return mlir::emitError(loc)
                 << "tensor '" << info.name << "': cleave.sharding names "
                 << name << ", which is not an axis of mesh @"
                 << mesh.getSymName();
        for (const std::vector<uint32_t> &other : info.sharding)
          if (llvm::is_contained(other, axis) ||
              llvm::is_contained(indices, axis))
            return mlir::emitError(loc)
                   << "tensor '" << info.name << "': mesh axis " << name
                   << " shards more than one dimension";
        indices.push_back(static_cast<uint32_t>(axis));
      }
      info.sharding.push_back(std::move(indices));
    }
    return success();
  };

  // State arguments: a state tensor each, with the parameter's initial value
  // as a constant at the same offset, or zeroed by an init command.
  std::vector<std::pair<int64_t, plan::Command>> stateCopies;
  llvm::json::Array untied;
  auto addState = [&](plan::Plan &p, unsigned i,
                      plan::TensorInfo info) -> LogicalResult {
    StringRef kind = main.getArgAttrOfType<StringAttr>(i, "cleave.state").getValue();
    auto parameter = main.getArgAttrOfType<StringAttr>(i, "cleave.parameter");
    auto slot = main.getArgAttrOfType<StringAttr>(i, "cleave.slot");
    plan::StateTensor state;
    state.info = info;
    state.parameter = parameter ? parameter.getValue().str() : info.name;
    state.slot = slot ? slot.getValue().str() : "";
    // A parameter --untie made, in the `untied` metadata for --export-onnx:
    // [{"name": copy, "from": source initializer, "node": ONNX node}, ...].
    if (auto from = main.getArgAttrOfType<StringAttr>(i, "cleave.untied_from")) {
      auto node = main.getArgAttrOfType<StringAttr>(i, "cleave.untied_node");
      untied.push_back(llvm::json::Object{
          {"name", info.name},
          {"from", from.getValue()},
          {"node", node ? node.getValue() : StringRef()}});
    }
    // `cleave.varying = ["dp"]`: the state differs from rank to rank over
    // those axes although its sharding does not split it (local SGD's
    // replicas, a delayed reduction's local gradients).
    if (auto varying = main.getArgAttrOfType<ArrayAttr>(i, "cleave.varying")) {
      for (Attribute a : varying) {
        auto name = dyn_cast<StringAttr>(a);
        auto it = name ? llvm::find(p.mesh.axisNames, name.getValue().str())
                       : p.mesh.axisNames.end();
        if (it == p.mesh.axisNames.end())
          return main.emitError()
                 << "state '" << info.name << "': cleave.varying names "
                 << a << ", which is not an axis of the module's mesh";
        state.varyingAxes.push_back(
            static_cast<uint32_t>(it - p.mesh.axisNames.begin()));
      }
    }
    auto initial =
        main.getArgAttrOfType<ElementsAttr>(i, "cleave.initial_value");
    if (kind == "parameter" || kind == "buffer" ||
        (kind == "optimizer_state" && initial)) {
      state.kind = kind == "parameter" ? plan::StateKind::Parameter
                   : kind == "buffer"  ? plan::StateKind::Buffer
                                       : plan::StateKind::OptimizerState;
      auto init = initial;
      if (!init)
        return main.emitError() << "parameter '" << info.name
                                << "' has no cleave.initial_value";
      // A sharded parameter's initial value is the global tensor; each
      // rank copies its shard when its executor starts.
      plan::TensorInfo global = info;
      global.shape = plan::globalShape(info, p.mesh);
      auto ref = main.getArgAttrOfType<DictionaryAttr>(i, kExternalDataAttrName);
      // Drawn by the runtime (initParametersRandomly): no bytes.
      if (options.drawWeightMatrices &&
          state.kind == plan::StateKind::Parameter &&
          info.dtype == plan::DType::F32 && global.shape.size() >= 2) {
        p.states.push_back(std::move(state));
        return success();
      }
      if (auto size = ref ? ref.getAs<IntegerAttr>("file_size") : nullptr;
          size && size.getInt() < 0) {
        auto file = ref.getAs<StringAttr>("file");
        return main.emitError()
               << "'" << info.name << "' has no values: its external data "
               << "file '" << (file ? file.getValue() : StringRef("?"))
               << "' is absent (a model declared without its weights), and "
               << (options.drawWeightMatrices
                       ? "--init-parameters draws only trainable f32 weight "
                         "matrices"
                       : "only --init-parameters can start a model without "
                         "its weights");
      }
      // Still the bytes of the model's external data: referenced, and each
      // rank reads only its shard of them.
      if (ref && ref.get("value") == init && options.referenceExternalData) {
        auto file = ref.getAs<StringAttr>("file");
        auto offset = ref.getAs<IntegerAttr>("offset");
        auto fileSize = ref.getAs<IntegerAttr>("file_size");
        if (file && offset && fileSize) {
          plan::Constant c;
          c.info = info;
          c.file = file.getValue().str();
          c.fileOffset = offset.getInt();
          c.fileSize = fileSize.getInt();
          p.constants.push_back(std::move(c));
          p.states.push_back(std::move(state));
          return success();
        }
      }
      FailureOr<std::vector<uint8_t>> bytes = constantBytes(init);
      if (failed(bytes) || bytes->size() != global.byteSize())
        return main.emitError() << "cannot serialize the initial value of '"
                                << info.name << "'";
      plan::Constant c;
      c.info = info;
      c.data = std::move(*bytes);
      p.constants.push_back(std::move(c));
    } else if (kind == "optimizer_state") {
      state.kind = plan::StateKind::OptimizerState;
      p.initCommands.push_back(plan::makeCommand(
          plan::CommandKind::Fill, {static_cast<int64_t>(info.byteSize()), 0},
          {info.offset}));
    } else {
      return main.emitError() << "argument " << i << " has unknown state kind '"
                              << kind << "'";
    }
    p.states.push_back(std::move(state));
    return success();
  };

  // Tables: inputs, state tensors, outputs.
  plan::TrainingInfo &training = p.training;
  training = options.training;
  for (BlockArgument arg : main.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto name = main.getArgAttrOfType<StringAttr>(i, "cleave.name");
    std::string fallback = "input" + std::to_string(i);
    plan::TensorInfo info;
    if (failed(tensorInfo(arg, name ? name.getValue() : StringRef(fallback),
                          info)) ||
        failed(sharding(main.getArgAttr(i, kShardingAttrName),
                        info, arg.getLoc())))
      return failure();
    if (auto state = main.getArgAttrOfType<StringAttr>(i, "cleave.state")) {
      if (failed(addState(p, i, std::move(info))))
        return failure();
      continue;
    }
    // The values an integer input may hold (cleave.valid_range: [lo, hi)
    // and an extra allowed value), for the runtime to check its data.
    if (auto range = main.getArgAttrOfType<DenseI64ArrayAttr>(
            i, "cleave.valid_range"))
      p.metadata.push_back(
          {std::string(plan::kValidRangePrefix) + info.name,
           llvm::join(llvm::map_range(range.asArrayRef(),
                                      [](int64_t v) { return std::to_string(v); }),
                      ",")});
    auto role = main.getArgAttrOfType<StringAttr>(i, "cleave.role");
    int64_t index = p.inputs.size();
    if (role && role.getValue() == "lr")
      training.lrInput = index;
    else if (role && role.getValue() == "step")
      training.stepInput = index;
    else if (role && role.getValue() == "data")
      training.dataInputs.push_back(index);
    p.inputs.push_back(std::move(info));
  }
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (auto updates = main.getResultAttrOfType<IntegerAttr>(i, "cleave.updates")) {
      int64_t target = updates.getInt();
      if (target < 0 || target >= main.getNumArguments() ||
          !main.getArgAttr(target, "cleave.state"))
        return main.emitError() << "result " << i
                                << " updates argument " << target
                                << ", which is not a state argument";
      uint64_t src = offsetOf(v), dst = offsetOf(main.getArgument(target));
      if (src != dst)
        stateCopies.push_back(
            {copyTime.count(i) ? copyTime.lookup(i) : end,
             plan::makeCommand(plan::CommandKind::Copy,
                               {static_cast<int64_t>(byteSize(
                                   cast<RankedTensorType>(v.getType())))},
                               {src, dst})});
      continue;
    }
    auto name = main.getResultAttrOfType<StringAttr>(i, "cleave.name");
    std::string fallback = "output" + std::to_string(i);
    plan::TensorInfo info;
    if (failed(tensorInfo(v, name ? name.getValue() : StringRef(fallback), info)) ||
        failed(sharding(main.getResultAttr(i, kShardingAttrName),
                        info, main.getLoc())))
      return failure();
    auto role = main.getResultAttrOfType<StringAttr>(i, "cleave.role");
    if (role && role.getValue() == "loss")
      training.lossOutput = p.outputs.size();
    else if (role && role.getValue() == "grad_norm")
      training.gradNormOutput = p.outputs.size();
    p.outputs.push_back(std::move(info));
  }
  training.enabled = !p.states.empty();
  if (training.enabled && !training.dataInputs.empty()) {
    const plan::TensorInfo &first = p.inputs[training.dataInputs.front()];
    training.batchSize = first.shape.empty() ? 1 : first.shape[0];
    training.sequenceLength = first.shape.size() >= 2 ? first.shape[1] : 0;
  }
  for (const Buffer &b : buffers) {
    auto cst = b.value.getDefiningOp<ConstantOp>();
    if (!cst)
      continue;
    auto name = cst->getAttrOfType<StringAttr>("cleave.initializer");
    if (auto ref = cst->getAttrOfType<DictionaryAttr>(kExternalDataAttrName))
      if (auto size = ref.getAs<IntegerAttr>("file_size");
          size && size.getInt() < 0)
        return cst.emitError()
               << "'" << (name ? name.getValue() : StringRef("constant"))
               << "' has no values: its external data file is absent (a "
                  "model declared without its weights), and the program "
                  "reads it as a constant (only trainable weight matrices "
                  "can be drawn by --init-parameters)";
    plan::Constant c;
    if (failed(tensorInfo(b.value, name ? name.getValue() : "constant", c.info)))
      return failure();
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(cst.getValue());
    if (failed(bytes))
      return cst.emitError() << "cannot serialize constant data";
    c.data = std::move(*bytes);
    p.constants.push_back(std::move(c));
  }

  // Commands, with each state copy right after the command it waits for.
  llvm::stable_sort(stateCopies, [](const auto &a, const auto &b) {
    return a.first < b.first;
  });
  auto nextCopy = stateCopies.begin();
  llvm::StringMap<size_t> kernelIndex, markerIndex;
  std::vector<std::string> markerNames;
  // Each Kernel command's flops and the bytes of its arguments (what it
  // reads and writes in the arena), for cost models (kKernelCostsKey).
  std::vector<std::string> kernelCosts;
  for (auto [index, node] : llvm::enumerate(nodes)) {
    if (index > 0)
      for (; nextCopy != stateCopies.end() &&
             nextCopy->first < static_cast<int64_t>(index);
           ++nextCopy)
        p.commands.push_back(std::move(nextCopy->second));
    plan::Command cmd;
    if (node.kind == Node::Collective) {
      if (failed(lowerCollective(node, cmd)))
        return failure();
      for (Value v : llvm::concat<Value>(node.inputs, node.outputs))
        cmd.buffers.push_back(offsetOf(v));
    } else if (node.kind == Node::Done) {
      cmd.kind = plan::CommandKind::Wait;
      cmd.event = eventOf.lookup(node.comm->getOperand(0).getDefiningOp());
    } else if (node.kind == Node::Marker) {
      // Steps are numbered in the order they first appear.
      auto marker = cast<PipelineMarkerOp>(node.comm);
      auto [it, inserted] =
          markerIndex.try_emplace(marker.getStep(), markerIndex.size());
      if (inserted)
        markerNames.push_back(marker.getStep().str());
      cmd.kind = plan::CommandKind::Marker;
      cmd.params = {static_cast<int64_t>(it->second),
                    marker.getBegin() ? 0 : 1};
    } else if (node.kind == Node::Kernel) {
      cmd.kind = plan::CommandKind::Kernel;
      auto [it, inserted] =
          kernelIndex.try_emplace(node.name, p.kernelNames.size());
      if (inserted)
        p.kernelNames.push_back(node.name);
      cmd.params = {static_cast<int64_t>(it->second)};
      for (Value v : llvm::concat<Value>(node.inputs, node.outputs))
        cmd.buffers.push_back(offsetOf(v));
      int64_t kernelFlops = 0, kernelSerialAdds = 0, kernelPermuted = 0,
              kernelTranscendentals = 0;
      uint64_t kernelBytes = 0;
      for (Operation *op : node.ops) {
        if (auto cost = dyn_cast<CostOpInterface>(op))
          kernelFlops += cost.getFlops();
        kernelSerialAdds += serialAdds(op);
        kernelPermuted += permutedBytes(op);
        kernelTranscendentals += transcendentals(op);
      }
      // An input the kernel only slices is read as far as its slices go
      // (an all-reduce bucket unpacked into its members, say).
      llvm::SmallPtrSet<Operation *, 16> inKernel(node.ops.begin(),
                                                  node.ops.end());
      for (Value v : node.inputs) {
        uint64_t whole = byteSize(cast<RankedTensorType>(v.getType())),
                 sliced = 0;
        for (Operation *user : v.getUsers()) {
          if (!inKernel.contains(user))
            continue;
          auto slice = dyn_cast<SliceOp>(user);
          if (!slice) {
            sliced = whole;
            break;
          }
          sliced += byteSize(cast<RankedTensorType>(slice.getType()));
        }
        kernelBytes += sliced ? std::min(whole, sliced) : whole;
      }
      for (Value v : node.outputs)
        kernelBytes += byteSize(cast<RankedTensorType>(v.getType()));
      kernelCosts.push_back(llvm::formatv(
          "{0}:{1}:{2}:{3}:{4}", kernelFlops, kernelBytes, kernelSerialAdds,
          kernelPermuted, kernelTranscendentals));
    } else if (node.kind == Node::Attention) {
      cmd = attentionCommand(node.ops.front());
      for (Value v : llvm::concat<Value>(node.inputs, node.outputs))
        cmd.buffers.push_back(offsetOf(v));
    } else {
      ::cleave::GemmShape g = *::cleave::getGemmShape(node.contract);
      // C's type: the contraction's, or the operands' when the command
      // rounds its result (bf16/f16 out, f32 accumulation).
      Type outType =
          cast<RankedTensorType>(node.result.getType()).getElementType();
      Type inType = node.contract.getLhs().getType().getElementType();
      cmd.kind = plan::CommandKind::Gemm;
      cmd.params.assign(plan::kGemmNumParams, 0);
      cmd.params[plan::kGemmDType] = static_cast<int64_t>(*toDType(inType));
      // Mixed or low precision only: the output dtype as a trailing
      // parameter, so plans of f32/f64 GEMMs are unchanged.
      if (inType != outType || outType.isBF16() || outType.isF16())
        cmd.params.push_back(static_cast<int64_t>(*toDType(outType)));
      cmd.params[plan::kGemmTransA] = g.transA;
      cmd.params[plan::kGemmTransB] = g.transB;
      cmd.params[plan::kGemmM] = g.m;
      cmd.params[plan::kGemmN] = g.n;
      cmd.params[plan::kGemmK] = g.k;
      cmd.params[plan::kGemmBatch] = g.batch;
      cmd.params[plan::kGemmLda] = g.transA ? g.m : g.k;
      cmd.params[plan::kGemmLdb] = g.transB ? g.k : g.n;
      cmd.params[plan::kGemmLdc] = g.n;
      cmd.params[plan::kGemmStrideA] = g.m * g.k;
      cmd.params[plan::kGemmStrideB] = g.k * g.n;
      cmd.params[plan::kGemmStrideC] = g.m * g.n;
      cmd.params[plan::kGemmAlphaBits] = plan::doubleToBits(1.0);
      cmd.params[plan::kGemmBetaBits] = plan::doubleToBits(0.0);
      cmd.buffers = {offsetOf(node.contract.getLhs()),
                     offsetOf(node.contract.getRhs()), offsetOf(node.result)};
      if (node.epilogue != plan::GemmEpilogue::None) {
        if (cmd.params.size() == plan::kGemmNumParams)
          cmd.params.push_back(static_cast<int64_t>(*toDType(outType)));
        cmd.params.push_back(static_cast<int64_t>(node.epilogue));
        int64_t biasDType = 0;
        if (node.bias) {
          biasDType = static_cast<int64_t>(*toDType(outType));
          cmd.buffers.push_back(offsetOf(node.bias));
        }
        cmd.params.push_back(biasDType);
      }
    }
    p.commands.push_back(std::move(cmd));
  }
  for (; nextCopy != stateCopies.end(); ++nextCopy)
    p.commands.push_back(std::move(nextCopy->second));

  // Metadata: what the plan costs.
  int64_t flops = 0, constantBytes = 0;
  main.walk([&](CostOpInterface op) { flops += op.getFlops(); });
  for (const plan::Constant &c : p.constants)
    constantBytes += c.data.size();
  size_t numGemms = llvm::count_if(nodes, [](const Node &n) { return n.kind == Node::Gemm; });
  size_t numKernels = llvm::count_if(nodes, [](const Node &n) { return n.kind == Node::Kernel; });
  int64_t commBytes = 0;
  for (const Node &n : nodes)
    if (n.kind == Node::Collective) {
      auto op = cast<CollectiveOpInterface>(n.comm);
      commBytes += getCollectiveCost(op, *getGroupSize(op),
                                     CollectiveAlgorithm::Ring)
                       .bytesSent;
    }
  // Before anything recorded while the inputs were read (valid ranges).
  p.metadata.insert(p.metadata.begin(),
               {{"producer", "cleave-compile"},
                {"model", options.modelName},
                {"source_model", options.sourceModel},
                {"flops", std::to_string(flops)},
                {"kernels", std::to_string(numKernels)},
                {"unique_kernels", std::to_string(p.kernelNames.size())},
                {"gemms", std::to_string(numGemms)},
                {"constant_bytes", std::to_string(constantBytes)},
                {"unplanned_bytes", std::to_string(memory.naiveBytes)}});
  if (numCollectives) {
    p.metadata.push_back({"collectives", std::to_string(numCollectives)});
    p.metadata.push_back({"comm_bytes_per_rank", std::to_string(commBytes)});
  }
  if (!untied.empty())
    p.metadata.push_back(
        {"untied", llvm::formatv("{0}", llvm::json::Value(std::move(untied)))});
  if (!markerNames.empty())
    p.metadata.push_back({plan::kPipelineStepsKey, llvm::join(markerNames, ",")});
  if (!kernelCosts.empty())
    p.metadata.push_back({"kernel_costs", llvm::join(kernelCosts, ",")});
  return success();
}

/// Reads (and removes, so that identical kernels stay identical) the
/// cleave.gradient_of tags the train step put on each parameter's gradient,
/// follows each gradient through what reduces, reshapes, converts, packs
/// and unpacks it, and marks the forward pass (the ops the loss depends
/// on), for the report.
/// The change of float width a conversion makes (to bits minus from
/// bits), or 0 for anything else.
static int floatWidening(Operation *op) {
  auto convert = dyn_cast_or_null<ConvertOp>(op);
  if (!convert)
    return 0;
  auto to = dyn_cast<FloatType>(getElementTypeOrSelf(convert.getType()));
  auto from = dyn_cast<FloatType>(
      getElementTypeOrSelf(convert.getOperand().getType()));
  return to && from ? int(to.getWidth()) - int(from.getWidth()) : 0;
}
/// A conversion to a narrower float type (f32 -> bf16/f16).
static bool isLoweringConvert(Operation *op) { return floatWidening(op) < 0; }

void PlanBuilder::takeGradientTags() {
  Block &body = main.getBody().front();
  for (Operation &op : body) {
    // A low-precision parameter copy gathered once and kept (ZeRO-1/2).
    if (op.hasAttr(kReshardOnceAttr)) {
      op.removeAttr(kReshardOnceAttr);
      keptCopies.insert(&op);
    }
    if (auto of = op.getAttrOfType<StringAttr>(::cleave::kGradientOfAttr)) {
      op.removeAttr(::cleave::kGradientOfAttr);
      for (Value r : op.getResults())
        gradientOf[r].push_back(of);
      // The tag sits on the last op autodiff built. The reductions and
      // layout changes before it (all_reduce, transpose, ...) hold the same
      // gradient, an add sums contributions to it (a tied weight), and the
      // values they start from are gradients too.
      SmallVector<Operation *> up = {&op};
      while (!up.empty()) {
        Operation *def = up.pop_back_val();
        auto add = dyn_cast<BinaryOp>(def);
        if (!isa<CollectiveOpInterface, DoneOp, ReshapeOp, ConvertOp,
                 TransposeOp>(def) &&
            !(add && add.getKind() == BinaryKind::add))
          continue;
        for (Value in : add ? def->getOperands() : def->getOperands().take_front()) {
          if (!in.hasOneUse() || gradientOf.count(in) || !in.getDefiningOp())
            continue;
          gradientOf[in].push_back(of);
          up.push_back(in.getDefiningOp());
        }
      }
      continue;
    }
    if (!(options.report || options.reportMemory) || op.getNumOperands() == 0)
      continue;
    auto of = [&](Value v) { return gradientOf.lookup(v); };
    SmallVector<StringAttr, 1> names;
    // A low-precision gradient widened back to f32 is the optimizer's
    // transient view of it, not another gradient (--low-precision-gradients).
    if (isa<CollectiveOpInterface, DoneOp, ReshapeOp, ConvertOp, SliceOp>(op) &&
        floatWidening(&op) <= 0) {
      names = of(op.getOperand(0));
    } else if (isa<ConcatOp>(op) &&
               llvm::all_of(op.getOperands(), [&](Value v) {
                 return gradientOf.count(v) != 0;
               })) {
      for (Value v : op.getOperands())
        llvm::append_range(names, of(v));
    }
    if (!names.empty())
      for (Value r : op.getResults())
        gradientOf[r] = names;
  }
  if (!(options.report || options.reportMemory))
    return;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Operation *> work;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto role = main.getResultAttrOfType<StringAttr>(i, "cleave.role");
    if (role && role.getValue() == "loss")
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
}

int64_t PlanBuilder::nodeFlops(Node &node) {
  int64_t flops = 0;
  if (node.kind == Node::Gemm)
    flops = cast<CostOpInterface>(node.contract.getOperation()).getFlops();
  for (Operation *op : node.ops)
    if (auto cost = dyn_cast<CostOpInterface>(op))
      flops += cost.getFlops();
  return flops;
}

/// The values that share `root`'s buffer: itself, and the reshapes and
/// waits that read it, transitively.
static SmallVector<Value> aliasesOf(Value root) {
  SmallVector<Value> aliases = {root};
  for (size_t i = 0; i < aliases.size(); ++i)
    for (Operation *user : aliases[i].getUsers())
      if (isa<ReshapeOp, DoneOp>(user))
        llvm::append_range(aliases, user->getResults());
  return aliases;
}

/// What a buffer holds (see ::cleave::MemoryClass).
::cleave::MemoryClass PlanBuilder::classify(Value root,
                                            bool &finalGradient) {
  using ::cleave::MemoryClass;
  finalGradient = false;
  if (auto arg = dyn_cast<BlockArgument>(root)) {
    auto state =
        main.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "cleave.state");
    if (!state)
      return MemoryClass::Inputs;
    if (state.getValue() == "parameter")
      return llvm::any_of(arg.getUsers(), isLoweringConvert)
                 ? MemoryClass::MasterParameters
                 : MemoryClass::Parameters;
    if (state.getValue() == "optimizer_state")
      return MemoryClass::OptimizerStates;
    return MemoryClass::StateBuffers;
  }
  if (root.getDefiningOp<ConstantOp>())
    return MemoryClass::Constants;
  // Low-precision parameter copies: a master's conversion (at ZeRO-1/2 only
  // the shard on its way to the gather that keeps the copy for the step).
  Operation *def = root.getDefiningOp();
  auto isCopy = [&](Operation *op) {
    return op && isLoweringConvert(op) &&
           isa<BlockArgument>(op->getOperand(0)) &&
           main.getArgAttrOfType<StringAttr>(
                   cast<BlockArgument>(op->getOperand(0)).getArgNumber(),
                   "cleave.state") == StringAttr::get(main.getContext(),
                                                      "parameter");
  };
  if (isCopy(def))
    return keptCopies.contains(def) ? MemoryClass::Temporaries
                                    : MemoryClass::Parameters;
  if (isa_and_nonnull<DoneOp>(def))
    def = def->getOperand(0).getDefiningOp();
  if (def && isa<CollectiveOpInterface>(def) && def->getNumOperands() &&
      keptCopies.contains(def->getOperand(0).getDefiningOp()))
    return MemoryClass::Parameters;
  // The readers of the buffer: users, through the reshapes and waits that
  // share it.
  SmallVector<Operation *> readers;
  bool gradient = false;
  for (Value v : aliasesOf(root)) {
    gradient |= gradientOf.count(v) != 0;
    for (Operation *user : v.getUsers())
      if (!isa<ReshapeOp, DoneOp>(user))
        readers.push_back(user);
  }
  if (gradient) {
    // Final unless it is reduced, converted, packed or sliced further
    // into another buffer.
    // (Through values that a kernel computes without a buffer of their
    // own: a transpose fused with a rounding to bf16.)
    std::function<bool(Value, int)> reachesBuffered = [&](Value r, int depth) {
      if (gradientOf.count(r) == 0)
        return false;
      if (buffered.contains(r))
        return true;
      return depth < 8 && llvm::any_of(r.getUsers(), [&](Operation *user) {
               return llvm::any_of(user->getResults(), [&](Value next) {
                 return reachesBuffered(next, depth + 1);
               });
             });
    };
    finalGradient = llvm::none_of(readers, [&](Operation *user) {
      return llvm::any_of(user->getResults(),
                          [&](Value r) { return reachesBuffered(r, 0); });
    });
    return MemoryClass::Gradients;
  }
  if (forward.contains(root.getDefiningOp()) &&
      llvm::any_of(readers, [&](Operation *user) {
        return !forward.contains(user) && !isa<func::ReturnOp>(user);
      }))
    return MemoryClass::Activations;
  return MemoryClass::Temporaries;
}

void PlanBuilder::fillReport(BuiltPlan &result, ArrayRef<Value> bufferValues,
                             ArrayRef<BufferInterval> intervals,
                             uint64_t arenaBytes) {
  ::cleave::StepReport &report = result.stepReport;
  std::vector<::cleave::ReportBuffer> buffers;
  llvm::SmallDenseSet<StringAttr, 64> found;
  for (auto [v, iv] : llvm::zip(bufferValues, intervals)) {
    bool final = false;
    ::cleave::MemoryClass cls = classify(v, final);
    unsigned elementBytes = 0;
    if (auto type = dyn_cast<RankedTensorType>(v.getType());
        type && type.getElementType().isIntOrFloat())
      elementBytes = type.getElementType().getIntOrFloatBitWidth() / 8;
    buffers.push_back(
        {cls, iv.size, iv.firstUse, iv.lastUse, final, elementBytes});
    if (final)
      for (Value alias : aliasesOf(v))
        for (StringAttr name : gradientOf.lookup(alias))
          found.insert(name);
  }
  ::cleave::summarizeBuffers(buffers, report);
  report.arenaBytes = arenaBytes;
  report.gradientsHeld = found.size();
  llvm::SmallDenseSet<StringAttr, 64> traced;
  for (const auto &entry : gradientOf)
    traced.insert(entry.second.begin(), entry.second.end());
  report.gradientsTraced = traced.size();
  for (const auto &entry : gradientOf)
    if (auto type = dyn_cast<RankedTensorType>(entry.first.getType());
        type && type.getElementType().isIntOrFloat() &&
        type.getElementType().getIntOrFloatBitWidth() == 16)
      report.lowPrecisionGradients = true;
  if (report.peakNode >= 0 &&
      report.peakNode < static_cast<int64_t>(nodes.size())) {
    Node &node = nodes[report.peakNode];
    Operation *op = node.kind == Node::Gemm ? node.contract.getOperation()
                    : node.comm            ? node.comm
                                           : node.ops.front();
    report.peakWhere = node.name;
    if (std::string where = sourceOf(op); !where.empty())
      report.peakWhere += ": " + where;
  } else if (report.peakNode >= 0) {
    report.peakWhere = "the state copies after the last command";
  }
  for (BlockArgument arg : main.getArguments()) {
    auto state =
        main.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "cleave.state");
    if (!state || state.getValue() != "parameter")
      continue;
    ++report.parameterTensors;
    auto type = cast<RankedTensorType>(arg.getType());
    int64_t elements = type.getNumElements();
    int64_t replica = elements;
    if (auto sharding = getSharding(arg); sharding && mesh)
      for (DimShardingAttr dim : sharding.getDims())
        for (StringAttr axis : dim.getAxes()) {
          int64_t size = getAxesSize(mesh, axis);
          elements *= size;
          replica *= axis.getValue() == "dp" ? size : 1;
        }
    report.parameterElements += elements;
    report.replicaParameterElements += replica;
    if (llvm::any_of(arg.getUsers(), isLoweringConvert))
      report.replicaLowPrecisionElements += replica;
  }
  if (!result.plan.mesh.empty())
    report.mesh = result.plan.mesh.str();
  DenseMap<Operation *, int64_t> doneNode;
  for (auto [index, node] : llvm::enumerate(nodes))
    if (node.kind == Node::Done)
      doneNode[node.comm->getOperand(0).getDefiningOp()] = index;
  for (auto [index, node] : llvm::enumerate(nodes)) {
    if (node.kind != Node::Collective)
      continue;
    auto op = cast<CollectiveOpInterface>(node.comm);
    ::cleave::ReportCollective c;
    c.kind = node.comm->getName().stripDialect().str();
    llvm::raw_string_ostream axes(c.axes);
    for (auto [i, a] : llvm::enumerate(op.getMeshAxesAttr()))
      axes << (i ? "," : "") << cast<StringAttr>(a).getValue();
    c.bytesSent =
        getCollectiveCost(op, *getGroupSize(op), CollectiveAlgorithm::Ring)
            .bytesSent;
    c.async = op.getAsync();
    if (auto it = doneNode.find(node.comm); it != doneNode.end())
      for (int64_t t = index + 1; t < it->second; ++t)
        if (nodes[t].kind == Node::Kernel || nodes[t].kind == Node::Gemm ||
            nodes[t].kind == Node::Attention) {
          ++c.computeCommandsInFlight;
          c.flopsInFlight += nodeFlops(nodes[t]);
        }
    report.collectives.push_back(std::move(c));
  }
}

FailureOr<BuiltPlan> PlanBuilder::run() {
  // A hand-written program may declare anything: the plan holds statically
  // shaped tensors of its element types only.
  auto checkType = [&](Type t, StringRef what, unsigned i) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (!tensor || !tensor.hasStaticShape() ||
        failed(toDType(tensor.getElementType())))
      return main.emitError() << "@main " << what << " " << i << " has type "
                              << t
                              << "; a plan's inputs and outputs are "
                                 "statically shaped tensors of f32, f64, f16, "
                                 "bf16, integers or i1";
    return success();
  };
  for (auto [i, t] : llvm::enumerate(main.getArgumentTypes()))
    if (failed(checkType(t, "argument", i)))
      return failure();
  for (auto [i, t] : llvm::enumerate(main.getResultTypes()))
    if (failed(checkType(t, "result", i)))
      return failure();
  auto module = main->getParentOfType<ModuleOp>();
  for (auto m : module.getOps<MeshOp>()) {
    if (mesh)
      return m.emitOpError() << "is a second mesh; a plan has one mesh (@"
                             << mesh.getSymName() << ")";
    mesh = m;
  }
  takeGradientTags();
  matchEpilogues();
  markRematerializedBroadcasts();
  for (Operation &op : main.getBody().front()) {
    if (isa<func::ReturnOp, ConstantOp, ReshapeOp>(op))
      continue;
    if (auto collective = dyn_cast<CollectiveOpInterface>(op)) {
      if (collective.getAsync())
        eventOf[&op] = eventOf.size();
      addCommNode(Node::Collective, &op);
      continue;
    }
    if (isa<DoneOp>(op)) {
      addCommNode(Node::Done, &op);
      continue;
    }
    if (isa<PipelineMarkerOp>(op)) {
      addCommNode(Node::Marker, &op);
      continue;
    }
    if (op.getDialect() != op.getContext()->getLoadedDialect<CleaveDialect>())
      return op.emitOpError() << "cannot be planned: only cleave ops may "
                                 "appear in @main at this point";
    // An op that produces only empty tensors needs no command: its result
    // is a zero-byte buffer.
    if (llvm::all_of(op.getResultTypes(), [](Type t) {
          return cast<RankedTensorType>(t).getNumElements() == 0;
        }))
      continue;
    // A GEMM with an epilogue becomes its command where the epilogue's last
    // op stands, after everything its bias needs.
    if (auto it = absorbedBy.find(&op); it != absorbedBy.end()) {
      if (epilogueOf.find(it->second)->second.result.getDefiningOp() == &op)
        addGemm(it->second);
      continue;
    }
    if (deadBroadcasts.contains(&op) || rematerialized.contains(&op))
      continue;
    if (isGemm(&op)) {
      if (!epilogueOf.count(&op))
        addGemm(cast<ContractOp>(op));
      continue;
    }
    if (isa<AttentionOp, AttentionGradOp>(op)) {
      // Left whole by the prepare pipeline for the fused command (CPU and CUDA).
      if (!::cleave::hasFusedAttentionKernel(&op))
        return op.emitOpError()
               << "has no fused attention kernel for these element types; "
                  "--cleave-decompose-attention should have spelled it out";
      nodeOfOp[&op] = nodes.size();
      nodes.push_back(Node{Node::Attention, {&op}, {}, plan::GemmEpilogue::None,
                           {}, {}, {}, {}, {}});
      continue;
    }
    addKernelOp(&op);
  }
  BuiltPlan result;
  result.kernels = ModuleOp::create(main.getLoc());
  if (failed(outline(*result.kernels)) || failed(assemble(result)))
    return failure();
  result.plan.numEvents = eventOf.size();
  return result;
}

FailureOr<BuiltPlan>
(::cleave::buildPlan)(ModuleOp module, const PlanBuildOptions &options) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main || main.getBody().getBlocks().size() != 1)
    return module.emitError() << "expected a single-block func.func @main";
  return PlanBuilder(main, options).run();
}
