//===- Safetensors.h - The safetensors tensor file format ------*- C++ -*-===//
//
// A safetensors file: u64 little-endian header length N, N bytes of JSON
// (padded with spaces so the data starts 8-byte aligned) mapping each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the
// data section, which they must cover without holes or overlaps), an
// optional "__metadata__" string map, then the little-endian data.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SAFETENSORS_H
#define CLEAVE_SAFETENSORS_H

#include "cleave/PlanFormat.h"

#include <string>
#include <utility>
#include <vector>

namespace cleave::safetensors {

using Metadata = std::vector<std::pair<std::string, std::string>>;

/// A tensor's entry in the header; begin/end are offsets in the data section.
struct TensorEntry {
  std::string name;
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<TensorEntry> tensors; ///< In data order.
  Metadata metadata;
  uint64_t dataStart = 0; ///< File offset of the data section.
};

/// "F32", "BF16", "I64", "BOOL", ...; nullptr for a dtype safetensors lacks.
const char *dtypeCode(plan::DType);
bool dtypeFromCode(const std::string &code, plan::DType *out);

/// Lays out `tensors` (name, dtype, shape; begin/end are assigned, in order,
/// contiguously) and returns the 8-byte length prefix plus the padded JSON
/// header. The data of each tensor follows in order. False on a dtype
/// safetensors cannot express.
bool encodeHeader(std::vector<TensorEntry> *tensors, const Metadata &metadata,
                  std::vector<uint8_t> *out, std::string *error);

/// Parses and checks the header of a file image of `fileSize` bytes of which
/// `data` holds at least the first min(fileSize, 8 + N) bytes: names
/// unique, dtypes known, offsets matching shapes and covering the data
/// section exactly, which must end at fileSize.
bool decodeHeader(const uint8_t *data, size_t size, uint64_t fileSize,
                  Header *out, std::string *error);

/// One tensor to write: its bytes are data[0, bytes).
struct HostTensorRef {
  std::string name;
  plan::DType dtype;
  std::vector<int64_t> shape;
  const void *data;
  size_t bytes;
};

/// The whole file image.
bool encode(const std::vector<HostTensorRef> &tensors, const Metadata &metadata,
            std::vector<uint8_t> *out, std::string *error);

} // namespace cleave::safetensors

#endif // CLEAVE_SAFETENSORS_H
