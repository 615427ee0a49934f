//===- ApplyMixedPrecision.cpp - bf16/fp16 compute, f32 master state ------===//
//
// Rewrites every func.func (normally the training step built by
// --cleave-build-train-step) so that its f32 contractions and the
// elementwise work on activations compute in bf16 or f16, while statistics,
// the loss and the optimizer stay in f32:
//
//  - cleave.contract with f32 operands: the operands are converted down, the
//    result stays f32 (f32 accumulation: a bf16/f16 x bf16/f16 -> f32
//    contraction, a mixed-precision GEMM in the plan);
//  - unary, binary, compare, select and the shape-only data movement ops
//    (broadcast_in_dim, reshape, transpose, slice, reverse, concat) follow
//    their operands: they compute in low precision when one operand already
//    is low precision, or (elementwise ones) when one is a contraction
//    result; their other f32 operands (e.g. f32 master parameters) are
//    converted down where used. Data movement of a contraction result keeps
//    f32 and passes the "contraction result" mark on;
//  - cleave.attention: q, k and v are converted down and the result is low
//    (the op computes its scores and softmax in f32);
//  - everything else (softmax, log_softmax, layer_norm, reduce, gather,
//    scatter, ...) computes in f32: low-precision operands are converted up;
//  - ops tagged `cleave.fp32` (by --cleave-build-train-step with
//    mark-fp32-ops: the loss, gradient norm, clipping, loss scaling, the
//    optimizer update) stay f32, and so do the elementwise ops whose results
//    flow into them (e.g. the sum of two gradient contributions of a shared
//    parameter), so nothing they read was rounded;
//  - function results keep their types.
//
// Only f32 values are lowered; f64, integer and already-low values are left
// alone. The tags are removed.
//
// With low-precision-parameters, every f32 parameter is read through its
// low-precision copy, as Megatron keeps all parameters in bf16 beside f32
// masters: layer norms' scales and biases, biases and embedding tables too.
// Ops that compute in f32 read the copy converted back up (the rounded
// value); a parameter's layout changes (a tied embedding's transpose) and
// embedding lookups move the copy in low precision, which gives the same
// values without an f32 temporary of the whole table. Only the optimizer
// (tagged cleave.fp32) reads the f32 master. With low-precision-gradients
// too, the model states take the ZeRO paper's 16 bytes per parameter.
//
// With low-precision-gradients, the gradient of every parameter the step
// reads in low precision is rounded to the low type where autodiff
// finishes it (the op tagged cleave.gradient_of; the tag moves to the
// rounding), so that it is reduced over data-parallel ranks and stored in
// 2 bytes; the optimizer reads it converted back to f32.
//
//===----------------------------------------------------------------------===//

#include "cleave/Analysis/TrainingTags.h"
#include "cleave/Transforms/Training/Passes.h"

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "cleave-apply-mixed-precision"

namespace cleave {
#define GEN_PASS_DEF_APPLYMIXEDPRECISIONPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

bool isElementwise(Operation *op) {
  return isa<UnaryOp, BinaryOp, CompareOp, SelectOp>(op);
}
bool isMovement(Operation *op) {
  return isa<BroadcastInDimOp, ReshapeOp, TransposeOp, SliceOp, ReverseOp,
             ConcatOp>(op);
}
Type elementTypeOf(Value v) { return getElementTypeOrSelf(v.getType()); }

class Rewriter {
public:
  Rewriter(func::FuncOp fn, Type low, bool allParameters) : fn(fn), low(low) {
    if (!allParameters)
      return;
    for (BlockArgument arg : fn.getArguments())
      if (isParameterArg(fn, arg.getArgNumber()) && elementTypeOf(arg).isF32())
        lowParameters.insert(arg);
  }
  LogicalResult run();
  /// Rounds the gradients of the parameters read in low precision (see the
  /// file comment); after run().
  void roundGradients();

private:
  /// `v` (f32) as `low`, converted once right after its definition.
  Value down(Value v);
  /// `v` (lowered by this pass) back in f32.
  Value up(Value v);
  Value convertAfterDef(Value v, Type elem, DenseMap<Value, Value> &cache);

  /// Whether `v` is an f32 parameter read through its low copy
  /// (low-precision-parameters).
  bool isLowParameter(Value v) const { return lowParameters.contains(v); }

  func::FuncOp fn;
  Type low;
  /// With low-precision-parameters: the f32 parameter arguments.
  DenseSet<Value> lowParameters;
  DenseSet<Value> lowered;    ///< Values this pass turned into `low`.
  DenseSet<Value> contracted; ///< f32 contraction results (and their moves).
  DenseMap<Value, Value> downCache, upCache;
};

Value Rewriter::convertAfterDef(Value v, Type elem,
                                DenseMap<Value, Value> &cache) {
  if (Value c = cache.lookup(v))
    return c;
  OpBuilder b(fn.getContext());
  if (Operation *def = v.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
  auto type = cast<RankedTensorType>(v.getType());
  Value c = ConvertOp::create(b, v.getLoc(), type.clone(elem), v);
  cache[v] = c;
  return c;
}

Value Rewriter::down(Value v) {
  if (lowered.contains(v))
    return v;
  return convertAfterDef(v, low, downCache);
}

Value Rewriter::up(Value v) {
  return convertAfterDef(v, Float32Type::get(fn.getContext()), upCache);
}

LogicalResult Rewriter::run() {
  Block &block = fn.getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);

  // Ops that stay f32: tagged ones, and the elementwise/movement ops whose
  // results flow (through more of them) into f32 ones. A tied parameter's
  // gradient meets its other stages' in a pipeline_sum, which passes f32
  // on: the microbatches' contributions are accumulated in f32, as every
  // other gradient is (rounding each to the low type first would also
  // force a data-parallel reduction per microbatch).
  DenseSet<Operation *> keepF32;
  for (Operation *op : llvm::reverse(ops)) {
    if (op->hasAttr(attr::kFp32)) {
      keepF32.insert(op);
      continue;
    }
    if (!isElementwise(op) && !isMovement(op) && !isa<PipelineSumOp>(op))
      continue;
    for (Operation *user : op->getUsers())
      if (keepF32.contains(user)) {
        keepF32.insert(op);
        break;
      }
  }

  auto isF32 = [](Value v) { return elementTypeOf(v).isF32(); };
  for (Operation *op : ops) {
    if (isa<ConstantOp, IotaOp, RngKeyOp, ConvertOp>(op))
      continue; // Converts accept any float operand type.
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (OpOperand &use : ret->getOpOperands())
        if (lowered.contains(use.get()))
          use.set(up(use.get()));
      continue;
    }
    bool fp32 = keepF32.contains(op);
    auto contract = dyn_cast<ContractOp>(op);
    if (contract && !fp32 && isF32(contract.getResult()) &&
        (isF32(contract.getLhs()) || lowered.contains(contract.getLhs())) &&
        (isF32(contract.getRhs()) || lowered.contains(contract.getRhs()))) {
      contract.getLhsMutable().set(down(contract.getLhs()));
      contract.getRhsMutable().set(down(contract.getRhs()));
      contracted.insert(contract.getResult());
      continue;
    }
    // Attention computes its products in the low type and its scores and
    // softmax in f32 (see cleave.attention); a bias stays f32.
    if (auto attention = dyn_cast<AttentionOp>(op);
        attention && !fp32 && isF32(attention.getResult()) &&
        llvm::all_of(
            ValueRange{attention.getQ(), attention.getK(), attention.getV()},
            [&](Value v) { return isF32(v) || lowered.contains(v); })) {
      attention.getQMutable().set(down(attention.getQ()));
      attention.getKMutable().set(down(attention.getK()));
      attention.getVMutable().set(down(attention.getV()));
      Value r = attention.getResult();
      r.setType(cast<RankedTensorType>(r.getType()).clone(low));
      lowered.insert(r);
      continue;
    }
    // Its gradient reads q, k, v and the result in the low type too (the
    // cotangent in the type it comes in) and gives f32 gradients, as a
    // lowered contraction does.
    if (auto grad = dyn_cast<AttentionGradOp>(op);
        grad && !fp32 && isF32(grad.getDq()) &&
        llvm::all_of(
            ValueRange{grad.getQ(), grad.getK(), grad.getV(), grad.getOut()},
            [&](Value v) { return isF32(v) || lowered.contains(v); })) {
      grad.getQMutable().set(down(grad.getQ()));
      grad.getKMutable().set(down(grad.getK()));
      grad.getVMutable().set(down(grad.getV()));
      grad.getOutMutable().set(down(grad.getOut()));
      continue;
    }
    // A parameter's layout change moves its low copy.
    bool movesParameter = !fp32 && isMovement(op) &&
                          llvm::all_of(op->getOperands(), [&](Value v) {
                            return lowered.contains(v) || isLowParameter(v);
                          });
    // An embedding lookup in a low table (or a parameter's copy) gathers
    // low-precision rows.
    if (auto gather = dyn_cast<GatherOp>(op);
        gather && !fp32 && isF32(gather.getResult()) &&
        (lowered.contains(gather.getOperand()) ||
         isLowParameter(gather.getOperand()))) {
      gather.getOperandMutable().set(down(gather.getOperand()));
      Value r = gather.getResult();
      r.setType(cast<RankedTensorType>(r.getType()).clone(low));
      lowered.insert(r);
      continue;
    }
    bool follow = !fp32 && (isElementwise(op) || isMovement(op));
    bool anyLowered =
        movesParameter || llvm::any_of(op->getOperands(), [&](Value v) {
          return lowered.contains(v);
        });
    bool anyContracted = llvm::any_of(
        op->getOperands(), [&](Value v) { return contracted.contains(v); });
    if (follow && !anyLowered && anyContracted && isMovement(op) &&
        op->getNumOperands() == 1) {
      // Reshaping a contraction result: keep f32, pass the mark on.
      contracted.insert(op->getResult(0));
      continue;
    }
    if (follow && (anyLowered || anyContracted)) {
      for (OpOperand &use : op->getOpOperands())
        if (isF32(use.get()))
          use.set(down(use.get()));
      for (Value r : op->getResults())
        if (isF32(r)) {
          r.setType(cast<RankedTensorType>(r.getType()).clone(low));
          lowered.insert(r);
        }
      continue;
    }
    // f32 compute: low-precision operands this pass made come back up, and
    // parameters are read rounded through their copies (not the optimizer,
    // which updates the masters).
    for (OpOperand &use : op->getOpOperands())
      if (lowered.contains(use.get()))
        use.set(up(use.get()));
      else if (!op->hasAttr(attr::kFp32) && isLowParameter(use.get()))
        use.set(up(down(use.get())));
  }
  for (Operation *op : ops)
    op->removeAttr(attr::kFp32);
  return success();
}

void Rewriter::roundGradients() {
  // The parameters the step reads in low precision, by name.
  llvm::StringSet<> lowNames;
  for (BlockArgument arg : fn.getArguments()) {
    auto name = getArgParameter(fn, arg.getArgNumber());
    if (!isParameterArg(fn, arg.getArgNumber()) || !name)
      continue;
    if (llvm::any_of(arg.getUsers(), [&](Operation *user) {
          auto convert = dyn_cast<ConvertOp>(user);
          return convert && elementTypeOf(convert.getResult()) == low;
        }))
      lowNames.insert(name.getValue());
  }
  SmallVector<Operation *> tagged;
  fn.walk([&](Operation *op) {
    auto of = op->getAttrOfType<StringAttr>(attr::kGradientOf);
    if (of && lowNames.contains(of.getValue()) && op->getNumResults() == 1 &&
        elementTypeOf(op->getResult(0)).isF32())
      tagged.push_back(op);
  });
  for (Operation *op : tagged) {
    Value g = op->getResult(0);
    auto type = cast<RankedTensorType>(g.getType());
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    auto rounded = ConvertOp::create(b, op->getLoc(), type.clone(low), g);
    auto back = ConvertOp::create(b, op->getLoc(), type, rounded.getResult());
    g.replaceAllUsesExcept(back.getResult(), rounded);
    rounded->setAttr(attr::kGradientOf, op->getAttr(attr::kGradientOf));
    op->removeAttr(attr::kGradientOf);
  }
}

struct ApplyMixedPrecisionPass
    : public ::cleave::impl::ApplyMixedPrecisionPassBase<
          ApplyMixedPrecisionPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    Type low;
    if (precision == "bf16")
      low = BFloat16Type::get(ctx);
    else if (precision == "fp16")
      low = Float16Type::get(ctx);
    else if (precision != "fp32") {
      module.emitError() << "unknown precision '" << precision
                         << "' (expected fp32, bf16 or fp16)";
      return signalPassFailure();
    }
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!low) {
        fn.walk([](Operation *op) { op->removeAttr(attr::kFp32); });
        continue;
      }
      if (!fn.getBody().hasOneBlock()) {
        fn.emitError() << "mixed precision needs a single-block function";
        return signalPassFailure();
      }
      // A training step must say which ops are its loss and optimizer.
      bool hasState = false, hasTags = false;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        hasState |= hasArgState(fn, i);
      fn.walk([&](Operation *op) { hasTags |= op->hasAttr(attr::kFp32); });
      if (hasState && !hasTags) {
        fn.emitError() << "training step without `cleave.fp32` tags: build "
                          "it with --cleave-build-train-step=\"mark-fp32-ops="
                          "true ...\" so that the loss and optimizer stay f32";
        return signalPassFailure();
      }
      Rewriter rewriter(fn, low, lowPrecisionParameters);
      if (failed(rewriter.run()))
        return signalPassFailure();
      if (lowPrecisionGradients)
        rewriter.roundGradients();
      narrowPipelineTransfers(fn);
    }
  }

  /// A pipeline stage's bf16 output widened for the next stage's f32 reader
  /// (a layer norm's input) crosses as bf16 and is widened on the receiving
  /// rank: transfer(convert(x)) becomes convert(transfer(x)), half the bytes
  /// on the wire and the same values.
  static void narrowPipelineTransfers(func::FuncOp fn) {
    SmallVector<PipelineTransferOp> transfers;
    fn.walk([&](PipelineTransferOp op) { transfers.push_back(op); });
    for (PipelineTransferOp transfer : transfers) {
      auto convert = transfer.getOperand().getDefiningOp<ConvertOp>();
      if (!convert)
        continue;
      auto from = cast<RankedTensorType>(convert.getOperand().getType());
      auto to = cast<RankedTensorType>(convert.getType());
      if (!from.getElementType().isIntOrFloat() ||
          from.getElementType().getIntOrFloatBitWidth() >=
              to.getElementType().getIntOrFloatBitWidth())
        continue;
      OpBuilder b(transfer);
      auto narrow = PipelineTransferOp::create(
          b, transfer.getLoc(), from, convert.getOperand(),
          transfer.getFromAttr(), transfer.getToAttr());
      narrow->setDiscardableAttrs(transfer->getDiscardableAttrDictionary());
      Value widened = ConvertOp::create(b, transfer.getLoc(), to, narrow);
      transfer.getResult().replaceAllUsesWith(widened);
      transfer.erase();
      if (convert->use_empty())
        convert.erase();
    }
  }
};

} // namespace
