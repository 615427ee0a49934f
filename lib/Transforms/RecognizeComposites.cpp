//===- RecognizeComposites.cpp - Spelled-out attention and RMS norm as ops ===//
//
// Exporters write attention as matmul-scale-mask-softmax-matmul, RMS
// normalization as pow-mean-rsqrt-mul and a mixture of experts' GEMMs as
// gathered weights times their rows. This pass finds those forms in an
// imported program and rewrites each into one op (those ONNX's opset-23
// `Attention` and `RMSNormalization` import to; cleave.grouped_matmul),
// where the op computes the same thing; anything it cannot prove the same
// is left as it is. The forms are RecognizeAttention.cpp's,
// RecognizeRmsNorm.cpp's, RecognizeRotary.cpp's and RecognizeExperts.cpp's.
//
//===----------------------------------------------------------------------===//

#include "Recognize.h"

#include "cleave/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <cmath>

#define DEBUG_TYPE "cleave-recognize-composites"

namespace cleave {
#define GEN_PASS_DEF_RECOGNIZECOMPOSITESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

namespace cleave::recognize {

/// Looks through the broadcasts and reshapes that spread one value.
static Value throughSpreads(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (!isa<BroadcastInDimOp, ReshapeOp>(op))
      break;
    v = op->getOperand(0);
  }
  return v;
}

std::optional<double> getSplat(Value v) {
  std::optional<ConstantElements> c = ConstantElements::get(throughSpreads(v));
  if (!c || !isa<FloatType>(c->getType().getElementType()) ||
      c->getType().getNumElements() == 0)
    return std::nullopt;
  double first = 0;
  bool same = c->all([&](int64_t i, double x) {
    if (i == 0)
      first = x;
    return x == first || (std::isnan(x) && std::isnan(first));
  });
  if (!same)
    return std::nullopt;
  return first;
}

void eraseDead(ArrayRef<Operation *> ops) {
  llvm::SetVector<Operation *> work(ops.begin(), ops.end());
  llvm::SetVector<Operation *> erased;
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < work.size(); ++i) {
      Operation *op = work[i];
      if (erased.contains(op) || !op->use_empty() || !isPure(op))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (!def->hasAttr(attr::kInitializer))
            work.insert(def);
      op->dropAllReferences();
      erased.insert(op);
      changed = true;
    }
  }
  for (Operation *op : erased)
    op->erase();
}

LogicalResult miss(Operation *op, StringRef why) {
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": " << op->getLoc()
                          << ": not recognized: " << why << "\n");
  return failure();
}

} // namespace cleave::recognize

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {
/// x * sigmoid(x) (either order) as `cleave.unary silu`, whose VJP keeps x
/// alone instead of x and the sigmoid. The sigmoid stays if read elsewhere.
bool recognizeSilu(BinaryOp op) {
  if (op.getKind() != BinaryKind::mul)
    return false;
  for (int i = 0; i < 2; ++i) {
    Value x = op->getOperand(i);
    auto sigmoid = op->getOperand(1 - i).getDefiningOp<UnaryOp>();
    if (!sigmoid || sigmoid.getKind() != UnaryKind::sigmoid ||
        sigmoid.getOperand() != x || x.getType() != op.getType())
      continue;
    OpBuilder b(op);
    Value silu = UnaryOp::create(b, op.getLoc(), UnaryKind::silu, x);
    op.getResult().replaceAllUsesWith(silu);
    ::cleave::recognize::eraseDead({op.getOperation()});
    return true;
  }
  return false;
}

struct RecognizeCompositesPass
    : ::cleave::impl::RecognizeCompositesPassBase<RecognizeCompositesPass> {
  using RecognizeCompositesPassBase::RecognizeCompositesPassBase;

  void runOnOperation() override {
    if (attention) {
      SmallVector<SoftmaxOp> softmaxes;
      getOperation().walk([&](SoftmaxOp op) { softmaxes.push_back(op); });
      ::cleave::recognize::MaskCache masks;
      for (SoftmaxOp op : softmaxes) {
        bool causal = false;
        if (::cleave::recognize::recognizeAttention(op, masks, causal)) {
          ++numAttention;
          if (causal)
            ++numCausal;
        }
      }
    }
    if (silu) {
      SmallVector<BinaryOp> products;
      getOperation().walk([&](BinaryOp op) { products.push_back(op); });
      for (BinaryOp op : products)
        if (recognizeSilu(op))
          ++numSilu;
    }
    if (rotary) {
      SmallVector<BinaryOp> sums;
      getOperation().walk([&](BinaryOp op) {
        if (op.getKind() == BinaryKind::add)
          sums.push_back(op);
      });
      for (BinaryOp op : sums)
        if (::cleave::recognize::recognizeRotary(op))
          ++numRotary;
    }
    if (experts) {
      SmallVector<ContractOp> products;
      getOperation().walk([&](ContractOp op) { products.push_back(op); });
      for (ContractOp op : products)
        if (::cleave::recognize::recognizeGroupedMatmul(op))
          ++numExperts;
    }
    if (rmsNorm) {
      SmallVector<ReduceOp> reductions;
      getOperation().walk([&](ReduceOp op) { reductions.push_back(op); });
      for (ReduceOp op : reductions) {
        if (::cleave::recognize::recognizeRmsNorm(op))
          ++numRmsNorm;
      }
    }
  }
};
} // namespace
