"""Writes a data-parallel training step of a small MLP in the cleave dialect,
per rank, for a mesh dp=N, with the collectives written out by hand.

  make_dp_mlp.py N VARIANT OUT.mlir [B D H O]
  make_dp_mlp.py data DIR            (x.npy [64, 4] and y.npy [64, 2])

B D H O (default 8 4 8 2) set the global batch and the layer widths (the
overlap benchmark uses larger ones).

VARIANT:
  sync   gradients all-reduced (avg) with blocking collectives
  async  the same, with the weight gradients' all-reduces started as soon as
         they are computed and waited for only before the update (they run
         beside the rest of the backward pass)
  zero   weights stored sharded over dp (dim 0): all-gathered before use,
         gradients reduce-scattered, each rank updating its shard
  none   no gradient collectives (each rank trains on its own shard: not
         data parallel; the overlap benchmark's compute-only reference)

The global batch is 8 rows; each rank takes 8/N of them (x and y are
sharded over dp on dim 0), so every N trains the same model on the same
data: its losses match N=1's within float rounding.

  data   x [8, 4], y [8, 2]
  model  h = relu(x W1 + b1), out = h W2 + b2, loss = mean((out - y)^2)
  sgd    p -= lr * grad
"""
import sys

import numpy as np

B, D, H, O = 8, 4, 8, 2


def dense(a):
    return "dense<" + np.array2string(
        np.asarray(a, np.float32), separator=", ", threshold=1 << 30,
        floatmode="unique").replace("\n", "") + ">"


def initial_values():
    rng = np.random.default_rng(7)
    if (B, D, H, O) != (8, 4, 8, 2):
        rng = np.random.default_rng(11)
        return {
            "w1": rng.normal(0, D ** -0.5, (D, H)).astype(np.float32),
            "b1": np.zeros(H, np.float32),
            "w2": rng.normal(0, H ** -0.5, (H, O)).astype(np.float32),
            "b2": np.zeros(O, np.float32),
        }
    return {
        "w1": rng.normal(0, 0.5, (D, H)).astype(np.float32),
        "b1": rng.normal(0, 0.1, (H,)).astype(np.float32),
        "w2": rng.normal(0, 0.5, (H, O)).astype(np.float32),
        "b2": rng.normal(0, 0.1, (O,)).astype(np.float32),
    }


def t(*dims):
    return "tensor<" + "x".join(str(d) for d in dims) + ("x" if dims else "") + "f32>"


def sgd_and_return(shapes, results):
    """p -= lr * g{p} for each parameter (in order w1, b1, w2, b2), then the
    return of the new parameters and %loss."""
    lines = []
    for name, shape in shapes.items():
        lines.append(f'%lr_{name} = cleave.broadcast_in_dim %lr dims = [] : {t()} -> {t(*shape)}')
        lines.append(f'%step_{name} = cleave.binary mul %lr_{name}, %g{name} : {t(*shape)}')
        lines.append(f'%new_{name} = cleave.binary sub %{name}, %step_{name} : {t(*shape)}')
    types = ", ".join(r.split(" {")[0] for r in results)
    lines.append(f'return %new_w1, %new_b1, %new_w2, %new_b2, %loss : {types}')
    return lines


def program(n, variant):
    if B % n or D % n or H % n:
        raise SystemExit(f"dp={n} does not divide the batch and weights")
    bl = B // n
    init = initial_values()
    zero = variant == "zero"
    rows = {"w1": D // n if zero else D, "w2": H // n if zero else H}
    shard = ', cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>'

    def param(name, shape, sharded):
        return (f'%{name}: {t(*shape)} {{cleave.name = "{name}", '
                f'cleave.parameter = "{name}", cleave.state = #cleave.state<parameter>, '
                f'cleave.initial_value = {dense(init[name])} : '
                f'{t(*init[name].shape)}{shard if sharded else ""}}}')

    args = [
        param("w1", (rows["w1"], H), zero),
        param("b1", (H,), False),
        param("w2", (rows["w2"], O), zero),
        param("b2", (O,), False),
        f'%x: {t(bl, D)} {{cleave.name = "x", cleave.role = #cleave.role<data>{shard}}}',
        f'%y: {t(bl, O)} {{cleave.name = "y", cleave.role = #cleave.role<data>{shard}}}',
        f'%lr: {t()} {{cleave.name = "lr", cleave.role = #cleave.role<lr>}}',
    ]
    results = [
        f'{t(rows["w1"], H)} {{cleave.name = "w1", cleave.updates = 0 : i64}}',
        f'{t(H)} {{cleave.name = "b1", cleave.updates = 1 : i64}}',
        f'{t(rows["w2"], O)} {{cleave.name = "w2", cleave.updates = 2 : i64}}',
        f'{t(O)} {{cleave.name = "b2", cleave.updates = 3 : i64}}',
        f'{t()} {{cleave.name = "loss", cleave.role = #cleave.role<loss>}}',
    ]
    L = []
    a = L.append
    m = '@mesh ["dp"]'
    if zero:
        a(f'%w1f = cleave.all_gather %w1 over {m} dim = 0 : {t(D // n, H)} -> {t(D, H)}')
        a(f'%w2f = cleave.all_gather %w2 over {m} dim = 0 : {t(H // n, O)} -> {t(H, O)}')
        w1, w2 = "%w1f", "%w2f"
    else:
        w1, w2 = "%w1", "%w2"
    # Forward.
    a(f'%xw = cleave.contract %x, {w1} batch = [] x [] contract = [1] x [0] : {t(bl, D)}, {t(D, H)} -> {t(bl, H)}')
    a(f'%b1b = cleave.broadcast_in_dim %b1 dims = [1] : {t(H)} -> {t(bl, H)}')
    a(f'%pre = cleave.binary add %xw, %b1b : {t(bl, H)}')
    a(f'%zh = cleave.constant dense<0.0> : {t(bl, H)}')
    a(f'%mask = cleave.compare gt %pre, %zh : {t(bl, H)} -> tensor<{bl}x{H}xi1>')
    a(f'%h = cleave.select %mask, %pre, %zh : tensor<{bl}x{H}xi1>, {t(bl, H)}')
    a(f'%hw = cleave.contract %h, {w2} batch = [] x [] contract = [1] x [0] : {t(bl, H)}, {t(H, O)} -> {t(bl, O)}')
    a(f'%b2b = cleave.broadcast_in_dim %b2 dims = [1] : {t(O)} -> {t(bl, O)}')
    a(f'%out = cleave.binary add %hw, %b2b : {t(bl, O)}')
    a(f'%diff = cleave.binary sub %out, %y : {t(bl, O)}')
    a(f'%sq = cleave.binary mul %diff, %diff : {t(bl, O)}')
    a(f'%sse = cleave.reduce sum %sq dims = [0, 1] : {t(bl, O)} -> {t()}')
    a(f'%inv = cleave.constant dense<{1.0 / (bl * O)!r}> : {t()}')
    a(f'%lloss = cleave.binary mul %sse, %inv : {t()}')
    a(f'%loss = cleave.all_reduce avg %lloss over {m} : {t()}')
    # Backward of the local mean loss.
    a(f'%sc = cleave.constant dense<{2.0 / (bl * O)!r}> : {t(bl, O)}')
    a(f'%dout = cleave.binary mul %diff, %sc : {t(bl, O)}')
    a(f'%gw2l = cleave.contract %h, %dout batch = [] x [] contract = [0] x [0] : {t(bl, H)}, {t(bl, O)} -> {t(H, O)}')
    if variant == "async":
        a(f'%gw2s = cleave.all_reduce avg %gw2l over {m} async : {t(H, O)}')
    a(f'%gb2l = cleave.reduce sum %dout dims = [0] : {t(bl, O)} -> {t(O)}')
    if variant == "async":
        a(f'%gb2s = cleave.all_reduce avg %gb2l over {m} async : {t(O)}')
    a(f'%dh = cleave.contract %dout, {w2} batch = [] x [] contract = [1] x [1] : {t(bl, O)}, {t(H, O)} -> {t(bl, H)}')
    a(f'%dpre = cleave.select %mask, %dh, %zh : tensor<{bl}x{H}xi1>, {t(bl, H)}')
    a(f'%gw1l = cleave.contract %x, %dpre batch = [] x [] contract = [0] x [0] : {t(bl, D)}, {t(bl, H)} -> {t(D, H)}')
    a(f'%gb1l = cleave.reduce sum %dpre dims = [0] : {t(bl, H)} -> {t(H)}')
    # Gradient reduction.
    if variant == "sync":
        a(f'%gw1 = cleave.all_reduce avg %gw1l over {m} : {t(D, H)}')
        a(f'%gb1 = cleave.all_reduce avg %gb1l over {m} : {t(H)}')
        a(f'%gw2 = cleave.all_reduce avg %gw2l over {m} : {t(H, O)}')
        a(f'%gb2 = cleave.all_reduce avg %gb2l over {m} : {t(O)}')
    elif variant == "none":
        for g in ("gw1", "gb1", "gw2", "gb2"):
            shape = {"gw1": (D, H), "gb1": (H,), "gw2": (H, O), "gb2": (O,)}[g]
            a(f'%{g} = cleave.binary add %{g}l, %{g}l : {t(*shape)}')
    elif variant == "async":
        a(f'%gw1s = cleave.all_reduce avg %gw1l over {m} async : {t(D, H)}')
        a(f'%gb1 = cleave.all_reduce avg %gb1l over {m} : {t(H)}')
        a(f'%gw2 = cleave.done %gw2s : {t(H, O)}')
        a(f'%gb2 = cleave.done %gb2s : {t(O)}')
        a(f'%gw1 = cleave.done %gw1s : {t(D, H)}')
    else:
        a(f'%gw1 = cleave.reduce_scatter avg %gw1l over {m} dim = 0 : {t(D, H)} -> {t(D // n, H)}')
        a(f'%gb1 = cleave.all_reduce avg %gb1l over {m} : {t(H)}')
        a(f'%gw2 = cleave.reduce_scatter avg %gw2l over {m} dim = 0 : {t(H, O)} -> {t(H // n, O)}')
        a(f'%gb2 = cleave.all_reduce avg %gb2l over {m} : {t(O)}')
    L += sgd_and_return({"w1": (rows["w1"], H), "b1": (H,),
                         "w2": (rows["w2"], O), "b2": (O,)}, results)
    body = "\n".join("    " + line for line in L)
    return (f'// Data-parallel MLP training step, rank program for dp={n} '
            f'({variant}); made by make_dp_mlp.py.\n'
            f'module {{\n  cleave.mesh @mesh axes = ["dp"] shape = [{n}]\n'
            f'  func.func @main({", ".join(args)}) -> ({", ".join(results)}) {{\n'
            f'{body}\n  }}\n}}\n')


def reference(steps, lr, x, y, order):
    """numpy SGD on the global batch: the losses a single rank must see."""
    p = {k: v.astype(np.float64) for k, v in initial_values().items()}
    losses = []
    for s in range(steps):
        xb, yb = x[order[s]].astype(np.float64), y[order[s]].astype(np.float64)
        pre = xb @ p["w1"] + p["b1"]
        h = np.maximum(pre, 0)
        out = h @ p["w2"] + p["b2"]
        diff = out - yb
        losses.append(float(np.mean(diff * diff)))
        dout = diff * 2 / diff.size
        g = {"w2": h.T @ dout, "b2": dout.sum(0)}
        dpre = (dout @ p["w2"].T) * (pre > 0)
        g["w1"], g["b1"] = xb.T @ dpre, dpre.sum(0)
        for k in p:
            p[k] -= lr * g[k]
    return losses


if __name__ == "__main__":
    if sys.argv[1] == "data":
        import os
        rng = np.random.default_rng(1)
        np.save(os.path.join(sys.argv[2], "x.npy"),
                rng.normal(size=(64, D)).astype(np.float32))
        np.save(os.path.join(sys.argv[2], "y.npy"),
                rng.normal(size=(64, O)).astype(np.float32))
        sys.exit(0)
    n, variant, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if len(sys.argv) == 8:
        B, D, H, O = (int(v) for v in sys.argv[4:8])
    with open(out, "w") as f:
        f.write(program(n, variant))
