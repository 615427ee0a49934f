//===- Safetensors.cpp - The safetensors tensor file format ---------------===//

#include "cleave/Safetensors.h"
#include "cleave/Json.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace cleave::safetensors {

using namespace plan;

static const std::pair<DType, const char *> kCodes[] = {
    {DType::F32, "F32"},  {DType::F16, "F16"}, {DType::BF16, "BF16"},
    {DType::F64, "F64"},  {DType::I64, "I64"}, {DType::I32, "I32"},
    {DType::I16, "I16"},  {DType::I8, "I8"},   {DType::U8, "U8"},
    {DType::U16, "U16"},  {DType::U32, "U32"}, {DType::U64, "U64"},
    {DType::Bool, "BOOL"}};

const char *dtypeCode(DType t) {
  for (const auto &c : kCodes)
    if (c.first == t)
      return c.second;
  return nullptr;
}

bool dtypeFromCode(const std::string &code, DType *out) {
  for (const auto &c : kCodes)
    if (code == c.second) {
      *out = c.first;
      return true;
    }
  return false;
}

bool encodeHeader(std::vector<TensorEntry> *tensors, const Metadata &metadata,
                  std::vector<uint8_t> *out, std::string *error) {
  json::Value header = json::Value::object();
  if (!metadata.empty()) {
    json::Value &meta = header["__metadata__"] = json::Value::object();
    for (const auto &[key, value] : metadata)
      meta[key] = value;
  }
  uint64_t offset = 0;
  std::set<std::string> names;
  for (TensorEntry &t : *tensors) {
    const char *code = dtypeCode(t.dtype);
    if (!code) {
      *error = "tensor '" + t.name + "': dtype " + dtypeName(t.dtype) +
               " cannot be stored in safetensors";
      return false;
    }
    if (t.name == "__metadata__" || !names.insert(t.name).second) {
      *error = "tensor name '" + t.name + "' is reserved or used twice";
      return false;
    }
    TensorInfo info;
    info.dtype = t.dtype;
    info.shape = t.shape;
    t.begin = offset;
    t.end = offset + info.byteSize();
    offset = t.end;
    header[t.name] = {{"dtype", code},
                      {"shape", t.shape},
                      {"data_offsets", {t.begin, t.end}}};
  }
  std::string json = json::dump(header);
  while ((8 + json.size()) % 8 != 0)
    json += ' ';
  out->clear();
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    out->push_back(static_cast<uint8_t>(n >> (8 * i)));
  out->insert(out->end(), json.begin(), json.end());
  return true;
}

bool decodeHeader(const uint8_t *data, size_t size, uint64_t fileSize,
                  Header *out, std::string *error) {
  if (fileSize < 8 || size < 8) {
    *error = "truncated: shorter than the 8-byte header length";
    return false;
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(data[i]) << (8 * i);
  if (n > fileSize - 8 || n > size - 8) {
    *error = "truncated: the header announces " + std::to_string(n) +
             " bytes of JSON but the file holds " +
             std::to_string(fileSize - 8) + " after the length";
    return false;
  }
  std::string text(reinterpret_cast<const char *>(data + 8), n);
  json::Value root;
  std::string jsonError;
  if (!json::parse(text, &root, &jsonError) || !root.is_object()) {
    *error = "malformed JSON header: " +
             (jsonError.empty() ? "not an object" : jsonError);
    return false;
  }
  Header h;
  h.dataStart = 8 + n;
  for (const auto &[name, v] : root.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) {
        *error = "__metadata__ is not an object";
        return false;
      }
      for (const auto &[key, value] : v.items()) {
        if (!value.is_string()) {
          *error = "__metadata__ value '" + key + "' is not a string";
          return false;
        }
        h.metadata.emplace_back(key, value.get<std::string>());
      }
      continue;
    }
    std::string what = "tensor '" + name + "'";
    const json::Value *shape = json::get(v, "shape"),
                      *offsets = json::get(v, "data_offsets");
    const std::string *dtype = json::asString(json::get(v, "dtype"));
    TensorEntry t;
    t.name = name;
    if (!dtype || !dtypeFromCode(*dtype, &t.dtype)) {
      *error = what + ": missing or unsupported dtype";
      return false;
    }
    if (!shape || !shape->is_array()) {
      *error = what + ": missing shape";
      return false;
    }
    for (const json::Value &d : *shape) {
      int64_t dim;
      if (!json::asInt64(d, &dim) || dim < 0) {
        *error = what + ": bad dimension in shape";
        return false;
      }
      t.shape.push_back(dim);
    }
    int64_t b, e;
    if (!offsets || !offsets->is_array() || offsets->size() != 2 ||
        !json::asInt64((*offsets)[0], &b) ||
        !json::asInt64((*offsets)[1], &e) || b < 0 || e < b) {
      *error = what + ": missing or bad data_offsets";
      return false;
    }
    t.begin = static_cast<uint64_t>(b);
    t.end = static_cast<uint64_t>(e);
    TensorInfo info;
    info.dtype = t.dtype;
    info.shape = t.shape;
    if (t.end - t.begin != info.byteSize()) {
      *error = what + ": data_offsets span " + std::to_string(t.end - t.begin) +
               " bytes but its shape needs " + std::to_string(info.byteSize());
      return false;
    }
    h.tensors.push_back(std::move(t));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const TensorEntry &a, const TensorEntry &b) {
              return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
            });
  uint64_t expect = 0;
  for (const TensorEntry &t : h.tensors) {
    if (t.begin != expect) {
      *error = "tensor '" + t.name +
               "': data_offsets leave a hole or overlap "
               "at byte " +
               std::to_string(expect) + " of the data";
      return false;
    }
    expect = t.end;
  }
  uint64_t dataBytes = fileSize - h.dataStart;
  if (expect != dataBytes) {
    *error = (expect > dataBytes ? "truncated: the tensors need "
                                 : "trailing data: the tensors need only ") +
             std::to_string(expect) + " bytes of data, the file holds " +
             std::to_string(dataBytes);
    return false;
  }
  *out = std::move(h);
  return true;
}

bool encode(const std::vector<HostTensorRef> &tensors, const Metadata &metadata,
            std::vector<uint8_t> *out, std::string *error) {
  std::vector<TensorEntry> entries;
  for (const HostTensorRef &t : tensors) {
    TensorEntry e;
    e.name = t.name;
    e.dtype = t.dtype;
    e.shape = t.shape;
    entries.push_back(e);
  }
  if (!encodeHeader(&entries, metadata, out, error))
    return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].bytes != entries[i].end - entries[i].begin) {
      *error = "tensor '" + tensors[i].name +
               "': " + std::to_string(tensors[i].bytes) +
               " bytes given, its shape "
               "needs " +
               std::to_string(entries[i].end - entries[i].begin);
      return false;
    }
    const uint8_t *p = static_cast<const uint8_t *>(tensors[i].data);
    out->insert(out->end(), p, p + tensors[i].bytes);
  }
  return true;
}

} // namespace cleave::safetensors
