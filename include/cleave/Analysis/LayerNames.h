//===- LayerNames.h - Layers of a model from ONNX node names ----*- C++ -*-===//
//
// The layer rule shared by the importer (ImportOptions::keepLayers,
// outlineONNXModel), recomputation and pipeline stage assignment: a node
// belongs to the layer its name's prefix names.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_ANALYSIS_LAYERNAMES_H
#define CLEAVE_ANALYSIS_LAYERNAMES_H

#include "llvm/ADT/StringRef.h"

namespace cleave {

/// The layer prefix of an ONNX node name: up to and including the first run
/// of digits that follows a letter, `.` or `_` and is followed by `.` or
/// `/` (`h3.qkv` -> `h3`, `/model/layers.11/mlp/fc` -> `/model/layers.11`),
/// or "" when there is none.
inline llvm::StringRef layerPrefix(llvm::StringRef name) {
  auto isDigit = [](char c) { return c >= '0' && c <= '9'; };
  auto isLead = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
           c == '_';
  };
  for (size_t i = 1; i < name.size(); ++i) {
    if (!isDigit(name[i]) || isDigit(name[i - 1]) || !isLead(name[i - 1]))
      continue;
    size_t e = i;
    while (e < name.size() && isDigit(name[e]))
      ++e;
    if (e < name.size() && (name[e] == '.' || name[e] == '/'))
      return name.take_front(e);
    i = e;
  }
  return "";
}

} // namespace cleave

#endif // CLEAVE_ANALYSIS_LAYERNAMES_H
