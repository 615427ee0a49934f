//===- PlanAssembly.cpp - Buffers and commands of a plan ------------------===//
//
// The last step of the plan builder: a buffer per value that crosses a
// command boundary, placed in the arena by planMemory; the memory a
// pipeline stage keeps between its steps; the --print-memory-plan listing;
// a command per node (kernels with their costs, GEMMs, attention,
// collectives, waits and markers) with the state copies between them; and
// the metadata of what the plan costs. The tables of inputs, states and
// outputs are PlanTables.cpp's.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilderInternal.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::plan_builder;
using ::cleave::BufferInterval;
using ::cleave::BuiltPlan;
namespace plan = ::cleave::plan;

//===----------------------------------------------------------------------===//
// Command costs
//===----------------------------------------------------------------------===//

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

/// The Attention or AttentionBackward command of an attention op: the
/// whole forms (cleave.attention, attention_grad) or the block forms of
/// ring attention (attention_block, attention_block_grad; kAttnBlock).
static plan::Command attentionCommand(Operation *op) {
  bool backward = isa<AttentionGradOp, AttentionBlockGradOp>(op);
  bool block = isa<AttentionBlockOp, AttentionBlockGradOp>(op);
  // q, k and v lead every form's operands; dout follows out in the
  // gradients', whose first result is dq.
  Value q = op->getOperand(0), k = op->getOperand(1), v = op->getOperand(2);
  Value bias, dout;
  if (auto fwd = dyn_cast<AttentionOp>(op))
    bias = fwd.getBias();
  if (auto grad = dyn_cast<AttentionGradOp>(op)) {
    bias = grad.getBias();
    dout = grad.getDout();
  }
  if (auto grad = dyn_cast<AttentionBlockGradOp>(op))
    dout = grad.getDout();
  auto shape = [](Value x) {
    return cast<RankedTensorType>(x.getType()).getShape();
  };
  auto dtype = [](Value x) {
    return static_cast<int64_t>(
        *toDType(cast<RankedTensorType>(x.getType()).getElementType()));
  };
  plan::Command cmd;
  cmd.kind = backward ? plan::CommandKind::AttentionBackward
                      : plan::CommandKind::Attention;
  std::vector<int64_t> &p = cmd.params;
  // The whole forms leave kAttnBlock out, as plans did before it.
  p.assign(block ? plan::kAttnNumParams : plan::kAttnBlock, 0);
  p[plan::kAttnDType] = dtype(q);
  p[plan::kAttnDoutDType] = backward ? dtype(dout) : dtype(q);
  p[plan::kAttnGradDType] = backward ? dtype(op->getResult(0)) : dtype(q);
  p[plan::kAttnBatch] = shape(q)[0];
  p[plan::kAttnQHeads] = shape(q)[1];
  p[plan::kAttnKVHeads] = shape(k)[1];
  p[plan::kAttnQLen] = shape(q)[2];
  p[plan::kAttnKVLen] = shape(k)[2];
  p[plan::kAttnHeadDim] = shape(q)[3];
  p[plan::kAttnValueDim] = shape(v)[3];
  p[plan::kAttnCausal] = op->hasAttr("causal");
  // The I64Attr is unsigned: read the offset signed.
  if (auto offset = op->getAttrOfType<IntegerAttr>("causal_offset"))
    p[plan::kAttnCausalOffset] = offset.getValue().getSExtValue();
  p[plan::kAttnScaleBits] = plan::doubleToBits(
      op->getAttrOfType<FloatAttr>("scale").getValueAsDouble());
  if (auto softcap = op->getAttrOfType<FloatAttr>("softcap"))
    p[plan::kAttnSoftcapBits] = plan::doubleToBits(softcap.getValueAsDouble());
  if (bias) {
    p[plan::kAttnBiasDType] = dtype(bias);
    p[plan::kAttnBiasBatch] = shape(bias)[0];
    p[plan::kAttnBiasHeads] = shape(bias)[1];
    p[plan::kAttnBiasQLen] = shape(bias)[2];
  }
  if (block)
    p[plan::kAttnBlock] = 1;
  return cmd;
}

/// The GroupedGemm command of cleave.grouped_matmul (the forward) or
/// cleave.grouped_matmul_weight_grad; buffers {x, w | dy, ids, result}.
/// The ops' element types are the command's (f32, bf16, f16; i32, i64).
static plan::Command groupedGemmCommand(Operation *op) {
  auto type = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  auto forward = dyn_cast<GroupedMatmulOp>(op);
  bool weightGrad = !forward;
  RankedTensorType x = type(op->getOperand(0));
  RankedTensorType weights =
      forward ? type(forward.getW()) : type(op->getResult(0));
  bool transposeW = forward
                        ? forward.getTransposeW()
                        : cast<GroupedMatmulWeightGradOp>(op).getTransposeW();
  plan::Command cmd;
  cmd.kind = plan::CommandKind::GroupedGemm;
  std::vector<int64_t> &p = cmd.params;
  p.assign(plan::kGroupedNumParams, 0);
  p[plan::kGroupedDType] = static_cast<int64_t>(*toDType(x.getElementType()));
  p[plan::kGroupedIdDType] =
      static_cast<int64_t>(*toDType(type(op->getOperand(2)).getElementType()));
  p[plan::kGroupedRows] = x.getDimSize(0);
  p[plan::kGroupedK] = x.getDimSize(1);
  p[plan::kGroupedN] = weights.getDimSize(transposeW ? 1 : 2);
  p[plan::kGroupedExperts] = weights.getDimSize(0);
  p[plan::kGroupedTransposeW] = transposeW;
  p[plan::kGroupedWeightGrad] = weightGrad;
  return cmd;
}

/// A Kernel command's flops, the bytes of its arguments (what it reads and
/// writes in the arena) and its serial adds, permuted bytes and
/// transcendentals, as the kernel_costs metadata lists them.
static std::string kernelCost(const Node &node) {
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
  llvm::SmallPtrSet<Operation *, 16> inKernel(node.ops.begin(), node.ops.end());
  for (Value v : node.inputs) {
    uint64_t whole = byteSize(cast<RankedTensorType>(v.getType())), sliced = 0;
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
  return llvm::formatv("{0}:{1}:{2}:{3}:{4}", kernelFlops, kernelBytes,
                       kernelSerialAdds, kernelPermuted, kernelTranscendentals);
}

/// The Gemm command of a GEMM node, its epilogue included.
static plan::Command gemmCommand(Node &node,
                                 function_ref<uint64_t(Value)> offsetOf) {
  plan::Command cmd;
  ::cleave::GemmShape g = *::cleave::getGemmShape(node.contract);
  // C's type: the contraction's, or the operands' when the command
  // rounds its result (bf16/f16 out, f32 accumulation).
  Type outType = cast<RankedTensorType>(node.result.getType()).getElementType();
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
  return cmd;
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

/// The buffer of `v`'s root value, made on first use, its live range
/// widened to [first, last].
size_t PlanBuilder::bufferFor(Assembly &a, Value v, int64_t first,
                              int64_t last) {
  Value r = root(v);
  auto [it, inserted] = a.bufferOf.try_emplace(r, a.buffers.size());
  if (inserted)
    a.buffers.push_back(
        {r, {byteSize(cast<RankedTensorType>(r.getType())), first, last}});
  BufferInterval &iv = a.buffers[it->second].interval;
  iv.firstUse = std::min(iv.firstUse, first);
  iv.lastUse = std::max(iv.lastUse, last);
  return it->second;
}

/// A buffer per root value that crosses a command boundary, with its live
/// range in node indices, and when each new state value is copied into
/// its state buffer.
void PlanBuilder::collectBuffers(Assembly &a) {
  const int64_t end = a.end;
  // Inputs and constants live for the whole plan, so the plan can run again.
  for (BlockArgument arg : main.getArguments())
    bufferFor(a, arg, 0, end);
  for (auto [index, node] : llvm::enumerate(nodes)) {
    int64_t t = index;
    for (Value v : node.inputs) {
      bool isConstant = root(v).getDefiningOp<ConstantOp>() != nullptr;
      bufferFor(a, v, isConstant ? 0 : t, isConstant ? end : t);
    }
    for (Value v : node.outputs)
      bufferFor(a, v, t, t);
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
      bufferFor(a, v, isConstant ? 0 : begin, isConstant ? end : t);
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
      for (Value v : node.comm->getOperand(0).getDefiningOp()->getOperands())
        lastRead[root(v)] = index;
  }
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    bool isConstant = root(v).getDefiningOp<ConstantOp>() != nullptr;
    std::optional<int64_t> updates = getResultUpdates(main, i);
    if (!updates || isConstant || *updates < 0 ||
        *updates >= main.getNumArguments()) {
      bufferFor(a, v, isConstant ? 0 : end, end);
      continue;
    }
    Value old = main.getArgument(*updates);
    int64_t t = std::max<int64_t>(
        {nodeOf(v), lastRead.lookup(root(old)), lastRead.lookup(root(v)), 0});
    a.copyTime[i] = t;
    bufferFor(a, v, t, t);
  }
}

/// A pipeline stage program: what its first microbatch keeps from its
/// forward step for its backward step (activation_bytes), the gradient
/// sums the optimizer reads (accumulator_bytes) and what is made before
/// the steps for all of them (kept_bytes). The planner extrapolates a
/// stage's memory to other schedules and layer counts from these
/// (sim::planParallelism).
void PlanBuilder::addStageMemory(const Assembly &a, plan::Plan &p) {
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
    for (const Assembly::Buffer &b : a.buffers) {
      if (isa<BlockArgument>(b.value))
        continue;
      const BufferInterval &iv = b.interval;
      bool accumulator = summed ? iv.firstUse > gBegin && iv.firstUse < gEnd &&
                                      iv.lastUse > lastGradientBegin
                                : iv.firstUse > fBegin &&
                                      iv.firstUse < lastStepEnd &&
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
    plan::addMetadata(p, plan::meta::kActivationBytes, activations);
    plan::addMetadata(p, plan::meta::kAccumulatorBytes, accumulators);
    // Made before the first step for all of them (low-precision copies of
    // the parameters, kept for the step).
    plan::addMetadata(p, plan::meta::kKeptBytes, kept);
  }
}

/// The --print-memory-plan listing: a line per node, then per buffer.
void PlanBuilder::writeMemoryReport(const Assembly &a, std::string &out) {
  llvm::raw_string_ostream os(out);
  for (auto [index, node] : llvm::enumerate(nodes)) {
    os << "node " << index << ": ";
    switch (node.kind) {
    case Node::Kernel:
      os << "kernel " << node.name;
      break;
    case Node::Gemm:
      os << "gemm";
      break;
    case Node::Library:
      os << node.name;
      break;
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
        auto it = a.bufferOf.find(root(v));
        if (it == a.bufferOf.end())
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
  for (auto [i, b] : llvm::enumerate(a.buffers)) {
    os << "buffer " << i << ": offset " << a.memory.offsets[i] << " bytes "
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
       << (cls == ::cleave::MemoryClass::Gradients && !final ? ", partial" : "")
       << ")\n";
  }
}

//===----------------------------------------------------------------------===//
// Commands and metadata
//===----------------------------------------------------------------------===//

/// The commands, with each state copy right after the command it waits
/// for.
LogicalResult PlanBuilder::addCommands(Assembly &a, plan::Plan &p) {
  auto offsetOf = [&](Value v) { return this->offsetOf(a, v); };
  llvm::stable_sort(a.stateCopies, [](const auto &x, const auto &y) {
    return x.first < y.first;
  });
  auto nextCopy = a.stateCopies.begin();
  llvm::StringMap<size_t> kernelIndex, markerIndex;
  for (auto [index, node] : llvm::enumerate(nodes)) {
    if (index > 0)
      for (; nextCopy != a.stateCopies.end() &&
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
        a.markerNames.push_back(marker.getStep().str());
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
      a.kernelCosts.push_back(kernelCost(node));
    } else if (node.kind == Node::Library) {
      Operation *op = node.ops.front();
      cmd = isa<GroupedMatmulOp, GroupedMatmulWeightGradOp>(op)
                ? groupedGemmCommand(op)
                : attentionCommand(op);
      for (Value v : llvm::concat<Value>(node.inputs, node.outputs))
        cmd.buffers.push_back(offsetOf(v));
    } else {
      cmd = gemmCommand(node, offsetOf);
    }
    p.commands.push_back(std::move(cmd));
  }
  for (; nextCopy != a.stateCopies.end(); ++nextCopy)
    p.commands.push_back(std::move(nextCopy->second));
  return success();
}

/// The metadata of what the plan costs, and the lists the other steps
/// gathered (untied parameters, pipeline steps, kernel costs).
void PlanBuilder::addCostMetadata(Assembly &a, plan::Plan &p) {
  int64_t flops = 0, constantBytes = 0;
  main.walk([&](CostOpInterface op) { flops += op.getFlops(); });
  for (const plan::Constant &c : p.constants)
    constantBytes += c.data.size();
  size_t numGemms =
      llvm::count_if(nodes, [](const Node &n) { return n.kind == Node::Gemm; });
  size_t numKernels = llvm::count_if(
      nodes, [](const Node &n) { return n.kind == Node::Kernel; });
  int64_t commBytes = 0;
  for (const Node &n : nodes)
    if (n.kind == Node::Collective) {
      auto op = cast<CollectiveOpInterface>(n.comm);
      commBytes +=
          getCollectiveCost(op, *getGroupSize(op), CollectiveAlgorithm::Ring)
              .bytesSent;
    }
  // Before anything recorded while the inputs were read (valid ranges).
  namespace meta = plan::meta;
  using plan::metadataEntry;
  p.metadata.insert(
      p.metadata.begin(),
      {metadataEntry(meta::kProducer, "cleave-compile"),
       metadataEntry(meta::kModel, options.modelName),
       metadataEntry(meta::kSourceModel, options.sourceModel),
       metadataEntry(meta::kFlops, flops),
       metadataEntry(meta::kKernels, numKernels),
       metadataEntry(meta::kUniqueKernels, p.kernelNames.size()),
       metadataEntry(meta::kGemms, numGemms),
       metadataEntry(meta::kConstantBytes, constantBytes),
       metadataEntry(meta::kUnplannedBytes, a.memory.naiveBytes)});
  if (numCollectives) {
    plan::addMetadata(p, meta::kCollectives, numCollectives);
    plan::addMetadata(p, meta::kCommBytesPerRank, commBytes);
  }
  if (!a.untied.empty())
    plan::addMetadata(
        p, meta::kUntied,
        llvm::formatv("{0}", llvm::json::Value(std::move(a.untied))).str());
  if (!a.folded.empty())
    plan::addMetadata(
        p, meta::kFolded,
        llvm::formatv("{0}", llvm::json::Value(std::move(a.folded))).str());
  if (!a.markerNames.empty())
    plan::addMetadata(p, meta::kPipelineSteps, a.markerNames);
  if (!a.kernelCosts.empty())
    plan::addMetadata(p, meta::kKernelCosts, a.kernelCosts);
}

/// Buffers and their arena offsets, then the tables, constants and
/// commands of the plan, then its metadata.
LogicalResult PlanBuilder::assemble(BuiltPlan &result) {
  plan::Plan &p = result.plan;
  if (mesh) {
    for (Attribute a : mesh.getAxisNames())
      p.mesh.axisNames.push_back(cast<StringAttr>(a).getValue().str());
    p.mesh.shape.assign(mesh.getShape().begin(), mesh.getShape().end());
  }
  Assembly a;
  a.end = nodes.size();
  collectBuffers(a);
  for (const Assembly::Buffer &b : a.buffers) {
    a.intervals.push_back(b.interval);
    if (options.report || options.reportMemory)
      buffered.insert(b.value);
  }
  a.memory = ::cleave::planMemory(a.intervals, p.alignment);
  addStageMemory(a, p);
  if (options.report) {
    SmallVector<Value> values;
    for (const Assembly::Buffer &b : a.buffers)
      values.push_back(b.value);
    fillReport(result, values, a.intervals, a.memory.arenaBytes);
  }
  if (options.reportMemory)
    writeMemoryReport(a, result.memoryReport);
  p.arenaBytes = a.memory.arenaBytes;
  if (failed(addTables(a, p)) || failed(addConstants(a, p)) ||
      failed(addCommands(a, p)))
    return failure();
  addCostMetadata(a, p);
  return success();
}
