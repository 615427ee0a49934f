//===- MergeGPUModules.cpp - Outlined kernels into one gpu.module ---------===//
//
// `--cleave-cuda-merge-gpu-modules`: moves every outlined gpu.func into one
// `gpu.module @cleave_kernels` (one cubin for the whole program) and
// retargets the launches. Launch bounds: outlining records the constant
// block size as `gpu.known_block_size`, which convert-gpu-to-nvvm turns into
// `nvvm.maxntid`.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CUDA/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/StringMap.h"

#define DEBUG_TYPE "cleave-cuda-merge-gpu-modules"

namespace cleave {
#define GEN_PASS_DEF_MERGEGPUMODULESPASS
#include "cleave/Target/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct MergeGPUModulesPass
    : ::cleave::impl::MergeGPUModulesPassBase<MergeGPUModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
    if (modules.empty())
      return;
    OpBuilder b(module.getContext());
    b.setInsertionPoint(modules.front());
    auto merged =
        gpu::GPUModuleOp::create(b, module.getLoc(), "cleave_kernels");
    SymbolTable mergedTable(merged);
    llvm::StringMap<std::string> renamed; // "module::func" -> new name
    for (gpu::GPUModuleOp m : modules) {
      for (Operation &op : llvm::make_early_inc_range(*m.getBody())) {
        auto sym = dyn_cast<SymbolOpInterface>(op);
        std::string oldName = sym ? sym.getName().str() : "";
        op.moveBefore(merged.getBody(), merged.getBody()->end());
        if (sym) {
          mergedTable.insert(&op); // renames on collision
          renamed[(m.getName() + "::" + oldName).str()] = sym.getName().str();
        }
      }
      m.erase();
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      std::string key = (launch.getKernelModuleName().getValue() +
                         "::" + launch.getKernelName().getValue())
                            .str();
      auto it = renamed.find(key);
      if (it == renamed.end())
        return;
      launch.setKernelAttr(SymbolRefAttr::get(
          b.getStringAttr("cleave_kernels"),
          {FlatSymbolRefAttr::get(b.getStringAttr(it->second))}));
    });
  }
};

} // namespace
