//===- CUDACodegenTest.cpp - Compile cleave kernels for NVIDIA GPUs -------===//
//
// No GPU needed: each test compiles a small module of cleave kernels with
// compileCUDAKernels and checks the launch descriptions, that the cubin is an
// ELF holding every launched symbol, and that `ptxas -v` on the PTX reports
// no stack frame (local memory) and no spills for any kernel. Skipped when
// the CUDA toolkit (ptxas) is missing.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CUDA/CUDACodegen.h"
#include "Cleave/IR/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace {

const char *kToolkit = "/usr/local/cuda";

bool haveToolkit() {
  return llvm::sys::fs::can_execute(std::string(kToolkit) + "/bin/ptxas");
}

std::optional<cleave::CUDAProgram>
compile(mlir::MLIRContext &context, const std::string &source,
        cleave::CUDACodegenOptions options = {}) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();
  cleave::registerCUDACodegenDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  if (!module)
    return std::nullopt;
  options.toolkit = kToolkit;
  auto program = cleave::compileCUDAKernels(*module, options);
  if (mlir::failed(program))
    return std::nullopt;
  return std::move(*program);
}

/// Runs `ptxas -v` on the PTX and returns its report (stderr).
std::string ptxasReport(const std::string &ptx, const std::string &chip) {
  llvm::SmallString<128> ptxPath, logPath;
  llvm::sys::fs::createTemporaryFile("cleave-cuda-test", "ptx", ptxPath);
  llvm::sys::fs::createTemporaryFile("cleave-cuda-test", "log", logPath);
  auto cleanup = llvm::make_scope_exit([&] {
    llvm::sys::fs::remove(ptxPath);
    llvm::sys::fs::remove(logPath);
  });
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(ptxPath, ec);
    os << ptx;
  }
  std::string ptxas = std::string(kToolkit) + "/bin/ptxas";
  std::string arch = "-arch=" + chip;
  llvm::SmallVector<llvm::StringRef> args = {ptxas, "-v",        arch,
                                             "-o",  "/dev/null", ptxPath};
  std::optional<llvm::StringRef> redirects[] = {
      std::nullopt, llvm::StringRef(logPath), llvm::StringRef(logPath)};
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects);
  auto buffer = llvm::MemoryBuffer::getFile(logPath);
  std::string log = buffer ? (*buffer)->getBuffer().str() : "";
  EXPECT_EQ(rc, 0) << log;
  return log;
}

/// Checks the cubin, the symbols and that no kernel uses local memory.
void checkProgram(const cleave::CUDAProgram &program,
                  const std::string &chip = "sm_90a") {
  ASSERT_GE(program.cubin.size(), 4u);
  EXPECT_EQ(std::string(program.cubin.begin(), program.cubin.begin() + 4),
            "\x7f"
            "ELF");
  std::string cubin(program.cubin.begin(), program.cubin.end());
  std::string log = ptxasReport(program.ptx, chip);
  for (const cleave::CUDAKernel &kernel : program.kernels) {
    EXPECT_FALSE(kernel.launches.empty()) << kernel.name;
    for (const cleave::CUDALaunch &launch : kernel.launches) {
      EXPECT_NE(cubin.find(launch.symbol), std::string::npos) << launch.symbol;
      EXPECT_NE(program.ptx.find(".entry " + launch.symbol + "("),
                std::string::npos)
          << launch.symbol;
      EXPECT_NE(log.find("Compiling entry function '" + launch.symbol + "'"),
                std::string::npos)
          << log;
      for (int i = 0; i < 3; ++i) {
        EXPECT_GE(launch.grid[i], 1);
        EXPECT_GE(launch.block[i], 1);
      }
      EXPECT_LE(launch.block[0] * launch.block[1] * launch.block[2], 1024);
    }
  }
  // Every "N bytes stack frame, S bytes spill stores, L bytes spill loads"
  // line must be all zeros, and no kernel may report lmem.
  llvm::Regex frame("([0-9]+) bytes stack frame, ([0-9]+) bytes spill "
                    "stores, ([0-9]+) bytes spill loads");
  llvm::StringRef rest(log);
  int frames = 0;
  llvm::SmallVector<llvm::StringRef> m;
  while (frame.match(rest, &m)) {
    ++frames;
    EXPECT_EQ(m[1], "0") << log;
    EXPECT_EQ(m[2], "0") << log;
    EXPECT_EQ(m[3], "0") << log;
    rest = rest.substr(rest.find(m[0]) + m[0].size());
  }
  EXPECT_GT(frames, 0) << log;
  llvm::Regex lmem("[1-9][0-9]* bytes lmem");
  EXPECT_FALSE(lmem.match(log)) << log;
}

#define REQUIRE_TOOLKIT()                                                      \
  if (!haveToolkit())                                                          \
  GTEST_SKIP() << "no CUDA toolkit (ptxas) at " << kToolkit

TEST(CUDACodegen, Elementwise) {
  REQUIRE_TOOLKIT();
  mlir::MLIRContext context;
  auto program = compile(context, R"mlir(
    func.func @chain(%x: tensor<64x1000xf32>, %b: tensor<1000xf32>) -> tensor<64x1000xf32> {
      %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<1000xf32> -> tensor<64x1000xf32>
      %s = cleave.binary add %x, %bb : tensor<64x1000xf32>
      %t = cleave.unary tanh %s : tensor<64x1000xf32>
      %e = cleave.unary exp %t : tensor<64x1000xf32>
      return %e : tensor<64x1000xf32>
    })mlir");
  ASSERT_TRUE(program);
  ASSERT_EQ(program->kernels.size(), 1u);
  const cleave::CUDAKernel &k = program->kernels[0];
  EXPECT_EQ(k.name, "chain");
  // One fused launch over 64000 elements, 4 per thread (16 bytes of f32),
  // 256 threads per block, arguments x, b, result.
  ASSERT_EQ(k.launches.size(), 1u);
  EXPECT_EQ(k.launches[0].block[0], 256);
  EXPECT_EQ(k.launches[0].grid[0], 63);
  EXPECT_EQ(k.launches[0].args, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(k.temporaryBytes.empty());
  checkProgram(*program);
  EXPECT_NE(program->ptx.find(".maxntid 256, 1, 1"), std::string::npos);
  EXPECT_NE(program->ptx.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(program->ptx.find("ld.global.v4.b32"), std::string::npos);
  EXPECT_NE(program->ptx.find("st.global.v4.b32"), std::string::npos);
}

TEST(CUDACodegen, VectorizedBF16) {
  REQUIRE_TOOLKIT();
  mlir::MLIRContext context;
  // A bf16 GELU-like chain and a bf16 -> f32 conversion: 8 and 4 elements
  // per thread, every global access 16 bytes (8 for the bf16 input of the
  // conversion), and the unrolled bodies stay in registers.
  auto program = compile(context, R"mlir(
    func.func @act(%x: tensor<128x768xbf16>, %b: tensor<768xbf16>) -> tensor<128x768xbf16> {
      %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<768xbf16> -> tensor<128x768xbf16>
      %s = cleave.binary add %x, %bb : tensor<128x768xbf16>
      %t = cleave.unary tanh %s : tensor<128x768xbf16>
      %m = cleave.binary mul %s, %t : tensor<128x768xbf16>
      return %m : tensor<128x768xbf16>
    }
    func.func @widen(%x: tensor<128x768xbf16>) -> tensor<128x768xf32> {
      %w = cleave.convert %x : tensor<128x768xbf16> -> tensor<128x768xf32>
      return %w : tensor<128x768xf32>
    })mlir");
  ASSERT_TRUE(program);
  ASSERT_EQ(program->kernels.size(), 2u);
  ASSERT_EQ(program->kernels[0].launches.size(), 1u);
  EXPECT_EQ(program->kernels[0].launches[0].grid[0], 128 * 768 / 8 / 256);
  ASSERT_EQ(program->kernels[1].launches.size(), 1u);
  EXPECT_EQ(program->kernels[1].launches[0].grid[0], 128 * 768 / 4 / 256);
  checkProgram(*program);
  // act: x, b, result; widen: result.
  llvm::StringRef ptx(program->ptx);
  EXPECT_EQ(ptx.count("ld.global.v4.b32"), 2u) << program->ptx;
  EXPECT_EQ(ptx.count("st.global.v4.b32"), 2u) << program->ptx;
  EXPECT_EQ(ptx.count("ld.global.v4.b16"), 1u) << program->ptx;
  EXPECT_EQ(ptx.count("ld.global.b16"), 0u) << program->ptx;
}

TEST(CUDACodegen, SoftmaxUsesTemporaries) {
  REQUIRE_TOOLKIT();
  mlir::MLIRContext context;
  auto program = compile(context, R"mlir(
    func.func @softmax(%x: tensor<64x512xf32>) -> tensor<64x512xf32> {
      %a = cleave.softmax %x dim = 1 : tensor<64x512xf32>
      return %a : tensor<64x512xf32>
    }
    func.func @log_softmax(%x: tensor<8x128xf32>) -> tensor<8x128xf32> {
      %a = cleave.log_softmax %x dim = 1 : tensor<8x128xf32>
      return %a : tensor<8x128xf32>
    })mlir");
  ASSERT_TRUE(program);
  ASSERT_EQ(program->kernels.size(), 2u);
  // One row kernel: a block per row whose 128 threads move 4 floats each
  // (16-byte accesses), the row maxima and sums in a temporary.
  const cleave::CUDAKernel &k = program->kernels[0];
  ASSERT_EQ(k.launches.size(), 1u);
  EXPECT_EQ(k.launches[0].grid[0], 64);
  EXPECT_EQ(k.launches[0].block[0], 128);
  EXPECT_NE(program->ptx.find("ld.global.v4.b32"), std::string::npos);
  EXPECT_EQ(program->kernels[1].launches.size(), 1u);
  EXPECT_NE(program->ptx.find("shfl.sync.bfly"), std::string::npos);
  ASSERT_FALSE(k.temporaryBytes.empty());
  bool usesTemporary = false;
  for (const cleave::CUDALaunch &l : k.launches)
    for (int64_t a : l.args) {
      EXPECT_LT(a, 2 + int64_t(k.temporaryBytes.size()));
      usesTemporary |= a >= 2;
    }
  EXPECT_TRUE(usesTemporary);
  checkProgram(*program);
}

TEST(CUDACodegen, LayerNormAndReductions) {
  REQUIRE_TOOLKIT();
  mlir::MLIRContext context;
  auto program = compile(context, R"mlir(
    func.func @ln(%x: tensor<128x768xf32>, %g: tensor<768xf32>, %b: tensor<768xf32>) -> tensor<128x768xf32> {
      %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05
          : (tensor<128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<128x768xf32>
      return %0 : tensor<128x768xf32>
    }
    func.func @red(%x: tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<3xf32>, tensor<2x3xi64>) {
      %m = cleave.reduce max %x dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
      %s = cleave.reduce sum %x dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
      %a = cleave.arg_reduce max %x dim = 2 : tensor<2x3x4xf32> -> tensor<2x3xi64>
      return %m, %s, %a : tensor<2x4xf32>, tensor<3xf32>, tensor<2x3xi64>
    }
    func.func @total(%x: tensor<16x16xf32>) -> tensor<f32> {
      %s = cleave.reduce sum %x dims = [0, 1] : tensor<16x16xf32> -> tensor<f32>
      return %s : tensor<f32>
    })mlir");
  ASSERT_TRUE(program);
  ASSERT_EQ(program->kernels.size(), 3u);
  // Layer norm: one row kernel, 128 rows of 768 (192 threads of 4 floats).
  ASSERT_EQ(program->kernels[0].launches.size(), 1u);
  EXPECT_EQ(program->kernels[0].launches[0].grid[0], 128);
  EXPECT_EQ(program->kernels[0].launches[0].block[0], 192);
  // Three reductions over different row spaces (and an arg-reduce, two
  // results) are not one row kernel: one launch each way, as before.
  EXPECT_GT(program->kernels[1].launches.size(), 1u);
  // A small full reduction: one block of 256 threads (the fill of the
  // output folded in).
  ASSERT_EQ(program->kernels[2].launches.size(), 1u);
  EXPECT_EQ(program->kernels[2].launches[0].grid[0], 1);
  EXPECT_EQ(program->kernels[2].launches[0].block[0], 256);
  checkProgram(*program);
}

TEST(CUDACodegen, SplitFullReduction) {
  REQUIRE_TOOLKIT();
  mlir::MLIRContext context;
  // 16M elements to one value: 1024 blocks reduce slices of 16384 into a
  // temporary, then one block reduces the 1024 partial sums.
  auto program = compile(context, R"mlir(
    func.func @sumsq(%x: tensor<4096x4096xf32>) -> tensor<f32> {
      %sq = cleave.binary mul %x, %x : tensor<4096x4096xf32>
      %s = cleave.reduce sum %sq dims = [0, 1] : tensor<4096x4096xf32> -> tensor<f32>
      return %s : tensor<f32>
    })mlir");
  ASSERT_TRUE(program);
  const cleave::CUDAKernel &k = program->kernels[0];
  ASSERT_EQ(k.launches.size(), 2u); // slices, total (fill folded in)
  EXPECT_EQ(k.launches[0].grid[0], 1024);
  EXPECT_EQ(k.launches[0].block[0], 512);
  EXPECT_EQ(k.launches[1].grid[0], 1);
  EXPECT_EQ(k.launches[1].block[0], 256); // 1024 partial sums, 4 a thread
  ASSERT_EQ(k.temporaryBytes.size(), 1u);
  EXPECT_EQ(k.temporaryBytes[0], 1024 * 4);
  checkProgram(*program);
}

TEST(CUDACodegen, RowReductionTypes) {
  REQUIRE_TOOLKIT();
  mlir::MLIRContext context;
  // Block all-reduces of every element width: 8-bit integers and booleans
  // are shuffled as 32-bit words.
  std::string source;
  for (std::string t : {"f64", "i64", "i32", "bf16", "f16", "i8", "i1"})
    for (std::string kind : {"max", "sum"})
      source += "func.func @" + kind + "_" + t + "(%x: tensor<64x300x" + t +
                ">) -> tensor<64x" + t + "> {\n  %s = cleave.reduce " + kind +
                " %x dims = [1] : tensor<64x300x" + t + "> -> tensor<64x" + t +
                ">\n  return %s : tensor<64x" + t + ">\n}\n";
  auto program = compile(context, source);
  ASSERT_TRUE(program);
  // 300 columns: 16-byte steps for 8-byte (150 a row: 160 threads) and
  // 4-byte elements (75: 96 threads); 300 is no multiple of 8 or 16, so
  // 2-byte and 1-byte elements go one at a time (320 threads).
  for (const cleave::CUDAKernel &k : program->kernels) {
    ASSERT_EQ(k.launches.size(), 1u) << k.name; // fill and reduce per row
    EXPECT_EQ(k.launches[0].grid[0], 64) << k.name;
    llvm::StringRef name(k.name);
    int64_t block = name.ends_with("64")   ? 160
                    : name.ends_with("32") ? 96
                                           : 320;
    EXPECT_EQ(k.launches[0].block[0], block) << k.name;
  }
  checkProgram(*program);
}

TEST(CUDACodegen, Gather) {
  REQUIRE_TOOLKIT();
  mlir::MLIRContext context;
  auto program = compile(context, R"mlir(
    func.func @g(%t: tensor<50257x768xf32>, %i: tensor<4x64xi64>) -> tensor<4x64x768xf32> {
      %a = cleave.gather %t, %i axis = 0 : (tensor<50257x768xf32>, tensor<4x64xi64>) -> tensor<4x64x768xf32>
      return %a : tensor<4x64x768xf32>
    }
    func.func @ge(%x: tensor<2x5xf32>, %i: tensor<2x2xi32>) -> tensor<2x2xf32> {
      %0 = cleave.gather_elements %x, %i axis = 1 : (tensor<2x5xf32>, tensor<2x2xi32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    })mlir");
  ASSERT_TRUE(program);
  checkProgram(*program);
}

TEST(CUDACodegen, SM80) {
  REQUIRE_TOOLKIT();
  mlir::MLIRContext context;
  cleave::CUDACodegenOptions options;
  options.chip = "sm_80";
  options.blockSize = 128;
  auto program = compile(context, R"mlir(
    func.func @sm(%x: tensor<32x100xf32>) -> tensor<32x100xf32> {
      %a = cleave.softmax %x dim = 1 : tensor<32x100xf32>
      return %a : tensor<32x100xf32>
    })mlir",
                         options);
  ASSERT_TRUE(program);
  EXPECT_NE(program->ptx.find(".target sm_80"), std::string::npos);
  for (const cleave::CUDALaunch &l : program->kernels[0].launches)
    EXPECT_LE(l.block[0], 128);
  checkProgram(*program, "sm_80");
}

} // namespace
