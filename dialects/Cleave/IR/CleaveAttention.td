//===- CleaveAttention.td - Attention ops ------------------*- tablegen -*-===//
//
// cleave.attention and its gradient, and the block forms that ring context
// parallelism builds them from; included by CleaveOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_CLEAVEATTENTION_TD
#define CLEAVE_IR_CLEAVEATTENTION_TD

def Cleave_AttentionOp : Cleave_Op<"attention", [],
                                    ["getFlops"]> {
  let summary = "Scaled dot-product attention with grouped key/value heads";
  let description = [{
    `q` is `B x Hq x Sq x D`, `k` is `B x Hkv x Skv x D` and `v` is
    `B x Hkv x Skv x Dv`, with `Hq` a multiple of `Hkv`: query head `h`
    reads key/value head `h / (Hq / Hkv)` (grouped-query attention; `Hq =
    Hkv` is multi-head attention). The result is `B x Hq x Sq x Dv`:

      s[b, h, i, j] = scale * sum_d q[b, h, i, d] * k[b, h / G, j, d]
      s = softcap * tanh(s / softcap)               (when softcap > 0)
      s = s + bias[b, h, i, j]                      (bias broadcast, if given)
      s[b, h, i, j] = -inf where j > i + causal_offset   (when causal)
      p = softmax over j of s; a row with no finite score gives zeros
      result[b, h, i, e] = sum_j p[b, h, i, j] * v[b, h / G, j, e]

    The optional additive `bias` is `B' x H' x Sq' x Skv` with each of
    `B'`, `H'`, `Sq'` either 1 (broadcast) or the full size: masks are
    biases of 0 and -inf. With bf16 or f16 operands the scores and the
    softmax are computed in f32; spelled out, the probabilities are rounded
    to the operands' type for the second product (as FlashAttention does on
    GPUs), while the CPU's fused kernel keeps them in f32.

    The op is kept whole through autodiff (its VJP is a
    `cleave.attention_grad`, which recomputes the probabilities from `q`
    and `k` rather than saving them), mixed precision and partitioning
    (heads and batch are parallel). On the CPU it becomes one fused
    attention command (tiles of the scores, an online softmax); elsewhere
    `--cleave-decompose-attention` expands it into contractions and a
    softmax before planning.

    ```mlir
    %0 = cleave.attention %q, %k, %v scale = 0.125 causal
        : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
           tensor<2x2x16x64xf32>) -> tensor<2x8x16x64xf32>
    %1 = cleave.attention %q, %k, %v bias %m scale = 0.125
        : (tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>,
           tensor<2x8x16x64xf32>, tensor<2x1x1x16xf32>) -> tensor<2x8x16x64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$q,
                       RankedTensorOf<[AnyFloat]>:$k,
                       RankedTensorOf<[AnyFloat]>:$v,
                       Optional<RankedTensorOf<[AnyFloat]>>:$bias,
                       F64Attr:$scale, UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$causal_offset,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs RankedTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`bias` $bias^)? `scale` `=` $scale (`causal` $causal^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Query heads per key/value head.
    int64_t getGroupSize();
  }];
  let hasVerifier = 1;
}

def Cleave_AttentionGradOp : Cleave_Op<"attention_grad", [],
                                        ["getFlops"]> {
  let summary = "Gradients of cleave.attention with respect to q, k and v";
  let description = [{
    Given the operands and attributes of a `cleave.attention`, its result
    `out` and the cotangent `dout` of that result, gives `dq`, `dk` and
    `dv` (the shapes of `q`, `k` and `v`, all of one element type: `q`'s or
    f32). The probabilities are recomputed from `q` and `k` rather than
    saved, as FlashAttention's backward pass does:

      p = the forward's probabilities (rows with no finite score: zeros)
      dv = p^T dout,  dp = dout v^T,  ds = p * (dp - rowsum(dout * out))
      ds' = ds * (1 - tanh^2) (softcap) * scale
      dq = ds' k,  dk = ds'^T q   (query heads summed into their kv head)

    The bias's gradient is not a result: the VJP rule spells it out beside
    this op when the bias needs one. On the CPU the op is one fused kernel
    that never holds more than a tile of the scores; elsewhere
    `--cleave-decompose-attention` spells it out.

    ```mlir
    %dq, %dk, %dv = cleave.attention_grad %q, %k, %v, %out, %dout
        scale = 0.125 causal
        : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
           tensor<2x2x16x64xf32>, tensor<2x8x16x64xf32>,
           tensor<2x8x16x64xf32>)
        -> (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>,
            tensor<2x2x16x64xf32>)
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$q,
                       RankedTensorOf<[AnyFloat]>:$k,
                       RankedTensorOf<[AnyFloat]>:$v,
                       RankedTensorOf<[AnyFloat]>:$out,
                       RankedTensorOf<[AnyFloat]>:$dout,
                       Optional<RankedTensorOf<[AnyFloat]>>:$bias,
                       F64Attr:$scale, UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$causal_offset,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs RankedTensorOf<[AnyFloat]>:$dq,
                      RankedTensorOf<[AnyFloat]>:$dk,
                      RankedTensorOf<[AnyFloat]>:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $dout (`bias` $bias^)? `scale` `=` $scale
    (`causal` $causal^)? attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Query heads per key/value head.
    int64_t getGroupSize();
  }];
  let hasVerifier = 1;
}

def Cleave_AttentionBlockOp : Cleave_Op<"attention_block", [],
                                         ["getFlops"]> {
  let summary = "Queries against one block of keys, with positions and the "
                "rows' log-sum-exp";
  let description = [{
    One step of ring attention (context parallelism): `cleave.attention`
    of `q` (`B x Hq x Sq x D`) against one block of keys and values (`k`,
    `v`, `B x Hkv x Skv x D|Dv`), where `q_positions` (`Sq`) and
    `k_positions` (`Skv`, i64) are the rows' places in the whole sequence.
    When `causal`, key `j` is masked for query `i` if `k_positions[j] >
    q_positions[i] + causal_offset`. Besides the block's normalized
    result `out`, it gives each row's log-sum-exp `lse` (`B x Hq x Sq`,
    f32) of its masked scores, so that blocks merge exactly:

      lse = log(exp(lse1) + exp(lse2))
      out = out1 * exp(lse1 - lse) + out2 * exp(lse2 - lse)

    A row with no unmasked key gets zeros and the lowest finite f32 as its
    log-sum-exp (not -inf), so that the merge needs no special case. The
    partitioner makes these ops when `--context-parallel=ring` splits the
    sequence; they are never differentiated (the ring's backward is built
    from `cleave.attention_block_grad`). The CPU runs each as one fused
    attention command.

    ```mlir
    %o, %lse = cleave.attention_block %q, %k, %v positions %qp, %kp
        scale = 0.125 causal
        : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>,
           tensor<8xi64>, tensor<8xi64>)
        -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$q,
                       RankedTensorOf<[AnyFloat]>:$k,
                       RankedTensorOf<[AnyFloat]>:$v,
                       RankedTensorOf<[I64]>:$q_positions,
                       RankedTensorOf<[I64]>:$k_positions,
                       F64Attr:$scale, UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$causal_offset,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs RankedTensorOf<[AnyFloat]>:$out,
                      RankedTensorOf<[F32]>:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v `positions` $q_positions `,` $k_positions
    `scale` `=` $scale (`causal` $causal^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_AttentionBlockGradOp : Cleave_Op<"attention_block_grad", [],
                                             ["getFlops"]> {
  let summary = "One key block's share of the gradients of a ring attention";
  let description = [{
    The backward step of ring attention: given the operands of a
    `cleave.attention_block`, the whole rows' log-sum-exp `lse` and output
    `out` (over every block, merged) and the cotangent `dout`, gives this
    block's contributions to `dq`, and `dk` and `dv` of this block:

      p = exp(scores - lse)  (masked: zero)
      dv = p^T dout,  ds = p * (dout v^T - rowsum(dout * out)) * scale
      dq = ds k,  dk = ds^T q   (query heads summed into their kv head)

    Summed over the blocks, the `dq`s are `cleave.attention_grad`'s.

    ```mlir
    %dq, %dk, %dv = cleave.attention_block_grad %q, %k, %v
        positions %qp, %kp lse %lse out %o dout %do scale = 0.125 causal
        : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>,
           tensor<8xi64>, tensor<8xi64>, tensor<1x4x8xf32>,
           tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>)
        -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$q,
                       RankedTensorOf<[AnyFloat]>:$k,
                       RankedTensorOf<[AnyFloat]>:$v,
                       RankedTensorOf<[I64]>:$q_positions,
                       RankedTensorOf<[I64]>:$k_positions,
                       RankedTensorOf<[F32]>:$lse,
                       RankedTensorOf<[AnyFloat]>:$out,
                       RankedTensorOf<[AnyFloat]>:$dout,
                       F64Attr:$scale, UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$causal_offset,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs RankedTensorOf<[AnyFloat]>:$dq,
                      RankedTensorOf<[AnyFloat]>:$dk,
                      RankedTensorOf<[AnyFloat]>:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `positions` $q_positions `,` $k_positions
    `lse` $lse `out` $out `dout` $dout `scale` `=` $scale
    (`causal` $causal^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // CLEAVE_IR_CLEAVEATTENTION_TD
