//===- Npy.cpp - Reading and writing .npy files ---------------------------===//
//
// Format: "\x93NUMPY", u8 major, u8 minor, header length (u16 for version 1,
// u32 for 2 and 3), a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } and the data.
//
// Hand-written: Debian packages no C++ .npy library, and the format is a
// fixed preamble and one dict literal, read here with bounds checks so that
// a hostile file gives an error.
//
//===----------------------------------------------------------------------===//

#include "cleave/FileUtil.h"
#include "cleave/TensorFile.h"

#include <cstring>

namespace cleave::tensorfile {

using plan::DType;

std::string shapeToString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {
/// A tiny parser for the header dict: string keys, and values that are
/// strings, True/False, or tuples of non-negative integers.
class DictParser {
public:
  explicit DictParser(const std::string &s) : s(s) {}
  std::string error;
  std::string descr;
  bool fortran = false, haveDescr = false, haveFortran = false,
       haveShape = false;
  std::vector<int64_t> shape;

  bool parse() {
    skip();
    if (!eat('{'))
      return fail("expected '{'");
    while (true) {
      skip();
      if (eat('}'))
        break;
      std::string key;
      if (!string(&key))
        return fail("expected a quoted key");
      skip();
      if (!eat(':'))
        return fail("expected ':' after '" + key + "'");
      skip();
      if (key == "descr") {
        if (!string(&descr))
          return fail("'descr' is not a string");
        haveDescr = true;
      } else if (key == "fortran_order") {
        if (s.compare(i, 4, "True") == 0) {
          fortran = true;
          i += 4;
        } else if (s.compare(i, 5, "False") == 0) {
          i += 5;
        } else {
          return fail("'fortran_order' is not True or False");
        }
        haveFortran = true;
      } else if (key == "shape") {
        if (!tuple())
          return false;
        haveShape = true;
      } else {
        return fail("unexpected key '" + key + "'");
      }
      skip();
      if (eat(','))
        continue;
      skip();
      if (eat('}'))
        break;
      return fail("expected ',' or '}'");
    }
    if (!haveDescr || !haveFortran || !haveShape)
      return fail("missing 'descr', 'fortran_order' or 'shape'");
    return true;
  }

private:
  bool fail(const std::string &m) {
    if (error.empty())
      error = m + " at column " + std::to_string(i);
    return false;
  }
  void skip() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n'))
      ++i;
  }
  bool eat(char c) {
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool string(std::string *out) {
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"'))
      return false;
    char q = s[i++];
    size_t end = s.find(q, i);
    if (end == std::string::npos)
      return false;
    *out = s.substr(i, end - i);
    i = end + 1;
    return true;
  }
  bool tuple() {
    if (!eat('('))
      return fail("'shape' is not a tuple");
    while (true) {
      skip();
      if (eat(')'))
        return true;
      if (i >= s.size() || s[i] < '0' || s[i] > '9')
        return fail("expected a non-negative integer in 'shape'");
      int64_t v = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        if (v > (INT64_MAX - 9) / 10)
          return fail("dimension too large in 'shape'");
        v = v * 10 + (s[i++] - '0');
      }
      if (i < s.size() && s[i] == 'L') // Python 2 longs.
        ++i;
      shape.push_back(v);
      skip();
      if (eat(','))
        continue;
      skip();
      if (eat(')'))
        return true;
      return fail("expected ',' or ')' in 'shape'");
    }
  }
  const std::string &s;
  size_t i = 0;
};
} // namespace

/// The .npy type codes of the element types .npy has.
static const struct {
  const char *code;
  DType dtype;
} kNpyCodes[] = {{"f2", DType::F16}, {"f4", DType::F32}, {"f8", DType::F64},
                 {"i1", DType::I8},  {"i2", DType::I16}, {"i4", DType::I32},
                 {"i8", DType::I64}, {"u1", DType::U8},  {"u2", DType::U16},
                 {"u4", DType::U32}, {"u8", DType::U64}, {"b1", DType::Bool}};

static bool dtypeFromDescr(const std::string &descr, DType *out) {
  if (descr.size() < 3)
    return false;
  char order = descr[0];
  std::string code = descr.substr(1);
  for (const auto &e : kNpyCodes) {
    if (code != e.code)
      continue;
    bool singleByte = plan::dtypeSize(e.dtype) == 1;
    // '=' is native order, little-endian on every host this runtime supports.
    if (order == '<' || order == '=' || order == '|' ||
        (order == '>' && singleByte)) {
      *out = e.dtype;
      return true;
    }
    return false;
  }
  return false;
}

bool parseNpy(const uint8_t *data, size_t size, HostTensor *out,
              std::string *error) {
  if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0) {
    *error = "not a .npy file (bad magic)";
    return false;
  }
  uint8_t major = data[6];
  size_t headerLen, start;
  if (major == 1) {
    headerLen = data[8] | (size_t(data[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) {
      *error = "truncated .npy header";
      return false;
    }
    headerLen = data[8] | (size_t(data[9]) << 8) | (size_t(data[10]) << 16) |
                (size_t(data[11]) << 24);
    start = 12;
  } else {
    *error = "unsupported .npy format version " + std::to_string(major);
    return false;
  }
  if (headerLen > size - start) {
    *error = "truncated .npy header: it announces " +
             std::to_string(headerLen) + " bytes but the file has " +
             std::to_string(size - start) + " after the preamble";
    return false;
  }
  std::string header(reinterpret_cast<const char *>(data + start), headerLen);
  DictParser dict(header);
  if (!dict.parse()) {
    *error = "malformed .npy header: " + dict.error;
    return false;
  }
  HostTensor t;
  if (!dtypeFromDescr(dict.descr, &t.dtype)) {
    *error = "unsupported .npy dtype '" + dict.descr +
             "' (supported: little-endian f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 "
             "b1)";
    return false;
  }
  t.shape = dict.shape;
  size_t nonUnit = 0;
  for (int64_t d : t.shape)
    nonUnit += d != 1;
  if (dict.fortran && nonUnit > 1) {
    *error = "Fortran-order .npy arrays are not supported (save with "
             "np.ascontiguousarray)";
    return false;
  }
  plan::TensorInfo info;
  info.dtype = t.dtype;
  info.shape = t.shape;
  uint64_t bytes = info.byteSize();
  size_t payload = size - start - headerLen;
  if (info.numElements() < 0 || (info.numElements() > 0 && bytes == 0) ||
      bytes != payload) {
    *error = "the .npy data holds " + std::to_string(payload) +
             " bytes but shape " + shapeToString(t.shape) + " " +
             plan::dtypeName(t.dtype) + " needs " +
             (info.numElements() < 0 ? std::string("too many")
                                     : std::to_string(bytes));
    return false;
  }
  t.data.assign(data + start + headerLen, data + size);
  *out = std::move(t);
  return true;
}

/// The .npy descr `dtype`'s data is written with: little-endian ('|' for
/// one byte) with its own code where .npy has the type, a byte each for
/// the sub-byte integers, f4 for the other floats (written widened).
static std::string descrFor(DType dtype) {
  for (const auto &e : kNpyCodes)
    if (e.dtype == dtype)
      return (plan::dtypeSize(dtype) == 1 ? "|" : "<") + std::string(e.code);
  switch (dtype) {
  case DType::I4:
  case DType::I2:
    return "|i1";
  case DType::U4:
  case DType::U2:
    return "|u1";
  default:
    return dtype == DType::BF16 || plan::isNarrowFloat(dtype) ? "<f4" : "|u1";
  }
}

std::vector<uint8_t> encodeNpy(DType dtype, const std::vector<int64_t> &shape,
                               const void *data, size_t bytes) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1)
    dims += ",";
  std::string header = std::string("{'descr': '") + descrFor(dtype) +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces so the data starts on a 64-byte boundary.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(static_cast<uint8_t>(header.size() & 0xff));
  out.push_back(static_cast<uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  const uint8_t *src = static_cast<const uint8_t *>(data);
  if (dtype == DType::BF16) {
    for (size_t i = 0; i + 1 < bytes; i += 2) {
      // bfloat16 is the high half of a float32.
      out.insert(out.end(), {0, 0, src[i], src[i + 1]});
    }
  } else if (plan::isNarrowType(dtype)) {
    // numpy has no float8/float4/int4/int2: widened to float32, int8 or
    // uint8 by value.
    bool toFloat = plan::isNarrowFloat(dtype);
    for (size_t i = 0; i < bytes; ++i) {
      double v = plan::narrowValue(dtype, src[i]);
      if (toFloat) {
        float f = static_cast<float>(v);
        uint8_t w[4];
        std::memcpy(w, &f, 4);
        out.insert(out.end(), w, w + 4);
      } else {
        out.push_back(static_cast<uint8_t>(static_cast<int8_t>(v)));
      }
    }
  } else {
    out.insert(out.end(), src, src + bytes);
  }
  return out;
}

bool readTensorFile(const std::string &path, HostTensor *out,
                    std::string *error) {
  auto endsWith = [&](const char *ext) {
    size_t n = std::strlen(ext);
    return path.size() >= n && path.compare(path.size() - n, n, ext) == 0;
  };
  bool npy = endsWith(".npy"), pb = endsWith(".pb");
  if (!npy && !pb) {
    *error = "'" + path + "': unknown tensor file extension (use .npy or .pb)";
    return false;
  }
  std::vector<uint8_t> bytes;
  if (!readWholeFile(path, &bytes, error))
    return false;
  bool ok = npy ? parseNpy(bytes.data(), bytes.size(), out, error)
                : parseTensorProto(bytes.data(), bytes.size(), out, error);
  if (!ok)
    *error = "'" + path + "': " + *error;
  return ok;
}

bool writeNpyFile(const std::string &path, DType dtype,
                  const std::vector<int64_t> &shape, const void *data,
                  size_t bytes, std::string *error) {
  std::vector<uint8_t> image = encodeNpy(dtype, shape, data, bytes);
  return writeFileAtomically(path, image.data(), image.size(), error);
}

} // namespace cleave::tensorfile
