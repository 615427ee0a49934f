//===- TensorProto.cpp - Hand-decoded onnx.TensorProto --------------------===//
//
// Decodes the protobuf wire format directly: fields dims=1, data_type=2,
// float_data=4, int32_data=5, string_data=6, int64_data=7, name=8,
// raw_data=9, double_data=10, uint64_data=11, data_location=14; every other
// field is skipped. Repeated numeric fields may be packed or not.
//
// Hand-written rather than protobuf: the runtime ships without libprotobuf
// and libonnx, and Debian's libonnx_proto is generated for the full
// protobuf runtime (its messages derive from Message), so protobuf-lite
// would mean compiling the ONNX schema with protoc for the lite runtime and
// shipping libprotobuf-lite, for one message read field by field.
//
//===----------------------------------------------------------------------===//

#include "cleave/TensorFile.h"

#include <cstring>

namespace cleave::tensorfile {

using plan::DType;

namespace {
class WireReader {
public:
  WireReader(const uint8_t *p, size_t n) : p(p), end(p + n) {}
  bool done() const { return p == end; }
  bool varint(uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p == end)
        return false;
      uint8_t b = *p++;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80))
        return true;
    }
    return false; // More than 10 bytes.
  }
  bool fixed(size_t bytes, uint64_t *v) {
    if (static_cast<size_t>(end - p) < bytes)
      return false;
    *v = 0;
    for (size_t i = 0; i < bytes; ++i)
      *v |= static_cast<uint64_t>(p[i]) << (8 * i);
    p += bytes;
    return true;
  }
  bool bytes(const uint8_t **data, size_t *size) {
    uint64_t n;
    if (!varint(&n) || n > static_cast<uint64_t>(end - p))
      return false;
    *data = p;
    *size = static_cast<size_t>(n);
    p += n;
    return true;
  }

private:
  const uint8_t *p, *end;
};

/// Values of one repeated numeric field, as raw 64-bit words.
struct Repeated {
  std::vector<uint64_t> values;
  /// Appends one value (wire type `wire`) or a packed run (wire type 2).
  /// `fixedBytes` is 4 or 8 for fixed-width fields, 0 for varints.
  bool add(WireReader &r, uint32_t wire, size_t fixedBytes) {
    if (wire == 2) {
      const uint8_t *d;
      size_t n;
      if (!r.bytes(&d, &n))
        return false;
      WireReader packed(d, n);
      while (!packed.done())
        if (!one(packed, fixedBytes))
          return false;
      return true;
    }
    if (wire != (fixedBytes == 0 ? 0u : fixedBytes == 4 ? 5u : 1u))
      return false;
    return one(r, fixedBytes);
  }

private:
  bool one(WireReader &r, size_t fixedBytes) {
    uint64_t v;
    if (!(fixedBytes ? r.fixed(fixedBytes, &v) : r.varint(&v)))
      return false;
    values.push_back(v);
    return true;
  }
};
} // namespace

static bool skipField(WireReader &r, uint32_t wire) {
  uint64_t v;
  const uint8_t *d;
  size_t n;
  switch (wire) {
  case 0:
    return r.varint(&v);
  case 1:
    return r.fixed(8, &v);
  case 2:
    return r.bytes(&d, &n);
  case 5:
    return r.fixed(4, &v);
  default:
    return false; // Groups (3, 4) are not used by ONNX.
  }
}

bool parseTensorProto(const uint8_t *data, size_t size, HostTensor *out,
                      std::string *error) {
  WireReader r(data, size);
  Repeated dims, floats, int32s, int64s, doubles, uint64s;
  uint64_t dataType = 0, location = 0;
  bool haveRaw = false, haveStrings = false;
  const uint8_t *raw = nullptr;
  size_t rawSize = 0;
  std::string name;
  while (!r.done()) {
    uint64_t key;
    if (!r.varint(&key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) {
      *error = "malformed TensorProto: bad field key";
      return false;
    }
    uint32_t field = static_cast<uint32_t>(key >> 3);
    uint32_t wire = static_cast<uint32_t>(key & 7);
    bool ok = true;
    const uint8_t *d;
    size_t n;
    switch (field) {
    case 1:
      ok = dims.add(r, wire, 0);
      break;
    case 2:
      ok = wire == 0 && r.varint(&dataType);
      break;
    case 4:
      ok = floats.add(r, wire, 4);
      break;
    case 5:
      ok = int32s.add(r, wire, 0);
      break;
    case 6:
      haveStrings = true;
      ok = skipField(r, wire);
      break;
    case 7:
      ok = int64s.add(r, wire, 0);
      break;
    case 8:
      ok = wire == 2 && r.bytes(&d, &n);
      if (ok)
        name.assign(reinterpret_cast<const char *>(d), n);
      break;
    case 9:
      ok = wire == 2 && r.bytes(&raw, &rawSize);
      haveRaw = ok;
      break;
    case 10:
      ok = doubles.add(r, wire, 8);
      break;
    case 11:
      ok = uint64s.add(r, wire, 0);
      break;
    case 14:
      ok = wire == 0 && r.varint(&location);
      break;
    default:
      ok = skipField(r, wire);
      break;
    }
    if (!ok) {
      *error = "malformed TensorProto: field " + std::to_string(field) +
               " (wire type " + std::to_string(wire) +
               ") is truncated or has the wrong wire type";
      return false;
    }
  }
  std::string who = name.empty() ? "TensorProto" : "TensorProto '" + name + "'";
  if (location == 1) {
    *error = who + " stores its data externally, which is not supported";
    return false;
  }
  if (dataType == 8 || haveStrings) {
    *error = who + " holds strings, which are not supported";
    return false;
  }
  if (dataType > UINT32_MAX || !plan::isKnownDType(uint32_t(dataType))) {
    *error = who + " has unsupported data_type " + std::to_string(dataType);
    return false;
  }
  HostTensor t;
  t.name = name;
  t.dtype = static_cast<DType>(dataType);
  for (uint64_t d : dims.values) {
    if (static_cast<int64_t>(d) < 0) {
      *error = who + " has a negative dimension";
      return false;
    }
    t.shape.push_back(static_cast<int64_t>(d));
  }
  plan::TensorInfo info;
  info.dtype = t.dtype;
  info.shape = t.shape;
  int64_t count = info.numElements();
  size_t elem = plan::dtypeSize(t.dtype);
  if (count < 0 || (count > 0 && info.byteSize() == 0)) {
    *error = who + " has too many elements";
    return false;
  }
  std::string shapeText =
      shapeToString(t.shape) + " " + plan::dtypeName(t.dtype);
  unsigned bits = plan::dtypeBits(t.dtype);
  if (bits < 8) {
    // int4/uint4/float4e2m1 and int2/uint2: packed, first element in the low
    // bits, in raw_data or one byte per int32_data entry. Unpacked to one
    // element per byte.
    size_t perByte = 8 / bits;
    size_t packed = (static_cast<size_t>(count) + perByte - 1) / perByte;
    std::vector<uint8_t> bytes;
    if (haveRaw) {
      bytes.assign(raw, raw + rawSize);
    } else {
      for (uint64_t v : int32s.values)
        bytes.push_back(static_cast<uint8_t>(v));
    }
    if (bytes.size() != packed) {
      *error = who + ": " + (haveRaw ? "raw_data" : "int32_data") + " holds " +
               std::to_string(bytes.size()) + (haveRaw ? " bytes" : " values") +
               " but shape " + shapeText + " needs " + std::to_string(packed) +
               " (" + std::to_string(perByte) + " elements per byte)";
      return false;
    }
    uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
    t.data.resize(static_cast<size_t>(count));
    for (size_t i = 0; i < t.data.size(); ++i)
      t.data[i] = (bytes[i / perByte] >> (bits * (i % perByte))) & mask;
    *out = std::move(t);
    return true;
  }
  if (haveRaw) {
    if (rawSize != info.byteSize()) {
      *error = who + ": raw_data holds " + std::to_string(rawSize) +
               " bytes but shape " + shapeText + " needs " +
               std::to_string(info.byteSize());
      return false;
    }
    t.data.assign(raw, raw + rawSize);
    *out = std::move(t);
    return true;
  }
  const Repeated *src = nullptr;
  const char *field = "";
  switch (t.dtype) {
  case DType::F32:
    src = &floats;
    field = "float_data";
    break;
  case DType::F64:
    src = &doubles;
    field = "double_data";
    break;
  case DType::I64:
    src = &int64s;
    field = "int64_data";
    break;
  case DType::U32:
  case DType::U64:
    src = &uint64s;
    field = "uint64_data";
    break;
  default:
    src = &int32s;
    field = "int32_data";
    break;
  }
  if (src->values.size() != static_cast<uint64_t>(count)) {
    *error = who + ": " + field + " holds " +
             std::to_string(src->values.size()) + " values but shape " +
             shapeText + " needs " + std::to_string(count);
    return false;
  }
  t.data.resize(static_cast<size_t>(count) * elem);
  for (size_t i = 0; i < src->values.size(); ++i) {
    uint64_t v = src->values[i];
    if (t.dtype == DType::Bool)
      v = v != 0;
    // Little-endian truncation to the element width: float_data holds the
    // float bits, double_data the double bits, int32_data the value (or the
    // 16- or 8-bit pattern of a float16/bfloat16/float8).
    for (size_t b = 0; b < elem; ++b)
      t.data[i * elem + b] = static_cast<uint8_t>(v >> (8 * b));
  }
  *out = std::move(t);
  return true;
}

} // namespace cleave::tensorfile
