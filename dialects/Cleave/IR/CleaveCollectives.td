//===- CleaveCollectives.td - Meshes and collectives -------*- tablegen -*-===//
//
// The device mesh and the communication ops of partitioned programs. They
// live in the cleave dialect but in a file (and generated header) of their
// own, like the LLVM dialect's intrinsic ops, so that only the code that
// deals with communication includes them.
//
// Unlike every other cleave op, collectives are not Pure: each one is a
// rendezvous of ranks, so CSE must not merge two of them, DCE must not drop
// an unused one (its peers would wait for it forever), and no pass may move
// one across another. They read and write the CommunicationResource.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_CLEAVECOLLECTIVES_TD
#define CLEAVE_IR_CLEAVECOLLECTIVES_TD

include "Cleave/IR/CleaveBase.td"
include "Cleave/IR/CleaveInterfaces.td"
include "Cleave/IR/CleaveCollectiveEnums.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Cleave_CommunicationResource
    : Resource<"::mlir::cleave::CommunicationResource">;

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def Cleave_MeshOp : Op<Cleave_Dialect, "mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A logical device mesh with named axes";
  let description = [{
    Declares the ranks of a partitioned program as a mesh: axis `i` is named
    `axis_names[i]` and has `shape[i]` ranks. A rank's coordinates are its
    index in row-major order over the axes (the last axis varies fastest),
    so rank = ((c0 * s1) + c1) * s2 + c2 ... The world size is the product
    of the shape.

    ```mlir
    cleave.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = [{
    $sym_name `axes` `=` $axis_names `shape` `=` $shape attr-dict
  }];
  let extraClassDeclaration = [{
    /// Product of the shape.
    int64_t getWorldSize();
    /// Index of the axis named `name`, or -1.
    int64_t getAxisIndex(::llvm::StringRef name);
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def Cleave_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    A communication op over a group of ranks of a `cleave.mesh`: the ranks
    whose coordinates agree on every mesh axis outside `mesh_axes`. A rank's
    index in its group linearizes its coordinates on `mesh_axes`, in the
    order given (the last varies fastest).
  }];
  let methods = [
    InterfaceMethod<"The mesh the op communicates over.",
      "::mlir::FlatSymbolRefAttr", "getMeshAttr">,
    InterfaceMethod<"The mesh axes spanned by the op's groups.",
      "::mlir::ArrayAttr", "getMeshAxesAttr">,
    InterfaceMethod<"True for the start of an asynchronous collective, "
      "whose result is only readable through a `cleave.done`.",
      "bool", "getAsync">,
  ];
}

class Cleave_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Op<Cleave_Dialect, mnemonic,
         !listconcat(traits, [
             DeclareOpInterfaceMethods<SymbolUserOpInterface>,
             Cleave_CollectiveOpInterface,
             DeclareOpInterfaceMethods<Cleave_CostOpInterface, ["getFlops"]>,
             MemoryEffects<[MemRead<Cleave_CommunicationResource>,
                            MemWrite<Cleave_CommunicationResource>]>])> {
  let hasVerifier = 1;
}

def Cleave_AllReduceOp : Cleave_CollectiveOp<"all_reduce",
    [SameOperandsAndResultType]> {
  let summary = "Combine a tensor elementwise over a group of ranks";
  let description = [{
    Every rank of the group gets the elementwise `kind` (sum, avg, max, min,
    prod) of the group's operands. The combination order is fixed by the
    group index, so the result is bitwise the same on every rank and in
    every run. `avg` needs a float element type.

    ```mlir
    %g = cleave.all_reduce avg %grad over @mesh ["dp"] : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Cleave_CollectiveReduceKind:$kind,
                       RankedTensorOf<[AnyFloat, AnyInteger]>:$operand,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       UnitAttr:$async);
  let results = (outs RankedTensorOf<[AnyFloat, AnyInteger]>:$result);
  let assemblyFormat = [{
    $kind $operand `over` $mesh $mesh_axes (`async` $async^)? attr-dict
    `:` type($operand)
  }];
}

def Cleave_AllGatherOp : Cleave_CollectiveOp<"all_gather"> {
  let summary = "Concatenate the group's tensors along one dimension";
  let description = [{
    The result is the group's operands concatenated along `dim`, in group
    index order: its `dim` is the operand's times the group size.

    ```mlir
    %w = cleave.all_gather %shard over @mesh ["dp"] dim = 0
        : tensor<16x64xf32> -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat, AnyInteger]>:$operand,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       I64Attr:$dim, UnitAttr:$async);
  let results = (outs RankedTensorOf<[AnyFloat, AnyInteger]>:$result);
  let assemblyFormat = [{
    $operand `over` $mesh $mesh_axes `dim` `=` $dim (`async` $async^)?
    attr-dict `:` type($operand) `->` type($result)
  }];
}

def Cleave_AllSliceOp : Cleave_CollectiveOp<"all_slice"> {
  let summary = "Keep this rank's slice of a tensor the group holds whole";
  let description = [{
    The inverse of `cleave.all_gather`: every rank of the group holds the
    same operand, splits it along `dim` into group-size equal slices and
    keeps slice `i`, `i` its group index. Nothing is sent; the op is among
    the collectives because its result depends on the rank. The SPMD
    partitioner uses it where a replicated tensor meets an op that reads it
    sharded, and to give each rank its offsets (a slice of a constant).

    ```mlir
    %w = cleave.all_slice %full over @mesh ["tp"] dim = 1
        : tensor<16x64xf32> -> tensor<16x32xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat, AnyInteger]>:$operand,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       I64Attr:$dim, UnitAttr:$async);
  let results = (outs RankedTensorOf<[AnyFloat, AnyInteger]>:$result);
  let assemblyFormat = [{
    $operand `over` $mesh $mesh_axes `dim` `=` $dim (`async` $async^)?
    attr-dict `:` type($operand) `->` type($result)
  }];
}

def Cleave_ReduceScatterOp : Cleave_CollectiveOp<"reduce_scatter"> {
  let summary = "Combine over the group and keep this rank's slice";
  let description = [{
    Combines the group's operands elementwise like `cleave.all_reduce`, then
    splits the result along `dim` into group-size equal slices; the rank with
    group index `i` gets slice `i`. The operand's `dim` must divide by the
    group size.

    ```mlir
    %g = cleave.reduce_scatter sum %grad over @mesh ["dp"] dim = 0
        : tensor<32x64xf32> -> tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Cleave_CollectiveReduceKind:$kind,
                       RankedTensorOf<[AnyFloat, AnyInteger]>:$operand,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       I64Attr:$dim, UnitAttr:$async);
  let results = (outs RankedTensorOf<[AnyFloat, AnyInteger]>:$result);
  let assemblyFormat = [{
    $kind $operand `over` $mesh $mesh_axes `dim` `=` $dim (`async` $async^)?
    attr-dict `:` type($operand) `->` type($result)
  }];
}

def Cleave_AllToAllOp : Cleave_CollectiveOp<"all_to_all"> {
  let summary = "Split along one dimension, exchange, concatenate along another";
  let description = [{
    Each rank splits its operand along `split_dim` into group-size slices and
    sends slice `j` to the rank with group index `j`; the received slices
    are concatenated along `concat_dim` in group index order.

    ```mlir
    %y = cleave.all_to_all %x over @mesh ["sp"] split = 1 concat = 2
        : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat, AnyInteger]>:$operand,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       I64Attr:$split_dim, I64Attr:$concat_dim,
                       UnitAttr:$async);
  let results = (outs RankedTensorOf<[AnyFloat, AnyInteger]>:$result);
  let assemblyFormat = [{
    $operand `over` $mesh $mesh_axes `split` `=` $split_dim
    `concat` `=` $concat_dim (`async` $async^)? attr-dict
    `:` type($operand) `->` type($result)
  }];
}

def Cleave_BroadcastOp : Cleave_CollectiveOp<"broadcast",
    [SameOperandsAndResultType]> {
  let summary = "Every rank of the group gets the root's tensor";
  let description = [{
    ```mlir
    %w = cleave.broadcast %w0 over @mesh ["dp"] root = 0 : tensor<64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat, AnyInteger]>:$operand,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       I64Attr:$root, UnitAttr:$async);
  let results = (outs RankedTensorOf<[AnyFloat, AnyInteger]>:$result);
  let assemblyFormat = [{
    $operand `over` $mesh $mesh_axes `root` `=` $root (`async` $async^)?
    attr-dict `:` type($operand)
  }];
}

def Cleave_CollectivePermuteOp : Cleave_CollectiveOp<"collective_permute",
    [SameOperandsAndResultType]> {
  let summary = "Send to and receive from fixed peers of the group";
  let description = [{
    `pairs` lists (source, target) group indices, flattened: the rank with
    group index `source` sends its operand to the rank with index `target`.
    Each index is a source at most once and a target at most once; a rank
    that is no target gets zeros.

    ```mlir
    // A ring shift over a group of 4.
    %y = cleave.collective_permute %x over @mesh ["sp"]
        pairs = [0, 1, 1, 2, 2, 3, 3, 0] : tensor<8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat, AnyInteger]>:$operand,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       DenseI64ArrayAttr:$pairs, UnitAttr:$async);
  let results = (outs RankedTensorOf<[AnyFloat, AnyInteger]>:$result);
  let assemblyFormat = [{
    $operand `over` $mesh $mesh_axes `pairs` `=` $pairs (`async` $async^)?
    attr-dict `:` type($operand)
  }];
}

def Cleave_SendOp : Cleave_CollectiveOp<"send"> {
  let summary = "The rank with group index `source` sends to `target`";
  let description = [{
    Point to point: on the rank whose group index is `source`, sends the
    operand to the rank whose group index is `target`, which runs the
    matching `cleave.recv`; on every other rank it does nothing. One
    program thus serves all ranks (SPMD), and a pipeline stage's program
    names its peer the same way.

    ```mlir
    cleave.send %act over @mesh ["pp"] from = 0 to = 1 : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat, AnyInteger]>:$operand,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       I64Attr:$source, I64Attr:$target);
  let assemblyFormat = [{
    $operand `over` $mesh $mesh_axes `from` `=` $source `to` `=` $target
    attr-dict `:` type($operand)
  }];
  let extraClassDeclaration = [{
    /// A send has no result to wait on: the runtime buffers it, so it never
    /// blocks on its receiver.
    bool getAsync() { return false; }
  }];
}

def Cleave_RecvOp : Cleave_CollectiveOp<"recv"> {
  let summary = "The rank with group index `target` receives from `source`";
  let description = [{
    The other half of `cleave.send`: on the rank whose group index is
    `target`, the result is the tensor sent by `source`; on every other rank
    it is zeros.

    ```mlir
    %act = cleave.recv over @mesh ["pp"] from = 0 to = 1 : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       I64Attr:$source, I64Attr:$target, UnitAttr:$async);
  let results = (outs RankedTensorOf<[AnyFloat, AnyInteger]>:$result);
  let assemblyFormat = [{
    `over` $mesh $mesh_axes `from` `=` $source `to` `=` $target
    (`async` $async^)? attr-dict `:` type($result)
  }];
}

def Cleave_DoneOp : Op<Cleave_Dialect, "done", [SameOperandsAndResultType,
    MemoryEffects<[MemRead<Cleave_CommunicationResource>,
                   MemWrite<Cleave_CommunicationResource>]>]> {
  let summary = "Wait for an asynchronous collective and read its result";
  let description = [{
    The end of an asynchronous collective (one with `async`): its operand is
    the collective's result, which nothing else may read. Compute between
    the collective and its `cleave.done` runs while the collective is in
    flight; the buffers of both stay alive until the wait.

    ```mlir
    %h = cleave.all_reduce sum %g over @mesh ["dp"] async : tensor<64xf32>
    ...
    %r = cleave.done %h : tensor<64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat, AnyInteger]>:$operand);
  let results = (outs RankedTensorOf<[AnyFloat, AnyInteger]>:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
  let hasVerifier = 1;
}

def Cleave_PipelineMarkerOp : Op<Cleave_Dialect, "pipeline_marker", [
    MemoryEffects<[MemRead<Cleave_CommunicationResource>,
                   MemWrite<Cleave_CommunicationResource>]>]> {
  let summary = "Where a pipeline step begins or ends";
  let description = [{
    Marks the beginning (`begin`) or the end of the step `step` ("F3",
    "B0", "W2", ...) of a pipeline rank's schedule. The plan builder makes
    it a Marker command, which costs nothing unless the runtime traces the
    step (`cleave-run --trace`). It orders like a collective, so no pass
    moves work across it.

    ```mlir
    cleave.pipeline_marker "F0" begin
    ```
  }];
  let arguments = (ins StrAttr:$step, UnitAttr:$begin);
  let assemblyFormat = "$step (`begin` $begin^)? attr-dict";
}

#endif // CLEAVE_IR_CLEAVECOLLECTIVES_TD
