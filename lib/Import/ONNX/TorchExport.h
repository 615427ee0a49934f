//===- TorchExport.h - What a PyTorch export says about its state -*- C++ -*-===//
//
// PyTorch's dynamo exporter records the export signature (which initializers
// are parameters and buffers) in the graph's metadata, and the aten call of
// each node in its `pkg.torch.onnx.fx_node` metadata. Its default optimizer
// then folds parameters into new constants: a Linear weight becomes its
// transposed copy `val_N`, a position table its rows at the exported
// positions. This file reads both records and recovers the parameters
// PyTorch trains where the file decides them, or refuses.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_ONNX_TORCHEXPORT_H
#define CLEAVE_LIB_IMPORT_ONNX_TORCHEXPORT_H

#include "Cleave/IR/CleaveMetadata.h"

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace cleave::onnximport {

/// The graph's `pkg.torch.export.ExportedProgram.graph_signature`.
struct TorchSignature {
  /// Parameter or buffer, by initializer name (the signature's target).
  llvm::StringMap<mlir::cleave::InitializerKind> kinds;
  /// The target of each placeholder ("p_l_weight" -> "l.weight").
  llvm::StringMap<std::string> targets;
  bool empty() const { return kinds.empty(); }
};

/// Reads the signature; empty when the model has none.
TorchSignature readTorchSignature(const onnx::GraphProto &graph);

/// A parameter that the exporter folded into a transposed copy, which the
/// graph now computes from the parameter again.
struct FoldedParameter {
  std::string parameter;
  /// The file's initializer that held the copy (a Transpose node of the
  /// parameter produces that value now).
  std::string copy;
  /// Whether the source file holds the parameter itself too (a tied copy),
  /// or only the copy (then --export-onnx writes only the copy).
  bool inSource = false;
};

/// For a model compiled for training: undoes the exporter's folding of
/// Linear weights into transposed copies (the node's fx_node names the
/// weight; a copy of a parameter the file still holds must equal its
/// transpose) and fails, naming what is in doubt and how to export
/// instead, when parameters of the signature are missing and constants the
/// file holds may be their folded forms. `refuse` false (the user named
/// the parameters with --trainable) recovers what it can and never fails.
mlir::LogicalResult recoverFoldedParameters(onnx::GraphProto &graph,
                                            llvm::StringRef path, bool refuse,
                                            mlir::Location loc,
                                            std::vector<FoldedParameter> &out);

} // namespace cleave::onnximport

#endif // CLEAVE_LIB_IMPORT_ONNX_TORCHEXPORT_H
