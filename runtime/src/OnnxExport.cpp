//===- OnnxExport.cpp - Write trained weights back into an ONNX model -----===//
//
// Protobuf wire format: a message is a sequence of (key, value) fields, the
// key a varint (field number << 3 | wire type). ModelProto.graph is field 7,
// GraphProto.initializer field 5, and in TensorProto dims = 1, data_type = 2,
// name = 8, raw_data = 9; float_data 4, int32_data 5, string_data 6,
// int64_data 7, double_data 10, uint64_data 11, external_data 13 and
// data_location 14 hold the values in other forms and are dropped.
//
// Hand-written rather than protobuf: the runtime ships without libprotobuf
// and libonnx (Debian's libonnx_proto is generated for the full protobuf
// runtime, not protobuf-lite), and only the initializers are rewritten:
// every other field of the model is copied through byte for byte, unparsed.
//
//===----------------------------------------------------------------------===//

#include "cleave/OnnxExport.h"

#include <map>

namespace cleave::onnxexport {
namespace {

struct Field {
  uint32_t number = 0;
  uint32_t wireType = 0;
  size_t begin = 0, end = 0;           ///< The whole field, key included.
  size_t valueBegin = 0, valueEnd = 0; ///< The payload of a LEN field.
  uint64_t varint = 0;                 ///< The value of a VARINT field.
};

bool readVarint(const uint8_t *p, size_t size, size_t *pos, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= size)
      return false;
    uint8_t b = p[(*pos)++];
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

void writeVarint(std::vector<uint8_t> &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

void writeLenField(std::vector<uint8_t> &out, uint32_t number,
                   const uint8_t *data, size_t size) {
  writeVarint(out, (static_cast<uint64_t>(number) << 3) | 2);
  writeVarint(out, size);
  out.insert(out.end(), data, data + size);
}

/// The bytes of a length-delimited field as a string.
std::string fieldText(const uint8_t *p, const Field &f) {
  return std::string(reinterpret_cast<const char *>(p + f.valueBegin),
                     f.valueEnd - f.valueBegin);
}

/// Splits the message in [begin, end) of `p` into fields.
bool parseFields(const uint8_t *p, size_t begin, size_t end,
                 std::vector<Field> *fields) {
  size_t pos = begin;
  while (pos < end) {
    Field f;
    f.begin = pos;
    uint64_t key;
    if (!readVarint(p, end, &pos, &key) || (key >> 3) == 0)
      return false;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wireType = static_cast<uint32_t>(key & 7);
    switch (f.wireType) {
    case 0:
      if (!readVarint(p, end, &pos, &f.varint))
        return false;
      break;
    case 1:
      if (end - pos < 8)
        return false;
      pos += 8;
      break;
    case 5:
      if (end - pos < 4)
        return false;
      pos += 4;
      break;
    case 2: {
      uint64_t len;
      if (!readVarint(p, end, &pos, &len) || len > end - pos)
        return false;
      f.valueBegin = pos;
      f.valueEnd = pos + len;
      pos += len;
      break;
    }
    default:
      return false;
    }
    f.end = pos;
    fields->push_back(f);
  }
  return true;
}

/// The dims of a TensorProto (packed or not).
bool readDims(const uint8_t *p, const std::vector<Field> &fields,
              std::vector<int64_t> *dims) {
  for (const Field &f : fields) {
    if (f.number != 1)
      continue;
    if (f.wireType == 0) {
      dims->push_back(static_cast<int64_t>(f.varint));
    } else if (f.wireType == 2) {
      size_t pos = f.valueBegin;
      while (pos < f.valueEnd) {
        uint64_t v;
        if (!readVarint(p, f.valueEnd, &pos, &v))
          return false;
        dims->push_back(static_cast<int64_t>(v));
      }
    }
  }
  return true;
}

std::string shapeText(const std::vector<int64_t> &s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

} // namespace

bool replaceInitializers(const std::vector<uint8_t> &model,
                         const std::vector<Weight> &weights,
                         std::vector<uint8_t> *out, std::string *error) {
  const uint8_t *p = model.data();
  std::vector<Field> modelFields;
  if (!parseFields(p, 0, model.size(), &modelFields)) {
    *error = "not an ONNX model (the protobuf encoding is invalid)";
    return false;
  }
  const Field *graph = nullptr;
  for (const Field &f : modelFields)
    if (f.number == 7 && f.wireType == 2)
      graph = &f;
  std::vector<Field> graphFields;
  if (!graph ||
      !parseFields(p, graph->valueBegin, graph->valueEnd, &graphFields)) {
    *error = "not an ONNX model (no valid graph)";
    return false;
  }
  std::map<std::string, const Weight *> pending;
  // Untied copies by the node that reads them (a node may read copies of
  // several initializers, e.g. a LayerNorm's weight and bias).
  std::map<std::string, std::vector<const Weight *>> copies;
  for (const Weight &w : weights) {
    if (w.copyOf.empty())
      pending[w.name] = &w;
    else
      copies[w.node].push_back(&w);
  }

  std::vector<uint8_t> newGraph;
  size_t nodeIndex = 0;
  for (const Field &f : graphFields) {
    if (f.number == 1 && f.wireType == 2 && !copies.empty()) {
      // A node: inputs that read an untied source read the copy instead.
      std::vector<Field> node;
      if (!parseFields(p, f.valueBegin, f.valueEnd, &node)) {
        *error = "node " + std::to_string(nodeIndex) + " is malformed";
        return false;
      }
      std::string name, opType;
      for (const Field &n : node) {
        if (n.number == 3 && n.wireType == 2)
          name = fieldText(p, n);
        if (n.number == 4 && n.wireType == 2)
          opType = fieldText(p, n);
      }
      // The importer's name for the node (its NameLoc).
      std::string key =
          name.empty() ? opType + "#" + std::to_string(nodeIndex) : name;
      ++nodeIndex;
      auto it = copies.find(key);
      if (it == copies.end()) {
        newGraph.insert(newGraph.end(), p + f.begin, p + f.end);
        continue;
      }
      std::map<std::string, const Weight *> bySource;
      for (const Weight *w : it->second)
        bySource[w->copyOf] = w;
      std::map<std::string, int> reads;
      std::vector<uint8_t> newNode;
      for (const Field &n : node) {
        auto source = n.number == 1 && n.wireType == 2
                          ? bySource.find(fieldText(p, n))
                          : bySource.end();
        if (source == bySource.end()) {
          newNode.insert(newNode.end(), p + n.begin, p + n.end);
          continue;
        }
        const std::string &copy = source->second->name;
        ++reads[source->first];
        writeLenField(newNode, 1,
                      reinterpret_cast<const uint8_t *>(copy.data()),
                      copy.size());
      }
      for (const auto &[source, w] : bySource) {
        int n = reads[source];
        if (n != 1) {
          *error = "node '" + key + "' reads '" + source + "' " +
                   (n == 0 ? "nowhere" : "more than once") +
                   ", so its untied copy '" + w->name +
                   "' cannot replace one input";
          return false;
        }
      }
      writeLenField(newGraph, 1, newNode.data(), newNode.size());
      copies.erase(it);
      continue;
    }
    if (f.number == 1 && f.wireType == 2)
      ++nodeIndex;
    std::vector<Field> tensor;
    if (f.number != 5 || f.wireType != 2 ||
        !parseFields(p, f.valueBegin, f.valueEnd, &tensor)) {
      newGraph.insert(newGraph.end(), p + f.begin, p + f.end);
      continue;
    }
    std::string name;
    uint64_t dtype = 0;
    for (const Field &t : tensor) {
      if (t.number == 8 && t.wireType == 2)
        name = fieldText(p, t);
      if (t.number == 2 && t.wireType == 0)
        dtype = t.varint;
    }
    auto it = pending.find(name);
    if (it == pending.end()) {
      newGraph.insert(newGraph.end(), p + f.begin, p + f.end);
      continue;
    }
    const Weight &w = *it->second;
    std::vector<int64_t> dims;
    if (!readDims(p, tensor, &dims)) {
      *error = "initializer '" + name + "' has malformed dims";
      return false;
    }
    if (dtype != w.dtype || dims != w.shape) {
      *error = "initializer '" + name + "' is type " + std::to_string(dtype) +
               " " + shapeText(dims) + " in the model but type " +
               std::to_string(w.dtype) + " " + shapeText(w.shape) +
               " in the plan";
      return false;
    }
    std::vector<uint8_t> newTensor;
    for (const Field &t : tensor) {
      bool dataField = t.number == 4 || t.number == 5 || t.number == 6 ||
                       t.number == 7 || t.number == 9 || t.number == 10 ||
                       t.number == 11 || t.number == 13 || t.number == 14;
      if (!dataField)
        newTensor.insert(newTensor.end(), p + t.begin, p + t.end);
    }
    writeLenField(newTensor, 9, w.data, w.size);
    writeLenField(newGraph, 5, newTensor.data(), newTensor.size());
    pending.erase(it);
  }
  if (!pending.empty()) {
    *error =
        "the model has no initializer named '" + pending.begin()->first + "'";
    return false;
  }
  if (!copies.empty()) {
    *error = "the model has no node '" + copies.begin()->first +
             "' to read the untied copy '" +
             copies.begin()->second.front()->name + "'";
    return false;
  }
  // The untied copies, as new initializers (dims, data_type, name,
  // raw_data).
  for (const Weight &w : weights) {
    if (w.copyOf.empty())
      continue;
    std::vector<uint8_t> tensor;
    for (int64_t d : w.shape) {
      writeVarint(tensor, 1 << 3);
      writeVarint(tensor, static_cast<uint64_t>(d));
    }
    writeVarint(tensor, 2 << 3);
    writeVarint(tensor, w.dtype);
    writeLenField(tensor, 8, reinterpret_cast<const uint8_t *>(w.name.data()),
                  w.name.size());
    writeLenField(tensor, 9, w.data, w.size);
    writeLenField(newGraph, 5, tensor.data(), tensor.size());
  }

  out->clear();
  for (const Field &f : modelFields) {
    if (&f == graph)
      writeLenField(*out, 7, newGraph.data(), newGraph.size());
    else
      out->insert(out->end(), p + f.begin, p + f.end);
  }
  if (out->size() > 0x7fffffffu) {
    *error = "the exported model exceeds protobuf's 2 GiB limit";
    return false;
  }
  return true;
}

} // namespace cleave::onnxexport
