//===- CleaveDialect.h - The cleave dialect ---------------------*- C++ -*-===//

#ifndef CLEAVE_IR_CLEAVEDIALECT_H
#define CLEAVE_IR_CLEAVEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "Cleave/IR/CleaveDialect.h.inc"
#include "Cleave/IR/CleaveMetadata.h"

#include <string>

namespace mlir::cleave {
/// The ONNX node an op was imported from (its NameLoc, first of a FusedLoc),
/// or an empty string.
llvm::StringRef getNodeName(Location loc);
/// Where an op comes from, for messages: "node <name>", "file.mlir:<line>",
/// or an empty string.
std::string describeLocation(Location loc);

/// On an initializer's constant (and a parameter's argument): where its
/// bytes lie in the model's external data, {file (resolved path), offset,
/// file_size, value}. `value` is the attribute those bytes back; an
/// initial value that differs from it (a pass transformed it) is not the
/// file's, and a plan holds a copy instead of a reference.
inline constexpr llvm::StringLiteral kExternalDataAttrName =
    attr::kExternalData;
} // namespace mlir::cleave

#endif // CLEAVE_IR_CLEAVEDIALECT_H
