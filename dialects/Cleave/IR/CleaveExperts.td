//===- CleaveExperts.td - Mixture-of-experts ops -----------*- tablegen -*-===//
//
// The expert GEMMs of a mixture of experts: each token row times the
// weights of the expert it is routed to, and the weights' gradient;
// included by CleaveOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_CLEAVEEXPERTS_TD
#define CLEAVE_IR_CLEAVEEXPERTS_TD

def Cleave_GroupedMatmulOp : Cleave_Op<"grouped_matmul", [],
                                        ["getFlops"]> {
  let summary = "Each row times the weight matrix of its group (expert)";
  let description = [{
    The expert GEMMs of a mixture of experts. `x` is `M x K` (one row per
    routed token), `w` holds `E` weight matrices, `E x K x N` (or `E x N x
    K` with `transpose_w`, PyTorch's `Linear` layout), and `group_ids`
    (`M`, i32 or i64) names each row's expert:

      result[m, n] = sum_k x[m, k] * W[g][k, n],   g = group_ids[m]
      W[g] = w[g]  (transpose_w: w[g]^T)

    A negative id counts from the end (`g + E`); a row whose id is still
    outside `[0, E)` gives zeros. The floats are f32, bf16 or f16, as the
    grouped GEMM command takes them. This is what exporters spell as a
    gather of each row's weights followed by a batched matrix-vector
    product (`--cleave-recognize-composites{experts}` finds that form):
    the op reads each expert's weights once instead of once per row. The
    CPU runs it as one grouped GEMM command: the rows are ordered by
    expert (a stable counting sort) and each expert's rows are one
    library GEMM. The VJP is a `cleave.grouped_matmul` of the cotangent
    against the transposed weights, and a
    `cleave.grouped_matmul_weight_grad`.

    ```mlir
    %y = cleave.grouped_matmul %x, %w, %ids transpose_w
        : (tensor<16x32xf32>, tensor<4x64x32xf32>, tensor<16xi64>)
        -> tensor<16x64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32, BF16, F16]>:$x,
                       RankedTensorOf<[F32, BF16, F16]>:$w,
                       RankedTensorOf<[I32, I64]>:$group_ids,
                       UnitAttr:$transpose_w);
  let results = (outs RankedTensorOf<[F32, BF16, F16]>:$result);
  let assemblyFormat = [{
    $x `,` $w `,` $group_ids (`transpose_w` $transpose_w^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_GroupedMatmulWeightGradOp
    : Cleave_Op<"grouped_matmul_weight_grad", [], ["getFlops"]> {
  let summary = "The weights' gradient of a grouped matmul";
  let description = [{
    Given the rows `x` (`M x K`) and the cotangent `dy` (`M x N`) of a
    `cleave.grouped_matmul` with these `group_ids`, each expert's weight
    gradient sums over the rows routed to it:

      result[g] = sum over m with group_ids[m] = g of x[m]^T dy[m]
                  (E x K x N; transpose_w: its transpose, E x N x K)

    `E` is the result's leading dimension; ids follow the forward's
    rules (negative from the end, out of range: no contribution). An
    expert no row is routed to gets zeros. Rows are summed in their
    order, so the result does not depend on the routing's order of
    experts.

    ```mlir
    %dw = cleave.grouped_matmul_weight_grad %x, %dy, %ids transpose_w
        : (tensor<16x32xf32>, tensor<16x64xf32>, tensor<16xi64>)
        -> tensor<4x64x32xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32, BF16, F16]>:$x,
                       RankedTensorOf<[F32, BF16, F16]>:$dy,
                       RankedTensorOf<[I32, I64]>:$group_ids,
                       UnitAttr:$transpose_w);
  let results = (outs RankedTensorOf<[F32, BF16, F16]>:$result);
  let assemblyFormat = [{
    $x `,` $dy `,` $group_ids (`transpose_w` $transpose_w^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // CLEAVE_IR_CLEAVEEXPERTS_TD
