//===- GraphImporter.h - The walk over an ONNX graph ------------*- C++ -*-===//
//
// Private to the ONNX importer: the GraphImporter, whose walk over the
// graph is ONNXImporter.cpp and whose If, Loop and Scan (imported by the
// walk itself, not by a converter) are ControlFlowOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
#define CLEAVE_LIB_IMPORT_ONNX_GRAPHIMPORTER_H

#include "cleave/Import/ONNXImporter.h"

#include "NodeContext.h"
#include "ONNXLoader.h"
#include "TorchExport.h"

#include "Cleave/IR/CleaveMetadata.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Path.h"

#include <string>
#include <utility>

namespace cleave {
namespace onnximport {

using llvm::SmallVectorImpl;
using mlir::FailureOr;
using mlir::FileLineColLoc;
using mlir::MLIRContext;
using mlir::ModuleOp;
using mlir::OpBuilder;
using mlir::OwningOpRef;

/// `If` of the default domain: imported by the graph walk itself when its
/// condition is known (GraphImporter::importIf).
bool isIfNode(const onnx::NodeProto &node);

/// `Loop` and `Scan` of the default domain: unrolled by the graph walk
/// (GraphImporter::importLoop, importScan).
bool isLoopNode(const onnx::NodeProto &node);

/// The graph attribute `name` of `node`, or null.
const onnx::GraphProto *graphAttr(const onnx::NodeProto &node, StringRef name);

class GraphImporter {
public:
  GraphImporter(MLIRContext *ctx, const onnx::ModelProto &model, StringRef path,
                const ImportOptions &options, int64_t sourceOpset)
      : ctx(ctx), graph(model.graph()), path(path), options(options),
        fileLoc(FileLineColLoc::get(ctx, path, 0, 0)) {
    modelDir = llvm::sys::path::parent_path(path).str();
    if (modelDir.empty())
      modelDir = ".";
    opset = getDefaultOpset(model);
    settings.sourceOpset = sourceOpset ? sourceOpset : opset;
    settings.batchNormTraining = options.batchNormTraining;
    settings.keepParameters = options.keepParameters;
  }

  FailureOr<OwningOpRef<ModuleOp>> run();

  /// Parameters made again from the exporter's transposed copies
  /// (recoverFoldedParameters), recorded on their initializers for
  /// --export-onnx.
  void setFoldedParameters(std::vector<FoldedParameter> f) {
    folded = std::move(f);
  }

private:
  LogicalResult checkSupported();
  FailureOr<RankedTensorType> convertValueInfo(const onnx::ValueInfoProto &vi,
                                               bool isInput);
  Location nodeLoc(const onnx::NodeProto &node, int index);
  LogicalResult crossCheck(NodeContext &node);
  /// Converts the nodes of `g` (the graph or a branch taken by an If) in
  /// order into the builder's block.
  LogicalResult importNodes(const onnx::GraphProto &g, OpBuilder &b);
  /// An If whose condition is known at import time: imports the branch it
  /// takes in place, its outputs becoming the node's.
  LogicalResult importIf(NodeContext &nc);
  /// The initializers of a branch or body (`what`, for messages) as
  /// constants.
  LogicalResult importInitializers(NodeContext &nc, const onnx::GraphProto &g,
                                   StringRef what);
  /// Imports `body` once with its inputs bound to `inputs`, giving its
  /// outputs; the names it defines are restored to their outer values
  /// afterwards, so the next iteration and the outer graph see theirs.
  LogicalResult importBody(NodeContext &nc, const onnx::GraphProto &body,
                           ArrayRef<TensorEntry> inputs,
                           SmallVectorImpl<TensorEntry> &outputs);
  /// A Loop whose trip count and conditions are known at import time, and
  /// a Scan (static length): unrolled, one copy of the body per iteration.
  LogicalResult importLoop(NodeContext &nc);
  LogicalResult importScan(NodeContext &nc);

  MLIRContext *ctx;
  const onnx::GraphProto &graph;
  StringRef path;
  const ImportOptions &options;
  ImportSettings settings;
  /// Initializer updates of the converters (NodeContext::stateUpdates).
  SmallVector<std::pair<std::string, Value>> stateUpdates;
  std::string modelDir;
  Location fileLoc;
  int64_t opset;
  llvm::StringMap<TensorEntry> tensors;
  llvm::StringMap<const onnx::TypeProto *> inferred;
  std::vector<FoldedParameter> folded;
};

} // namespace onnximport
} // namespace cleave

#endif // CLEAVE_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
