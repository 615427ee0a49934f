//===- TrainingOps.h - ai.onnx.preview.training ops -------------*- C++ -*-===//
//
// Internal to lib/Import/ONNX: the optimizer converters (Adagrad, Adam,
// Momentum) and the Gradient op, which the graph importer handles itself
// because it differentiates a part of the graph (TrainingOps.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_ONNX_TRAININGOPS_H
#define CLEAVE_LIB_IMPORT_ONNX_TRAININGOPS_H

#include "NodeContext.h"

#include <string>

namespace cleave::onnximport {

constexpr const char kTrainingDomain[] = "ai.onnx.preview.training";

/// The converter table key of a node: the op type in the default domain,
/// "<domain>.<op type>" in the others.
std::string converterKey(const onnx::NodeProto &node);

/// Registers Adagrad, Adam, Momentum and (as a marker) Gradient under
/// "ai.onnx.preview.training.<op>".
void registerTrainingConverters(llvm::StringMap<ConverterFn> &table);

/// True for an ai.onnx.preview.training Gradient node.
bool isGradientNode(const onnx::NodeProto &node);

/// Imports the Gradient node `graph.node(nodeIndex)`: the gradients of its
/// `y` attribute with respect to its inputs bound to `xs` (`zs` bound but
/// not differentiated) over the nodes before it, as a cleave.gradient marker
/// that --cleave-expand-gradients expands. A non-scalar y is differentiated
/// as sum(y).
mlir::LogicalResult importGradientNode(NodeContext &ctx,
                                       const onnx::GraphProto &graph,
                                       int nodeIndex,
                                       llvm::StringMap<TensorEntry> &tensors);

} // namespace cleave::onnximport

#endif // CLEAVE_LIB_IMPORT_ONNX_TRAININGOPS_H
