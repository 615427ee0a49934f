//===- LaunchAssignment.cpp - A plan's kernels as CUDA launches -----------===//
//
// A step on the plan, not an IR pass: code generation has turned each
// kernel of the kernel module into launches (CUDAProgram), and the plan's
// Kernel commands name those kernels and their arena buffers. This step
// joins the two: each Kernel command becomes its kernel's launches, in
// order, with every launch argument resolved to an arena offset. The
// temporaries kernels use between their launches share one scratch region
// after the planned buffers (commands run one after another).
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CUDA/LaunchAssignment.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>

using namespace mlir;

namespace cleave {

LogicalResult assignCUDALaunches(plan::Plan &p, const CUDAProgram &cuda,
                                 StringRef chip, Location loc) {
  llvm::StringMap<const CUDAKernel *> byName;
  for (const CUDAKernel &k : cuda.kernels)
    byName[k.name] = &k;
  auto align = [&](uint64_t v) {
    return (v + p.alignment - 1) / p.alignment * p.alignment;
  };
  uint64_t scratchBase = align(p.arenaBytes), scratchBytes = 0;
  for (const CUDAKernel &k : cuda.kernels) {
    uint64_t total = 0;
    for (int64_t bytes : k.temporaryBytes)
      total += align(std::max<int64_t>(bytes, 1));
    scratchBytes = std::max(scratchBytes, total);
  }

  std::vector<std::string> symbols;
  llvm::StringMap<int64_t> symbolIndex;
  std::vector<plan::Command> commands;
  for (plan::Command &cmd : p.commands) {
    if (cmd.kind != plan::CommandKind::Kernel) {
      commands.push_back(std::move(cmd));
      continue;
    }
    const std::string &name = p.kernelNames[cmd.params[0]];
    const CUDAKernel *kernel = byName.lookup(name);
    if (!kernel)
      return mlir::emitError(loc) << "no CUDA code for kernel '" << name << "'";
    std::vector<uint64_t> temporaries;
    uint64_t offset = scratchBase;
    for (int64_t bytes : kernel->temporaryBytes) {
      temporaries.push_back(offset);
      offset += align(std::max<int64_t>(bytes, 1));
    }
    for (const CUDALaunch &launch : kernel->launches) {
      auto [it, inserted] =
          symbolIndex.try_emplace(launch.symbol, symbols.size());
      if (inserted)
        symbols.push_back(launch.symbol);
      plan::Command gpu;
      gpu.kind = plan::CommandKind::GpuLaunch;
      gpu.params = {it->second,      launch.grid[0],    launch.grid[1],
                    launch.grid[2],  launch.block[0],   launch.block[1],
                    launch.block[2], launch.sharedBytes};
      for (int64_t arg : launch.args) {
        size_t io = cmd.buffers.size();
        if (arg < 0 || static_cast<size_t>(arg) >= io + temporaries.size())
          return mlir::emitError(loc)
                 << "kernel '" << name << "' launches with argument " << arg
                 << " out of range";
        gpu.buffers.push_back(static_cast<size_t>(arg) < io
                                  ? cmd.buffers[arg]
                                  : temporaries[arg - io]);
      }
      commands.push_back(std::move(gpu));
    }
  }
  p.commands = std::move(commands);
  if (cuda.hostLaunches) {
    for (const std::string &symbol : symbols) {
      auto it = cuda.hostLaunchArgs.find(symbol);
      if (it == cuda.hostLaunchArgs.end())
        return mlir::emitError(loc)
               << "no host version of the CUDA kernel '" << symbol << "'";
      std::vector<plan::HostKernelArg> args;
      for (const CUDALaunchArg &a : it->second)
        args.push_back({static_cast<uint64_t>(a.bytes), a.written});
      p.hostKernelArgs.push_back(std::move(args));
    }
  }
  p.kernelNames = std::move(symbols);
  p.kernelObject = cuda.cubin;
  p.arenaBytes = scratchBase + scratchBytes;
  p.target = ("cuda-" + chip).str();
  plan::addMetadata(p, plan::meta::kKernelPtx, cuda.ptx);
  plan::addMetadata(p, plan::meta::kCudaScratchBytes, scratchBytes);
  return success();
}

} // namespace cleave
