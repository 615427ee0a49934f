//===- CleaveDialect.cpp - Cleave dialect registration --------------------===//

#include "Cleave/IR/CleaveDialect.h"
#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"

#include "mlir/IR/Location.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::cleave;

#include "Cleave/IR/CleaveDialect.cpp.inc"
#include "Cleave/IR/CleaveEnums.cpp.inc"
#include "Cleave/IR/CleaveInterfaces.cpp.inc"

void CleaveDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Cleave/IR/CleaveOps.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "Cleave/IR/CleaveCollectiveOps.cpp.inc"
      >();
  registerAttributes();
}

StringRef mlir::cleave::getNodeName(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (!fused.getLocations().empty())
      loc = fused.getLocations().front();
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().getValue();
  return {};
}

std::string mlir::cleave::describeLocation(Location loc) {
  if (StringRef node = getNodeName(loc); !node.empty())
    return ("node " + node).str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (!fused.getLocations().empty())
      loc = fused.getLocations().front();
  if (auto file = dyn_cast<FileLineColLoc>(loc); file && file.getLine())
    return llvm::sys::path::filename(file.getFilename().getValue()).str() +
           ":" + std::to_string(file.getLine());
  return "";
}

Operation *CleaveDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
