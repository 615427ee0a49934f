//===- CleaveDialect.h - The cleave dialect ---------------------*- C++ -*-===//

#ifndef CLEAVE_IR_CLEAVEDIALECT_H
#define CLEAVE_IR_CLEAVEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "Cleave/IR/CleaveDialect.h.inc"

#include <string>

namespace mlir::cleave {
/// The ONNX node an op was imported from (its NameLoc, first of a FusedLoc),
/// or an empty string.
llvm::StringRef getNodeName(Location loc);
/// Where an op comes from, for messages: "node <name>", "file.mlir:<line>",
/// or an empty string.
std::string describeLocation(Location loc);
} // namespace mlir::cleave

#endif // CLEAVE_IR_CLEAVEDIALECT_H
