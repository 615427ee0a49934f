//===- TestGradients.cpp - Append gradients to scalar functions -----------===//
//
// --cleave-test-gradients: for each function whose single result is a 0-d
// float tensor, returns in addition the gradients of that result with respect
// to every float argument (buildGradients). For tests of the VJP rules.
//
//===----------------------------------------------------------------------===//

#include "TestPasses.h"
#include "cleave/Transforms/Autodiff.h"

#define DEBUG_TYPE "cleave-test-gradients"

namespace cleave::test {
#define GEN_PASS_DEF_TESTGRADIENTSPASS
#include "TestPasses.h.inc"
} // namespace cleave::test

using namespace mlir;

namespace {

/// Whether `v` is a ranked tensor of floats (what gradients are taken for).
bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

struct TestGradientsPass
    : ::cleave::test::impl::TestGradientsPassBase<TestGradientsPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal() || fn.getNumResults() != 1 ||
        !fn.getBody().hasOneBlock())
      return;
    auto resultType = dyn_cast<RankedTensorType>(fn.getResultTypes()[0]);
    if (!resultType || resultType.getRank() != 0 ||
        !isa<FloatType>(resultType.getElementType()))
      return;
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    SmallVector<Value> wrt;
    for (BlockArgument arg : fn.getArguments())
      if (isFloatTensor(arg))
        wrt.push_back(arg);
    OpBuilder b(ret);
    FailureOr<SmallVector<Value>> grads =
        ::cleave::buildGradients(b, ret.getOperand(0), wrt);
    if (failed(grads))
      return signalPassFailure();
    ret->insertOperands(ret.getNumOperands(), *grads);
    fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(),
                                 ret.getOperandTypes()));
  }
};

} // namespace
