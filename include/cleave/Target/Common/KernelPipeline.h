//===- KernelPipeline.h - Kernel front half both targets share --*- C++ -*-===//

#ifndef CLEAVE_TARGET_COMMON_KERNELPIPELINE_H
#define CLEAVE_TARGET_COMMON_KERNELPIPELINE_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

namespace cleave {

/// Adds the target-independent front half shared by the CPU and CUDA
/// pipelines: cleave -> linalg, elementwise fusion, splat constants as fills
/// (`--cleave-splat-constants-to-fill`), fresh buffers for aliased results
/// (`--cleave-copy-aliased-results`), one-shot bufferization with results as
/// out-parameters (identity layouts, static result buffers hoisted to the
/// caller), deallocation of temporaries, memref.copy -> linalg.copy
/// (`--cleave-lower-memref-copy`). Leaves linalg on memrefs.
void buildKernelBufferizationPipeline(mlir::OpPassManager &pm);

/// Adds the dialects and interface models (bufferization, deallocation) the
/// front half and the lowering to the LLVM dialect need.
void registerKernelCodegenDialects(mlir::DialectRegistry &registry);

} // namespace cleave

#endif // CLEAVE_TARGET_COMMON_KERNELPIPELINE_H
