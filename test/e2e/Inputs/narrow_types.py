"""Checks Cleave's float8/float4/int4/int2 conversions against ml_dtypes and
ONNX's reference, value by value.

For each narrow float type: every code decoded (Cast T -> float); and
float32 values encoded (Cast float -> T, with and without saturate): every
representable value, every midpoint between neighbours (the ties), the
floats one ulp either side of each midpoint, the overflow boundary,
infinities, NaN, float32 subnormals and random values over the whole
range. float8e8m0 in its three round modes against
onnx.numpy_helper.to_float8e8m0; int4/uint4/int2/uint2 from floats and
integers (wrapping like ml_dtypes) and back, with odd element counts so the
packed files end in half a byte.

Prints one line per check; a mismatch prints the first differing value.

usage: narrow_types.py CLEAVE_COMPILE CLEAVE_RUN WORKDIR
"""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
from onnx import helper, numpy_helper

compile_bin, run_bin, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
TP = onnx.TensorProto

FLOATS = {
    "float8e4m3fn": (TP.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
    "float8e4m3fnuz": (TP.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
    "float8e5m2": (TP.FLOAT8E5M2, ml_dtypes.float8_e5m2),
    "float8e5m2fnuz": (TP.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
    "float4e2m1": (TP.FLOAT4E2M1, ml_dtypes.float4_e2m1fn),
}
INTS = {
    "int4": (TP.INT4, ml_dtypes.int4, np.int8),
    "uint4": (TP.UINT4, ml_dtypes.uint4, np.uint8),
    "int2": (TP.INT2, ml_dtypes.int2, np.int8),
    "uint2": (TP.UINT2, ml_dtypes.uint2, np.uint8),
}
failures = 0


def run_cast(name, x, x_type, to, **attrs):
    """Compiles Cast(x) -> to and runs it on x; returns the .npy output."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    node = helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("x", x_type, x.shape)],
        [helper.make_tensor_value_info("y", to, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    model.ir_version = 11
    onnx.save(model, os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "x.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    subprocess.run([compile_bin, os.path.join(d, "model.onnx"), "-o",
                    os.path.join(d, "model.cleave")], check=True)
    subprocess.run([run_bin, os.path.join(d, "model.cleave"),
                    os.path.join(d, "x.pb"), "--output-dir", d], check=True,
                   stdout=subprocess.DEVNULL)
    return np.load(os.path.join(d, "y.npy"))


def same_floats(got, want):
    """Equal float32 bit patterns, any NaN equal to any NaN."""
    g, w = got.astype(np.float32), want.astype(np.float32)
    ok = (g.view(np.uint32) == w.view(np.uint32)) | (np.isnan(g) & np.isnan(w))
    return ok


def report(what, inputs, ok, got, want):
    global failures
    if ok.all():
        print("%s: %d values match" % (what, ok.size))
        return
    failures += 1
    i = int(np.argwhere(~ok.ravel())[0][0])
    print("%s: MISMATCH at input %r: got %r, expected %r (%d of %d differ)" % (
        what, inputs.ravel()[i], got.ravel()[i], want.ravel()[i],
        int((~ok).sum()), ok.size))


def test_inputs(dtype):
    """float32 values that probe every rounding decision of `dtype`."""
    if dtype == ml_dtypes.float4_e2m1fn:
        reps = _decode_all(dtype)
    else:
        reps = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    finite = np.unique(reps[np.isfinite(reps)])
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    around = np.concatenate([np.nextafter(mids, np.float32(np.inf)),
                             np.nextafter(mids, np.float32(-np.inf))])
    big = float(finite.max())
    edges = np.array([big, big * 1.03, big * 1.0625, big * 1.1, big * 1.125,
                      big * 1.25, big * 2, 1e30, np.inf, -np.inf, np.nan,
                      -np.nan, 0.0, -0.0, 1e-45, -1e-45, 1e-39, 1.2e-38,
                      -3e-38], np.float32)
    rng = np.random.default_rng(7)
    rand = (rng.standard_normal(4000) *
            np.exp2(rng.uniform(-24, np.log2(big) + 2, 4000))).astype(np.float32)
    return np.concatenate([reps, mids, around, edges, rand]).astype(np.float32)


def _decode_all(dtype):
    """The 16 values of a 4-bit float, found by value (ml_dtypes' 4-bit
    types do not view uint8 buffers)."""
    table = {}
    for v in np.linspace(-8, 8, 4097, dtype=np.float32):
        q = np.array([v], np.float32).astype(dtype)
        table.setdefault(int(q.view(np.uint8)[0]) & 0xF, float(q.astype(np.float32)[0]))
    return np.array([table[i] for i in sorted(table)], np.float32)


for name, (code, dtype) in FLOATS.items():
    bits = 4 if dtype == ml_dtypes.float4_e2m1fn else 8
    # Decode: every code.
    if bits == 8:
        allcodes = np.arange(256, dtype=np.uint8).view(dtype)
    else:
        allcodes = _decode_all(dtype).astype(dtype)
    got = run_cast(name + "-decode", allcodes, code, TP.FLOAT)
    want = allcodes.astype(np.float32)
    report("%s decode" % name, allcodes.astype(np.float32),
           same_floats(got, want), got, want)
    # Encode, without and (for float8) with saturation.
    x = test_inputs(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(dtype).astype(np.float32)
    got = run_cast(name + "-encode", x, TP.FLOAT, code, saturate=0)
    ok = same_floats(got, want)
    if bits == 4:
        # ml_dtypes turns NaN into a zero of either sign: compare values.
        ok |= np.isnan(x) & (got == 0)
    report("%s encode" % name, x, ok, got, want)
    if bits == 8:
        want = numpy_helper.saturate_cast(x, dtype).astype(np.float32)
        got = run_cast(name + "-saturate", x, TP.FLOAT, code, saturate=1)
        report("%s encode saturate" % name, x, same_floats(got, want), got, want)

# float8e8m0: each round mode, with and without saturation.
x = np.concatenate([test_inputs(ml_dtypes.float8_e5m2),
                    np.exp2(np.arange(-127, 128, dtype=np.float32)),
                    np.exp2(np.arange(-126, 128, dtype=np.float32)) * 1.5,
                    np.array([3.4e38, 1.7e38, 1.5e-45, 5.9e-39, 8.8e-39], np.float32)])
for mode in ("up", "down", "nearest"):
    for sat in (1, 0):
        want = numpy_helper.to_float8e8m0(x, bool(sat), mode).astype(np.float32)
        got = run_cast("e8m0-%s-%d" % (mode, sat), x, TP.FLOAT, TP.FLOAT8E8M0,
                       round_mode=mode, saturate=sat)
        report("float8e8m0 %s saturate=%d" % (mode, sat), x,
               same_floats(got, want), got, want)
codes = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
got = run_cast("e8m0-decode", codes, TP.FLOAT8E8M0, TP.FLOAT)
want = codes.astype(np.float32)
report("float8e8m0 decode", want, same_floats(got, want), got, want)

# int4/uint4/int2/uint2: from floats and int32 (wrapping), and back; odd
# counts end the packed files in a partial byte.
for name, (code, dtype, wide) in INTS.items():
    x = np.array([-9.7, -8.5, -8, -3.2, -2.5, -1, -0.5, 0, 0.7, 1, 1.5, 2.5,
                  3, 6.9, 7, 7.5, 8, 15.2, 16, 17.9, 100, -100, 1e9],
                 np.float32)
    want = x.astype(dtype).astype(wide)
    got = run_cast(name + "-from-float", x, TP.FLOAT, code)
    report("%s from float" % name, x, got == want, got, want)
    xi = np.arange(-40, 41, dtype=np.int32)
    want = xi.astype(dtype).astype(wide)
    got = run_cast(name + "-from-int32", xi, TP.INT32, code)
    report("%s from int32" % name, xi, got == want, got, want)
    lo, hi = int(ml_dtypes.iinfo(dtype).min), int(ml_dtypes.iinfo(dtype).max)
    q = np.array([v for v in range(lo, hi + 1)] * 3 + [lo], dtype=np.int64).astype(dtype)
    got = run_cast(name + "-to-float", q, code, TP.FLOAT)
    want = q.astype(np.float32)
    report("%s to float (%d values)" % (name, q.size), want, got == want, got,
           want)

print("narrow types: %s" % ("all match" if failures == 0 else
                            "%d checks FAILED" % failures))
sys.exit(1 if failures else 0)
