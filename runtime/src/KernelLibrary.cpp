//===- KernelLibrary.cpp - Loads the plan's kernel shared object ----------===//

#include "KernelLibrary.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

namespace cleave::rt {

KernelLibrary::~KernelLibrary() {
  if (handle)
    ::dlclose(handle);
  if (fd >= 0)
    ::close(fd);
}

static std::string dlerrorText() {
  const char *e = ::dlerror();
  return e ? e : "unknown dlopen error";
}

cleave_rt_status KernelLibrary::load(const std::vector<uint8_t> &object,
                                     const std::vector<std::string> &names,
                                     const KernelThreads *threads,
                                     std::unique_ptr<KernelLibrary> *out) {
  std::unique_ptr<KernelLibrary> lib(new KernelLibrary());
  if (names.empty()) {
    *out = std::move(lib);
    return nullptr;
  }
  int fd = ::memfd_create("cleave-kernels", MFD_CLOEXEC);
  if (fd < 0)
    return makeStatus(CLEAVE_RT_INTERNAL,
                      std::string("cannot create an in-memory file for the "
                                  "kernel object: ") +
                          std::strerror(errno));
  size_t done = 0;
  while (done < object.size()) {
    ssize_t n = ::write(fd, object.data() + done, object.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return makeStatus(CLEAVE_RT_INTERNAL,
                        std::string("cannot write the kernel object to "
                                    "memory: ") +
                            std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  ::dlerror();
  lib->handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  // The descriptor stays open while the object is loaded: the dynamic loader
  // knows objects by path, so a second plan loaded through a reused
  // /proc/self/fd/N would get this plan's kernels.
  lib->fd = fd;
  if (!lib->handle)
    return makeStatus(CLEAVE_RT_DATA_LOSS,
                      "cannot load the plan's kernel object (" +
                          std::to_string(object.size()) +
                          " bytes): " + dlerrorText());
  lib->kernels.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    ::dlerror();
    void *sym = ::dlsym(lib->handle, names[i].c_str());
    if (!sym)
      return makeStatus(CLEAVE_RT_NOT_FOUND,
                        "kernel " + std::to_string(i) + " '" + names[i] +
                            "' is not exported by the plan's kernel object: " +
                            dlerrorText());
    lib->kernels.push_back(reinterpret_cast<KernelFn>(sym));
  }
  // Objects without parallel loop nests have neither slot.
  auto *parallelFor = static_cast<plan::ParallelForFn *>(
      ::dlsym(lib->handle, plan::kParallelForSymbol));
  auto *runtime = static_cast<const void **>(
      ::dlsym(lib->handle, plan::kParallelRuntimeSymbol));
  if (threads && parallelFor && runtime) {
    *runtime = threads;
    *parallelFor = &KernelThreads::parallelFor;
  }
  *out = std::move(lib);
  return nullptr;
}

} // namespace cleave::rt
