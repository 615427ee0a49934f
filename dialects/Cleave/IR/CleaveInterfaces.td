//===- CleaveInterfaces.td - Cleave op interfaces ---------*- tablegen -*-===//

#ifndef CLEAVE_IR_CLEAVEINTERFACES_TD
#define CLEAVE_IR_CLEAVEINTERFACES_TD

include "mlir/IR/OpBase.td"

def Cleave_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    The static cost of one execution of an op: floating-point (or integer)
    operations, and bytes read and written, assuming every operand is read
    once and every result written once. Used by the memory planner, the
    cost model and the pipeline/sharding planners.
  }];
  let methods = [
    InterfaceMethod<"Arithmetic operations performed by the op.",
      "int64_t", "getFlops", (ins), [{}], [{
        return ::mlir::cleave::detail::getTotalResultElements($_op);
      }]>,
    InterfaceMethod<"Bytes of operands read by the op.",
      "int64_t", "getBytesRead", (ins), [{}], [{
        return ::mlir::cleave::detail::getTotalOperandBytes($_op);
      }]>,
    InterfaceMethod<"Bytes of results written by the op.",
      "int64_t", "getBytesWritten", (ins), [{}], [{
        return ::mlir::cleave::detail::getTotalResultBytes($_op);
      }]>,
  ];
}

#endif // CLEAVE_IR_CLEAVEINTERFACES_TD
