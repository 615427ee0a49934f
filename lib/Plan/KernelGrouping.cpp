//===- KernelGrouping.cpp - Ops into plan commands ------------------------===//
//
// The first step of the plan builder: which contractions become library
// GEMM commands and what epilogue each absorbs, which broadcasts, widening
// converts and index computations every reader rebuilds, and which fused
// kernel each remaining op of @main joins.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilderInternal.h"

#include "cleave/Analysis/GemmShape.h"

#include <functional>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::plan_builder;
namespace plan = ::cleave::plan;

bool plan_builder::isElementwise(Operation *op) {
  return isa<UnaryOp, BinaryOp, CompareOp, SelectOp, ConvertOp, BitcastOp,
             BroadcastInDimOp>(op);
}

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
        addedBiases.push_back(bias.getDefiningOp());
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
  // fused attention and grouped GEMM commands, communication, reshapes
  // (aliases), other broadcasts or the return.
  auto inKernel = [&](Operation *user) {
    if (isa<func::ReturnOp, ConstantOp, ReshapeOp, DoneOp, PipelineMarkerOp,
            BroadcastInDimOp, CollectiveOpInterface, AttentionOp,
            AttentionGradOp, AttentionBlockOp, AttentionBlockGradOp,
            GroupedMatmulOp, GroupedMatmulWeightGradOp>(user) ||
        absorbedBy.count(user) || isGemm(user) ||
        user->getDialect() !=
            user->getContext()->getLoadedDialect<CleaveDialect>())
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
  Node node{Node::Gemm, {},
            contract,   plan::GemmEpilogue::None,
            {},         contract.getResult(),
            {},         {},
            {}};
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

LogicalResult PlanBuilder::joinRecordedKernel(Operation *op) {
  auto name = op->getAttrOfType<StringAttr>(attr::kKernel);
  auto group = op->getAttrOfType<IntegerAttr>(attr::kKernelGroup);
  if (!name || !group)
    return op->emitOpError()
           << "has no recorded kernel (" << attr::kKernel << " and "
           << attr::kKernelGroup
           << "): @main changed after --cleave-outline-kernels outlined it";
  auto [it, inserted] = nodeOfGroup.try_emplace(group.getInt(), nodes.size());
  if (inserted) {
    Node node{Node::Kernel, {op}, {}, plan::GemmEpilogue::None, {}, {},
              {},           {},   {}};
    node.name = name.getValue().str();
    nodeOfOp[op] = nodes.size();
    nodes.push_back(std::move(node));
    return success();
  }
  Node &node = nodes[it->second];
  if (node.name != name.getValue())
    return op->emitOpError()
           << "is in kernel group " << group.getInt() << " of kernel '"
           << node.name << "' but names the kernel '" << name.getValue() << "'";
  node.ops.push_back(op);
  nodeOfOp[op] = it->second;
  return success();
}

void PlanBuilder::addCommNode(Node::Kind kind, Operation *op) {
  Node node{kind, {}, {}, plan::GemmEpilogue::None, {}, {}, {}, {}, {}, op};
  nodeOfOp[op] = nodes.size();
  nodes.push_back(std::move(node));
}
