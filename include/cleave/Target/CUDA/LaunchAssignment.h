//===- LaunchAssignment.h - A plan's kernels as CUDA launches ---*- C++ -*-===//
//
// The CUDA target's step on the plan after code generation: each Kernel
// command becomes the GPU launches of its compiled kernel.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TARGET_CUDA_LAUNCHASSIGNMENT_H
#define CLEAVE_TARGET_CUDA_LAUNCHASSIGNMENT_H

#include "cleave/PlanFormat.h"
#include "cleave/Target/CUDA/CUDACodegen.h"

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

namespace cleave {

/// Replaces each Kernel command of `plan` with the GpuLaunch commands of
/// its kernel in `cuda`, in order, with arguments resolved to arena offsets;
/// the temporaries kernels use between their launches share one scratch
/// region after the planned buffers. Records the kernel object, the PTX and
/// the target `cuda-<chip>`, and with host launches each kernel's argument
/// table. Errors (a kernel without code, an argument out of range) are
/// reported at `loc`.
mlir::LogicalResult assignCUDALaunches(plan::Plan &plan,
                                       const CUDAProgram &cuda,
                                       llvm::StringRef chip,
                                       mlir::Location loc);

} // namespace cleave

#endif // CLEAVE_TARGET_CUDA_LAUNCHASSIGNMENT_H
