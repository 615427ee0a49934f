//===- CleaveBase.td - Cleave dialect definition and enums -*- tablegen -*-===//

#ifndef CLEAVE_IR_CLEAVEBASE_TD
#define CLEAVE_IR_CLEAVEBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

def Cleave_Dialect : Dialect {
  let name = "cleave";
  let cppNamespace = "::mlir::cleave";
  let summary = "Tensor-level ML operations on global shapes";
  let description = [{
    The `cleave` dialect holds the tensor programs that Cleave imports from
    ONNX and transforms into training programs. Every op works on ranked,
    statically shaped tensors. Broadcasting is explicit
    (`cleave.broadcast_in_dim`); elementwise ops take operands of equal
    types; contractions are one general op (`cleave.contract`); reductions
    take a kind and a list of dimensions; convolution and windowed reduction
    (pooling) are one general op each. A few composites (softmax, layer norm)
    stay whole for fusion and numerics. Every op implements
    `CostOpInterface` (flops and bytes).

    Integer element types keep their signedness (`ui8`, `i32`, ...): ONNX's
    unsigned types map to unsigned MLIR integers, signed ones to signless.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  // The discardable `cleave.*` metadata attributes (CleaveMetadata.cpp).
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Sharding attributes (CleaveSharding.td), registered from
    /// CleaveSharding.cpp.
    void registerAttributes();
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Cleave_UnaryKind : I32EnumAttr<"UnaryKind", "elementwise unary function", [
    I32EnumAttrCase<"neg", 0>, I32EnumAttrCase<"abs", 1>,
    I32EnumAttrCase<"exp", 2>, I32EnumAttrCase<"log", 3>,
    I32EnumAttrCase<"sqrt", 4>, I32EnumAttrCase<"rsqrt", 5>,
    I32EnumAttrCase<"tanh", 6>, I32EnumAttrCase<"sigmoid", 7>,
    I32EnumAttrCase<"erf", 8>, I32EnumAttrCase<"sin", 9>,
    I32EnumAttrCase<"cos", 10>, I32EnumAttrCase<"tan", 11>,
    I32EnumAttrCase<"asin", 12>, I32EnumAttrCase<"acos", 13>,
    I32EnumAttrCase<"atan", 14>, I32EnumAttrCase<"sinh", 15>,
    I32EnumAttrCase<"cosh", 16>, I32EnumAttrCase<"asinh", 17>,
    I32EnumAttrCase<"acosh", 18>, I32EnumAttrCase<"atanh", 19>,
    I32EnumAttrCase<"floor", 20>, I32EnumAttrCase<"ceil", 21>,
    I32EnumAttrCase<"round", 22>, I32EnumAttrCase<"sign", 23>,
    I32EnumAttrCase<"reciprocal", 24>, I32EnumAttrCase<"lnot", 25, "not">,
    I32EnumAttrCase<"silu", 26>
  ]> {
  let cppNamespace = "::mlir::cleave";
}

def Cleave_BinaryKind : I32EnumAttr<"BinaryKind", "elementwise binary function", [
    I32EnumAttrCase<"add", 0>, I32EnumAttrCase<"sub", 1>,
    I32EnumAttrCase<"mul", 2>, I32EnumAttrCase<"div", 3>,
    I32EnumAttrCase<"rem", 4>, I32EnumAttrCase<"mod", 5>,
    I32EnumAttrCase<"pow", 6>, I32EnumAttrCase<"max", 7>,
    I32EnumAttrCase<"min", 8>, I32EnumAttrCase<"land", 9, "and">,
    I32EnumAttrCase<"lor", 10, "or">, I32EnumAttrCase<"lxor", 11, "xor">,
    I32EnumAttrCase<"shl", 12>, I32EnumAttrCase<"shr", 13>
  ]> {
  let cppNamespace = "::mlir::cleave";
}

def Cleave_CompareKind : I32EnumAttr<"CompareKind", "elementwise comparison", [
    I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
    I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
    I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>
  ]> {
  let cppNamespace = "::mlir::cleave";
}

def Cleave_ReduceKind : I32EnumAttr<"ReduceKind", "reduction combiner", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"prod", 1>,
    I32EnumAttrCase<"max", 2>, I32EnumAttrCase<"min", 3>
  ]> {
  let cppNamespace = "::mlir::cleave";
}

def Cleave_ScatterKind : I32EnumAttr<"ScatterKind",
    "how a scattered update combines with the existing element", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"add", 1>,
    I32EnumAttrCase<"mul", 2>, I32EnumAttrCase<"max", 3>,
    I32EnumAttrCase<"min", 4>
  ]> {
  let cppNamespace = "::mlir::cleave";
}

def Cleave_PadMode : I32EnumAttr<"PadMode", "padding mode", [
    I32EnumAttrCase<"constant", 0>, I32EnumAttrCase<"reflect", 1>,
    I32EnumAttrCase<"edge", 2>
  ]> {
  let cppNamespace = "::mlir::cleave";
}

#endif // CLEAVE_IR_CLEAVEBASE_TD
