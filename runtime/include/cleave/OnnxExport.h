//===- OnnxExport.h - Trained weights back into ONNX ------------*- C++ -*-===//
//
// Rewrites initializers of a serialized onnx.ModelProto in place of their old
// values, working on the protobuf wire format directly (the runtime links no
// protobuf library). Every other byte of the model is kept as it was.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_ONNXEXPORT_H
#define CLEAVE_ONNXEXPORT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cleave::onnxexport {

/// A new value for the initializer `name` (ONNX TensorProto data type code,
/// dims, little-endian element bytes).
struct Weight {
  std::string name;
  uint32_t dtype = 0;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  size_t size = 0;
  /// A parameter that cleave-compile --untie split off the initializer
  /// `copyOf` for the node `node` (its name, or "<OpType>#<index>" for an
  /// unnamed node): written as a new initializer, and the node's inputs
  /// that read `copyOf` read it instead.
  std::string copyOf, node;
};

/// Returns the model `model` (the bytes of an .onnx file) with each initializer
/// named in `weights` holding the new value as raw_data (external-data and
/// typed-field storage of those initializers is dropped). Fails with a clear
/// message if the bytes are not a model, an initializer is missing, or its
/// type or dims differ. Untied copies (Weight::copyOf) are added as new
/// initializers and rewired into their node.
bool replaceInitializers(const std::vector<uint8_t> &model,
                         const std::vector<Weight> &weights,
                         std::vector<uint8_t> *out, std::string *error);

} // namespace cleave::onnxexport

#endif // CLEAVE_ONNXEXPORT_H
