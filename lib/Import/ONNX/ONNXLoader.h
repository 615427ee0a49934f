//===- ONNXLoader.h - Parse, check and shape-infer an ONNX model ---------===//
//
// Internal to lib/Import/ONNX: the only code that calls libonnx, which
// reports errors with C++ exceptions (ONNXLoader.cpp builds with
// -fexceptions and turns every exception into a diagnostic).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_ONNX_ONNXLOADER_H
#define CLEAVE_LIB_IMPORT_ONNX_ONNXLOADER_H

#include "cleave/Import/ONNXImporter.h"

#include <onnx/onnx_pb.h>

namespace cleave::onnximport {

/// Opset of the default ONNX domain the importer converts old models to.
constexpr int64_t kMinConvertedOpset = 13;
/// Newest opset libonnx's checker and shape inference know.
constexpr int64_t kMaxCheckedOpset = 17;
/// Newest opset of the default domain whose ops Cleave implements (onnx
/// 1.23's, NewerSchemas.inc); newer models need
/// ImportOptions::allowNewerOpset.
constexpr int64_t kMaxImplementedOpset = 28;

/// Opset version of the default domain ("" or "ai.onnx"); 0 when absent.
int64_t getDefaultOpset(const onnx::ModelProto &model);

/// Parses `path` into `model`, refuses opsets newer than
/// kMaxImplementedOpset (unless ImportOptions::allowNewerOpset), runs
/// Cleave's own checks (ModelChecks.h), pins input shapes from `options`,
/// converts opsets below 13, runs the checker and strict shape inference
/// (opset <= 17, IR version <= 8).
/// `sourceOpset` (if not null) receives the file's opset before conversion.
mlir::LogicalResult loadONNXModel(llvm::StringRef path,
                                  const ImportOptions &options,
                                  mlir::MLIRContext *ctx,
                                  onnx::ModelProto &model,
                                  int64_t *sourceOpset = nullptr);

/// Cuts `model` down to its first `keep` layers (ImportOptions::keepLayers):
/// the nodes of the later layers go, and what read the last layer's tensors
/// reads the kept last layer's. Fails, naming the difference, when the
/// layers do not repeat the first one.
mlir::LogicalResult keepFirstLayers(onnx::ModelProto &model, int64_t keep,
                                    mlir::Location loc);

} // namespace cleave::onnximport

#endif // CLEAVE_LIB_IMPORT_ONNX_ONNXLOADER_H
