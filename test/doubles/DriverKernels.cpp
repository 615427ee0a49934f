//===- DriverKernels.cpp - Modules and launches of the driver double ------===//
//
// cuModuleLoadData finds the host code attached to an image pointer
// (cleaveDoubleAttachHostKernels) and loads it from memory (memfd +
// dlopen, as runtime/src/KernelLibrary.cpp does); cuLaunchKernel queues a
// call of `void name(void **args)` with the attached argument sizes as its
// accesses. PTX text defining the runtime's attention kernels maps them to
// their host emulation (test/runtime/AttentionEmulation.cpp), with accesses
// derived from the AttentionArgs fields.
//
//===----------------------------------------------------------------------===//

#include "AttentionEmulation.h"
#include "DriverState.h"
#include "cuda/AttentionArgs.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace cleave::cudadouble;
using namespace cleave::cudadouble::driver;
using cleave::rt::cuda::AttentionArgs;

namespace cleave::cudadouble::driver {
LoadedObject::~LoadedObject() {
  if (handle)
    ::dlclose(handle);
  if (fd >= 0)
    ::close(fd);
}

} // namespace cleave::cudadouble::driver

namespace {

/// Bytes of one element of plan dtype `code` in the attention kernels.
uint64_t attentionElementBytes(int code, const char *field,
                               const std::string &what) {
  switch (code) {
  case 1: // F32
    return 4;
  case 10: // F16
  case 16: // BF16
    return 2;
  default:
    fail(what + ": AttentionArgs." + field + " = " + std::to_string(code) +
         " is not a dtype the attention kernels take (F32 1, F16 10, "
         "BF16 16)");
  }
}

/// The byte ranges kernel `kind` reads and writes, from its arguments (see
/// runtime/src/cuda/AttentionKernels.cu). The double runs the whole
/// backward at the dk/dv launch, the last of the three, so that one also
/// writes dq.
std::vector<Access> attentionAccesses(KernelKind kind, const AttentionArgs &a,
                                      const std::string &what) {
  if (a.B < 0 || a.Hq < 0 || a.Hkv <= 0 || a.Sq < 0 || a.Skv < 0 || a.D <= 0 ||
      a.Dv <= 0 || a.D > cleave::rt::cuda::kAttentionMaxHeadDim ||
      a.Dv > cleave::rt::cuda::kAttentionMaxHeadDim || a.Hq % a.Hkv ||
      a.G != a.Hq / a.Hkv)
    fail(what + ": inconsistent AttentionArgs (B " + std::to_string(a.B) +
         ", Hq " + std::to_string(a.Hq) + ", Hkv " + std::to_string(a.Hkv) +
         ", G " + std::to_string(a.G) + ", Sq " + std::to_string(a.Sq) +
         ", Skv " + std::to_string(a.Skv) + ", D " + std::to_string(a.D) +
         ", Dv " + std::to_string(a.Dv) + ")");
  uint64_t B = static_cast<uint64_t>(a.B), Hq = static_cast<uint64_t>(a.Hq),
           Hkv = static_cast<uint64_t>(a.Hkv), Sq = static_cast<uint64_t>(a.Sq),
           Skv = static_cast<uint64_t>(a.Skv), D = static_cast<uint64_t>(a.D),
           Dv = static_cast<uint64_t>(a.Dv);
  uint64_t x = attentionElementBytes(a.dtype, "dtype", what);
  std::vector<Access> acc;
  auto add = [&](unsigned long long ptr, uint64_t bytes, bool write,
                 const char *role) {
    acc.push_back(Access{ptr, bytes, write, role});
  };
  bool backward = kind != KernelKind::AttentionForward;
  add(a.q, B * Hq * Sq * D * x, false, "q");
  add(a.k, B * Hkv * Skv * D * x, false, "k");
  if (kind != KernelKind::AttentionRows)
    add(a.v, B * Hkv * Skv * Dv * x, false, "v");
  if (a.hasBias)
    add(a.bias,
        static_cast<uint64_t>(a.biasB) * static_cast<uint64_t>(a.biasH) *
            static_cast<uint64_t>(a.biasSq) * Skv *
            attentionElementBytes(a.biasDType, "biasDType", what),
        false, "bias");
  if (!backward) {
    add(a.result, B * Hq * Sq * Dv * x, true, "result");
    return acc;
  }
  uint64_t dx = attentionElementBytes(a.doutDType, "doutDType", what);
  uint64_t gx = attentionElementBytes(a.gradDType, "gradDType", what);
  uint64_t rows = B * Hq * Sq * sizeof(float);
  add(a.dout, B * Hq * Sq * Dv * dx, false, "dout");
  bool rowsKernel = kind == KernelKind::AttentionRows;
  if (rowsKernel)
    add(a.out, B * Hq * Sq * Dv * x, false, "out");
  add(a.lse, rows, rowsKernel, "lse");
  add(a.rowDot, rows, rowsKernel, "rowDot");
  if (kind == KernelKind::AttentionDq || kind == KernelKind::AttentionDkdv)
    add(a.dq, B * Hq * Sq * D * gx, true, "dq");
  if (kind == KernelKind::AttentionDkdv) {
    add(a.dk, B * Hkv * Skv * D * gx, true, "dk");
    add(a.dv, B * Hkv * Skv * Dv * gx, true, "dv");
  }
  return acc;
}

/// The emulation keeps its grid in globals: one attention kernel at a time.
std::mutex &attentionMutex() {
  static std::mutex *m = new std::mutex();
  return *m;
}

bool isBinaryImage(const void *image) {
  const auto *b = static_cast<const unsigned char *>(image);
  static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'};
  static const unsigned char fatbin[4] = {0x50, 0xed, 0x55, 0xba};
  return !std::memcmp(b, elf, 4) || !std::memcmp(b, fatbin, 4);
}

/// Loads the host object attached to an image: memfd + dlopen, as the
/// runtime's KernelLibrary does. The objects' parallel-for slots stay null,
/// so every kernel runs serially on its stream's thread.
CUresult loadHostKernels(State &s, const HostKernelTable &table, Module *m) {
  int fd = ::memfd_create("cleave-double-kernels", MFD_CLOEXEC);
  if (fd < 0)
    return refuse(kInvalidImage,
                  std::string("cuModuleLoadData: memfd_create failed: ") +
                      std::strerror(errno));
  auto object = std::make_shared<LoadedObject>();
  object->fd = fd;
  for (size_t done = 0; done < table.object.size();) {
    ssize_t n =
        ::write(fd, table.object.data() + done, table.object.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return refuse(kInvalidImage,
                    std::string("cuModuleLoadData: cannot write the host "
                                "kernel object: ") +
                        std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  ::dlerror();
  object->handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!object->handle) {
    const char *e = ::dlerror();
    return refuse(kInvalidImage,
                  "cuModuleLoadData: cannot load the attached host kernel "
                  "object (" +
                      std::to_string(table.object.size()) +
                      " bytes): " + (e ? e : "unknown dlopen error"));
  }
  for (size_t i = 0; i < table.names.size(); ++i) {
    void *sym = ::dlsym(object->handle, table.names[i].c_str());
    if (!sym)
      return refuse(kInvalidImage, "cuModuleLoadData: the attached host "
                                   "kernel object does not export '" +
                                       table.names[i] + "'");
    auto f = std::make_unique<Function>();
    f->name = table.names[i];
    f->kind = KernelKind::Host;
    f->host = reinterpret_cast<void (*)(void **)>(sym);
    f->object = object;
    f->argBytes = table.argBytes[i];
    f->argWrites = table.argWrites[i];
    s.functions.insert(f.get());
    m->functions[f->name] = std::move(f);
  }
  m->object = object;
  return kSuccess;
}

} // namespace

extern "C" {

CLEAVE_DOUBLE_EXPORT int
cleaveDoubleAttachHostKernels(const void *image, const void *object,
                              uint64_t objectBytes, const char *const *names,
                              const uint32_t *numArgs, const uint64_t *argBytes,
                              const uint8_t *argWrites, uint32_t numNames) {
  if (!image || !object || !objectBytes || (numNames && (!names || !numArgs)))
    return refuse(kInvalidValue, "cleaveDoubleAttachHostKernels: null image, "
                                 "object or tables");
  HostKernelTable table;
  const auto *bytes = static_cast<const uint8_t *>(object);
  table.object.assign(bytes, bytes + objectBytes);
  size_t at = 0;
  for (uint32_t i = 0; i < numNames; ++i) {
    if (!names[i])
      return refuse(kInvalidValue, "cleaveDoubleAttachHostKernels: null name " +
                                       std::to_string(i));
    if (numArgs[i] && (!argBytes || !argWrites))
      return refuse(kInvalidValue, "cleaveDoubleAttachHostKernels: null "
                                   "argument tables");
    table.names.push_back(names[i]);
    table.argBytes.emplace_back(argBytes + at, argBytes + at + numArgs[i]);
    table.argWrites.emplace_back();
    for (uint32_t j = 0; j < numArgs[i]; ++j)
      table.argWrites.back().push_back(argWrites[at + j] != 0);
    at += numArgs[i];
  }
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  s.hostKernels[image] = std::move(table);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuModuleLoadData(CUmodule *out,
                                               const void *image) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!currentContext())
    return noContext("cuModuleLoadData");
  if (!out || !image)
    return refuse(kInvalidValue, "cuModuleLoadData: null pointer");
  auto m = std::make_unique<Module>();
  m->id = s.nextModuleId++;
  auto attached = s.hostKernels.find(image);
  if (attached != s.hostKernels.end()) {
    if (CUresult r = loadHostKernels(s, attached->second, m.get())) {
      for (auto &f : m->functions)
        s.functions.erase(f.second.get());
      return r;
    }
  } else if (!isBinaryImage(image)) {
    // PTX text: the runtime's attention kernels map to their emulation.
    const char *ptx = static_cast<const char *>(image);
    static const std::pair<const char *, KernelKind> kAttention[] = {
        {"cleave_attention_forward", KernelKind::AttentionForward},
        {"cleave_attention_backward_rows", KernelKind::AttentionRows},
        {"cleave_attention_backward_dq", KernelKind::AttentionDq},
        {"cleave_attention_backward_dkdv", KernelKind::AttentionDkdv}};
    for (const auto &entry : kAttention) {
      std::string needle = std::string(".entry ") + entry.first + "(";
      if (!std::strstr(ptx, needle.c_str()))
        continue;
      auto f = std::make_unique<Function>();
      f->name = entry.first;
      f->kind = entry.second;
      s.functions.insert(f.get());
      m->functions[f->name] = std::move(f);
    }
  }
  if (m->functions.empty() && attached == s.hostKernels.end())
    return refuse(kInvalidImage,
                  "cuModuleLoadData: the kernel image at " +
                      hex(reinterpret_cast<uintptr_t>(image)) + " (" +
                      (isBinaryImage(image) ? "a cubin" : "PTX") +
                      ") has no host kernels attached: the plan carries no "
                      "host kernels: compile it with --cuda-host-kernels");
  Module *raw = m.release();
  s.modules.insert(raw);
  *out = reinterpret_cast<CUmodule>(raw);
  return kSuccess;
}

static Module *moduleOrFail(State &s, CUmodule h, const char *call) {
  auto *m = reinterpret_cast<Module *>(h);
  if (!s.modules.count(m))
    fail(std::string(call) + ": " + hex(reinterpret_cast<uintptr_t>(h)) +
         " is not a loaded module");
  return m;
}

static Function *functionOrFail(State &s, CUfunction h, const char *call) {
  auto *f = reinterpret_cast<Function *>(h);
  if (!s.functions.count(f))
    fail(std::string(call) + ": " + hex(reinterpret_cast<uintptr_t>(h)) +
         " is not a function of a loaded module (unloaded, or never "
         "returned by cuModuleGetFunction)");
  return f;
}

CLEAVE_DOUBLE_EXPORT CUresult cuModuleUnload(CUmodule h) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Module *m = moduleOrFail(s, h, "cuModuleUnload");
  for (auto &f : m->functions)
    s.functions.erase(f.second.get());
  s.modules.erase(m);
  // Queued launches and graphs keep the object loaded until they are done.
  delete m;
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuModuleGetFunction(CUfunction *out, CUmodule h,
                                                  const char *name) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Module *m = moduleOrFail(s, h, "cuModuleGetFunction");
  if (!out || !name)
    return refuse(kInvalidValue, "cuModuleGetFunction: null pointer");
  auto it = m->functions.find(name);
  if (it == m->functions.end()) {
    std::string have;
    for (const auto &f : m->functions)
      have += (have.empty() ? "" : ", ") + f.first;
    return refuse(kNotFound, "cuModuleGetFunction: module #" +
                                 std::to_string(m->id) + " has no kernel '" +
                                 name + "' (it has: " + have + ")");
  }
  *out = reinterpret_cast<CUfunction>(it->second.get());
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuFuncSetAttribute(CUfunction h, int attribute,
                                                 int value) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Function *f = functionOrFail(s, h, "cuFuncSetAttribute");
  if (attribute !=
      cleave::rt::cuda::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    return refuse(kNotSupported, "cuFuncSetAttribute(" + f->name +
                                     "): attribute " +
                                     std::to_string(attribute) +
                                     " is not modelled by the double");
  if (value < 0 || value > 227 * 1024)
    return refuse(kInvalidValue, "cuFuncSetAttribute(" + f->name +
                                     "): MAX_DYNAMIC_SHARED_SIZE_BYTES " +
                                     std::to_string(value) +
                                     " is over 227 KiB");
  f->maxDynamicShared = std::max(value, 48 * 1024);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuLaunchKernel(CUfunction h, unsigned gx,
                                             unsigned gy, unsigned gz,
                                             unsigned bx, unsigned by,
                                             unsigned bz, unsigned shared,
                                             CUstream stream, void **params,
                                             void **extra) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Function *f = functionOrFail(s, h, "cuLaunchKernel");
  std::string what = "cuLaunchKernel(" + f->name + ")";
  streamOrFail(s, stream, what.c_str());
  if (extra)
    return refuse(kNotSupported,
                  what + ": 'extra' launch parameters are not supported by "
                         "the double (pass kernelParams)");
  if (!gx || !gy || !gz || !bx || !by || !bz || uint64_t(bx) * by * bz > 1024)
    return refuse(kInvalidValue,
                  what + ": invalid launch shape grid (" + std::to_string(gx) +
                      ", " + std::to_string(gy) + ", " + std::to_string(gz) +
                      ") block (" + std::to_string(bx) + ", " +
                      std::to_string(by) + ", " + std::to_string(bz) + ")");
  if (shared > static_cast<unsigned>(f->maxDynamicShared))
    return refuse(kInvalidValue,
                  what + ": " + std::to_string(shared) +
                      " bytes of dynamic shared memory need "
                      "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) "
                      "first (limit now " +
                      std::to_string(f->maxDynamicShared) + ")");
  if (f->kind == KernelKind::Host) {
    size_t n = f->argBytes.size();
    if (n && !params)
      fail(what + ": null kernelParams for a kernel of " + std::to_string(n) +
           " arguments");
    std::vector<void *> args(n);
    std::vector<Access> accesses;
    for (size_t i = 0; i < n; ++i) {
      if (!params[i])
        fail(what + ": kernelParams[" + std::to_string(i) + "] is null");
      CUdeviceptr ptr = *static_cast<const CUdeviceptr *>(params[i]);
      args[i] = hostPointer(ptr);
      accesses.push_back(Access{ptr, f->argBytes[i], f->argWrites[i],
                                "argument " + std::to_string(i)});
    }
    auto fn = f->host;
    std::shared_ptr<LoadedObject> keep = f->object;
    return enqueueLocked(s, lock, stream, what, std::move(accesses),
                         [fn, args, keep] {
                           std::vector<void *> copy = args;
                           fn(copy.data());
                         });
  }
  if (!params || !params[0])
    fail(what + ": null kernelParams (the kernel takes one AttentionArgs)");
  AttentionArgs a;
  std::memcpy(&a, params[0], sizeof(a));
  std::vector<Access> accesses = attentionAccesses(f->kind, a, what);
  std::function<void()> work = [] {}; // Rows and dq: done at dk/dv.
  if (f->kind == KernelKind::AttentionForward ||
      f->kind == KernelKind::AttentionDkdv) {
    bool backward = f->kind == KernelKind::AttentionDkdv;
    work = [a, backward] {
      std::lock_guard<std::mutex> guard(attentionMutex());
      cleave::test::emulateAttention(a, backward);
    };
  }
  return enqueueLocked(s, lock, stream, what, std::move(accesses),
                       std::move(work));
}

} // extern "C"
