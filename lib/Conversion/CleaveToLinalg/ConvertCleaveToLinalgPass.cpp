//===- ConvertCleaveToLinalgPass.cpp - cleave -> linalg/tensor/arith/math -===//

#include "LoweringUtils.h"

#include "Cleave/IR/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Transforms/DialectConversion.h"

#define DEBUG_TYPE "cleave-convert-cleave-to-linalg"

namespace mlir::cleave {
#define GEN_PASS_DEF_CONVERTCLEAVETOLINALGPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;
using namespace mlir::cleave;

//===----------------------------------------------------------------------===//
// Type converter
//===----------------------------------------------------------------------===//

static Type toSignless(Type type) {
  if (auto intType = dyn_cast<IntegerType>(type);
      intType && intType.isUnsigned())
    return IntegerType::get(type.getContext(), intType.getWidth());
  return type;
}

CleaveTypeConverter::CleaveTypeConverter() {
  addConversion([](Type type) { return type; });
  addConversion([](IntegerType type) -> Type { return toSignless(type); });
  addConversion([](RankedTensorType type) -> Type {
    return type.clone(toSignless(type.getElementType()));
  });
  auto cast = [](OpBuilder &b, Type type, ValueRange inputs,
                 Location loc) -> Value {
    return UnrealizedConversionCastOp::create(b, loc, type, inputs)
        .getResult(0);
  };
  addSourceMaterialization(cast);
  addTargetMaterialization(cast);
}

void mlir::cleave::populateCleaveToLinalgPatterns(
    const TypeConverter &typeConverter, RewritePatternSet &patterns) {
  lowering::populateElementwisePatterns(typeConverter, patterns);
  lowering::populateDataMovementPatterns(typeConverter, patterns);
  lowering::populateReductionPatterns(typeConverter, patterns);
  lowering::populateConvolutionPatterns(typeConverter, patterns);
  lowering::populateScatterPatterns(typeConverter, patterns);
  lowering::populateTopKPatterns(typeConverter, patterns);
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct ConvertCleaveToLinalgPass
    : mlir::cleave::impl::ConvertCleaveToLinalgPassBase<
          ConvertCleaveToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    CleaveTypeConverter typeConverter;
    ConversionTarget target(*ctx);
    target.addIllegalDialect<CleaveDialect>();
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                           math::MathDialect, scf::SCFDialect,
                           tensor::TensorDialect>();
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
      return typeConverter.isSignatureLegal(op.getFunctionType()) &&
             typeConverter.isLegal(&op.getBody());
    });
    target.addDynamicallyLegalOp<func::ReturnOp, func::CallOp>(
        [&](Operation *op) { return typeConverter.isLegal(op); });

    RewritePatternSet patterns(ctx);
    populateCleaveToLinalgPatterns(typeConverter, patterns);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(
        patterns, typeConverter);
    populateReturnOpTypeConversionPattern(patterns, typeConverter);
    populateCallOpTypeConversionPattern(patterns, typeConverter);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
