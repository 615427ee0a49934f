//===- Passes.td - Cleave transformation passes -----------*- tablegen -*-===//

#ifndef CLEAVE_TRANSFORMS_PASSES_TD
#define CLEAVE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CanonicalizeContractionsPass : Pass<"cleave-canonicalize-contractions", "::mlir::func::FuncOp"> {
  let summary = "Put every contraction in batched-GEMM form";
  let description = [{
    Rewrites each `cleave.contract` so that its operands are laid out as a
    row-major batched GEMM: batch dimensions lead in both operands, in the
    same order; the lhs is `[batch..., M..., K...]` or `[batch..., K...,
    M...]` and the rhs `[batch..., K..., N...]` or `[batch..., N..., K...]`,
    with the contracting dimensions paired in order. Operands that are not
    are transposed. A batch dimension that the rhs only has because of a
    `cleave.broadcast_in_dim` is turned into an lhs free dimension, so a
    weight shared over the batch is not copied. A product only transposed
    or reshaped before it is narrowed (`cleave.convert` f32 -> bf16) is
    narrowed first, so that the GEMM writes the narrow type.

    ```mlir
    // Before: the weight is broadcast over the batch.
    %wb = cleave.broadcast_in_dim %w dims = [1, 2] : tensor<16x32xf32> -> tensor<4x16x32xf32>
    %0 = cleave.contract %x, %wb batch = [0] x [0] contract = [2] x [1]
        : tensor<4x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
    // After: one GEMM with M = 4 * 8.
    %0 = cleave.contract %x, %w batch = [] x [] contract = [2] x [0]
        : tensor<4x8x16xf32>, tensor<16x32xf32> -> tensor<4x8x32xf32>
    ```
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

def DecomposeAttentionPass : Pass<"cleave-decompose-attention", "::mlir::func::FuncOp"> {
  let summary = "Spell out attention as contractions and a masked softmax";
  let description = [{
    Rewrites each `cleave.attention` into the contraction of the queries
    (grouped by their key/value head, `B x Hkv x G x Sq x D`) with the keys,
    the scale, softcap, bias and causal mask as elementwise ops, a softmax
    over the keys (rows with every key masked give zeros) and the
    contraction of the probabilities with the values. The products become
    library GEMM commands; the scores are a `B x Hq x Sq x Skv` temporary.
    `cleave.attention_grad` is spelled out the same way from recomputed
    probabilities, so the forward and backward pass agree on them.

    With `keep-fused`, ops the runtime's fused attention kernels take
    (f32, bf16 and f16; head dimensions up to `max-head-dim` when it is not
    0, 128 for the CUDA kernels) stay whole for the plan builder, which
    makes each an attention command that never holds more than a tile of
    the scores.
  }];
  let options = [
    Option<"keepFused", "keep-fused", "bool", /*default=*/"false",
           "Keep the attention ops the runtime's fused kernels run">,
    Option<"maxHeadDim", "max-head-dim", "int64_t", /*default=*/"0",
           "With keep-fused, the largest head dimension kept (0: any)">
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

def DecomposeRotaryPass : Pass<"cleave-decompose-rotary", "::mlir::func::FuncOp"> {
  let summary = "Spell out rotary position embeddings";
  let description = [{
    Rewrites each `cleave.rotary` into slices of the rotated feature pairs,
    the angles broadcast over heads, products and sums, and a concatenation
    with the features that pass through: elementwise ops that the plan
    builder fuses into kernels.
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

def ConvolutionsToGemmPass : Pass<"cleave-convolutions-to-gemm", "::mlir::func::FuncOp"> {
  let summary = "Rewrite convolutions as im2col and a batched GEMM";
  let description = [{
    Rewrites each `cleave.conv` whose groups have at least
    `min-group-outputs` output channels into `cleave.im2col` (the windows of
    its input as columns), a `cleave.contract` of the filter with the
    columns batched over the groups (M = O/G, K = C/G * prod(kernel),
    N = N * prod(S')), and a transpose back to `N x O x S'...` (a reshape
    once canonicalized when N = 1). The
    contraction becomes a library GEMM command, so convolutions run at the
    speed of the BLAS (CPU) or cuBLASLt (CUDA). The data and filter
    gradients that autodiff writes as convolutions are rewritten alike.
    Depthwise and other narrow-group convolutions stay direct kernels: a
    GEMM of one output row per group is slower than the loop.

    The columns take `C * prod(kernel) * N * prod(S')` elements, a
    temporary the memory planner reuses once the GEMM has read it.

    ```mlir
    // Before:
    %y = cleave.conv %x, %w strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1]
        dilations = [1, 1] groups = 1
        : (tensor<2x4x8x8xf32>, tensor<16x4x3x3xf32>) -> tensor<2x16x8x8xf32>
    // After:
    %cols = cleave.im2col %x kernel = [3, 3] strides = [1, 1] pad_low = [1, 1]
        pad_high = [1, 1] dilations = [1, 1] groups = 1
        : (tensor<2x4x8x8xf32>) -> tensor<1x4x3x3x2x8x8xf32>
    %wg = cleave.reshape %w : tensor<16x4x3x3xf32> -> tensor<1x16x4x3x3xf32>
    %p = cleave.contract %wg, %cols batch = [0] x [0] contract = [2, 3, 4] x [1, 2, 3]
        : tensor<1x16x4x3x3xf32>, tensor<1x4x3x3x2x8x8xf32> -> tensor<1x16x2x8x8xf32>
    %r = cleave.reshape %p : tensor<1x16x2x8x8xf32> -> tensor<16x2x8x8xf32>
    %y = cleave.transpose %r perm = [1, 0, 2, 3]
        : tensor<16x2x8x8xf32> -> tensor<2x16x8x8xf32>
    ```
  }];
  let options = [
    Option<"minGroupOutputs", "min-group-outputs", "int64_t", /*default=*/"4",
           "Output channels per group below which a convolution stays a "
           "direct kernel">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

def ExpertCapacityPass : Pass<"cleave-expert-capacity", "::mlir::ModuleOp"> {
  let summary = "Give each expert a capacity per batch row: grouped matmuls in GShard's dispatch-and-combine form";
  let description = [{
    Rewrites every `cleave.grouped_matmul` of @main into the capacity form
    of GShard and Switch Transformer. The routed rows of each batch row (a
    sequence's tokens times their k choices, `R` rows) share each expert's
    `C = ceil(factor * R / E)` slots (at least 1, at most R), taken in row
    order; a row past its expert's slots is dropped and gives zeros, as a
    row whose id is out of range does. The kept rows are scattered into a
    `G x E x C x K` buffer, the experts multiply it as one contraction
    batched over E, and each kept row gathers its result back.

    Dropless (no factor) is the grouped matmul itself. With the experts
    split over an `ep` mesh axis, the partitioner moves the buffer's split
    from the batch rows to the experts and back: an all_to_all over ep each
    way, GShard's dispatch and combine. The groups are whole batch rows, so
    which rows are dropped does not depend on the mesh.

    ```mlir
    // Before (2 batch rows of 8 routed rows, 4 experts):
    %y = cleave.grouped_matmul %x, %w, %ids
        : (tensor<16x32xf32>, tensor<4x32x64xf32>, tensor<16xi64>)
        -> tensor<16x64xf32>
    // After, factor 1.0 (C = 2): the slots of the kept rows (one-hot of
    // the ids, cumsum down each group's rows), a scatter into
    // tensor<2x8x32xf32> (2 x E*C x K), the contraction with %w batched
    // over E (tensor<4x2x2x64xf32>), and a gather_elements of each row's
    // slot, zero where dropped.
    ```
  }];
  let options = [
    Option<"factor", "factor", "::cleave::ExactDouble", /*default=*/"1.0",
           "Slots per expert and batch row: factor x routed rows per batch "
           "row / experts, rounded up">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

def ExpertBiasPass : Pass<"cleave-expert-bias", "::mlir::ModuleOp"> {
  let summary = "Route by scores plus a bias per expert: DeepSeek's auxiliary-loss-free load balancing";
  let description = [{
    For every router of @main (a `cleave.top_k` over tokens x experts
    scores along the experts whose indices reach a `cleave.grouped_matmul`'s
    ids), adds a bias per expert, a `tensor<E x f32>` initializer of zeros
    named `<node>.expert_bias` and tagged `cleave.expert_bias = rate` (a
    buffer of the training step, never a parameter): the top-k picks the experts by the scores plus the bias, and
    the gating weights are the scores of the experts picked, without it
    (DeepSeek-V3's auxiliary-loss-free balancing). The training step
    (`--cleave-build-train-step`) then moves each bias, once per step, by
    `rate * sign(mean load - load)`: an expert given more than the mean of
    the step's routed rows is picked less the next step.

    ```mlir
    // Before:
    %v, %i = cleave.top_k %s k = 2 dim = 1 largest = true sorted = true
        : tensor<8x4xf32> -> tensor<8x2xf32>, tensor<8x2xi64>
    // After:
    %b = cleave.constant dense<0.0> {cleave.initializer = "moe_topk.expert_bias",
        cleave.expert_bias = 1.0e-3 : f64} : tensor<4xf32>
    %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<4xf32> -> tensor<8x4xf32>
    %sel = cleave.binary add %s, %bb : ...
    %_, %i2 = cleave.top_k %sel k = 2 dim = 1 largest = true sorted = true ...
    %v2 = cleave.gather_elements %s, %i2 axis = 1 ...
    ```
  }];
  let options = [
    Option<"rate", "rate", "::cleave::ExactDouble", /*default=*/"1e-3",
           "How far each step moves an expert's bias (DeepSeek-V3's "
           "gamma)">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

def RecognizeCompositesPass : Pass<"cleave-recognize-composites", "::mlir::func::FuncOp"> {
  let summary = "Rewrite spelled-out attention, RMS normalization, rotary embedding and expert GEMMs as ops";
  let description = [{
    Finds the forms exporters write for attention and RMS normalization and
    rewrites each into `cleave.attention` or `cleave.rms_norm`, the ops
    ONNX's opset-23 `Attention` and `RMSNormalization` import to, so that
    autodiff, recompute, mixed precision and partitioning see one op.

    Attention: a softmax over the last axis of the rank-4 scores, contracted
    over the keys with the values. The scores are the product of q and k
    over their head dimension (through transposes; k may be `B x H x D x S`),
    times scalar constants (on the scores, or on q and k as PyTorch's SDPA
    export writes `sqrt(scale)` on both), then masked: a `select` of a
    constant causal pattern (`j > i + offset`, offset >= 0) and a fill at
    or below -1e4 (-inf, -1e9, the type's lowest value), an additive
    constant of that pattern (0 where allowed), an additive constant of
    zeros (no mask), or any other additive tensor (the bias). A mask the
    program computes from constants alone (iotas or index constants
    compared, combined with `and`/`or`/`not`, a `select` of 0 and the fill,
    as exports materialize `[B, 1, T, T]` masks they do not fold) is
    evaluated exactly and read as a constant: causal or the bias. Key/value
    heads repeated for grouped queries (reshape, broadcast, reshape) become
    the op's grouped heads.

    Rotary position embedding, as `apply_rotary_pos_emb` exports it:
    `x * cos + cat(-x[..., R:], x[..., :R]) * sin` over `B x H x S x 2R`,
    with cos and sin broadcast over the heads from `B' x S x 2R` and their
    two halves provably equal (a constant's elements, or `cat(f, f)` through
    elementwise ops): `cleave.rotary` of their first halves, which gives
    every element bitwise the same.

    RMS normalization: `x * rsqrt(mean(x^2) + eps) * scale` over the
    trailing dimensions, with the square as `pow(x, 2)` or `x * x`, the mean
    as a sum divided by (or multiplied by the inverse of) the count, the
    inverse root as `rsqrt`, `reciprocal(sqrt)`, `1 / sqrt` or `x / sqrt`,
    and the scale optional (ones).

    Expert GEMMs (mixture of experts): a gather of whole weight matrices
    along the experts' axis of an `E x N x K` (or `E x K x N`) tensor at
    one id per row, contracted with the rows `M x K` as a batched
    matrix-vector product (what HF's `batched_mm` experts export to ONNX
    as GatherND then MatMul): `cleave.grouped_matmul`, which reads each
    expert's weights once instead of once per row. Off for targets
    without a grouped GEMM command (CUDA).

    Anything else stays as it is: a non-constant scale, a mask that is not
    causal in a `select` (or reads a trained initializer), rotate-half with
    its halves swapped, cos or sin whose halves differ, a fill that exp does not take to 0, a softmax
    over another axis or over a tensor other than the scores, mixed element
    types, intermediate values read elsewhere.

    ```mlir
    // Before:
    %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2]
        : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
    %c = cleave.constant dense<0.25> : tensor<f32>
    %cb = cleave.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<2x4x8x8xf32>
    %ss = cleave.binary mul %s, %cb : tensor<2x4x8x8xf32>
    %p = cleave.softmax %ss dim = 3 : tensor<2x4x8x8xf32>
    %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2]
        : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
    // After:
    %k = cleave.transpose %kt perm = [0, 1, 3, 2]
        : tensor<2x4x16x8xf32> -> tensor<2x4x8x16xf32>
    %y = cleave.attention %q, %k, %v scale = 2.500000e-01
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
        -> tensor<2x4x8x16xf32>
    ```
  }];
  let options = [
    Option<"attention", "attention", "bool", /*default=*/"true",
           "Recognize attention">,
    Option<"rmsNorm", "rms-norm", "bool", /*default=*/"true",
           "Recognize RMS normalization">,
    Option<"silu", "silu", "bool", /*default=*/"true",
           "Recognize x * sigmoid(x) as SiLU (swish)">,
    Option<"rotary", "rotary", "bool", /*default=*/"false",
           "Recognize rotary position embeddings (off by default: under "
           "tensor and sequence parallelism the recognized op's angle "
           "gradients cost more than the spelled-out form's)">,
    Option<"experts", "experts", "bool", /*default=*/"true",
           "Recognize gathered expert weights times their rows as "
           "cleave.grouped_matmul (mixture of experts)">,
  ];
  let statistics = [
    Statistic<"numAttention", "attention", "Attentions recognized">,
    Statistic<"numCausal", "causal",
              "Attentions recognized in their causal form">,
    Statistic<"numRotary", "rotary", "Rotary embeddings recognized">,
    Statistic<"numRmsNorm", "rms-norm", "RMS normalizations recognized">,
    Statistic<"numSilu", "silu", "SiLU activations recognized">,
    Statistic<"numExperts", "experts", "Expert GEMMs recognized">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

#endif // CLEAVE_TRANSFORMS_PASSES_TD
