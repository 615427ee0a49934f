"""Every collective against numpy, on the ranks of a 2x2 and a 2x2x2 mesh.

For each mesh and each group of mesh axes (every single axis and a pair in
non-mesh order), writes one program in the cleave dialect whose inputs are,
per element type, a tensor sharded over all mesh axes on dim 0 (so every
rank holds different values), and whose outputs are every collective of
that input (all_reduce of each kind, all_gather on both dims,
reduce_scatter, all_to_all, broadcast, a permute that leaves one rank
without a source, send/recv in both directions), each sharded the same way
so the assembled output file stacks the ranks' results. Runs it with the
given launcher and compares every output bit for bit with numpy. `gloo`
starts the ranks as torchrun would (launch_ranks.py), so they meet over
the Gloo communicator.

  check_collectives.py CLEAVE_BIN_DIR WORK_DIR [local|mpi|gloo]
"""
import os
import subprocess
import sys

import numpy as np

bin_dir, work = sys.argv[1], sys.argv[2]
launcher = sys.argv[3] if len(sys.argv) > 3 else "local"
os.makedirs(work, exist_ok=True)

MESHES = {
    "2x2": (["a", "b"], [2, 2], [["a"], ["b"], ["a", "b"], ["b", "a"]]),
    "2x2x2": (["x", "y", "z"], [2, 2, 2], [["x"], ["y"], ["z"], ["z", "x"]]),
}
# name: (MLIR element type, numpy type of the file, float?)
DTYPES = {
    "f32": ("f32", np.float32, True), "f64": ("f64", np.float64, True),
    "f16": ("f16", np.float16, True), "bf16": ("bf16", np.uint16, True),
    "i8": ("i8", np.int8, False), "u8": ("ui8", np.uint8, False),
    "i16": ("i16", np.int16, False), "u16": ("ui16", np.uint16, False),
    "i32": ("i32", np.int32, False), "u32": ("ui32", np.uint32, False),
    "i64": ("i64", np.int64, False), "u64": ("ui64", np.uint64, False),
    "bool": ("i1", np.bool_, False),
}
R, C = 3, 5  # odd sizes: each rank holds [3, 5 G]


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(f):
    bits = np.ascontiguousarray(f, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return bits.astype(np.uint16)


def coords(rank, shape):
    c = []
    for s in reversed(shape):
        c.append(rank % s)
        rank //= s
    return c[::-1]


def group_of(rank, axes, names, shape):
    """The ranks of rank's group, in group-index order, and rank's index."""
    idx = [names.index(a) for a in axes]
    mine = coords(rank, shape)
    size = int(np.prod([shape[i] for i in idx]))
    ranks = []
    for g in range(size):
        c, rest = list(mine), g
        for i in reversed(idx):
            c[i] = rest % shape[i]
            rest //= shape[i]
        r = 0
        for d, s in enumerate(shape):
            r = r * s + c[d]
        ranks.append(r)
    return ranks, ranks.index(rank)


def ops_for(dt):
    floaty = DTYPES[dt][2]
    kinds = ["sum", "max", "min", "prod"] + (["avg"] if floaty else [])
    return [f"ar_{k}" for k in kinds] + ["ag0", "ag1", "rs", "a2a", "bc",
                                         "perm", "p2p01", "p2p10", "sl"]


def program(names, shape, axes):
    g = int(np.prod([shape[names.index(a)] for a in axes]))
    grp = "[" + ", ".join(f'"{a}"' for a in axes) + "]"
    everyone = "{" + ", ".join(f'"{a}"' for a in names) + "}"
    shard = f"cleave.sharding = #cleave.sharding<@mesh, [{everyone}, {{}}]>"
    args, results, body, rets = [], [], [], []

    def t(r, c, ty):
        return f"tensor<{r}x{c}x{ty}>"

    for dt, (ty, _, _) in DTYPES.items():
        x = f"%in_{dt}"
        args.append(f'{x}: {t(R, C * g, ty)} {{cleave.name = "in_{dt}", {shard}}}')
        for op in ops_for(dt):
            v = f"%{dt}_{op}"
            if op.startswith("ar_"):
                out = t(R, C * g, ty)
                body.append(f"{v} = cleave.all_reduce {op[3:]} {x} over @mesh {grp} : {out}")
            elif op == "ag0":
                out = t(R * g, C * g, ty)
                body.append(f"{v} = cleave.all_gather {x} over @mesh {grp} dim = 0 : {t(R, C * g, ty)} -> {out}")
            elif op == "ag1":
                out = t(R, C * g * g, ty)
                body.append(f"{v} = cleave.all_gather {x} over @mesh {grp} dim = 1 : {t(R, C * g, ty)} -> {out}")
            elif op == "rs":
                out = t(R, C, ty)
                body.append(f"{v} = cleave.reduce_scatter sum {x} over @mesh {grp} dim = 1 : {t(R, C * g, ty)} -> {out}")
            elif op == "a2a":
                out = t(R * g, C, ty)
                body.append(f"{v} = cleave.all_to_all {x} over @mesh {grp} split = 1 concat = 0 : {t(R, C * g, ty)} -> {out}")
            elif op == "sl":
                out = t(R, C, ty)
                body.append(f"{v} = cleave.all_slice {x} over @mesh {grp} dim = 1 : {t(R, C * g, ty)} -> {out}")
            elif op == "bc":
                out = t(R, C * g, ty)
                body.append(f"{v} = cleave.broadcast {x} over @mesh {grp} root = {g - 1} : {out}")
            elif op == "perm":
                out = t(R, C * g, ty)
                pairs = ", ".join(f"{i}, {i + 1}" for i in range(g - 1))
                body.append(f"{v} = cleave.collective_permute {x} over @mesh {grp} pairs = [{pairs}] : {out}")
            else:
                src, dst = (0, 1) if op == "p2p01" else (1, 0)
                out = t(R, C * g, ty)
                body.append(f"cleave.send {x} over @mesh {grp} from = {src} to = {dst} : {out}")
                body.append(f"{v} = cleave.recv over @mesh {grp} from = {src} to = {dst} : {out}")
            results.append(f'{out} {{cleave.name = "{dt}_{op}", {shard}}}')
            rets.append((v, out))
    body.append("return " + ", ".join(v for v, _ in rets) + " : " +
                ", ".join(o for _, o in rets))
    mesh = (f'cleave.mesh @mesh axes = [{", ".join(chr(34) + n + chr(34) for n in names)}]'
            f' shape = [{", ".join(map(str, shape))}]')
    return (f"module {{\n  {mesh}\n  func.func @main({', '.join(args)}) -> "
            f"({', '.join(results)}) {{\n" +
            "\n".join("    " + b for b in body) + "\n  }\n}\n")


def inputs(world, g):
    rng = np.random.default_rng(world * 100 + g)
    data = {}
    for dt, (_, npt, floaty) in DTYPES.items():
        shape = (R * world, C * g)
        if dt == "bf16":
            data[dt] = f32_to_bf16(rng.normal(0, 2, shape).astype(np.float32))
        elif floaty:
            data[dt] = rng.normal(0, 2, shape).astype(npt)
        elif dt == "bool":
            data[dt] = rng.integers(0, 2, shape).astype(np.bool_)
        elif np.issubdtype(npt, np.unsignedinteger):
            data[dt] = rng.integers(0, 6, shape).astype(npt)
        else:
            data[dt] = rng.integers(-3, 4, shape).astype(npt)
    return data


def reduce(kind, parts, dt):
    """Fold in group order, as the runtime does."""
    if dt == "bool":
        acc = parts[0].copy()
        for p in parts[1:]:
            acc = acc | p if kind in ("sum", "max") else acc & p
        return acc
    half = dt in ("f16", "bf16")
    vals = [bf16_to_f32(p) if dt == "bf16" else p.astype(np.float32) if half
            else p for p in parts]
    acc = vals[0].copy()
    with np.errstate(over="ignore"):
        for v in vals[1:]:
            if kind in ("sum", "avg"):
                acc = acc + v
            elif kind == "prod":
                acc = acc * v
            elif kind == "max":
                acc = np.maximum(acc, v)
            else:
                acc = np.minimum(acc, v)
        if kind == "avg":
            acc = acc / acc.dtype.type(len(parts))
    acc = acc.astype(vals[0].dtype)
    if dt == "bf16":
        return bf16_to_f32(f32_to_bf16(acc))
    if dt == "f16":
        return acc.astype(np.float16)
    return acc


def expected(op, dt, shards, rank, names, shape, axes):
    ranks, me = group_of(rank, axes, names, shape)
    g = len(ranks)
    parts = [shards[r] for r in ranks]
    mine = shards[rank]
    as_out = (lambda a: bf16_to_f32(a)) if dt == "bf16" else (lambda a: a)
    if op.startswith("ar_"):
        return reduce(op[3:], parts, dt)
    if op == "ag0":
        return as_out(np.concatenate(parts, 0))
    if op == "ag1":
        return as_out(np.concatenate(parts, 1))
    if op == "rs":
        return reduce("sum", [p[:, me * C:(me + 1) * C] for p in parts], dt)
    if op == "a2a":
        return as_out(np.concatenate([p[:, me * C:(me + 1) * C] for p in parts], 0))
    if op == "sl":
        return as_out(mine[:, me * C:(me + 1) * C])
    if op == "bc":
        return as_out(parts[g - 1])
    if op == "perm":
        return as_out(parts[me - 1] if me > 0 else np.zeros_like(mine))
    src, dst = (0, 1) if op == "p2p01" else (1, 0)
    return as_out(parts[src] if me == dst else np.zeros_like(mine))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")


failures, checked = [], 0
for mesh_name, (names, shape, groups) in MESHES.items():
    world = int(np.prod(shape))
    for axes in groups:
        g = int(np.prod([shape[names.index(a)] for a in axes]))
        tag = f"{mesh_name}_{'_'.join(axes)}"
        d = os.path.join(work, tag)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "prog.mlir"), "w") as f:
            f.write(program(names, shape, axes))
        run([f"{bin_dir}/cleave-compile", os.path.join(d, "prog.mlir"), "-o",
             os.path.join(d, "prog.cleave")])
        data = inputs(world, g)
        cmd = [f"{bin_dir}/cleave-run", os.path.join(d, "prog.cleave"),
               "--output-dir", os.path.join(d, "out"), "--comm-timeout", "60"]
        for dt, a in data.items():
            np.save(os.path.join(d, f"in_{dt}.npy"), a)
            cmd += ["--input", f"in_{dt}={os.path.join(d, f'in_{dt}.npy')}"]
        if launcher == "local":
            cmd += ["--ranks", str(world)]
        elif launcher == "gloo":
            cmd = [sys.executable, os.path.join(os.path.dirname(__file__),
                                                "launch_ranks.py"),
                   str(world), "--"] + cmd
        else:
            cmd = ["mpirun", "-np", str(world), "--oversubscribe"] + cmd
        run(cmd)
        for dt in DTYPES:
            shards = np.split(data[dt], world, axis=0)
            for op in ops_for(dt):
                got = np.load(os.path.join(d, "out", f"{dt}_{op}.npy"))
                want = np.concatenate([expected(op, dt, shards, r, names, shape, axes)
                                       for r in range(world)], 0)
                checked += 1
                same = (got.shape == want.shape and
                        np.array_equal(got.view(np.uint8), np.ascontiguousarray(
                            want.astype(got.dtype)).view(np.uint8)))
                if not same:
                    failures.append(f"{tag} {dt} {op}")
        print(f"mesh {mesh_name} group {axes} (size {g}): "
              f"{sum(len(ops_for(t)) for t in DTYPES)} outputs checked")
print(f"{checked} collective outputs, {len(failures)} differ from numpy")
if failures:
    sys.exit("FAILED: " + ", ".join(failures[:20]))
print("PASSED")
