//===- ModelChecks.h - Cleave's own checks of an ONNX model's graph ------===//
//
// Internal to lib/Import/ONNX. What the importer checks itself, for every
// IR version and opset, before libonnx's checker (which only knows IR
// version 8 and opset 17) or in its place: the graph's names
// (GraphChecks.cpp) and every node's attributes against its op's schema
// (AttributeChecks.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_ONNX_MODELCHECKS_H
#define CLEAVE_LIB_IMPORT_ONNX_MODELCHECKS_H

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LLVM.h"

#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace cleave::onnximport {

/// Checks the names of `graph` and of its subgraphs (If, Loop and Scan
/// bodies): every node input and graph output names a graph input,
/// initializer or earlier node output (a body may use its outer graphs'
/// names, an outer graph not a body's); no value is produced twice, no
/// input or initializer declared twice; an initializer that is also a graph
/// input holds the element type and shape the input declares. Errors name
/// the node or tensor, located at `path`.
mlir::LogicalResult checkGraphStructure(const onnx::GraphProto &graph,
                                        llvm::StringRef path,
                                        mlir::MLIRContext *ctx);

/// Checks the attributes of every default-domain node of `graph` and its
/// subgraphs against its op's schema at `opset` (libonnx's up to opset 17,
/// NewerSchemas.inc's after): each attribute known to the op and of its
/// type, every required one present; flags 0 or 1, strings from their
/// op's set, window attributes (pads, strides, ...) as long as the
/// spatial rank needs. Errors name the node, the attribute, what it holds
/// and what it must hold.
mlir::LogicalResult checkNodeAttributes(const onnx::GraphProto &graph,
                                        int64_t opset, llvm::StringRef path,
                                        mlir::MLIRContext *ctx);

/// Adds the rank of every value of `graph` whose rank is declared (graph
/// inputs, value_info and outputs with a shape, initializers) to `ranks`.
void addDeclaredRanks(const onnx::GraphProto &graph,
                      llvm::StringMap<int> &ranks);

/// "an integer", "a list of floats", ... for an AttributeProto type.
std::string attributeTypeNoun(int type);
/// What an attribute holds, for errors: "a string 'yes'", "an integer 2",
/// "a list of 3 integers".
std::string describeAttribute(const onnx::AttributeProto &attr);
/// Whether `attr` holds a value of `type`: its declared type with that
/// field populated, or, for an attribute without a declared type (files of
/// IR version 1), the populated field.
bool attributeHolds(const onnx::AttributeProto &attr, int type);

} // namespace cleave::onnximport

#endif // CLEAVE_LIB_IMPORT_ONNX_MODELCHECKS_H
