//===- CleaveCollectiveEnums.td - Collective enums ---------*- tablegen -*-===//
//
// A file of its own so that its generated enums are only these.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_CLEAVECOLLECTIVEENUMS_TD
#define CLEAVE_IR_CLEAVECOLLECTIVEENUMS_TD

include "mlir/IR/EnumAttr.td"

def Cleave_CollectiveReduceKind : I32EnumAttr<"CollectiveReduceKind",
    "how a collective combines the ranks' values", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"avg", 1>,
    I32EnumAttrCase<"max", 2>, I32EnumAttrCase<"min", 3>,
    I32EnumAttrCase<"prod", 4>
  ]> {
  let cppNamespace = "::mlir::cleave";
}

#endif // CLEAVE_IR_CLEAVECOLLECTIVEENUMS_TD
