//===- ApproximateMath.cpp - f32 transcendentals as polynomials -----------===//
//
// `--cleave-cpu-approximate-math`: replaces f32 transcendentals (exp, log,
// tanh, erf, ...) by MLIR's polynomial approximations, plain arithmetic that
// LLVM vectorizes, instead of one libm call per element. Other element types
// keep libm calls or intrinsics.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CPU/Passes.h"

#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "cleave-cpu-approximate-math"

namespace cleave {
#define GEN_PASS_DEF_APPROXIMATEMATHPASS
#include "cleave/Target/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct ApproximateMathPass
    : ::cleave::impl::ApproximateMathPassBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // pow by a constant 1, 2, 3, -1, -2, 0.5, -0.5 or 0.75 as products and
    // square roots (GELU's x^3 and its derivative's x^2; a libm powf per
    // element took a fifth of a small GPT's training step).
    populateMathAlgebraicSimplificationPatterns(patterns);
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
      // Names are operation names ("math.exp").
      name.consume_front("math.");
      return llvm::is_contained(
          {"exp", "expm1", "log", "log1p", "log2", "tanh", "erf", "erfc"},
          name);
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
