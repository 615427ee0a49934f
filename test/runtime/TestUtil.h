//===- TestUtil.h - Helpers shared by the runtime tests --------*- C++ -*-===//

#ifndef CLEAVE_TEST_RUNTIME_TESTUTIL_H
#define CLEAVE_TEST_RUNTIME_TESTUTIL_H

#include "cleave/PlanFormat.h"
#include "cleave/cleave_rt.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace cleave::test {

inline int64_t doubleBits(double d) {
  int64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  return bits;
}

inline plan::TensorInfo tensor(std::string name, plan::DType dtype,
                               std::vector<int64_t> shape, uint64_t offset) {
  plan::TensorInfo t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.offset = offset;
  return t;
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

/// Row-major gemm parameters with tight leading dimensions.
inline plan::Command gemm(plan::DType dtype, bool tA, bool tB, int64_t M,
                          int64_t N, int64_t K, uint64_t a, uint64_t b,
                          uint64_t c, int64_t batch = 1, int64_t strideA = 0,
                          int64_t strideB = 0, int64_t strideC = 0,
                          double alpha = 1.0, double beta = 0.0) {
  plan::Command cmd;
  cmd.kind = plan::CommandKind::Gemm;
  cmd.params = {static_cast<int64_t>(dtype),
                tA,
                tB,
                M,
                N,
                K,
                batch,
                tA ? M : K,
                tB ? K : N,
                N,
                strideA,
                strideB,
                strideC,
                doubleBits(alpha),
                doubleBits(beta)};
  cmd.buffers = {a, b, c};
  return cmd;
}

/// A fresh temporary directory, removed with its files on destruction.
class TempDir {
public:
  TempDir() {
    char tmpl[] = "/tmp/cleave-rt-test-XXXXXX";
    const char *d = ::mkdtemp(tmpl);
    path = d ? d : "/tmp";
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path + "'";
    if (path != "/tmp")
      (void)std::system(cmd.c_str());
  }
  std::string file(const std::string &name) const { return path + "/" + name; }
  std::string path;
};

inline bool writeBytes(const std::string &path,
                       const std::vector<uint8_t> &bytes) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

inline bool fileExists(const std::string &path) {
  return ::access(path.c_str(), F_OK) == 0;
}

/// Owns a program and an executor made from a plan; records the first
/// error's code and message.
struct Loaded {
  cleave_rt::Program program;
  cleave_rt::Executor executor;
  cleave_rt_status_code_t code = CLEAVE_RT_OK;
  std::string error;
  explicit Loaded(const plan::Plan &p, const char *backend = "cpu") {
    std::vector<uint8_t> bytes = plan::serialize(p);
    if (!take(cleave_rt_program_load_memory(bytes.data(), bytes.size(),
                                            program.out())))
      return;
    take(cleave_rt_executor_create(program, backend, executor.out()));
  }
  bool take(cleave_rt_status s) {
    if (!s)
      return true;
    code = cleave_rt_status_code(s);
    error = cleave_rt_status_message(s);
    cleave_rt_status_free(s);
    return false;
  }
  template <typename T> bool set(size_t i, const std::vector<T> &v) {
    return take(cleave_rt_executor_set_input(executor, i, v.data(),
                                             v.size() * sizeof(T)));
  }
  bool run() { return take(cleave_rt_executor_run(executor)); }
  template <typename T> std::vector<T> out(size_t i) {
    const void *data = nullptr;
    size_t bytes = 0;
    if (!take(cleave_rt_executor_output(executor, i, &data, &bytes)))
      return {};
    const T *p = static_cast<const T *>(data);
    return std::vector<T>(p, p + bytes / sizeof(T));
  }
};

/// The whole contents of a file ("" if it cannot be read).
inline std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

#ifdef CLEAVE_RUN_PATH
/// Exit code and captured output of one cleave-run.
struct Result {
  int code;
  std::string out, err;
};

/// Runs cleave-run with `args` (already shell-quoted), output in `dir`.
inline Result runTool(const TempDir &dir, const std::string &args) {
  std::string cmd = std::string("'") + CLEAVE_RUN_PATH + "' " + args + " >'" +
                    dir.file("stdout") + "' 2>'" + dir.file("stderr") + "'";
  int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir.file("stdout"));
  r.err = slurp(dir.file("stderr"));
  return r;
}
#endif

} // namespace cleave::test

#endif // CLEAVE_TEST_RUNTIME_TESTUTIL_H
