//===- CudaApi.cpp - dlopen of the CUDA driver and cuBLASLt ---------------===//

#include "CudaApi.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <vector>

namespace cleave::rt::cuda {

namespace {
/// What a process-wide load produced: the table or the error to repeat.
template <typename Api> struct Loaded {
  Api api;
  cleave_rt_status_code_t code = CLEAVE_RT_OK;
  std::string message;
};
} // namespace

static cleave_rt_status repeat(cleave_rt_status_code_t code,
                               const std::string &message) {
  return code == CLEAVE_RT_OK ? nullptr : makeStatus(code, message);
}

std::string driverErrorString(const DriverApi &api, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (api.cuGetErrorName)
    api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString)
    api.cuGetErrorString(r, &text);
  std::string s = name ? name : "CUresult " + std::to_string(r);
  if (text)
    s += std::string(" (") + text + ")";
  return s;
}

cleave_rt_status checkDriver(const DriverApi &api, CUresult r,
                             const char *what) {
  if (r == CUDA_SUCCESS)
    return nullptr;
  return makeStatus(CLEAVE_RT_INTERNAL,
                    std::string(what) + " failed: " + driverErrorString(api, r));
}

static void loadDriverOnce(Loaded<DriverApi> *l) {
  auto fail = [&](cleave_rt_status_code_t code, std::string msg) {
    l->code = code;
    l->message = std::move(msg);
  };
  DriverApi &api = l->api;
  dlerror();
  api.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api.handle) {
    const char *e = dlerror();
    return fail(CLEAVE_RT_UNAVAILABLE,
                std::string("CUDA driver library libcuda.so.1 not found: ") +
                    (e ? e : "dlopen failed") +
                    " (is the NVIDIA driver installed?)");
  }
#define CLEAVE_CUDA_RESOLVE(name, sym, type)                                   \
  api.name = reinterpret_cast<type>(dlsym(api.handle, sym));                   \
  if (!api.name)                                                               \
    return fail(CLEAVE_RT_UNAVAILABLE,                                         \
                std::string("libcuda.so.1 lacks ") + sym +                     \
                    " (the driver is too old for this runtime)");
  CLEAVE_CUDA_DRIVER_SYMBOLS(CLEAVE_CUDA_RESOLVE)
#undef CLEAVE_CUDA_RESOLVE
  CUresult r = api.cuInit(0);
  if (r != CUDA_SUCCESS)
    return fail(CLEAVE_RT_UNAVAILABLE,
                "no CUDA device: cuInit failed: " + driverErrorString(api, r));
  int count = 0;
  r = api.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS)
    return fail(CLEAVE_RT_UNAVAILABLE, "no CUDA device: cuDeviceGetCount failed: " +
                                           driverErrorString(api, r));
  if (count == 0)
    return fail(CLEAVE_RT_UNAVAILABLE,
                "no CUDA device: the driver reports 0 devices");
}

cleave_rt_status loadDriver(const DriverApi **out) {
  static Loaded<DriverApi> loaded;
  static std::once_flag once;
  std::call_once(once, [] { loadDriverOnce(&loaded); });
  CLEAVE_RT_RETURN_IF_ERROR(repeat(loaded.code, loaded.message));
  *out = &loaded.api;
  return nullptr;
}

cleave_rt_status checkCublas(const CublasLtApi &api, cublasStatus_t s,
                             const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return nullptr;
  std::string text = "cublasStatus " + std::to_string(s);
  if (api.cublasLtGetStatusString)
    if (const char *t = api.cublasLtGetStatusString(s))
      text += std::string(" (") + t + ")";
  return makeStatus(CLEAVE_RT_INTERNAL, std::string(what) + " failed: " + text);
}

static void loadCublasLtOnce(Loaded<CublasLtApi> *l) {
  CublasLtApi &api = l->api;
  std::string tried, lastError;
  std::vector<std::string> names;
  if (const char *env = std::getenv("CLEAVE_CUBLASLT_LIBRARY"))
    names.push_back(env);
  for (const char *dir : {"", "/usr/local/cuda/lib64/"})
    for (const char *base : {"libcublasLt.so.13", "libcublasLt.so.12",
                             "libcublasLt.so"})
      names.push_back(std::string(dir) + base);
  for (const std::string &name : names) {
    dlerror();
    api.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.handle)
      break;
    const char *e = dlerror();
    lastError = e ? e : "dlopen failed";
    tried += (tried.empty() ? "" : ", ") + name;
  }
  if (!api.handle) {
    l->code = CLEAVE_RT_UNAVAILABLE;
    l->message = "cuBLASLt library not found (tried " + tried + "): " +
                 lastError + " (set CLEAVE_CUBLASLT_LIBRARY or LD_LIBRARY_PATH)";
    return;
  }
#define CLEAVE_CUDA_RESOLVE(name, sym, type)                                   \
  api.name = reinterpret_cast<type>(dlsym(api.handle, sym));                   \
  if (!api.name) {                                                             \
    l->code = CLEAVE_RT_UNAVAILABLE;                                           \
    l->message = std::string("cuBLASLt lacks ") + sym;                         \
    return;                                                                    \
  }
  CLEAVE_CUBLASLT_SYMBOLS(CLEAVE_CUDA_RESOLVE)
#undef CLEAVE_CUDA_RESOLVE
  api.cublasLtGetStatusString =
      reinterpret_cast<const char *(*)(cublasStatus_t)>(
          dlsym(api.handle, "cublasLtGetStatusString"));
}

cleave_rt_status loadCublasLt(const CublasLtApi **out) {
  static Loaded<CublasLtApi> loaded;
  static std::once_flag once;
  std::call_once(once, [] { loadCublasLtOnce(&loaded); });
  CLEAVE_RT_RETURN_IF_ERROR(repeat(loaded.code, loaded.message));
  *out = &loaded.api;
  return nullptr;
}

} // namespace cleave::rt::cuda
