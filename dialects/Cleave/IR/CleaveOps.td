//===- CleaveOps.td - Cleave dialect operations -----------*- tablegen -*-===//

#ifndef CLEAVE_IR_CLEAVEOPS_TD
#define CLEAVE_IR_CLEAVEOPS_TD

include "Cleave/IR/CleaveBase.td"
include "Cleave/IR/CleaveInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Cleave_ElementType : AnyTypeOf<[AnyFloat, AnyInteger]>;
def Cleave_Tensor : RankedTensorOf<[Cleave_ElementType]>;
def Cleave_BoolTensor : RankedTensorOf<[I1]>;
def Cleave_IndexTensor : RankedTensorOf<[AnyInteger]>;

/// Every Cleave op is pure, has a cost and a sharding rule. `costOverrides`
/// names the CostOpInterface methods an op computes itself instead of the
/// defaults.
class Cleave_Op<string mnemonic, list<Trait> traits = [],
                list<string> costOverrides = []>
    : Op<Cleave_Dialect, mnemonic,
         !listconcat(traits, [Pure,
             DeclareOpInterfaceMethods<Cleave_CostOpInterface,
                                       costOverrides>,
             DeclareOpInterfaceMethods<Cleave_ShardingRuleOpInterface>])>;

//===----------------------------------------------------------------------===//
// Constants and index generation
//===----------------------------------------------------------------------===//

def Cleave_ConstantOp : Cleave_Op<"constant",
    [ConstantLike, AllTypesMatch<["value", "result"]>]> {
  let summary = "A tensor constant";
  let description = [{
    Produces a constant tensor. ONNX initializers and folded shape
    computations become `cleave.constant`.

    ```mlir
    %0 = cleave.constant dense<[1.0, 2.0]> : tensor<2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Cleave_IotaOp : Cleave_Op<"iota"> {
  let summary = "Index values along one dimension";
  let description = [{
    Fills the result with the index of each element along `dimension`,
    converted to the element type.

    ```mlir
    // [[0, 1, 2], [0, 1, 2]]
    %0 = cleave.iota dim = 1 : tensor<2x3xi64>
    ```
  }];
  let arguments = (ins I64Attr:$dimension);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "`dim` `=` $dimension attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_RngKeyOp : Cleave_Op<"rng_key"> {
  let summary = "The key of a random stream for this training step";
  let description = [{
    The 64-bit key from which a random op (a training-mode dropout) draws
    its bits: `cleave::randomBits(key, shape)` hashes each element's
    global linear index with it, so every rank of a partitioned program and
    every microbatch draws its own elements' bits of one stream. `salt`
    names the stream (an ONNX Dropout's `seed`, else its output's name).

    BuildTrainStep replaces it by `cleave::stepKey(step, salt)`, a hash of
    the step argument, so each step draws new bits; outside a training step
    it is the key of step 0 (`cleave::stepKeyValue(0, salt)`).

    ```mlir
    %key = cleave.rng_key salt = 42 : tensor<ui64>
    ```
  }];
  let arguments = (ins UI64Attr:$salt);
  let results = (outs 0DTensorOf<[UI64]>:$result);
  let assemblyFormat = "`salt` `=` $salt attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def Cleave_UnaryOp : Cleave_Op<"unary", [SameOperandsAndResultType]> {
  let summary = "Elementwise unary function";
  let description = [{
    Applies `kind` to every element. Float kinds (`exp`, `log`, `tanh`, ...)
    need a float type; `not` needs an integer type (bitwise, logical on
    `i1`); `neg`, `abs` and `sign` take any type. `round` rounds half to
    even. `silu` is x * sigmoid(x) (swish), one op so that its VJP keeps x
    alone.

    ```mlir
    %0 = cleave.unary exp %x : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Cleave_UnaryKind:$kind, Cleave_Tensor:$operand);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$kind $operand attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_BinaryOp : Cleave_Op<"binary", [SameOperandsAndResultType]> {
  let summary = "Elementwise binary function of equal-shaped tensors";
  let description = [{
    Applies `kind` elementwise. Operands have the same type (broadcasting is
    explicit). Integer `div` truncates toward zero, `rem` takes the sign of
    the dividend (C `fmod`), `mod` the sign of the divisor (Python `%`).
    `and`/`or`/`xor`/`shl`/`shr` need integer types; `shr` is logical for
    unsigned and arithmetic for signed types.

    ```mlir
    %0 = cleave.binary add %a, %b : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Cleave_BinaryKind:$kind, Cleave_Tensor:$lhs,
                       Cleave_Tensor:$rhs);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$kind $lhs `,` $rhs attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_CompareOp : Cleave_Op<"compare", [AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "Elementwise comparison";
  let description = [{
    Compares equal-typed operands elementwise and returns an `i1` tensor of
    the same shape. Float comparisons are ordered except `ne`, which is true
    when either operand is NaN.

    ```mlir
    %0 = cleave.compare lt %a, %b : tensor<4xf32> -> tensor<4xi1>
    ```
  }];
  let arguments = (ins Cleave_CompareKind:$kind, Cleave_Tensor:$lhs,
                       Cleave_Tensor:$rhs);
  let results = (outs Cleave_BoolTensor:$result);
  let assemblyFormat = [{
    $kind $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Cleave_SelectOp : Cleave_Op<"select",
    [AllTypesMatch<["on_true", "on_false", "result"]>]> {
  let summary = "Elementwise choice between two tensors";
  let description = [{
    `result[i] = cond[i] ? on_true[i] : on_false[i]`; all shapes are equal.

    ```mlir
    %0 = cleave.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Cleave_BoolTensor:$cond, Cleave_Tensor:$on_true,
                       Cleave_Tensor:$on_false);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $cond `,` $on_true `,` $on_false attr-dict `:` type($cond) `,` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_ConvertOp : Cleave_Op<"convert"> {
  let summary = "Elementwise element-type conversion";
  let description = [{
    Converts every element to the result's element type with ONNX `Cast`
    semantics: float to integer truncates toward zero, to `i1` tests for
    non-zero, integer widening follows the source's signedness.

    ```mlir
    %0 = cleave.convert %x : tensor<4xf32> -> tensor<4xbf16>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_BitcastOp : Cleave_Op<"bitcast"> {
  let summary = "Elementwise reinterpretation of the bits";
  let description = [{
    Reinterprets every element's bits as the result's element type, which
    has the operand's width (ONNX `BitCast`). `i1` counts as one byte: it
    becomes 0 or 1, and a byte becomes `i1` by testing for non-zero.

    ```mlir
    %0 = cleave.bitcast %x : tensor<4xf32> -> tensor<4xi32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Cleave_BroadcastInDimOp : Cleave_Op<"broadcast_in_dim"> {
  let summary = "Explicit broadcast to a larger shape";
  let description = [{
    Operand dimension `i` becomes result dimension `dims[i]` (strictly
    increasing); its size equals that result dimension or is 1 (then it is
    repeated). Result dimensions not named are new.

    ```mlir
    %0 = cleave.broadcast_in_dim %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand,
                       DenseI64ArrayAttr:$broadcast_dimensions);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $operand `dims` `=` $broadcast_dimensions attr-dict `:` type($operand) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_ReshapeOp : Cleave_Op<"reshape", [], ["getFlops"]> {
  let summary = "Reinterpret a tensor's shape (row-major order kept)";
  let description = [{
    ```mlir
    %0 = cleave.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Cleave_TransposeOp : Cleave_Op<"transpose", [], ["getFlops"]> {
  let summary = "Permute dimensions";
  let description = [{
    `result.shape[i] = operand.shape[permutation[i]]`.

    ```mlir
    %0 = cleave.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand, DenseI64ArrayAttr:$permutation);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $operand `perm` `=` $permutation attr-dict `:` type($operand) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Cleave_SliceOp : Cleave_Op<"slice", [], ["getFlops"]> {
  let summary = "Strided static slice";
  let description = [{
    Takes elements `start[d], start[d] + strides[d], ...` below `limit[d]` in
    every dimension (`0 <= start <= limit <= size`, `strides >= 1`).
    Negative steps are expressed with `cleave.reverse`.

    ```mlir
    %0 = cleave.slice %x start = [0, 1] limit = [2, 3] strides = [1, 1]
        : tensor<2x4xf32> -> tensor<2x2xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand, DenseI64ArrayAttr:$start_indices,
                       DenseI64ArrayAttr:$limit_indices,
                       DenseI64ArrayAttr:$strides);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $operand `start` `=` $start_indices `limit` `=` $limit_indices
    `strides` `=` $strides attr-dict `:` type($operand) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_ReverseOp : Cleave_Op<"reverse", [SameOperandsAndResultType],
                                 ["getFlops"]> {
  let summary = "Reverse the order of elements along dimensions";
  let description = [{
    ```mlir
    %0 = cleave.reverse %x dims = [0] : tensor<4x2xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand, DenseI64ArrayAttr:$dimensions);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$operand `dims` `=` $dimensions attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_ConcatOp : Cleave_Op<"concat", [], ["getFlops"]> {
  let summary = "Concatenate tensors along one dimension";
  let description = [{
    ```mlir
    %0 = cleave.concat %a, %b dim = 0
        : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
    ```
  }];
  let arguments = (ins Variadic<Cleave_Tensor>:$inputs, I64Attr:$dimension);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dimension attr-dict `:` functional-type($inputs, $result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_PadOp : Cleave_Op<"pad", [], ["getFlops"]> {
  let summary = "Pad a tensor at both ends of every dimension";
  let description = [{
    Adds `low[d]` elements before and `high[d]` after dimension `d`
    (non-negative; negative ONNX pads become slices). `constant` mode fills
    with `padding_value` (a 0-d tensor), `reflect` mirrors without repeating
    the edge, `edge` repeats the edge element.

    ```mlir
    %0 = cleave.pad %x, %zero low = [0, 1] high = [0, 1] mode = constant
        : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x5xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand, Cleave_Tensor:$padding_value,
                       DenseI64ArrayAttr:$low, DenseI64ArrayAttr:$high,
                       Cleave_PadMode:$mode);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $operand `,` $padding_value `low` `=` $low `high` `=` $high `mode` `=` $mode
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_GatherOp : Cleave_Op<"gather", [], ["getFlops"]> {
  let summary = "Take slices of a tensor at indices along one axis";
  let description = [{
    ONNX `Gather`: `result.shape = operand.shape[:axis] + indices.shape +
    operand.shape[axis+1:]`. A negative index counts from the end; an
    index out of range reads as zero.

    ```mlir
    %0 = cleave.gather %table, %ids axis = 0
        : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand, Cleave_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $operand `,` $indices `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_GatherElementsOp : Cleave_Op<"gather_elements", [], ["getFlops"]> {
  let summary = "Take one element per index along one axis";
  let description = [{
    ONNX `GatherElements`: the result has the indices' shape and
    `result[i][j][k] = operand[i][indices[i][j][k]][k]` for `axis = 1`.

    ```mlir
    %0 = cleave.gather_elements %x, %idx axis = 1
        : (tensor<2x5xf32>, tensor<2x1xi64>) -> tensor<2x1xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand, Cleave_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $operand `,` $indices `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_ScatterOp : Cleave_Op<"scatter",
    [AllTypesMatch<["operand", "result"]>]> {
  let summary = "Combine updates into a copy of a tensor at indices along one axis";
  let description = [{
    ONNX `ScatterElements`: the result starts as a copy of `operand`, then
    for every position `p` of `indices` (for `axis = 1` on rank 3,
    `p = (i, j, k)`)

        result[i][indices[i][j][k]][k] =
            combine(result[i][indices[i][j][k]][k], updates[i][j][k])

    where `combine` is given by `kind`: `none` replaces, `add`, `mul`, `max`
    and `min` accumulate. Positions are visited in row-major order, so with
    duplicate indices `none` keeps the last update and the accumulating kinds
    combine all of them (`add` is the VJP of `cleave.gather_elements`). A
    negative index counts from the end; an index still out of range is
    skipped. `indices` and `updates` have the operand's rank and equal
    shapes, no larger than the operand's outside `axis`.

    ```mlir
    %0 = cleave.scatter add %x, %idx, %upd axis = 1
        : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>
    ```
  }];
  let arguments = (ins Cleave_ScatterKind:$kind, Cleave_Tensor:$operand,
                       Cleave_IndexTensor:$indices, Cleave_Tensor:$updates,
                       I64Attr:$axis);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $kind $operand `,` $indices `,` $updates `axis` `=` $axis attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_TopKOp : Cleave_Op<"top_k", [], ["getFlops"]> {
  let summary = "The k largest or smallest elements along one dimension";
  let description = [{
    ONNX `TopK`: `values` and `indices` have the operand's shape with
    `dimension` resized to `k`. Along `dimension`, they hold the `k`
    largest (or, with `largest = false`, smallest) elements and their
    positions (`i64`), best first; equal values keep the lower position
    first. The output is always sorted; `sorted = false` (ONNX leaves the
    order unspecified) only records the model's request.

    The CPU lowering selects one element per pass over the row (the best
    one after the previous pick in the order above), so it costs
    O(k * n) per row of `n` elements: meant for small `k`.

    ```mlir
    %v, %i = cleave.top_k %x k = 3 dim = 1 largest = true sorted = true
        : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x3xi64>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand, I64Attr:$k, I64Attr:$dimension,
                       BoolAttr:$largest, BoolAttr:$sorted);
  let results = (outs Cleave_Tensor:$values, RankedTensorOf<[I64]>:$indices);
  let assemblyFormat = [{
    $operand `k` `=` $k `dim` `=` $dimension `largest` `=` $largest
    `sorted` `=` $sorted attr-dict `:` type($operand) `->` type($values) `,`
    type($indices)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

def Cleave_ContractOp : Cleave_Op<"contract", [], ["getFlops"]> {
  let summary = "General tensor contraction (batched matmul, einsum)";
  let description = [{
    Contracts `lhs` and `rhs` over paired contracting dimensions, keeping
    paired batch dimensions. Result dimensions are: the batch dimensions (in
    the order given), then the remaining `lhs` dimensions, then the
    remaining `rhs` dimensions, each in operand order. MatMul, Gemm, Einsum
    and attention products all map to it.

    The result element type is the operands', except that bf16 or f16
    operands may give an f32 result: the products are accumulated in f32
    (mixed precision, see `--cleave-apply-mixed-precision`). Same-type
    bf16/f16 contractions accumulate in f32 too and round the result.

    ```mlir
    %0 = cleave.contract %a, %b batch = [0] x [0] contract = [2] x [1]
        : tensor<4x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
    %1 = cleave.contract %x, %w batch = [] x [] contract = [1] x [0]
        : tensor<8x16xbf16>, tensor<16x32xbf16> -> tensor<8x32xf32>
    ```
  }];
  let extraClassDeclaration = [{
    ::mlir::LogicalResult checkContractResultType();
    /// The free dimensions of a rank-`rank` operand with these batch and
    /// contracting dimensions (neither batch nor contracting), in order.
    static ::llvm::SmallVector<int64_t>
    getFreeDimensions(int64_t rank, ::llvm::ArrayRef<int64_t> batch,
                      ::llvm::ArrayRef<int64_t> contract);
  }];
  let arguments = (ins Cleave_Tensor:$lhs, Cleave_Tensor:$rhs,
                       DenseI64ArrayAttr:$lhs_batching_dimensions,
                       DenseI64ArrayAttr:$rhs_batching_dimensions,
                       DenseI64ArrayAttr:$lhs_contracting_dimensions,
                       DenseI64ArrayAttr:$rhs_contracting_dimensions);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `batch` `=` $lhs_batching_dimensions `x` $rhs_batching_dimensions
    `contract` `=` $lhs_contracting_dimensions `x` $rhs_contracting_dimensions
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Cleave_ReduceOp : Cleave_Op<"reduce", [], ["getFlops"]> {
  let summary = "Reduce a tensor over a list of dimensions";
  let description = [{
    Combines elements over `dimensions` with `kind`; those dimensions are
    removed from the result (keep-dims is a following reshape). An empty
    reduction yields the identity (0, 1, -inf or the lowest value, +inf or
    the highest value).

    ```mlir
    %0 = cleave.reduce sum %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Cleave_ReduceKind:$kind, Cleave_Tensor:$operand,
                       DenseI64ArrayAttr:$dimensions);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $kind $operand `dims` `=` $dimensions attr-dict `:` type($operand) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Cleave_ArgReduceOp : Cleave_Op<"arg_reduce"> {
  let summary = "Index of the maximum or minimum along one dimension";
  let description = [{
    ONNX `ArgMax`/`ArgMin` (kind `max` or `min`): the result drops
    `dimension` and holds `i64` indices; ties take the first index unless
    `select_last_index` is set.

    ```mlir
    %0 = cleave.arg_reduce max %x dim = 1 : tensor<4x8xf32> -> tensor<4xi64>
    ```
  }];
  let arguments = (ins Cleave_ReduceKind:$kind, Cleave_Tensor:$operand,
                       I64Attr:$dimension, UnitAttr:$select_last_index);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = [{
    $kind $operand `dim` `=` $dimension (`last` $select_last_index^)?
    attr-dict `:` type($operand) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Cleave_CumSumOp : Cleave_Op<"cumsum", [SameOperandsAndResultType]> {
  let summary = "Cumulative sum along one dimension";
  let description = [{
    ```mlir
    %0 = cleave.cumsum %x dim = 0 exclusive reverse : tensor<5xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand, I64Attr:$dimension,
                       UnitAttr:$exclusive, UnitAttr:$reverse);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $operand `dim` `=` $dimension (`exclusive` $exclusive^)? (`reverse` $reverse^)?
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Composites kept whole for fusion and numerics
//===----------------------------------------------------------------------===//

class Cleave_SoftmaxLikeOp<string mnemonic, string what>
    : Cleave_Op<mnemonic, [SameOperandsAndResultType], ["getFlops"]> {
  let summary = what # " along one dimension";
  let description = [{
    Computed stably: the maximum along `dimension` is subtracted first.

    ```mlir
    %0 = cleave.}] # mnemonic # [{ %x dim = 1 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$operand, I64Attr:$dimension);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$operand `dim` `=` $dimension attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_SoftmaxOp : Cleave_SoftmaxLikeOp<"softmax", "Softmax">;
def Cleave_LogSoftmaxOp : Cleave_SoftmaxLikeOp<"log_softmax", "Log-softmax">;

def Cleave_LayerNormOp : Cleave_Op<"layer_norm", [], ["getFlops"]> {
  let summary = "Layer normalization over the trailing dimensions";
  let description = [{
    Normalizes over dimensions `[axis, rank)`:
    `(x - mean) / sqrt(var + epsilon) * scale + bias`, with the population
    variance. `scale` and `bias` have the normalized shape.

    ```mlir
    %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05
        : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$operand,
                       RankedTensorOf<[AnyFloat]>:$scale,
                       RankedTensorOf<[AnyFloat]>:$bias,
                       I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $operand `,` $scale `,` $bias `axis` `=` $axis `epsilon` `=` $epsilon
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_RmsNormOp : Cleave_Op<"rms_norm", [], ["getFlops"]> {
  let summary = "Root-mean-square normalization over the trailing dimensions";
  let description = [{
    Normalizes over dimensions `[axis, rank)` by the root mean square,
    without centering: `x / sqrt(mean(x^2) + epsilon) * scale`. `scale` has
    the normalized shape. bf16 and f16 inputs are normalized in f32.

    ```mlir
    %0 = cleave.rms_norm %x, %g axis = 1 epsilon = 1.0e-06
        : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$operand,
                       RankedTensorOf<[AnyFloat]>:$scale,
                       I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $operand `,` $scale `axis` `=` $axis `epsilon` `=` $epsilon
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_RotaryOp : Cleave_Op<"rotary", [], ["getFlops"]> {
  let summary = "Rotary position embedding";
  let description = [{
    Rotates pairs of features of `x` (`B x H x S x D`) by the angles whose
    cosines and sines are `cos` and `sin` (`B' x S x R`, `B'` 1 or `B`,
    `2 R <= D`): for each `r < R`, the pair is `(x[r], x[r + R])`, or
    `(x[2r], x[2r + 1])` when `interleaved`, and becomes

      (cos[r] x1 - sin[r] x2,  sin[r] x1 + cos[r] x2)

    at batch `b` and position `s`; features from `2 R` on pass through.
    ONNX `RotaryEmbedding` (opset 23) imports to it after gathering the
    caches at the position ids. Its VJP is the rotation by the opposite
    angle. Before planning `--cleave-decompose-rotary` spells it out as
    slices, products and a concatenation (elementwise kernels).

    ```mlir
    %0 = cleave.rotary %x, %cos, %sin interleaved
        : (tensor<2x4x16x8xf32>, tensor<1x16x4xf32>, tensor<1x16x4xf32>)
        -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$x,
                       RankedTensorOf<[AnyFloat]>:$cos,
                       RankedTensorOf<[AnyFloat]>:$sin, UnitAttr:$interleaved);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $x `,` $cos `,` $sin (`interleaved` $interleaved^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Convolution and windowed reduction
//===----------------------------------------------------------------------===//

def Cleave_ConvOp : Cleave_Op<"conv", [], ["getFlops"]> {
  let summary = "Grouped N-d convolution (NC... input, OI... filter)";
  let description = [{
    Cross-correlation over the spatial dimensions of an `N x C x S...`
    input with an `O x C/groups x K...` filter, giving `N x O x S'...`.
    `pad_low`, `pad_high`, `strides` and `dilations` have one entry per
    spatial dimension. Bias is a separate broadcast add.

    ```mlir
    %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1]
        dilations = [1, 1] groups = 1
        : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                       RankedTensorOf<[AnyFloat]>:$filter,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pad_low,
                       DenseI64ArrayAttr:$pad_high, DenseI64ArrayAttr:$dilations,
                       I64Attr:$groups);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $input `,` $filter `strides` `=` $strides `pad_low` `=` $pad_low
    `pad_high` `=` $pad_high `dilations` `=` $dilations `groups` `=` $groups
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_Im2ColOp : Cleave_Op<"im2col", [], ["getFlops"]> {
  let summary = "The windows of a convolution's input, as GEMM columns";
  let description = [{
    Gathers every element that a grouped convolution with a filter of
    spatial extent `kernel` reads from the `N x C x S...` input, padded with
    zeros by `pad_low`/`pad_high`:

      result[g, c, k..., n, s...] =
          padded[n, g * C/G + c, s * strides + k * dilations]

    of shape `G x C/G x K... x N x S'...` (S' as the convolution's output).
    A convolution is the contraction of its filter, viewed as
    `G x O/G x C/G x K...`, with these columns over `C/G x K...`, batched
    over the G groups: one GEMM per group of M = O/G, K = C/G * prod(K...)
    and N = N * prod(S'...).

    ```mlir
    %0 = cleave.im2col %x kernel = [3, 3] strides = [1, 1] pad_low = [1, 1]
        pad_high = [1, 1] dilations = [1, 1] groups = 1
        : (tensor<2x4x8x8xf32>) -> tensor<1x4x3x3x2x8x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$input,
                       DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pad_low,
                       DenseI64ArrayAttr:$pad_high, DenseI64ArrayAttr:$dilations,
                       I64Attr:$groups);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $input `kernel` `=` $kernel `strides` `=` $strides `pad_low` `=` $pad_low
    `pad_high` `=` $pad_high `dilations` `=` $dilations `groups` `=` $groups
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_ReduceWindowOp : Cleave_Op<"reduce_window", [], ["getFlops"]> {
  let summary = "Reduction over sliding windows (pooling)";
  let description = [{
    Reduces each window of `window` elements (one entry per dimension,
    1 for dimensions not pooled), moved by `strides`, with `dilations`
    between window elements, over the operand padded with the reduction's
    identity by `pad_low`/`pad_high`. Average pooling is a `sum` window
    divided by the element counts.

    ```mlir
    %0 = cleave.reduce_window max %x window = [1, 1, 2, 2] strides = [1, 1, 2, 2]
        pad_low = [0, 0, 0, 0] pad_high = [0, 0, 0, 0] dilations = [1, 1, 1, 1]
        : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
    ```
  }];
  let arguments = (ins Cleave_ReduceKind:$kind, Cleave_Tensor:$operand,
                       DenseI64ArrayAttr:$window, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pad_low, DenseI64ArrayAttr:$pad_high,
                       DenseI64ArrayAttr:$dilations);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $kind $operand `window` `=` $window `strides` `=` $strides
    `pad_low` `=` $pad_low `pad_high` `=` $pad_high `dilations` `=` $dilations
    attr-dict `:` type($operand) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pipeline stages
//===----------------------------------------------------------------------===//
//
// A pipelined training step is first built as one global program whose ops
// carry the pipeline rank that runs them (`cleave.pipeline_rank`), so that
// sharding propagation and partitioning over the other mesh axes see every
// stage at once. These two ops are where values cross pipeline ranks; they
// exist only until --pipeline-stages splits the program into one program
// per pipeline rank, where they become `cleave.send` / `cleave.recv`.

def Cleave_PipelineTransferOp : Cleave_Op<"pipeline_transfer",
    [SameOperandsAndResultType], ["getFlops"]> {
  let summary = "A value made on one pipeline rank and read on another";
  let description = [{
    The identity in the global program. Split per pipeline rank, it is a
    `cleave.send` on rank `from` and a `cleave.recv` on rank `to`, placed
    where the op stands in the global program (so in each rank's schedule).
    With `from` equal to `to` (two stages of one rank, interleaved
    schedules) it is only the boundary where the later stage's backward
    pass stops, and the split replaces it by its operand.

    ```mlir
    %a = cleave.pipeline_transfer %h from = 0 to = 1 : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$operand, I64Attr:$from, I64Attr:$to);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $operand `from` `=` $from `to` `=` $to attr-dict `:` type($operand)
  }];
  let hasVerifier = 1;
}

def Cleave_PipelineSumOp : Cleave_Op<"pipeline_sum",
    [SameOperandsAndResultType]> {
  let summary = "The sum of values made on several pipeline ranks";
  let description = [{
    Operand `i` is made on pipeline rank `ranks[i]` (strictly increasing).
    The result is their sum in that order, available to every pipeline rank
    that reads it: split per rank, each rank sends its operand to every
    other rank that reads the result and adds what it receives in rank
    order, so every reader holds bitwise the same sum. Gradients of a
    parameter read on several stages (tied embeddings), the partial sums of
    the global gradient norm, and the loss made on the last stage use it.

    ```mlir
    %g = cleave.pipeline_sum %g0, %g3 ranks = [0, 3] : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Cleave_Tensor>:$operands,
                       DenseI64ArrayAttr:$ranks);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $operands `ranks` `=` $ranks attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

include "Cleave/IR/CleaveAttention.td"
include "Cleave/IR/CleaveExperts.td"
include "Cleave/IR/CleaveGradient.td"

#endif // CLEAVE_IR_CLEAVEOPS_TD
