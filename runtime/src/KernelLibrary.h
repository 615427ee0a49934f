//===- KernelLibrary.h - Loads the plan's kernel shared object -*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_KERNELLIBRARY_H
#define CLEAVE_RUNTIME_KERNELLIBRARY_H

#include "KernelThreads.h"
#include "Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cleave::rt {

/// Every kernel has this signature: args[i] is the address of argument i.
using KernelFn = void (*)(void **args);

/// An ELF shared object held in memory, loaded through memfd_create + dlopen
/// (so nothing is written to disk), with its kernels resolved by name.
class KernelLibrary {
public:
  ~KernelLibrary();
  /// Loads `object` and resolves every name of `names`, in order. With
  /// `threads`, the object's parallel loop nests run on them (its
  /// plan::kParallelForSymbol slots are set); without, on the thread that
  /// calls each kernel.
  static cleave_rt_status load(const std::vector<uint8_t> &object,
                               const std::vector<std::string> &names,
                               const KernelThreads *threads,
                               std::unique_ptr<KernelLibrary> *out);
  KernelFn kernel(size_t index) const { return kernels[index]; }
  size_t size() const { return kernels.size(); }

private:
  KernelLibrary() = default;
  void *handle = nullptr;
  int fd = -1; ///< The memfd the object was loaded from.
  std::vector<KernelFn> kernels;
};

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_KERNELLIBRARY_H
