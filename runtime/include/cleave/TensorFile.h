//===- TensorFile.h - .npy and ONNX TensorProto (.pb) tensors --*- C++ -*-===//
//
// Readers and a writer for the tensor files cleave-run consumes and produces.
// The TensorProto reader decodes the protobuf wire format by hand, so the
// runtime needs no protobuf library.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TENSORFILE_H
#define CLEAVE_TENSORFILE_H

#include "cleave/PlanFormat.h"

#include <string>
#include <vector>

namespace cleave::tensorfile {

/// A dense, C-order, little-endian tensor in host memory.
struct HostTensor {
  std::string name; ///< From a TensorProto; empty for .npy.
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// Parses a .npy image (format versions 1, 2 and 3; C order; little-endian
/// or single-byte dtypes f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1).
bool parseNpy(const uint8_t *data, size_t size, HostTensor *out,
              std::string *error);

/// Encodes a .npy (version 1) image. bfloat16, float8 and float4 are
/// widened to float32 and int4/int2 (uint4/uint2) to int8 (uint8), since
/// numpy has none of them; float16 is written as '<f2', bool as '|b1'.
std::vector<uint8_t> encodeNpy(plan::DType dtype,
                               const std::vector<int64_t> &shape,
                               const void *data, size_t bytes);

/// Parses a serialized onnx.TensorProto (raw_data or the typed fields).
bool parseTensorProto(const uint8_t *data, size_t size, HostTensor *out,
                      std::string *error);

/// Reads `path`, choosing the format by extension (.npy or .pb).
bool readTensorFile(const std::string &path, HostTensor *out,
                    std::string *error);

/// Writes `path` as .npy, atomically.
bool writeNpyFile(const std::string &path, plan::DType dtype,
                  const std::vector<int64_t> &shape, const void *data,
                  size_t bytes, std::string *error);

/// "[2,3]".
std::string shapeToString(const std::vector<int64_t> &shape);

} // namespace cleave::tensorfile

#endif // CLEAVE_TENSORFILE_H
