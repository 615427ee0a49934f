//===- CudaApi.cpp - dlopen of the CUDA driver, cuBLASLt and NCCL --------===//

#include "CudaApi.h"

#include <cstdlib>
#include <dlfcn.h>
#include <initializer_list>
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
  return makeStatus(CLEAVE_RT_INTERNAL, std::string(what) + " failed: " +
                                            driverErrorString(api, r));
}

static void loadDriverOnce(Loaded<DriverApi> *l) {
  auto fail = [&](cleave_rt_status_code_t code, std::string msg) {
    l->code = code;
    l->message = std::move(msg);
  };
  DriverApi &api = l->api;
  // $CLEAVE_CUDA_DRIVER_LIBRARY names another driver library (the host
  // double of test/doubles, or a driver outside the loader path); only that
  // one is tried, so a wrong path is an error, never the system's driver.
  const char *env = std::getenv("CLEAVE_CUDA_DRIVER_LIBRARY");
  std::string path = env && *env ? env : "libcuda.so.1";
  dlerror();
  api.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!api.handle) {
    const char *e = dlerror();
    return fail(CLEAVE_RT_UNAVAILABLE,
                "CUDA driver library " + path +
                    " not found: " + (e ? e : "dlopen failed") +
                    (env && *env ? " ($CLEAVE_CUDA_DRIVER_LIBRARY)"
                                 : " (is the NVIDIA driver installed?)"));
  }
#define CLEAVE_CUDA_RESOLVE(name, sym, type)                                   \
  api.name = reinterpret_cast<type>(dlsym(api.handle, sym));                   \
  if (!api.name)                                                               \
    return fail(CLEAVE_RT_UNAVAILABLE,                                         \
                path + " lacks " + sym +                                       \
                    " (the driver is too old for this runtime)");
  CLEAVE_CUDA_DRIVER_SYMBOLS(CLEAVE_CUDA_RESOLVE)
#undef CLEAVE_CUDA_RESOLVE
  // The host doubles' own entry points; a real driver has neither.
  api.cleaveDoubleSetCommand =
      reinterpret_cast<decltype(api.cleaveDoubleSetCommand)>(
          dlsym(api.handle, "cleaveDoubleSetCommand"));
  api.cleaveDoubleAttachHostKernels =
      reinterpret_cast<decltype(api.cleaveDoubleAttachHostKernels)>(
          dlsym(api.handle, "cleaveDoubleAttachHostKernels"));
  CUresult r = api.cuInit(0);
  if (r != CUDA_SUCCESS)
    return fail(CLEAVE_RT_UNAVAILABLE,
                "no CUDA device: cuInit failed: " + driverErrorString(api, r));
  int count = 0;
  r = api.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS)
    return fail(CLEAVE_RT_UNAVAILABLE,
                "no CUDA device: cuDeviceGetCount failed: " +
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

/// dlopen(path) or null with *error set to the dlerror() text.
static void *openLibrary(const std::string &path, std::string *error) {
  dlerror();
  if (void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))
    return handle;
  const char *e = dlerror();
  *error = e ? e : "dlopen failed";
  return nullptr;
}

/// Opens $`envVar` when it is set (that library only: a wrong path is an
/// error, never another library), else the first that loads among `bases`
/// on the loader path, under $CUDA_HOME/lib64 and under
/// /usr/local/cuda/lib64; sets *opened to the name that loaded. On failure
/// returns null and sets *error to "<what> library not found (tried ...):
/// <last dlerror()> (...)".
static void *openCudaLibrary(const char *what, const char *envVar,
                             std::initializer_list<const char *> bases,
                             std::string *opened, std::string *error) {
  std::vector<std::string> names;
  if (const char *env = std::getenv(envVar); env && *env) {
    names.push_back(env);
  } else {
    std::vector<std::string> dirs = {""};
    if (const char *home = std::getenv("CUDA_HOME"); home && *home)
      dirs.push_back(std::string(home) + "/lib64/");
    if (dirs.back() != "/usr/local/cuda/lib64/")
      dirs.push_back("/usr/local/cuda/lib64/");
    for (const std::string &dir : dirs)
      for (const char *base : bases)
        names.push_back(dir + base);
  }
  std::string tried, lastError;
  for (const std::string &name : names) {
    if (void *handle = openLibrary(name, &lastError)) {
      *opened = name;
      return handle;
    }
    tried += (tried.empty() ? "" : ", ") + name;
  }
  *error = std::string(what) + " library not found (tried " + tried +
           "): " + lastError + " (set " + envVar + " or LD_LIBRARY_PATH)";
  return nullptr;
}

static void loadCublasLtOnce(Loaded<CublasLtApi> *l) {
  CublasLtApi &api = l->api;
  std::string opened;
  api.handle = openCudaLibrary(
      "cuBLASLt", "CLEAVE_CUBLASLT_LIBRARY",
      {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, &opened,
      &l->message);
  if (!api.handle) {
    l->code = CLEAVE_RT_UNAVAILABLE;
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

std::string ncclVersionString(int code) {
  // NCCL_VERSION(X, Y, Z) is X * 1000 + Y * 100 + Z up to 2.8, then
  // X * 10000 + Y * 100 + Z.
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(code % 100);
}

cleave_rt_status checkNccl(const NcclApi &api, ncclResult_t r, const char *what,
                           ncclComm_t comm) {
  if (r == ncclSuccess)
    return nullptr;
  std::string text = "ncclResult " + std::to_string(r);
  if (api.ncclGetErrorString)
    if (const char *t = api.ncclGetErrorString(r))
      text += std::string(" (") + t + ")";
  if (api.ncclGetLastError)
    if (const char *detail = api.ncclGetLastError(comm); detail && *detail)
      text += std::string(": ") + detail;
  return makeStatus(CLEAVE_RT_INTERNAL, std::string(what) + " failed: " + text);
}

/// Checks the version of the library at api->handle (opened from `library`),
/// then resolves the table. On failure the library is closed and the table
/// cleared.
static cleave_rt_status resolveNccl(NcclApi *api, const std::string &library) {
  auto fail = [&](std::string message) {
    dlclose(api->handle);
    *api = NcclApi();
    return makeStatus(CLEAVE_RT_UNAVAILABLE, std::move(message));
  };
  // The version first: a release too old for the table is named as such,
  // not by the first symbol it lacks.
  auto getVersion = reinterpret_cast<NcclApi::ncclGetVersionFn>(
      dlsym(api->handle, "ncclGetVersion"));
  if (!getVersion)
    return fail(library + " lacks ncclGetVersion (not an NCCL library)");
  int code = 0;
  if (ncclResult_t r = getVersion(&code))
    return fail(library + ": ncclGetVersion failed with ncclResult " +
                std::to_string(r));
  if (code < kMinNcclVersionCode)
    return fail("NCCL " + ncclVersionString(code) + " (" + library +
                ") is too old: this runtime needs NCCL " +
                ncclVersionString(kMinNcclVersionCode) + " or newer");
  api->versionCode = code;
#define CLEAVE_CUDA_RESOLVE(name, sym, type)                                   \
  api->name = reinterpret_cast<type>(dlsym(api->handle, sym));                 \
  if (!api->name)                                                              \
    return fail(library + " (NCCL " + ncclVersionString(code) + ") lacks " +   \
                sym);
  CLEAVE_NCCL_SYMBOLS(CLEAVE_CUDA_RESOLVE)
#undef CLEAVE_CUDA_RESOLVE
  api->ncclCommInitRankConfig =
      reinterpret_cast<decltype(api->ncclCommInitRankConfig)>(
          dlsym(api->handle, "ncclCommInitRankConfig"));
  return nullptr;
}

cleave_rt_status loadNcclFrom(const std::string &path, NcclApi *out) {
  NcclApi api;
  std::string error;
  api.handle = openLibrary(path, &error);
  if (!api.handle)
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      "cannot open the NCCL library " + path + ": " + error);
  CLEAVE_RT_RETURN_IF_ERROR(resolveNccl(&api, path));
  *out = api;
  return nullptr;
}

static void loadNcclOnce(Loaded<NcclApi> *l) {
  NcclApi &api = l->api;
  std::string opened;
  api.handle =
      openCudaLibrary("NCCL", "CLEAVE_NCCL_LIBRARY",
                      {"libnccl.so.2", "libnccl.so"}, &opened, &l->message);
  if (!api.handle) {
    l->code = CLEAVE_RT_UNAVAILABLE;
    return;
  }
  if (cleave_rt_status s = resolveNccl(&api, opened)) {
    l->code = cleave_rt_status_code(s);
    l->message = cleave_rt_status_message(s);
    cleave_rt_status_free(s);
  }
}

cleave_rt_status loadNccl(const NcclApi **out) {
  static Loaded<NcclApi> loaded;
  static std::once_flag once;
  std::call_once(once, [] { loadNcclOnce(&loaded); });
  CLEAVE_RT_RETURN_IF_ERROR(repeat(loaded.code, loaded.message));
  *out = &loaded.api;
  return nullptr;
}

} // namespace cleave::rt::cuda
