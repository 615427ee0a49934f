"""Writes a data- and tensor-parallel training step of the MLP of
make_dp_mlp.py in the cleave dialect, per rank, for a mesh dp=P x tp=T, with
the collectives written out by hand (Megatron-style tensor parallelism):

  make_tp_mlp.py P T OUT.mlir

  x, y   the global batch of 8 rows, sharded over dp (each dp rank 8/P
         rows), replicated over tp
  W1     [4, 8] split by columns over tp; b1 [8] split over tp
  W2     [8, 2] split by rows over tp; b2 [2] replicated
  h_r    = relu(x W1_r + b1_r): each tp rank holds 8/T hidden units
  out    = all_reduce_sum_tp(h_r W2_r) + b2
  loss   = mean over the global batch of (out - y)^2: all-reduced (avg)
           over dp; the same on every tp rank

The backward pass is written out: the partial products' cotangent is the
(replicated) cotangent of `out`, each rank's weight gradients are the
gradients of its shards, and every gradient is averaged over dp. SGD
updates each shard. Every mesh trains the model one rank trains
(make_dp_mlp.py 1 sync), up to float rounding.
"""
import sys

import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__file__))
import make_dp_mlp as base  # noqa: E402

B, D, H, O = base.B, base.D, base.H, base.O


t = base.t


def program(p, q):
    if B % p or H % q:
        raise SystemExit(f"dp={p}, tp={q} do not divide the batch and hidden units")
    bl, hl = B // p, H // q
    init = base.initial_values()
    dense = base.dense

    def param(name, shape, sharding):
        s = f", cleave.sharding = {sharding}" if sharding else ""
        return (f'%{name}: {t(*shape)} {{cleave.name = "{name}", '
                f'cleave.parameter = "{name}", cleave.state = #cleave.state<parameter>, '
                f'cleave.initial_value = {dense(init[name])} : '
                f'{t(*init[name].shape)}{s}}}')

    data = ', cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>'
    args = [
        param("w1", (D, hl), '#cleave.sharding<@mesh, [{}, {"tp"}]>'),
        param("b1", (hl,), '#cleave.sharding<@mesh, [{"tp"}]>'),
        param("w2", (hl, O), '#cleave.sharding<@mesh, [{"tp"}, {}]>'),
        param("b2", (O,), None),
        f'%x: {t(bl, D)} {{cleave.name = "x", cleave.role = #cleave.role<data>{data}}}',
        f'%y: {t(bl, O)} {{cleave.name = "y", cleave.role = #cleave.role<data>{data}}}',
        f'%lr: {t()} {{cleave.name = "lr", cleave.role = #cleave.role<lr>}}',
    ]
    shapes = {"w1": (D, hl), "b1": (hl,), "w2": (hl, O), "b2": (O,)}
    results = [f'{t(*shapes[n])} {{cleave.name = "{n}", cleave.updates = {i} : i64}}'
               for i, n in enumerate(("w1", "b1", "w2", "b2"))]
    results.append(f'{t()} {{cleave.name = "loss", cleave.role = #cleave.role<loss>}}')
    dp, tp = '@mesh ["dp"]', '@mesh ["tp"]'
    L = [
        f'%xw = cleave.contract %x, %w1 batch = [] x [] contract = [1] x [0] : {t(bl, D)}, {t(D, hl)} -> {t(bl, hl)}',
        f'%b1b = cleave.broadcast_in_dim %b1 dims = [1] : {t(hl)} -> {t(bl, hl)}',
        f'%pre = cleave.binary add %xw, %b1b : {t(bl, hl)}',
        f'%zh = cleave.constant dense<0.0> : {t(bl, hl)}',
        f'%mask = cleave.compare gt %pre, %zh : {t(bl, hl)} -> tensor<{bl}x{hl}xi1>',
        f'%h = cleave.select %mask, %pre, %zh : tensor<{bl}x{hl}xi1>, {t(bl, hl)}',
        f'%part = cleave.contract %h, %w2 batch = [] x [] contract = [1] x [0] : {t(bl, hl)}, {t(hl, O)} -> {t(bl, O)}',
        f'%hw = cleave.all_reduce sum %part over {tp} : {t(bl, O)}',
        f'%b2b = cleave.broadcast_in_dim %b2 dims = [1] : {t(O)} -> {t(bl, O)}',
        f'%out = cleave.binary add %hw, %b2b : {t(bl, O)}',
        f'%diff = cleave.binary sub %out, %y : {t(bl, O)}',
        f'%sq = cleave.binary mul %diff, %diff : {t(bl, O)}',
        f'%sse = cleave.reduce sum %sq dims = [0, 1] : {t(bl, O)} -> {t()}',
        f'%inv = cleave.constant dense<{1.0 / (bl * O)!r}> : {t()}',
        f'%lloss = cleave.binary mul %sse, %inv : {t()}',
        f'%loss = cleave.all_reduce avg %lloss over {dp} : {t()}',
        f'%sc = cleave.constant dense<{2.0 / (bl * O)!r}> : {t(bl, O)}',
        f'%dout = cleave.binary mul %diff, %sc : {t(bl, O)}',
        # The all-reduce's transpose for a replicated cotangent: identity.
        f'%gw2l = cleave.contract %h, %dout batch = [] x [] contract = [0] x [0] : {t(bl, hl)}, {t(bl, O)} -> {t(hl, O)}',
        f'%gb2l = cleave.reduce sum %dout dims = [0] : {t(bl, O)} -> {t(O)}',
        f'%dh = cleave.contract %dout, %w2 batch = [] x [] contract = [1] x [1] : {t(bl, O)}, {t(hl, O)} -> {t(bl, hl)}',
        f'%dpre = cleave.select %mask, %dh, %zh : tensor<{bl}x{hl}xi1>, {t(bl, hl)}',
        f'%gw1l = cleave.contract %x, %dpre batch = [] x [] contract = [0] x [0] : {t(bl, D)}, {t(bl, hl)} -> {t(D, hl)}',
        f'%gb1l = cleave.reduce sum %dpre dims = [0] : {t(bl, hl)} -> {t(hl)}',
    ]
    for g in ("gw1", "gb1", "gw2", "gb2"):
        shape = shapes[g[1:]]
        L.append(f'%{g} = cleave.all_reduce avg %{g}l over {dp} : {t(*shape)}')
    L += base.sgd_and_return(shapes, results)
    body = "\n".join("    " + line for line in L)
    return (f'// MLP training step, rank program for dp={p} x tp={q}; made by '
            f'make_tp_mlp.py.\nmodule {{\n'
            f'  cleave.mesh @mesh axes = ["dp", "tp"] shape = [{p}, {q}]\n'
            f'  func.func @main({", ".join(args)}) -> ({", ".join(results)}) {{\n'
            f'{body}\n  }}\n}}\n')


if __name__ == "__main__":
    p, q, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    with open(out, "w") as f:
        f.write(program(p, q))
