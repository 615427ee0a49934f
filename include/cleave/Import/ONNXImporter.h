//===- ONNXImporter.h - Import ONNX models into Cleave ----------*- C++ -*-===//

#ifndef CLEAVE_IMPORT_ONNXIMPORTER_H
#define CLEAVE_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cleave {

struct ImportOptions {
  /// Pins symbolic/unknown input dimensions: input name -> full static shape.
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Freezes graph inputs to the values in ONNX TensorProto (.pb) files:
  /// input name -> path. A frozen input becomes an initializer, so values
  /// that decide shapes (a Reshape's shape, Slice bounds, ...) are known at
  /// compile time; the compiled plan no longer takes that input.
  llvm::StringMap<std::string> frozenInputs;
  /// Imports BatchNormalization nodes of an inference export in training
  /// mode, as PyTorch's train() runs them: batch statistics normalize, and
  /// the running mean and variance (momentum as the node's, unbiased
  /// variance) are updated. Each update is an extra result of @main with a
  /// `cleave.updates_initializer` attribute naming the statistic's
  /// initializer, which the training step keeps as a "buffer" state.
  bool batchNormTraining = false;
  /// Never folds a node that reads a float initializer of more than one
  /// element at import time (a Gather of position embeddings at constant
  /// positions, an Expand of a class token): in a model compiled for
  /// training, those initializers are parameters.
  bool keepParameters = false;
  /// With keepParameters: the user names the parameters to train
  /// (--trainable), so a PyTorch export whose optimizer folded parameters
  /// into constants imports with what can be recovered instead of being
  /// refused (lib/Import/ONNX/TorchExport.h).
  bool trainableNamed = false;
  /// A large float initializer whose external data file does not exist
  /// imports as zeros, its cleave.external_data saying file_size = -1:
  /// models declared without their weights, whose weight matrices the
  /// runtime draws (cleave-compile --init-parameters). The plan builder
  /// refuses any other use of such a tensor.
  bool absentWeights = false;
  /// When positive: imports only the first `keepLayers` of the model's
  /// repeated layers (nodes named by layer, cleave/Analysis/LayerNames.h),
  /// what read the last layer's outputs reading the last kept layer's. The
  /// planner compiles such a cut-down model to cost one layer.
  int64_t keepLayers = 0;
  /// Imports a model whose default opset is newer than the newest Cleave
  /// implements (with a warning), each op read as its newest version Cleave
  /// knows; without it such a model is refused.
  bool allowNewerOpset = false;
  /// When set: the serialized model to import instead of reading the file
  /// (the path still names it, and external data is found beside it).
  std::shared_ptr<const std::string> modelBytes;
};

/// What the planner reads of a model before compiling it.
struct ModelOutline {
  /// Layer prefixes in graph order.
  std::vector<std::string> layers;
  /// Why the layers do not repeat the first one, or "".
  std::string mismatch;
  struct Input {
    std::string name;
    /// -1 for a symbolic or unknown dimension.
    std::vector<int64_t> shape;
  };
  /// The graph inputs that are not initializers.
  std::vector<Input> inputs;
};

/// Parses `path` (no checks, no inference) for its layers and inputs.
mlir::FailureOr<ModelOutline> outlineONNXModel(llvm::StringRef path,
                                               mlir::MLIRContext &context);

/// The model at `path` cut down to its first `keep` layers (as
/// ImportOptions::keepLayers does), serialized: for ImportOptions::modelBytes
/// when the same cut model is imported many times.
mlir::FailureOr<std::string> cutONNXModel(llvm::StringRef path, int64_t keep,
                                          mlir::MLIRContext &context);

/// Loads, checks and converts an ONNX model file into a module holding
/// `func.func @main`. Reports errors through the context's diagnostic engine
/// (mlir::emitError with a location naming the node/tensor) and returns
/// failure.
///
/// `@main` takes the graph inputs that are not initializers, in order, each
/// with the argument attribute `cleave.name`, and returns the graph outputs in
/// order, each with the result attribute `cleave.name`. Every initializer
/// becomes one `cleave.constant` carrying `cleave.initializer = "<name>"`.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
importONNXFile(llvm::StringRef path, mlir::MLIRContext &context,
               const ImportOptions &options);

/// Parses "name=2x3x4" into options; returns an error message or empty.
std::string parseInputShapeFlag(llvm::StringRef flag, ImportOptions &options);

/// Parses "name=value.pb" into options; returns an error message or empty.
std::string parseFreezeInputFlag(llvm::StringRef flag, ImportOptions &options);

} // namespace cleave

#endif // CLEAVE_IMPORT_ONNXIMPORTER_H
