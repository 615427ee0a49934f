//===- Partition.cpp - Global program to per-rank program -----------------===//
//
// Rewrites a program whose values all carry shardings (after
// --cleave-propagate-sharding) into the program every rank runs: local
// shapes, and the collectives the shardings imply. Each op is partitioned on
// its own through its sharding rule:
//
//   1. Factor axes: either results first (a factor in a result takes the
//      result's axes, a factor only operands have takes the axes of the
//      largest operand that splits it) or operands first (the largest
//      operands' axes, then the results'), whichever moves fewer bytes.
//      Need-replication factors take none; an axis splits one factor.
//   2. Each operand is resharded to what the factor axes give its
//      dimensions: all_gather where it has axes the op does not split it
//      over, all_slice where it lacks some (a local copy, no traffic).
//   3. The op runs on local shapes.
//   4. Reduction factors split over axes leave partial results: an
//      all_reduce of the factor's kind over those axes completes them, or
//      a reduce_scatter when the result is to be split over those axes.
//   5. The result is resharded to its propagated sharding.
//
// Every value then has its propagated sharding, which is what the next op
// and the function's results expect. Each collective records why it exists
// in `cleave.phase` (the plan's command source and --explain-sharding).
//
// Steps 1-5 are the generic path (PartitionByRule.cpp); an op whose
// per-rank form differs says so through PartitionOpInterface, whose models
// for the cleave ops are PartitionOpModels.cpp. This file holds the helpers
// they share, the walk over a function and the pass, which first checks
// every sharding against the mesh.
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

#include "cleave/Analysis/TrainingTags.h"
#include "cleave/Transforms/Sharding/Passes.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "cleave-partition"

namespace cleave {
#define GEN_PASS_DEF_PARTITIONPASS
#include "cleave/Transforms/Sharding/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::partition;
using namespace ::cleave::sharding;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

DimAxes partition::axesOf(TensorShardingAttr s, int64_t rank) {
  DimAxes dims(rank);
  if (s)
    for (auto [d, dim] : llvm::enumerate(s.getDims()))
      if (d < (size_t)rank)
        dims[d].assign(dim.getAxes().begin(), dim.getAxes().end());
  return dims;
}

std::string partition::dimsToString(ArrayRef<Axes> dims) {
  std::string s = "[";
  for (auto [d, axes] : llvm::enumerate(dims)) {
    s += d ? ", {" : "{";
    for (auto [i, a] : llvm::enumerate(axes))
      s += (i ? ", \"" : "\"") + a.getValue().str() + "\"";
    s += "}";
  }
  return s + "]";
}

/// A rounding to bf16/f16 that a partial sum is completed after, in the
/// low type, each rank rounding its addend: a gradient's
/// (--low-precision-gradients), or a mixed-precision contraction's f32
/// result rounded to the activations' type (a row-parallel matmul's
/// output, the q, k and v projections' input gradients: reduced once, in
/// bf16, as Megatron reduces them).
bool partition::isGradientRounding(Operation *op) {
  auto convert = dyn_cast<ConvertOp>(op);
  if (!convert)
    return false;
  if (op->hasAttr(mlir::cleave::attr::kGradientOf))
    return true;
  Type from = getElementTypeOrSelf(convert.getOperand().getType());
  Type to = getElementTypeOrSelf(convert.getResult().getType());
  return from.isF32() && (to.isBF16() || to.isF16());
}

/// Whether `op` is an add or subtract (linear in each operand).
bool partition::isAddOrSub(Operation *op) {
  auto binary = dyn_cast<BinaryOp>(op);
  return binary && (binary.getKind() == BinaryKind::add ||
                    binary.getKind() == BinaryKind::sub);
}

/// The gradient rounding `v` reaches through single-use reshapes,
/// transposes and adds (a tied weight's contributions), or null.
Operation *partition::gradientRoundingOf(Value v) {
  while (v.hasOneUse() && (isa<ReshapeOp, TransposeOp>(*v.getUsers().begin()) ||
                           isAddOrSub(*v.getUsers().begin())))
    v = v.getUsers().begin()->getResult(0);
  if (v.hasOneUse() && isGradientRounding(*v.getUsers().begin()))
    return *v.getUsers().begin();
  return nullptr;
}
bool partition::leadsToGradientRounding(Value v) {
  return gradientRoundingOf(v) != nullptr;
}

/// True if any dimension of `dims` is split over one of `over`.
bool partition::splitsOver(ArrayRef<Axes> dims, ArrayRef<StringAttr> over) {
  return llvm::any_of(dims, [&](const Axes &a) {
    return llvm::any_of(
        a, [&](StringAttr axis) { return llvm::is_contained(over, axis); });
  });
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

LogicalResult Partitioner::run(func::FuncOp func) {
  // The local arguments are new block arguments, so that the global ones
  // keep their types (the rules read them) until the old ops are gone.
  Block &body = func.getBody().front();
  unsigned numArgs = body.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i) {
    BlockArgument arg = body.getArgument(i);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    DimAxes dims = type ? axesOf(getSharding(arg), type.getRank()) : DimAxes();
    Value local = body.addArgument(type ? localType(type, dims) : arg.getType(),
                                   arg.getLoc());
    locals[arg] = {local, dims};
  }
  SmallVector<Operation *> old;
  for (Operation &op : body.without_terminator())
    old.push_back(&op);
  OpBuilder b(func.getContext());
  for (Operation *op : old) {
    b.setInsertionPoint(op);
    if (failed(partitionOp(b, op)))
      return failure();
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  b.setInsertionPoint(ret);
  conflicts = nullptr;
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    completeDeferred(b, v);
    Local &in = locals[v];
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type) {
      results.push_back(in.value);
      resultTypes.push_back(in.value.getType());
      continue;
    }
    DimAxes want = axesOf(getResultSharding(func, i), type.getRank());
    Value out = reshard(
        b, ret.getLoc(), in.value, type, in.dims, want,
        ("function result " + Twine(i) + " is " + dimsToString(want)).str());
    results.push_back(out);
    resultTypes.push_back(out.getType());
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  for (Operation *op : llvm::reverse(old)) {
    op->dropAllUses();
    op->erase();
  }
  body.eraseArguments(0, numArgs);
  func.setFunctionType(FunctionType::get(func.getContext(),
                                         body.getArgumentTypes(), resultTypes));
  return success();
}

namespace {

/// Checks every sharding of `func` against `mesh` and the value's type
/// (the axes exist, each splits one dimension, every split dimension
/// divides): the partitioner computes local shapes from them.
static LogicalResult verifyShardings(func::FuncOp func, MeshOp mesh) {
  FlatSymbolRefAttr meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  auto check = [&](TensorShardingAttr s, Type type, Operation *where,
                   const Twine &what) -> LogicalResult {
    if (!s)
      return success();
    auto emit = [&] { return where->emitError(); };
    if (s.getMesh() != meshRef)
      return emit() << what << ": sharding names mesh " << s.getMesh()
                    << ", but the program is partitioned over " << meshRef;
    return verifySharding(s, type, mesh, emit, what.str());
  };
  for (BlockArgument arg : func.getArguments())
    if (failed(check(getSharding(arg), arg.getType(), func,
                     "argument " + Twine(arg.getArgNumber()))))
      return failure();
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (failed(check(getResultSharding(func, i), func.getResultTypes()[i], func,
                     "function result " + Twine(i))))
      return failure();
  for (Operation &op : func.getBody().front())
    for (OpResult r : op.getResults())
      if (failed(check(getSharding(r), r.getType(), &op,
                       "result " + Twine(r.getResultNumber()))))
        return failure();
  return success();
}

struct PartitionPass : ::cleave::impl::PartitionPassBase<PartitionPass> {
  using Base::Base;
  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerPartitionExternalModels(registry);
  }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto meshes = llvm::to_vector(module.getOps<MeshOp>());
    if (meshes.empty())
      return;
    // The ops' partitioning differs from their rules' without their models.
    std::optional<RegisteredOperationName> binary =
        RegisteredOperationName::lookup(BinaryOp::getOperationName(),
                                        &getContext());
    if (!binary || !binary->hasInterface<PartitionOpInterface>()) {
      module.emitError() << "the cleave ops' PartitionOpInterface models are "
                            "not registered (registerPartitionExternalModels)";
      return signalPassFailure();
    }
    if (meshes.size() != 1) {
      meshes[1].emitError() << "the SPMD partitioner works over one mesh";
      return signalPassFailure();
    }
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      if (failed(verifyShardings(func, meshes.front())))
        return signalPassFailure();
      LLVM_DEBUG(llvm::dbgs()
                 << "partitioning @" << func.getSymName() << " over @"
                 << meshes.front().getSymName() << "\n");
      Partitioner::Options options;
      options.interleaved = interleavedAxes;
      options.exchangeAxes = exchangeAxes;
      options.requireExchange = requireExchange;
      options.ringAxes = ringAxes;
      options.ringFault = ringFault;
      Partitioner p(meshes.front(), options);
      if (failed(p.run(func)))
        return signalPassFailure();
    }
  }
};

} // namespace
