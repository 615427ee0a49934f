//===- CPUCodegenTest.cpp - Run cleave kernels compiled for the CPU -------===//
//
// Each test parses a small module of cleave kernels, compiles it with
// compileCPUKernels, dlopens the shared object, calls `void name(void **)`
// on caller-owned buffers and compares with a plain C++ reference.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CPU/CPUCodegen.h"
#include "Cleave/IR/CleaveDialect.h"
#include "cleave/PlanFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <limits>
#include <map>
#include <utility>
#include <vector>

namespace {

using KernelFn = void (*)(void **);

/// A compiled and loaded module of kernels.
class Kernels {
public:
  explicit Kernels(const std::string &source) {
    mlir::DialectRegistry registry;
    registry.insert<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();
    cleave::registerCPUCodegenDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    if (!module) {
      ADD_FAILURE() << "cannot parse kernels";
      return;
    }
    auto start = std::chrono::steady_clock::now();
    auto bytes =
        cleave::compileCPUKernels(*module, cleave::CPUCodegenOptions());
    compileSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (mlir::failed(bytes)) {
      ADD_FAILURE() << "compileCPUKernels failed";
      return;
    }
    scratchBytes = bytes->scratchBytes;
    llvm::SmallString<128> path;
    if (llvm::sys::fs::createTemporaryFile("cleave-test", "so", path)) {
      ADD_FAILURE() << "no temporary file";
      return;
    }
    soPath = path.str().str();
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(soPath, ec);
      os.write(reinterpret_cast<const char *>(bytes->object.data()),
               bytes->object.size());
    }
    handle = dlopen(soPath.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      ADD_FAILURE() << "dlopen failed: " << dlerror();
  }
  ~Kernels() {
    if (handle)
      dlclose(handle);
    if (!soPath.empty())
      llvm::sys::fs::remove(soPath);
  }
  bool ok() const { return handle != nullptr; }
  void *symbol(const char *name) const { return dlsym(handle, name); }
  /// Calls kernel `name` on `args`, adding its scratch buffer if it takes one.
  void call(const char *name, std::vector<void *> args) {
    auto fn = reinterpret_cast<KernelFn>(dlsym(handle, name));
    ASSERT_NE(fn, nullptr) << "missing symbol " << name;
    std::vector<uint64_t> scratch;
    if (auto it = scratchBytes.find(name); it != scratchBytes.end()) {
      scratch.assign(it->second / sizeof(uint64_t) + 8, 0);
      // 64-byte aligned, as the arena's scratch region is.
      auto base = reinterpret_cast<uintptr_t>(scratch.data());
      args.push_back(reinterpret_cast<void *>((base + 63) / 64 * 64));
    }
    fn(args.data());
  }
  double compileSeconds = 0;
  /// Per kernel with temporaries: its scratch bytes (compileCPUKernels).
  std::map<std::string, uint64_t> scratchBytes;

private:
  mlir::MLIRContext context;
  std::string soPath;
  void *handle = nullptr;
};

std::vector<float> ramp(size_t n, float scale = 0.37f, float offset = -1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = offset + scale * static_cast<float>((i * 7) % 11) +
           0.01f * static_cast<float>(i);
  return v;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i])))
        << "at " << i;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST(CPUCodegen, ElementwiseChainWithBroadcast) {
  Kernels k(R"mlir(
    func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
      %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
      %s = cleave.binary add %x, %bb : tensor<4x8xf32>
      %m = cleave.binary mul %s, %s : tensor<4x8xf32>
      %t = cleave.unary tanh %m : tensor<4x8xf32>
      %g = cleave.unary sigmoid %s : tensor<4x8xf32>
      %e = cleave.unary erf %s : tensor<4x8xf32>
      %r = cleave.binary add %g, %e : tensor<4x8xf32>
      return %t, %r : tensor<4x8xf32>, tensor<4x8xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  std::printf("compile time (7-op kernel): %.3f s\n", k.compileSeconds);
  auto x = ramp(32), b = ramp(8, 0.2f, 0.5f);
  std::vector<float> t(32), r(32), wantT(32), wantR(32);
  k.call("chain", {x.data(), b.data(), t.data(), r.data()});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      float s = x[i * 8 + j] + b[j];
      wantT[i * 8 + j] = std::tanh(s * s);
      wantR[i * 8 + j] = 1.0f / (1.0f + std::exp(-s)) + std::erf(s);
    }
  expectNear(t, wantT);
  expectNear(r, wantR);
}

TEST(CPUCodegen, FloatUnaryKinds) {
  Kernels k(R"mlir(
    func.func @un(%x: tensor<6xf32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) {
      %a = cleave.unary round %x : tensor<6xf32>
      %b = cleave.unary sign %x : tensor<6xf32>
      %ax = cleave.unary abs %x : tensor<6xf32>
      %c = cleave.unary rsqrt %ax : tensor<6xf32>
      %d = cleave.unary reciprocal %x : tensor<6xf32>
      %two = cleave.constant dense<2.0> : tensor<6xf32>
      %e = cleave.binary mod %x, %two : tensor<6xf32>
      return %a, %b, %c, %d, %e : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  std::vector<float> x = {0.5f, 1.5f, 2.5f, -2.5f, -3.7f, 4.0f};
  std::vector<float> a(6), s(6), c(6), d(6), e(6);
  k.call("un", {x.data(), a.data(), s.data(), c.data(), d.data(), e.data()});
  expectNear(a, {0.0f, 2.0f, 2.0f, -2.0f, -4.0f, 4.0f});
  expectNear(s, {1, 1, 1, -1, -1, 1});
  std::vector<float> wc, wd, we;
  for (float v : x) {
    wc.push_back(1.0f / std::sqrt(std::fabs(v)));
    wd.push_back(1.0f / v);
    float r = std::fmod(v, 2.0f);
    if (r != 0 && (r < 0) != (2.0f < 0))
      r += 2.0f;
    we.push_back(r);
  }
  expectNear(c, wc);
  expectNear(d, wd);
  expectNear(e, we);
}

TEST(CPUCodegen, UnsignedIntegerOps) {
  Kernels k(R"mlir(
    func.func @u(%a: tensor<4xui32>, %b: tensor<4xui32>) -> (tensor<4xui32>, tensor<4xui32>, tensor<4xui32>, tensor<4xi1>, tensor<4xf32>) {
      %d = cleave.binary div %a, %b : tensor<4xui32>
      %r = cleave.binary rem %a, %b : tensor<4xui32>
      %m = cleave.binary max %a, %b : tensor<4xui32>
      %c = cleave.compare lt %a, %b : tensor<4xui32> -> tensor<4xi1>
      %f = cleave.convert %a : tensor<4xui32> -> tensor<4xf32>
      return %d, %r, %m, %c, %f : tensor<4xui32>, tensor<4xui32>, tensor<4xui32>, tensor<4xi1>, tensor<4xf32>
    }
    func.func @s(%a: tensor<4xi32>, %b: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) {
      %d = cleave.binary div %a, %b : tensor<4xi32>
      %r = cleave.binary rem %a, %b : tensor<4xi32>
      %m = cleave.binary mod %a, %b : tensor<4xi32>
      %p = cleave.binary pow %a, %b : tensor<4xi32>
      return %d, %r, %m, %p : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
    })mlir");
  ASSERT_TRUE(k.ok());
  std::vector<uint32_t> a = {4000000000u, 7u, 3000000000u, 5u};
  std::vector<uint32_t> b = {3u, 2u, 5u, 3000000000u};
  std::vector<uint32_t> d(4), r(4), m(4);
  std::vector<uint8_t> c(4);
  std::vector<float> f(4);
  k.call("u", {a.data(), b.data(), d.data(), r.data(), m.data(), c.data(),
               f.data()});
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(d[i], a[i] / b[i]);
    EXPECT_EQ(r[i], a[i] % b[i]);
    EXPECT_EQ(m[i], std::max(a[i], b[i]));
    EXPECT_EQ(c[i], a[i] < b[i] ? 1 : 0);
    EXPECT_FLOAT_EQ(f[i], static_cast<float>(a[i]));
  }
  std::vector<int32_t> sa = {-7, 7, -7, 3}, sb = {2, -2, -2, 4};
  std::vector<int32_t> sd(4), sr(4), sm(4), sp(4);
  k.call("s",
         {sa.data(), sb.data(), sd.data(), sr.data(), sm.data(), sp.data()});
  EXPECT_EQ(sd, (std::vector<int32_t>{-3, -3, 3, 0}));
  EXPECT_EQ(sr, (std::vector<int32_t>{-1, 1, -1, 3}));
  EXPECT_EQ(sm, (std::vector<int32_t>{1, -1, -1, 3}));
  EXPECT_EQ(sp[3], 81);
}

TEST(CPUCodegen, Convert) {
  Kernels k(R"mlir(
    func.func @cv(%x: tensor<5xf32>, %i: tensor<5xi64>) -> (tensor<5xi32>, tensor<5xi1>, tensor<5xi1>, tensor<5xui8>) {
      %a = cleave.convert %x : tensor<5xf32> -> tensor<5xi32>
      %b = cleave.convert %x : tensor<5xf32> -> tensor<5xi1>
      %c = cleave.convert %i : tensor<5xi64> -> tensor<5xi1>
      %d = cleave.convert %i : tensor<5xi64> -> tensor<5xui8>
      return %a, %b, %c, %d : tensor<5xi32>, tensor<5xi1>, tensor<5xi1>, tensor<5xui8>
    })mlir");
  ASSERT_TRUE(k.ok());
  std::vector<float> x = {-2.7f, 2.7f, 0.0f, std::nanf(""), -0.5f};
  std::vector<int64_t> i = {0, 3, -1, 256, 257};
  std::vector<int32_t> a(5);
  std::vector<uint8_t> b(5), c(5), d(5);
  k.call("cv", {x.data(), i.data(), a.data(), b.data(), c.data(), d.data()});
  EXPECT_EQ(a[0], -2);
  EXPECT_EQ(a[1], 2);
  EXPECT_EQ(a[2], 0);
  EXPECT_EQ(b, (std::vector<uint8_t>{1, 1, 0, 1, 1}));
  EXPECT_EQ(c, (std::vector<uint8_t>{0, 1, 1, 1, 1}));
  EXPECT_EQ(d, (std::vector<uint8_t>{0, 3, 255, 0, 1}));
}

uint16_t toBF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}
float fromBF16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(CPUCodegen, BF16Add) {
  Kernels k(R"mlir(
    func.func @bf(%a: tensor<8xbf16>, %b: tensor<8xbf16>) -> (tensor<8xbf16>, tensor<8xf32>) {
      %s = cleave.binary add %a, %b : tensor<8xbf16>
      %e = cleave.unary exp %s : tensor<8xbf16>
      %f = cleave.convert %e : tensor<8xbf16> -> tensor<8xf32>
      return %s, %f : tensor<8xbf16>, tensor<8xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  std::vector<uint16_t> a(8), b(8), s(8);
  std::vector<float> f(8);
  for (int i = 0; i < 8; ++i) {
    a[i] = toBF16(0.25f * i - 1.0f);
    b[i] = toBF16(0.5f + 0.125f * i);
  }
  k.call("bf", {a.data(), b.data(), s.data(), f.data()});
  for (int i = 0; i < 8; ++i) {
    float want = fromBF16(toBF16(fromBF16(a[i]) + fromBF16(b[i])));
    EXPECT_EQ(fromBF16(s[i]), want) << i;
    EXPECT_NEAR(f[i], std::exp(want), 0.01f * std::exp(want)) << i;
  }
}

//===----------------------------------------------------------------------===//
// Composites and reductions
//===----------------------------------------------------------------------===//

TEST(CPUCodegen, SoftmaxAndLogSoftmax) {
  Kernels k(R"mlir(
    func.func @sm(%x: tensor<3x5xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>) {
      %a = cleave.softmax %x dim = 1 : tensor<3x5xf32>
      %b = cleave.log_softmax %x dim = 0 : tensor<3x5xf32>
      return %a, %b : tensor<3x5xf32>, tensor<3x5xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  auto x = ramp(15, 3.0f, -5.0f);
  x[3] = 80.0f; // stability
  std::vector<float> a(15), b(15), wa(15), wb(15);
  k.call("sm", {x.data(), a.data(), b.data()});
  for (int i = 0; i < 3; ++i) {
    double m = -1e30, s = 0;
    for (int j = 0; j < 5; ++j)
      m = std::max<double>(m, x[i * 5 + j]);
    for (int j = 0; j < 5; ++j)
      s += std::exp(x[i * 5 + j] - m);
    for (int j = 0; j < 5; ++j)
      wa[i * 5 + j] = std::exp(x[i * 5 + j] - m) / s;
  }
  for (int j = 0; j < 5; ++j) {
    double m = -1e30, s = 0;
    for (int i = 0; i < 3; ++i)
      m = std::max<double>(m, x[i * 5 + j]);
    for (int i = 0; i < 3; ++i)
      s += std::exp(x[i * 5 + j] - m);
    for (int i = 0; i < 3; ++i)
      wb[i * 5 + j] = x[i * 5 + j] - m - std::log(s);
  }
  expectNear(a, wa);
  expectNear(b, wb);
}

TEST(CPUCodegen, LayerNorm) {
  Kernels k(R"mlir(
    func.func @ln(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
      %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05
          : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  auto x = ramp(32), g = ramp(8, 0.1f, 0.8f), b = ramp(8, 0.05f, -0.2f);
  std::vector<float> y(32), want(32);
  k.call("ln", {x.data(), g.data(), b.data(), y.data()});
  for (int i = 0; i < 4; ++i) {
    double mean = 0, var = 0;
    for (int j = 0; j < 8; ++j)
      mean += x[i * 8 + j] / 8.0;
    for (int j = 0; j < 8; ++j)
      var += (x[i * 8 + j] - mean) * (x[i * 8 + j] - mean) / 8.0;
    for (int j = 0; j < 8; ++j)
      want[i * 8 + j] =
          (x[i * 8 + j] - mean) / std::sqrt(var + 1e-5) * g[j] + b[j];
  }
  expectNear(y, want, 1e-4f);
}

TEST(CPUCodegen, BatchedContract) {
  Kernels k(R"mlir(
    func.func @bmm(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
      %0 = cleave.contract %a, %b batch = [0] x [0] contract = [2] x [1]
          : tensor<2x3x4xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xf32>
      return %0 : tensor<2x3x5xf32>
    }
    func.func @tn(%a: tensor<4x3xf32>, %b: tensor<5x4xf32>) -> tensor<3x5xf32> {
      %0 = cleave.contract %a, %b batch = [] x [] contract = [0] x [1]
          : tensor<4x3xf32>, tensor<5x4xf32> -> tensor<3x5xf32>
      return %0 : tensor<3x5xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  auto a = ramp(24), b = ramp(40, 0.21f, -0.7f);
  std::vector<float> c(30), want(30, 0.0f);
  k.call("bmm", {a.data(), b.data(), c.data()});
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j)
        for (int p = 0; p < 4; ++p)
          want[n * 15 + i * 5 + j] +=
              a[n * 12 + i * 4 + p] * b[n * 20 + p * 5 + j];
  expectNear(c, want);
  std::vector<float> c2(15), want2(15, 0.0f);
  k.call("tn", {a.data(), b.data(), c2.data()});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j)
      for (int p = 0; p < 4; ++p)
        want2[i * 5 + j] += a[p * 3 + i] * b[j * 4 + p];
  expectNear(c2, want2);
}

TEST(CPUCodegen, ReduceMaxSumAndArgMax) {
  Kernels k(R"mlir(
    func.func @red(%x: tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) {
      %m = cleave.reduce max %x dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
      %s = cleave.reduce sum %x dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
      %a = cleave.arg_reduce max %x dim = 2 : tensor<2x3x4xf32> -> tensor<2x3xi64>
      %n = cleave.reduce min %x dims = [2] : tensor<2x3x4xf32> -> tensor<2x3xf32>
      return %m, %s, %a, %n : tensor<2x4xf32>, tensor<3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  auto x = ramp(24);
  std::vector<float> m(8), s(3), n(6);
  std::vector<int64_t> a(6);
  k.call("red", {x.data(), m.data(), s.data(), a.data(), n.data()});
  std::vector<float> wm(8, -INFINITY), ws(3, 0.0f), wn(6, INFINITY);
  std::vector<int64_t> wa(6, 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int l = 0; l < 4; ++l) {
        float v = x[i * 12 + j * 4 + l];
        wm[i * 4 + l] = std::max(wm[i * 4 + l], v);
        ws[j] += v;
        wn[i * 3 + j] = std::min(wn[i * 3 + j], v);
        if (v > x[i * 12 + j * 4 + wa[i * 3 + j]])
          wa[i * 3 + j] = l;
      }
  expectNear(m, wm);
  expectNear(s, ws);
  expectNear(n, wn);
  EXPECT_EQ(a, wa);
}

TEST(CPUCodegen, CumSum) {
  Kernels k(R"mlir(
    func.func @cs(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
      %a = cleave.cumsum %x dim = 1 : tensor<2x4xf32>
      %b = cleave.cumsum %x dim = 1 exclusive reverse : tensor<2x4xf32>
      return %a, %b : tensor<2x4xf32>, tensor<2x4xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, a(8), b(8);
  k.call("cs", {x.data(), a.data(), b.data()});
  expectNear(a, {1, 3, 6, 10, 5, 11, 18, 26});
  expectNear(b, {9, 7, 4, 0, 21, 15, 8, 0});
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

TEST(CPUCodegen, Conv2DPaddedGrouped) {
  Kernels k(R"mlir(
    func.func @conv(%x: tensor<1x4x5x5xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32> {
      %0 = cleave.conv %x, %w strides = [2, 1] pad_low = [1, 1] pad_high = [1, 1]
          dilations = [1, 2] groups = 2
          : (tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
      return %0 : tensor<1x6x3x3xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  auto x = ramp(100), w = ramp(108, 0.13f, -0.6f);
  std::vector<float> y(54), want(54, 0.0f);
  k.call("conv", {x.data(), w.data(), y.data()});
  for (int o = 0; o < 6; ++o) {
    int g = o / 3;
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        float acc = 0;
        for (int c = 0; c < 2; ++c)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw) {
              int ih = oh * 2 + kh - 1, iw = ow * 1 + kw * 2 - 1;
              if (ih < 0 || ih >= 5 || iw < 0 || iw >= 5)
                continue;
              acc += x[(g * 2 + c) * 25 + ih * 5 + iw] *
                     w[((o * 2 + c) * 3 + kh) * 3 + kw];
            }
        want[o * 9 + oh * 3 + ow] = acc;
      }
  }
  expectNear(y, want, 1e-4f);
}

TEST(CPUCodegen, ReduceWindowMaxAndSum) {
  Kernels k(R"mlir(
    func.func @pool(%x: tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x4x4xf32>) {
      %m = cleave.reduce_window max %x window = [1, 1, 2, 2] strides = [1, 1, 2, 2]
          pad_low = [0, 0, 0, 0] pad_high = [0, 0, 0, 0] dilations = [1, 1, 1, 1]
          : tensor<1x1x4x4xf32> -> tensor<1x1x2x2xf32>
      %s = cleave.reduce_window sum %x window = [1, 1, 3, 3] strides = [1, 1, 1, 1]
          pad_low = [0, 0, 1, 1] pad_high = [0, 0, 1, 1] dilations = [1, 1, 1, 1]
          : tensor<1x1x4x4xf32> -> tensor<1x1x4x4xf32>
      return %m, %s : tensor<1x1x2x2xf32>, tensor<1x1x4x4xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  auto x = ramp(16);
  std::vector<float> m(4), s(16), wm(4, -INFINITY), ws(16, 0.0f);
  k.call("pool", {x.data(), m.data(), s.data()});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      wm[(i / 2) * 2 + j / 2] = std::max(wm[(i / 2) * 2 + j / 2], x[i * 4 + j]);
      for (int di = -1; di <= 1; ++di)
        for (int dj = -1; dj <= 1; ++dj) {
          int a = i + di, b = j + dj;
          if (a >= 0 && a < 4 && b >= 0 && b < 4)
            ws[i * 4 + j] += x[a * 4 + b];
        }
    }
  expectNear(m, wm);
  expectNear(s, ws);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(CPUCodegen, GatherAndGatherElements) {
  Kernels k(R"mlir(
    func.func @g(%t: tensor<5x3xf32>, %i: tensor<2x2xi64>) -> (tensor<2x2x3xf32>, tensor<5x2x2xf32>) {
      %a = cleave.gather %t, %i axis = 0 : (tensor<5x3xf32>, tensor<2x2xi64>) -> tensor<2x2x3xf32>
      %b = cleave.gather %t, %i axis = 1 : (tensor<5x3xf32>, tensor<2x2xi64>) -> tensor<5x2x2xf32>
      return %a, %b : tensor<2x2x3xf32>, tensor<5x2x2xf32>
    }
    func.func @ge(%x: tensor<2x5xf32>, %i: tensor<2x2xi32>) -> tensor<2x2xf32> {
      %0 = cleave.gather_elements %x, %i axis = 1 : (tensor<2x5xf32>, tensor<2x2xi32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  auto t = ramp(15);
  std::vector<int64_t> idx = {1, -1, 0, 7};
  std::vector<float> a(12), b(20);
  k.call("g", {t.data(), idx.data(), a.data(), b.data()});
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 3; ++c) {
      int64_t r = idx[i] < 0 ? idx[i] + 5 : idx[i];
      float want = (r >= 0 && r < 5) ? t[r * 3 + c] : 0.0f;
      EXPECT_FLOAT_EQ(a[i * 3 + c], want);
    }
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 4; ++i) {
      int64_t c = idx[i] < 0 ? idx[i] + 3 : idx[i];
      float want = (c >= 0 && c < 3) ? t[r * 3 + c] : 0.0f;
      EXPECT_FLOAT_EQ(b[r * 4 + i], want);
    }
  auto x = ramp(10);
  std::vector<int32_t> ei = {4, -5, 0, 2};
  std::vector<float> e(4);
  k.call("ge", {x.data(), ei.data(), e.data()});
  expectNear(e, {x[4], x[0], x[5], x[7]});
}

TEST(CPUCodegen, ScatterKinds) {
  Kernels k(R"mlir(
    func.func @s(%x: tensor<2x4xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
      %a = cleave.scatter add %x, %i, %u axis = 1 : (tensor<2x4xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x4xf32>
      %b = cleave.scatter none %x, %i, %u axis = 1 : (tensor<2x4xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x4xf32>
      %c = cleave.scatter max %x, %i, %u axis = 1 : (tensor<2x4xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x4xf32>
      return %a, %b, %c : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, xCopy = x;
  // Row 0: duplicate index 1 twice, and -1 (= 3). Row 1: 9 is skipped.
  std::vector<int64_t> idx = {1, 1, -1, 0, 9, 0};
  std::vector<float> u = {10, 20, 30, 40, 50, 60}, a(8), b(8), c(8);
  k.call("s", {x.data(), idx.data(), u.data(), a.data(), b.data(), c.data()});
  expectNear(a, {1, 32, 3, 34, 105, 6, 7, 8});
  expectNear(b, {1, 20, 3, 30, 60, 6, 7, 8});
  expectNear(c, {1, 20, 3, 30, 60, 6, 7, 8});
  expectNear(x, xCopy); // the operand is not updated in place
}

TEST(CPUCodegen, TopK) {
  Kernels k(R"mlir(
    func.func @t(%x: tensor<2x5xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x2xf32>, tensor<2x2xi64>) {
      %v, %i = cleave.top_k %x k = 3 dim = 1 largest = true sorted = true : tensor<2x5xf32> -> tensor<2x3xf32>, tensor<2x3xi64>
      %w, %j = cleave.top_k %x k = 2 dim = 1 largest = false sorted = true : tensor<2x5xf32> -> tensor<2x2xf32>, tensor<2x2xi64>
      return %v, %i, %w, %j : tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x2xf32>, tensor<2x2xi64>
    })mlir");
  ASSERT_TRUE(k.ok());
  float nan = std::numeric_limits<float>::quiet_NaN();
  // Ties keep the lower position first; NaN is the worst value.
  std::vector<float> x = {3, 7, 3, 7, 1, nan, 2, 2, 5, 2};
  std::vector<float> v(6), w(4);
  std::vector<int64_t> i(6), j(4);
  k.call("t", {x.data(), v.data(), i.data(), w.data(), j.data()});
  expectNear(v, {7, 7, 3, 5, 2, 2});
  EXPECT_EQ(i, (std::vector<int64_t>{1, 3, 0, 3, 1, 2}));
  expectNear(w, {1, 3, 2, 2});
  EXPECT_EQ(j, (std::vector<int64_t>{4, 0, 1, 2}));
}

TEST(CPUCodegen, PadModes) {
  Kernels k(R"mlir(
    func.func @p(%x: tensor<2x3xf32>, %v: tensor<f32>) -> (tensor<4x7xf32>, tensor<4x7xf32>, tensor<4x7xf32>) {
      %a = cleave.pad %x, %v low = [1, 2] high = [1, 2] mode = reflect : (tensor<2x3xf32>, tensor<f32>) -> tensor<4x7xf32>
      %b = cleave.pad %x, %v low = [1, 2] high = [1, 2] mode = edge : (tensor<2x3xf32>, tensor<f32>) -> tensor<4x7xf32>
      %c = cleave.pad %x, %v low = [1, 2] high = [1, 2] mode = constant : (tensor<2x3xf32>, tensor<f32>) -> tensor<4x7xf32>
      return %a, %b, %c : tensor<4x7xf32>, tensor<4x7xf32>, tensor<4x7xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, a(28), b(28), c(28);
  float v = 9.5f;
  k.call("p", {x.data(), &v, a.data(), b.data(), c.data()});
  auto reflect = [](int i, int n) {
    if (i < 0)
      i = -i;
    if (i >= n)
      i = 2 * (n - 1) - i;
    return i;
  };
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 7; ++j) {
      int si = i - 1, sj = j - 2;
      EXPECT_EQ(a[i * 7 + j], x[reflect(si, 2) * 3 + reflect(sj, 3)])
          << i << "," << j;
      EXPECT_EQ(b[i * 7 + j],
                x[std::clamp(si, 0, 1) * 3 + std::clamp(sj, 0, 2)]);
      bool inside = si >= 0 && si < 2 && sj >= 0 && sj < 3;
      EXPECT_EQ(c[i * 7 + j], inside ? x[si * 3 + sj] : v);
    }
}

TEST(CPUCodegen, ShapeOps) {
  Kernels k(R"mlir(
    func.func @sh(%x: tensor<2x3x4xf32>, %y: tensor<2x1x4xf32>) -> (tensor<4x2x3xf32>, tensor<3x8xf32>, tensor<2x2x2xf32>, tensor<2x3x4xf32>, tensor<2x4x4xf32>, tensor<2x3xi32>) {
      %t = cleave.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
      %r = cleave.reshape %x : tensor<2x3x4xf32> -> tensor<3x8xf32>
      %s = cleave.slice %x start = [0, 1, 0] limit = [2, 3, 4] strides = [1, 1, 2] : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
      %v = cleave.reverse %x dims = [0, 2] : tensor<2x3x4xf32>
      %c = cleave.concat %x, %y dim = 1 : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32>
      %i = cleave.iota dim = 1 : tensor<2x3xi32>
      return %t, %r, %s, %v, %c, %i : tensor<4x2x3xf32>, tensor<3x8xf32>, tensor<2x2x2xf32>, tensor<2x3x4xf32>, tensor<2x4x4xf32>, tensor<2x3xi32>
    })mlir");
  ASSERT_TRUE(k.ok());
  auto x = ramp(24), y = ramp(8, 0.5f, 10.0f);
  std::vector<float> t(24), r(24), s(8), v(24), c(32);
  std::vector<int32_t> io(6);
  k.call("sh", {x.data(), y.data(), t.data(), r.data(), s.data(), v.data(),
                c.data(), io.data()});
  auto X = [&](int a, int b, int cc) { return x[a * 12 + b * 4 + cc]; };
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int cc = 0; cc < 4; ++cc) {
        EXPECT_EQ(t[cc * 6 + a * 3 + b], X(a, b, cc));
        EXPECT_EQ(v[a * 12 + b * 4 + cc], X(1 - a, b, 3 - cc));
        EXPECT_EQ(c[a * 16 + b * 4 + cc], X(a, b, cc));
      }
  for (int a = 0; a < 2; ++a)
    for (int cc = 0; cc < 4; ++cc)
      EXPECT_EQ(c[a * 16 + 12 + cc], y[a * 4 + cc]);
  expectNear(r, x);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int cc = 0; cc < 2; ++cc)
        EXPECT_EQ(s[a * 4 + b * 2 + cc], X(a, b + 1, cc * 2));
  EXPECT_EQ(io, (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
}

TEST(CPUCodegen, ConstantAndSelect) {
  Kernels k(R"mlir(
    func.func @cs(%x: tensor<4xf32>) -> tensor<4xf32> {
      %c = cleave.constant dense<[1.0, -2.0, 3.0, -4.0]> : tensor<4xf32>
      %p = cleave.compare gt %x, %c : tensor<4xf32> -> tensor<4xi1>
      %0 = cleave.select %p, %x, %c : tensor<4xi1>, tensor<4xf32>
      return %0 : tensor<4xf32>
    }
    func.func @id(%x: tensor<4xf32>) -> tensor<4xf32> {
      return %x : tensor<4xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  std::vector<float> x = {0.0f, 0.0f, 5.0f, 5.0f}, y(4), z(4);
  k.call("cs", {x.data(), y.data()});
  expectNear(y, {1.0f, 0.0f, 5.0f, 5.0f});
  k.call("id", {x.data(), z.data()});
  expectNear(z, x);
}

//===----------------------------------------------------------------------===//
// Parallel loop nests
//===----------------------------------------------------------------------===//

/// A parallel-for that runs a nest's range in uneven pieces, last first,
/// and records them: what a team of threads may do.
struct RecordingParallelFor {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> launches;
  static void run(void *self, void (*range)(void *, int64_t, int64_t),
                  void *frame, int64_t n) {
    auto &pieces =
        static_cast<RecordingParallelFor *>(self)->launches.emplace_back();
    int64_t end = n;
    for (int64_t size = 1; end > 0; size = size * 2 + 1) {
      int64_t begin = std::max<int64_t>(0, end - size);
      range(frame, begin, end);
      pieces.emplace_back(begin, end);
      end = begin;
    }
  }
};

TEST(CPUCodegen, ParallelLoopNestsGiveTheSameBitsForAnySplit) {
  // Large enough for --cleave-cpu-parallel-loops: an elementwise nest, the
  // softmax's four nests (row maxima, exponentials, row sums, division)
  // and a sum over the rows, whose 128 columns are split into 8 blocks
  // (--cleave-cpu-split-outer-reductions).
  Kernels k(R"mlir(
    func.func @par(%x: tensor<256x128xf32>, %b: tensor<128xf32>) -> (tensor<256x128xf32>, tensor<256x128xf32>, tensor<128xf32>) {
      %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<128xf32> -> tensor<256x128xf32>
      %s = cleave.binary add %x, %bb : tensor<256x128xf32>
      %e = cleave.unary erf %s : tensor<256x128xf32>
      %m = cleave.softmax %x dim = 1 : tensor<256x128xf32>
      %c = cleave.reduce sum %x dims = [0] : tensor<256x128xf32> -> tensor<128xf32>
      return %e, %m, %c : tensor<256x128xf32>, tensor<256x128xf32>, tensor<128xf32>
    })mlir");
  ASSERT_TRUE(k.ok());
  auto *slot = static_cast<cleave::plan::ParallelForFn *>(
      k.symbol(cleave::plan::kParallelForSymbol));
  auto *runtime =
      static_cast<void **>(k.symbol(cleave::plan::kParallelRuntimeSymbol));
  ASSERT_NE(slot, nullptr);
  ASSERT_NE(runtime, nullptr);
  EXPECT_EQ(*slot, nullptr);
  auto x = ramp(256 * 128, 0.05f, -2.0f), b = ramp(128, 0.1f, 0.3f);
  std::vector<float> e1(256 * 128), m1(256 * 128), c1(128);
  k.call("par", {x.data(), b.data(), e1.data(), m1.data(), c1.data()});

  RecordingParallelFor recorder;
  *slot = &RecordingParallelFor::run;
  *runtime = &recorder;
  std::vector<float> e2(256 * 128), m2(256 * 128), c2(128);
  k.call("par", {x.data(), b.data(), e2.data(), m2.data(), c2.data()});
  *slot = nullptr;
  *runtime = nullptr;

  // Five nests of 256 rows (the outer dimension; the 128 columns stay a
  // loop of each piece) and one of 8 column blocks, each in pieces that
  // cover [0, n) once.
  ASSERT_EQ(recorder.launches.size(), 6u);
  int rowNests = 0, blockNests = 0;
  for (const auto &pieces : recorder.launches) {
    ASSERT_GT(pieces.size(), 1u);
    rowNests += pieces.front().second == 256;
    blockNests += pieces.front().second == 8;
    EXPECT_EQ(pieces.back().first, 0);
    for (size_t i = 1; i < pieces.size(); ++i)
      EXPECT_EQ(pieces[i].second, pieces[i - 1].first);
  }
  EXPECT_EQ(rowNests, 5);
  EXPECT_EQ(blockNests, 1);
  EXPECT_EQ(0, std::memcmp(e1.data(), e2.data(), e1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(m1.data(), m2.data(), m1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)));
  for (int i = 0; i < 256; ++i) {
    double sum = 0;
    for (int j = 0; j < 128; ++j)
      sum += m2[i * 128 + j];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << i;
  }
  for (int j = 0; j < 128; ++j) {
    double sum = 0;
    for (int i = 0; i < 256; ++i)
      sum += x[i * 128 + j];
    EXPECT_NEAR(c2[j], sum, 1e-3 * std::max(1.0, std::fabs(sum)));
  }
}

} // namespace
