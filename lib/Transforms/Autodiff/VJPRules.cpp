//===- VJPRules.cpp - Attach the VJP rules to the cleave ops --------------===//
//
// VJPOpInterface is attached as an external model, so the dialect's ODS stays
// free of autodiff. Each model forwards to the op's `vjp` rule in
// VJPRules*.cpp.
//
//===----------------------------------------------------------------------===//

#include "VJPHelpers.h"

#include "cleave/Transforms/Autodiff.h"

#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {
template <typename OpT>
struct VJPModel : VJPOpInterface::ExternalModel<VJPModel<OpT>, OpT> {
  FailureOr<SmallVector<Value>> buildVJP(Operation *op, OpBuilder &b,
                                         ValueRange resultCotangents) const {
    return ::cleave::autodiff::vjp(cast<OpT>(op), b, resultCotangents);
  }
};

template <typename... OpTs> void attach(MLIRContext *ctx) {
  (OpTs::template attachInterface<VJPModel<OpTs>>(*ctx), ...);
}
} // namespace

namespace cleave {
void registerVJPExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, CleaveDialect *) {
    attach<ConstantOp, IotaOp, RngKeyOp, CompareOp, ArgReduceOp, UnaryOp,
           BinaryOp, SelectOp, ConvertOp, PipelineTransferOp>(ctx);
    attach<BroadcastInDimOp, ReshapeOp, TransposeOp, SliceOp, ReverseOp,
           ConcatOp, PadOp, GatherOp, GatherElementsOp, ScatterOp, TopKOp>(ctx);
    attach<ContractOp, GroupedMatmulOp, ReduceOp, CumSumOp, SoftmaxOp,
           LogSoftmaxOp, LayerNormOp, RmsNormOp, AttentionOp, RotaryOp>(ctx);
    attach<ConvOp, ReduceWindowOp>(ctx);
  });
}
} // namespace cleave
