//===- TensorData.cpp - ONNX element types and TensorProto contents -------===//

#include "NodeContext.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace mlir;

namespace cleave::onnximport {

/// Tensors above this many elements become resource blobs.

Type convertElementType(MLIRContext *ctx, int32_t t, std::string &why) {
  Builder b(ctx);
  using TP = onnx::TensorProto;
  switch (t) {
  case TP::FLOAT:
    return b.getF32Type();
  case TP::DOUBLE:
    return b.getF64Type();
  case TP::FLOAT16:
    return b.getF16Type();
  case TP::BFLOAT16:
    return b.getBF16Type();
  case TP::BOOL:
    return b.getI1Type();
  case TP::INT8:
    return b.getIntegerType(8);
  case TP::INT16:
    return b.getIntegerType(16);
  case TP::INT32:
    return b.getIntegerType(32);
  case TP::INT64:
    return b.getIntegerType(64);
  case TP::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case TP::UINT16:
    return b.getIntegerType(16, false);
  case TP::UINT32:
    return b.getIntegerType(32, false);
  case TP::UINT64:
    return b.getIntegerType(64, false);
  // The narrow types of onnx 1.14 and later, by number: libonnx 1.12's
  // enum does not name them.
  case 17:
    return b.getType<Float8E4M3FNType>();
  case 18:
    return b.getType<Float8E4M3FNUZType>();
  case 19:
    return b.getType<Float8E5M2Type>();
  case 20:
    return b.getType<Float8E5M2FNUZType>();
  case 21:
    return b.getIntegerType(4, /*isSigned=*/false);
  case 22:
    return b.getIntegerType(4);
  case 23:
    return b.getType<Float4E2M1FNType>();
  case 24:
    return b.getType<Float8E8M0FNUType>();
  case 25:
    return b.getIntegerType(2, /*isSigned=*/false);
  case 26:
    return b.getIntegerType(2);
  case TP::STRING:
    why = "string tensors are not supported";
    return {};
  case TP::COMPLEX64:
  case TP::COMPLEX128:
    why = "complex tensors are not supported";
    return {};
  default:
    why = "element type " + onnxElementTypeName(t) + " is not supported";
    return {};
  }
}

std::string onnxElementTypeName(int32_t t) {
  using TP = onnx::TensorProto;
  switch (t) {
    // clang-format off
  case TP::UNDEFINED: return "undefined";
  case TP::FLOAT: return "float";
  case TP::UINT8: return "uint8";
  case TP::INT8: return "int8";
  case TP::UINT16: return "uint16";
  case TP::INT16: return "int16";
  case TP::INT32: return "int32";
  case TP::INT64: return "int64";
  case TP::STRING: return "string";
  case TP::BOOL: return "bool";
  case TP::FLOAT16: return "float16";
  case TP::DOUBLE: return "double";
  case TP::UINT32: return "uint32";
  case TP::UINT64: return "uint64";
  case TP::COMPLEX64: return "complex64";
  case TP::COMPLEX128: return "complex128";
  case TP::BFLOAT16: return "bfloat16";
  // clang-format on
  // The types of onnx 1.14 and later, by number: libonnx 1.12's enum
  // does not name them.
  case 17:
    return "float8e4m3fn";
  case 18:
    return "float8e4m3fnuz";
  case 19:
    return "float8e5m2";
  case 20:
    return "float8e5m2fnuz";
  case 21:
    return "uint4";
  case 22:
    return "int4";
  case 23:
    return "float4e2m1";
  case 24:
    return "float8e8m0";
  case 25:
    return "uint2";
  case 26:
    return "int2";
  default:
    return "number " + std::to_string(t) + " (not an ONNX element type)";
  }
}

/// Bytes per element in ONNX raw_data and in a DenseElementsAttr's buffer
/// (bool, and the 4- and 2-bit types, take one byte).
static int64_t elementBytes(Type t) {
  if (t.isInteger(1))
    return 1;
  return (t.getIntOrFloatBitWidth() + 7) / 8;
}

/// Elements per byte of ONNX's packed encoding: 2 for int4, uint4 and
/// float4e2m1, 4 for int2 and uint2 (first element in the low bits), else 1.
static int64_t packedPerByte(Type t) {
  unsigned w = t.getIntOrFloatBitWidth();
  return t.isInteger(1) || w >= 8 ? 1 : 8 / w;
}

/// Spreads packed elements to one per byte.
static std::vector<char> unpackBits(ArrayRef<char> packed, Type t, int64_t n) {
  int64_t per = packedPerByte(t);
  unsigned w = 8 / per;
  std::vector<char> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<char>(
        (static_cast<uint8_t>(packed[i / per]) >> (w * (i % per))) &
        ((1u << w) - 1));
  return out;
}

/// Copies the typed repeated fields of a TensorProto into little-endian raw
/// bytes of the element type.
static LogicalResult typedFieldsToBytes(const onnx::TensorProto &t, Type et,
                                        int64_t n, std::vector<char> &out,
                                        std::string &why) {
  int64_t eb = elementBytes(et);
  out.assign(n * eb, 0);
  auto put = [&](int64_t i, uint64_t bits) {
    std::memcpy(out.data() + i * eb, &bits, eb); // little-endian host
  };
  auto count = [&](int64_t have) {
    if (have != n) {
      why = "holds " + std::to_string(have) + " values but its shape needs " +
            std::to_string(n);
      return false;
    }
    return true;
  };
  using TP = onnx::TensorProto;
  switch (t.data_type()) {
  case TP::FLOAT:
    if (!count(t.float_data_size()))
      return failure();
    for (int64_t i = 0; i < n; ++i) {
      float f = t.float_data(i);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      put(i, bits);
    }
    return success();
  case TP::DOUBLE:
    if (!count(t.double_data_size()))
      return failure();
    for (int64_t i = 0; i < n; ++i) {
      double d = t.double_data(i);
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      put(i, bits);
    }
    return success();
  case TP::INT64:
    if (!count(t.int64_data_size()))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      put(i, static_cast<uint64_t>(t.int64_data(i)));
    return success();
  case TP::UINT32:
  case TP::UINT64:
    if (!count(t.uint64_data_size()))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      put(i, t.uint64_data(i));
    return success();
  default: // int32_data holds bool, (u)int8/16, int32, float16, bfloat16,
           // float8, and the 4- and 2-bit types packed, a byte per entry.
    if (int64_t per = packedPerByte(et); per > 1) {
      int64_t want = (n + per - 1) / per;
      if (t.int32_data_size() != want) {
        why = "holds " + std::to_string(t.int32_data_size()) +
              " packed bytes but its shape needs " + std::to_string(want);
        return failure();
      }
      std::vector<char> packed;
      for (int32_t v : t.int32_data())
        packed.push_back(static_cast<char>(v));
      out = unpackBits(packed, et, n);
      return success();
    }
    if (!count(t.int32_data_size()))
      return failure();
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = static_cast<uint32_t>(t.int32_data(i));
      if (et.isInteger(1))
        v = v != 0;
      put(i, v);
    }
    return success();
  }
}

FailureOr<ElementsAttr> convertTensorProto(const onnx::TensorProto &t,
                                           StringRef modelDir, Location loc,
                                           MLIRContext *ctx,
                                           std::optional<ExternalRef> *external,
                                           bool absentAllowed) {
  auto fail = [&](const Twine &why) -> FailureOr<ElementsAttr> {
    mlir::emitError(loc) << "tensor '" << t.name() << "': " << why;
    return failure();
  };
  std::string why;
  Type et = convertElementType(ctx, t.data_type(), why);
  if (!et)
    return fail(why);
  SmallVector<int64_t> shape;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return fail("negative dimension " + Twine(d));
    if (d != 0 && n > (int64_t(1) << 40) / d)
      return fail("is too large");
    n *= d;
    shape.push_back(d);
  }
  int64_t eb = elementBytes(et);
  auto type = RankedTensorType::get(shape, et);
  std::string name = t.name().empty() ? std::string("tensor") : t.name();
  if (external)
    external->reset();
  if (absentAllowed && external && isa<FloatType>(et) &&
      t.data_location() == onnx::TensorProto::EXTERNAL &&
      n > kMaxInlineElements) {
    for (const auto &kv : t.external_data()) {
      if (kv.key() != "location" || llvm::sys::path::is_absolute(kv.value()))
        continue;
      llvm::SmallString<256> file(modelDir.empty() ? StringRef(".") : modelDir);
      llvm::sys::path::append(file, kv.value());
      if (llvm::sys::fs::exists(file))
        break;
      ExternalRef absent;
      absent.file = kv.value();
      absent.fileSize = kAbsentData;
      *external = absent;
      return ElementsAttr(DenseElementsAttr::get(
          type, APFloat::getZero(cast<FloatType>(et).getFloatSemantics())));
    }
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL &&
      n > kMaxInlineElements && !et.isInteger(1) && packedPerByte(et) == 1) {
    // Mapped, not copied: a training plan references the file instead of
    // holding the bytes, so nothing reads most of these pages at compile
    // time. The blob keeps the mapping alive.
    FailureOr<ExternalData> mapped = mapExternalData(t, modelDir, n * eb, loc);
    if (failed(mapped))
      return failure();
    ArrayRef<char> data(mapped->buffer->getBufferStart(),
                        mapped->buffer->getBufferSize());
    size_t align = static_cast<size_t>(eb);
    if (reinterpret_cast<uintptr_t>(data.data()) % align == 0) {
      if (external)
        *external = static_cast<const ExternalRef &>(*mapped);
      std::shared_ptr<llvm::MemoryBuffer> owner = std::move(mapped->buffer);
      AsmResourceBlob blob(
          data, align,
          [owner](void *, size_t, size_t) mutable { owner.reset(); },
          /*dataIsMutable=*/false);
      return ElementsAttr(
          DenseResourceElementsAttr::get(type, name, std::move(blob)));
    }
    // An offset that misaligns the elements: copied below instead.
  }
  std::vector<char> bytes;
  // The 4- and 2-bit types are packed in files and raw_data.
  int64_t per = packedPerByte(et);
  int64_t stored = per > 1 ? (n + per - 1) / per : n * eb;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto data = readExternalData(t, modelDir, stored, loc);
    if (failed(data))
      return failure();
    bytes = std::move(*data);
  } else if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != stored)
      return fail("raw_data has " + Twine(t.raw_data().size()) +
                  " bytes but its shape and type need " + Twine(stored));
    bytes.assign(t.raw_data().begin(), t.raw_data().end());
  } else if (failed(typedFieldsToBytes(t, et, n, bytes, why))) {
    return fail(why);
  }
  if (per > 1 &&
      (t.data_location() == onnx::TensorProto::EXTERNAL || t.has_raw_data()))
    bytes = unpackBits(bytes, et, n);

  if (n > kMaxInlineElements) {
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(bytes.data(), bytes.size()), alignof(uint64_t));
    return ElementsAttr(
        DenseResourceElementsAttr::get(type, name, std::move(blob)));
  }
  if (n == 0)
    return ElementsAttr(DenseElementsAttr::get(type, ArrayRef<Attribute>()));
  if (et.isInteger(1)) {
    SmallVector<bool> vals;
    for (char c : bytes)
      vals.push_back(c != 0);
    return ElementsAttr(DenseElementsAttr::get(type, vals));
  }
  bool detectedSplat = false;
  if (!DenseElementsAttr::isValidRawBuffer(type, bytes, detectedSplat))
    return fail("has an invalid data buffer");
  return ElementsAttr(DenseElementsAttr::getFromRawBuffer(type, bytes));
}

} // namespace cleave::onnximport
