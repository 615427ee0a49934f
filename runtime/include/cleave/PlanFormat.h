//===- PlanFormat.h - The .cleave plan file: data model and codec -*- C++ -*-//
//
// The plan is the contract between the compiler (which writes it) and the
// runtime (which reads it). This header has no dependency beyond the STL so
// that both sides can include it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANFORMAT_H
#define CLEAVE_PLANFORMAT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cleave::plan {

/// Element types, using ONNX TensorProto codes.
enum class DType : uint32_t {
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  U32 = 12,
  U64 = 13,
  BF16 = 16
};

/// Bytes per element (Bool = 1); 0 if the type is unknown.
size_t dtypeSize(DType);
/// "float32", "int64", "bool", ...; "unknown" for an unknown code.
const char *dtypeName(DType);
/// True if `code` is one of the DType enumerators.
bool isKnownDType(uint32_t code);

/// A tensor living in the arena.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0; ///< Byte offset in the arena.

  /// Product of the dims (1 for a scalar); -1 on a negative dim or overflow.
  int64_t numElements() const;
  /// numElements() * dtypeSize(dtype); 0 if either is invalid.
  uint64_t byteSize() const;
};

/// A constant, copied into the arena at info.offset when an executor is made.
struct Constant {
  TensorInfo info;
  std::vector<uint8_t> data;
};

enum class CommandKind : uint32_t { Kernel = 1, Gemm = 2, Copy = 3, Fill = 4 };

/// Lower-case name of a command kind ("kernel", "gemm", ...), "unknown" else.
const char *commandKindName(CommandKind);

/// A command has a kind, integer parameters and arena byte offsets.
///  Kernel: params = {kernelIndex}; buffers = arena offsets of each kernel
///          argument, in order. The kernel is called as `void fn(void **args)`
///          with args[i] = arenaBase + buffers[i].
///  Gemm:   params = {dtype, transA, transB, M, N, K, batch, lda, ldb, ldc,
///          strideA, strideB, strideC, alphaBits, betaBits}; row-major,
///          C = alpha*op(A)*op(B) + beta*C repeated `batch` times with element
///          strides between batches (0 = broadcast); alphaBits/betaBits are
///          bit patterns of doubles; buffers = {A, B, C}; dtype F32 or F64.
///  Copy:   params = {bytes}; buffers = {src, dst}.
///  Fill:   params = {bytes, byteValue}; buffers = {dst}.
struct Command {
  CommandKind kind = CommandKind::Copy;
  std::vector<int64_t> params;
  std::vector<uint64_t> buffers;
};

/// Indices into Command::params for Gemm commands.
enum GemmParam : size_t {
  kGemmDType = 0,
  kGemmTransA,
  kGemmTransB,
  kGemmM,
  kGemmN,
  kGemmK,
  kGemmBatch,
  kGemmLda,
  kGemmLdb,
  kGemmLdc,
  kGemmStrideA,
  kGemmStrideB,
  kGemmStrideC,
  kGemmAlphaBits,
  kGemmBetaBits,
  kGemmNumParams
};

struct Plan {
  std::string target = "cpu-x86_64";
  uint64_t arenaBytes = 0; ///< Peak memory: every buffer lies in [0, arenaBytes).
  uint64_t alignment = 64;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<Constant> constants;
  std::vector<std::string> kernelNames; ///< Exported symbols of kernelObject.
  std::vector<uint8_t> kernelObject;    ///< x86-64 ELF shared object, or empty.
  std::vector<Command> commands;
  std::vector<std::pair<std::string, std::string>> metadata;
};

constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 32;

/// Encodes `plan` as a complete file image (header + payload).
std::vector<uint8_t> serialize(const Plan &plan);

/// Decodes and validates a file image. Returns false and sets *error to a
/// message naming the problem on any malformed input; never reads out of
/// bounds and never allocates more than the input size justifies.
bool deserialize(const uint8_t *data, size_t size, Plan *out,
                 std::string *error);

/// All structural checks: offsets and sizes within the arena, kernel indices,
/// parameter counts per kind, known dtypes, non-negative dims, GEMM operand
/// extents. Called by deserialize.
bool validate(const Plan &plan, std::string *error);

/// Writes atomically: a temporary file in the same directory, fsync, rename.
bool writeFile(const std::string &path, const Plan &plan, std::string *error);
bool readFile(const std::string &path, Plan *out, std::string *error);

/// FNV-1a 64-bit hash (the payload checksum).
uint64_t fnv1a64(const uint8_t *data, size_t size);

} // namespace cleave::plan

#endif // CLEAVE_PLANFORMAT_H
