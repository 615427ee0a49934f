//===- LoadTranslations.cpp - Load what gpu-module-to-binary needs --------===//
//
// `--cleave-cuda-load-translations` does nothing but load, through its
// dependent dialects, the dialects, interface models and LLVM IR
// translations gpu-module-to-binary needs (registerCUDACodegenDialects):
// cleave-opt does not register them globally.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CUDA/CUDACodegen.h"
#include "cleave/Target/CUDA/Passes.h"

#define DEBUG_TYPE "cleave-cuda-load-translations"

namespace cleave {
#define GEN_PASS_DEF_LOADTRANSLATIONSPASS
#include "cleave/Target/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct LoadTranslationsPass
    : ::cleave::impl::LoadTranslationsPassBase<LoadTranslationsPass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    ::cleave::registerCUDACodegenDialects(registry);
  }
  void runOnOperation() override {}
};

} // namespace
