//===- LocalSGD.cpp - Local SGD's and DiLoCo's @sync function -------------===//
//
// Local SGD (each data-parallel replica steps on its own data, then the
// replicas average their parameters) and DiLoCo (Douillard et al. 2023: the
// averaging becomes an outer optimizer's step on a global copy) need work
// that runs every H steps, not every step: a second function, @sync, beside
// the step. The driver compiles it into the plan's entry "sync"; the
// runtime copies the states @sync reads into its arena, runs it and copies
// them back.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Training/LocalSGD.h"
#include "cleave/Transforms/Training/Passes.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveMetadata.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"
#include "cleave/Transforms/Sharding/Passes.h"

#include "Optimizers.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/Twine.h"

#define DEBUG_TYPE "cleave-build-local-sgd"

namespace cleave {
#define GEN_PASS_DEF_BUILDLOCALSGDPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace cleave {

std::string parseSyncMode(llvm::StringRef sync, llvm::StringRef outerOptimizer,
                          double outerLr, double outerMomentum, SyncMode &out) {
  out = SyncMode();
  if (sync == "step" || sync.empty()) {
    out.kind = SyncMode::Step;
  } else if (sync == "delayed") {
    out.kind = SyncMode::Delayed;
  } else if (sync.consume_front("local:")) {
    out.kind = SyncMode::Local;
    if (sync.getAsInteger(10, out.every) || out.every < 1 ||
        out.every > 1000000)
      return "--sync=local:H needs H from 1 to 1000000, got '" + sync.str() +
             "'";
  } else {
    return "unknown --sync '" + sync.str() +
           "' (expected step, local:<H> or delayed)";
  }
  if (outerOptimizer.empty() || outerOptimizer == "none")
    return "";
  if (outerOptimizer != "nesterov")
    return "unknown --outer-optimizer '" + outerOptimizer.str() +
           "' (expected nesterov)";
  if (out.kind != SyncMode::Local)
    return "--outer-optimizer needs --sync=local:<H> (DiLoCo's outer step "
           "runs when the replicas synchronize)";
  if (!(outerLr > 0.0) || !(outerMomentum >= 0.0) || !(outerMomentum < 1.0))
    return "--outer-lr must be positive and --outer-momentum in [0, 1)";
  out.nesterov = true;
  out.outerLr = outerLr;
  out.outerMomentum = outerMomentum;
  return "";
}

namespace {

/// One parameter of the step, as @sync sees it.
struct SyncedParameter {
  unsigned arg; ///< Its argument in the step.
  RankedTensorType type;
  int64_t splitDim = -1; ///< DiLoCo: the dimension the outer states split.
  unsigned outerParams = 0, outerMomentum = 0; ///< Their step arguments.
};

Value allReduceAvg(OpBuilder &b, Location loc, Value v) {
  OperationState state(loc, AllReduceOp::getOperationName());
  state.addOperands(v);
  state.addTypes(v.getType());
  state.addAttribute("kind", CollectiveReduceKindAttr::get(
                                 b.getContext(), CollectiveReduceKind::avg));
  state.addAttribute("mesh", FlatSymbolRefAttr::get(b.getContext(), "mesh"));
  state.addAttribute("mesh_axes", b.getStrArrayAttr({"dp"}));
  Operation *op = b.create(state);
  setPhase(op, "local SGD averaging");
  return op->getResult(0);
}

Value splat(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  return ConstantOp::create(
      b, loc, type,
      DenseElementsAttr::get(type,
                             b.getFloatAttr(type.getElementType(), value)));
}

Value binary(OpBuilder &b, Location loc, BinaryKind kind, Value x, Value y) {
  return BinaryOp::create(b, loc, x.getType(), kind, x, y);
}

} // namespace

LogicalResult buildLocalSGD(ModuleOp module, func::FuncOp step,
                            const SyncMode &mode, int64_t dp) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  Location loc = step.getLoc();
  ArrayAttr dpAxes = b.getStrArrayAttr({"dp"});
  // Every state of the step is its replica's own.
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    if (hasArgState(step, i))
      step.setArgAttr(i, kVaryingAttrName, dpAxes);

  SmallVector<SyncedParameter> params;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    if (!isParameterArg(step, i))
      continue;
    auto type = cast<RankedTensorType>(step.getArgument(i).getType());
    if (!isa<FloatType>(type.getElementType()))
      return step.emitError()
             << "local SGD averages float parameters; '"
             << step.getArgAttr(i, attr::kName) << "' is " << type;
    params.push_back({i, type});
  }

  // DiLoCo's outer states, held by the step (so checkpoints and resume see
  // them) and split over dp like ZeRO-1's optimizer states.
  auto shardingOn = [&](int64_t rank, int64_t dim) -> TensorShardingAttr {
    SmallVector<DimShardingAttr> dims(
        rank, DimShardingAttr::get(ctx, {}, /*closed=*/true, -1));
    dims[dim] = DimShardingAttr::get(ctx, {b.getStringAttr("dp")}, true, -1);
    return TensorShardingAttr::get(ctx, FlatSymbolRefAttr::get(ctx, "mesh"),
                                   dims);
  };
  auto localType = [&](const SyncedParameter &p) {
    if (p.splitDim < 0)
      return p.type;
    SmallVector<int64_t> shape(p.type.getShape());
    shape[p.splitDim] /= dp;
    return p.type.clone(shape);
  };
  if (mode.nesterov) {
    for (SyncedParameter &p : params) {
      for (int64_t d = 0; d < p.type.getRank(); ++d)
        if (p.type.getDimSize(d) % dp == 0) {
          p.splitDim = d;
          break;
        }
      StringAttr name = getArgName(step, p.arg);
      for (StringRef slot : {"outer_params", "outer_momentum"}) {
        unsigned index = step.getNumArguments();
        SmallVector<NamedAttribute> attrs{
            b.getNamedAttr(attr::kName,
                           b.getStringAttr(name.getValue() + "." + slot)),
            b.getNamedAttr(attr::kState,
                           StateKindAttr::get(ctx, StateKind::optimizer_state)),
            b.getNamedAttr(attr::kParameter, name),
            b.getNamedAttr(attr::kSlot, b.getStringAttr(slot))};
        // The global copy starts as the parameter (the same initial value,
        // or the same bytes of the model's external data).
        if (slot == "outer_params")
          for (StringRef a : {StringRef(attr::kInitialValue),
                              StringRef(kExternalDataAttrName)})
            if (Attribute v = step.getArgAttr(p.arg, a))
              attrs.push_back(b.getNamedAttr(a, v));
        if (p.splitDim >= 0)
          attrs.push_back(b.getNamedAttr(
              kShardingAttrName, shardingOn(p.type.getRank(), p.splitDim)));
        if (failed(step.insertArgument(index, localType(p),
                                       b.getDictionaryAttr(attrs), loc)))
          return failure();
        (slot == "outer_params" ? p.outerParams : p.outerMomentum) = index;
      }
    }
  }

  // @sync(params..., outer states...) -> (new params..., new outer states...)
  auto sync = func::FuncOp::create(b, loc, kSyncFunctionName,
                                   b.getFunctionType({}, {}));
  Block *body = sync.addEntryBlock();
  SmallVector<unsigned> fromStep; // step argument of each sync argument
  for (const SyncedParameter &p : params) {
    body->addArgument(p.type, loc);
    fromStep.push_back(p.arg);
  }
  if (mode.nesterov)
    for (const SyncedParameter &p : params) {
      body->addArgument(localType(p), loc);
      fromStep.push_back(p.outerParams);
      body->addArgument(localType(p), loc);
      fromStep.push_back(p.outerMomentum);
    }
  b.setInsertionPointToEnd(body);
  SmallVector<Value> results;
  SmallVector<unsigned> updates;
  // Local SGD: the replicas' average.
  for (unsigned k = 0; !mode.nesterov && k < params.size(); ++k) {
    results.push_back(allReduceAvg(b, loc, body->getArgument(k)));
    updates.push_back(k);
  }
  // DiLoCo: the outer step on this rank's block of the global copy.
  for (auto [k, p] : llvm::enumerate(params)) {
    if (!mode.nesterov)
      break;
    Value param = body->getArgument(k);
    unsigned globalArg = params.size() + 2 * k, momentumArg = globalArg + 1;
    Value global = body->getArgument(globalArg);
    Value momentum = body->getArgument(momentumArg);
    RankedTensorType shard = localType(p);
    // The average of the replicas, this rank's block of it.
    Value average;
    if (p.splitDim >= 0) {
      auto op =
          ReduceScatterOp::create(b, loc, shard, CollectiveReduceKind::avg,
                                  param, "mesh", dpAxes, p.splitDim);
      setPhase(op, "DiLoCo outer step");
      average = op->getResult(0);
    } else {
      average = allReduceAvg(b, loc, param);
    }
    // Outer gradient, Nesterov momentum (torch.optim.SGD's form), update.
    Value delta = binary(b, loc, BinaryKind::sub, global, average);
    train_step::Emitter e{b, loc};
    train_step::MomentumStep s = train_step::buildMomentumStep(
        e, momentum, delta, mode.outerMomentum, /*nesterov=*/true);
    Value newMomentum = s.velocity, direction = s.direction;
    Value newGlobal =
        binary(b, loc, BinaryKind::sub, global,
               binary(b, loc, BinaryKind::mul,
                      splat(b, loc, shard, mode.outerLr), direction));
    Value newParam = newGlobal;
    if (p.splitDim >= 0) {
      auto op = AllGatherOp::create(b, loc, p.type, newGlobal, "mesh", dpAxes,
                                    p.splitDim);
      setPhase(op, "DiLoCo outer step");
      newParam = op->getResult(0);
    }
    results.push_back(newParam);
    updates.push_back(k);
    results.push_back(newGlobal);
    updates.push_back(globalArg);
    results.push_back(newMomentum);
    updates.push_back(momentumArg);
  }
  func::ReturnOp::create(b, loc, results);
  sync.setFunctionType(b.getFunctionType(body->getArgumentTypes(),
                                         TypeRange(ValueRange(results))));
  // The step's attributes on the borrowed states; an entry's states get
  // their values from the step's, so their initial values are dropped
  // from the plan.
  for (auto [i, from] : llvm::enumerate(fromStep))
    for (NamedAttribute a : step.getArgAttrDict(from).getValue())
      sync.setArgAttr(i, a.getName(), a.getValue());
  for (auto [r, u] : llvm::enumerate(updates)) {
    setResultUpdates(sync, r, u);
    sync.setResultAttr(r, attr::kName, getArgName(sync, u));
  }
  module.push_back(sync);
  step->setAttr(kSyncEveryAttrName, b.getI64IntegerAttr(mode.every));
  return success();
}

namespace {
struct BuildLocalSGDPass : impl::BuildLocalSGDPassBase<BuildLocalSGDPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SyncMode mode;
    if (std::string error =
            parseSyncMode(("local:" + llvm::Twine(every)).str(), outerOptimizer,
                          outerLr, outerMomentum, mode);
        !error.empty()) {
      module.emitError() << "--cleave-build-local-sgd: " << error;
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>("main");
    if (!step || step.isExternal()) {
      module.emitError("--cleave-build-local-sgd needs a training step @main");
      return signalPassFailure();
    }
    if (module.lookupSymbol(kSyncFunctionName)) {
      module.emitError() << "--cleave-build-local-sgd: the module already "
                            "holds a symbol @"
                         << kSyncFunctionName;
      return signalPassFailure();
    }
    // The replicas are the mesh axis dp that --cleave-build-train-step's
    // data-parallel option made.
    int64_t dp = 0;
    for (MeshOp mesh : module.getOps<MeshOp>())
      for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape()))
        if (cast<StringAttr>(name).getValue() == "dp")
          dp = size;
    if (dp < 2) {
      module.emitError("--cleave-build-local-sgd needs data-parallel "
                       "replicas: a cleave.mesh with an axis dp > 1 (build "
                       "the step with data-parallel=N sync=local:<H>)");
      return signalPassFailure();
    }
    if (failed(buildLocalSGD(module, step, mode, dp)))
      return signalPassFailure();
  }
};
} // namespace

} // namespace cleave
