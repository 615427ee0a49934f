//===- CleaveDialect.cpp - Cleave dialect registration ---------------------===//

#include "Cleave/IR/CleaveDialect.h"
#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"

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

Operation *CleaveDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
