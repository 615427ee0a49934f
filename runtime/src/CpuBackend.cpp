//===- CpuBackend.cpp - Runs a plan on the host CPU -----------------------===//

#include "Backend.h"
#include "Gemm.h"
#include "RandomInit.h"
#include "KernelLibrary.h"

#include <cstdlib>
#include <cstring>

namespace cleave::rt {

using namespace plan;

namespace {
class CpuBackend final : public Backend {
public:
  explicit CpuBackend(PlanRef plan) : plan(std::move(plan)) {}
  ~CpuBackend() override { std::free(arena); }
  cleave_rt_status init();

  const char *name() const override { return "cpu"; }
  cleave_rt_status writeTensor(const TensorInfo &tensor,
                               const void *data) override {
    if (tensor.byteSize())
      std::memcpy(arena + tensor.offset, data, tensor.byteSize());
    return nullptr;
  }
  cleave_rt_status readTensor(const TensorInfo &tensor,
                              const void **out_data) override {
    *out_data = arena + tensor.offset;
    return nullptr;
  }
  cleave_rt_status run() override { return runCommands(plan->commands); }

private:
  cleave_rt_status runCommands(const std::vector<Command> &commands);

  PlanRef plan;
  uint8_t *arena = nullptr;
  std::unique_ptr<KernelLibrary> kernels;
  std::vector<void *> args; ///< Scratch for kernel arguments.
};
} // namespace

cleave_rt_status CpuBackend::init() {
  // One block, aligned to at least 64 bytes, never empty so the base pointer
  // is valid even for plans without buffers.
  uint64_t align = plan->alignment < 64 ? 64 : plan->alignment;
  uint64_t bytes = (plan->arenaBytes + align - 1) / align * align;
  if (bytes == 0)
    bytes = align;
  if (bytes < plan->arenaBytes || bytes > SIZE_MAX)
    return makeStatus(CLEAVE_RT_RESOURCE_EXHAUSTED,
                      "arena of " + std::to_string(plan->arenaBytes) +
                          " bytes is too large for this machine");
  arena = static_cast<uint8_t *>(std::aligned_alloc(align, bytes));
  if (!arena)
    return makeStatus(CLEAVE_RT_RESOURCE_EXHAUSTED,
                      "cannot allocate the arena of " +
                          std::to_string(plan->arenaBytes) + " bytes");
  std::memset(arena, 0, bytes);
  for (const Constant &c : plan->constants)
    if (!c.data.empty())
      std::memcpy(arena + c.info.offset, c.data.data(), c.data.size());
  size_t maxArgs = 0;
  for (const auto *list : {&plan->commands, &plan->initCommands})
    for (const Command &c : *list)
      if (c.kind == CommandKind::Kernel && c.buffers.size() > maxArgs)
        maxArgs = c.buffers.size();
  args.resize(maxArgs);
  CLEAVE_RT_RETURN_IF_ERROR(
      KernelLibrary::load(plan->kernelObject, plan->kernelNames, &kernels));
  // Once, after the constants: e.g. zeroing the optimizer state.
  return runCommands(plan->initCommands);
}

cleave_rt_status CpuBackend::runCommands(const std::vector<Command> &commands) {
  for (const Command &c : commands) {
    switch (c.kind) {
    case CommandKind::Kernel:
      for (size_t i = 0; i < c.buffers.size(); ++i)
        args[i] = arena + c.buffers[i];
      kernels->kernel(static_cast<size_t>(c.params[0]))(args.data());
      break;
    case CommandKind::Gemm:
      runGemm(c, arena);
      break;
    case CommandKind::Copy:
      if (c.params[0])
        std::memmove(arena + c.buffers[1], arena + c.buffers[0],
                     static_cast<size_t>(c.params[0]));
      break;
    case CommandKind::Fill:
      if (c.params[0])
        std::memset(arena + c.buffers[0], static_cast<int>(c.params[1]),
                    static_cast<size_t>(c.params[0]));
      break;
    case CommandKind::RandomNormal:
      fillNormal(c, 0, c.params[0], reinterpret_cast<float *>(arena + c.buffers[0]));
      break;
    case CommandKind::GpuLaunch: // Rejected by the validator.
      return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                        "GPU launch command in a CPU plan");
    }
  }
  return nullptr;
}

cleave_rt_status createCpuBackend(PlanRef plan, std::unique_ptr<Backend> *out) {
  if (plan->target.rfind("cpu", 0) != 0)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "the plan targets '" + plan->target +
                          "' and cannot run on the cpu backend");
  auto backend = std::make_unique<CpuBackend>(std::move(plan));
  CLEAVE_RT_RETURN_IF_ERROR(backend->init());
  *out = std::move(backend);
  return nullptr;
}

cleave_rt_status createBackend(const std::string &name, PlanRef plan,
                               std::unique_ptr<Backend> *out) {
  if (name.empty() || name == "cpu")
    return createCpuBackend(std::move(plan), out);
  if (name == "cuda")
    return createCudaBackend(std::move(plan), out);
  return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                    "unknown backend '" + name + "' (known: cpu, cuda)");
}

} // namespace cleave::rt
