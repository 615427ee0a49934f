//===- CleaveMetadataEnums.td - Enums of the metadata ---*- tablegen -*-===//
//
// The values of the enumerated `cleave.*` metadata attributes: what a state
// argument holds, what an input or output means to the training loop, and
// what an imported initializer becomes. A file of its own so that its
// generated enums are only these; the attributes that wrap them are in
// CleaveAttrs.td.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_CLEAVEMETADATAENUMS_TD
#define CLEAVE_IR_CLEAVEMETADATAENUMS_TD

include "mlir/IR/EnumAttr.td"

def Cleave_StateKind : I32EnumAttr<"StateKind",
    "what a state argument of a training step holds", [
    I32EnumAttrCase<"parameter", 0>,
    I32EnumAttrCase<"optimizer_state", 1>,
    I32EnumAttrCase<"buffer", 2>
  ]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}

def Cleave_Role : I32EnumAttr<"Role",
    "what an input or output of a step means to the training loop", [
    I32EnumAttrCase<"data", 0>,
    I32EnumAttrCase<"lr", 1>,
    I32EnumAttrCase<"step", 2>,
    I32EnumAttrCase<"loss", 3>,
    I32EnumAttrCase<"grad_norm", 4>,
    I32EnumAttrCase<"loss_scale", 5>,
    I32EnumAttrCase<"found_inf", 6>,
    I32EnumAttrCase<"gradient", 7>,
    I32EnumAttrCase<"probe", 8>,
    I32EnumAttrCase<"metric", 9>
  ]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}

def Cleave_InitializerKind : I32EnumAttr<"InitializerKind",
    "what an imported ONNX initializer becomes in training", [
    I32EnumAttrCase<"parameter", 0>,
    I32EnumAttrCase<"buffer", 1>,
    I32EnumAttrCase<"constant", 2>
  ]> {
  let cppNamespace = "::mlir::cleave";
  let genSpecializedAttr = 0;
}

#endif // CLEAVE_IR_CLEAVEMETADATAENUMS_TD
