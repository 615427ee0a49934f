//===- CleaveSharding.td - Sharding attributes -------------*- tablegen -*-===//
//
// How a tensor of a global program is laid out over a device mesh. Values
// carry them in attributes that passes keep: `cleave.sharding` on function
// arguments and results (a TensorShardingAttr) and on ops (an array with
// one TensorShardingAttr per result).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_CLEAVESHARDING_TD
#define CLEAVE_IR_CLEAVESHARDING_TD

include "Cleave/IR/CleaveBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class Cleave_Attr<string name, string attrMnemonic>
    : AttrDef<Cleave_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Cleave_DimShardingAttr : Cleave_Attr<"DimSharding", "dim_sharding"> {
  let summary = "The mesh axes one tensor dimension is split over";
  let description = [{
    An ordered list of mesh axes (major first): the dimension is split into
    as many blocks as the product of their sizes, and a rank holds the block
    at its coordinates along them. `closed` dimensions keep their axes;
    propagation may append axes to an open one (`?`). `priority` orders
    user shardings in propagation (0 first; -1 when not given).

    Written inside a `#cleave.sharding`: `{"dp"}` (closed), `{"tp", ?}`
    (open), `{?}` (open, unsharded so far), `{}` (closed, replicated),
    `{"dp"}p0` (with a priority).
  }];
  let parameters = (ins
    OptionalArrayRefParameter<"::mlir::StringAttr">:$axes,
    "bool":$closed,
    DefaultValuedParameter<"int64_t", "-1">:$priority);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// Parses and prints the short form used inside `#cleave.sharding`.
    static ::mlir::FailureOr<DimShardingAttr>
    parseShort(::mlir::AsmParser &parser);
    void printShort(::mlir::AsmPrinter &printer) const;
  }];
}

def Cleave_TensorShardingAttr : Cleave_Attr<"TensorSharding", "sharding"> {
  let summary = "How a tensor is split over the axes of a mesh";
  let description = [{
    One DimShardingAttr per tensor dimension, over the mesh named by the
    symbol. Mesh axes that no dimension names hold the tensor replicated.

    ```mlir
    #cleave.sharding<@mesh, [{"dp"}, {} ]>        // rows over dp
    #cleave.sharding<@mesh, [{?}, {"tp", ?} ]>    // open, columns over tp
    ```
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    OptionalArrayRefParameter<"DimShardingAttr">:$dims);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// A sharding of `rank` dimensions, all open or all closed and empty.
    static TensorShardingAttr getReplicated(::mlir::MLIRContext *ctx,
                                            ::mlir::FlatSymbolRefAttr mesh,
                                            int64_t rank, bool closed);
    int64_t getRank() const { return getDims().size(); }
    /// The axes of dimension `d`.
    ::llvm::ArrayRef<::mlir::StringAttr> getDimAxes(int64_t d) const {
      return getDims()[d].getAxes();
    }
    /// True when no dimension names an axis.
    bool isFullyReplicated() const;
    /// Every axis named, in dimension order.
    ::llvm::SmallVector<::mlir::StringAttr> getAllAxes() const;
  }];
}

#endif // CLEAVE_IR_CLEAVESHARDING_TD
