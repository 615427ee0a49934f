#!/usr/bin/env python3
"""Compares the .npy outputs of two cleave-run output directories.

Standard library only (the GPU machine may lack numpy). Prints one line per
output and exits 1 if any differs beyond the tolerance:
    |a - b| <= atol + rtol * |b|   (NaN must match NaN)
    npy_compare.py GPU_DIR CPU_DIR --rtol 1e-4 --atol 1e-5
"""

import argparse
import ast
import math
import os
import struct
import sys

CODES = {"f4": "f", "f8": "d", "f2": "e", "i8": "q", "i4": "i", "i2": "h",
         "i1": "b", "u8": "Q", "u4": "I", "u2": "H", "u1": "B", "b1": "?"}


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(path + ": not an .npy file")
    major = data[6]
    if major == 1:
        hlen = struct.unpack("<H", data[8:10])[0]
        start = 10
    else:
        hlen = struct.unpack("<I", data[8:12])[0]
        start = 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    descr = header["descr"]
    order = "<" if descr[0] in "<|" else ">"
    code = CODES.get(descr[1:])
    if code is None:
        raise ValueError(path + ": unsupported dtype " + descr)
    shape = tuple(header["shape"])
    n = 1
    for d in shape:
        n *= d
    body = data[start + hlen:]
    values = struct.unpack(order + str(n) + code, body[:n * struct.calcsize(code)])
    return shape, values


def main():
    p = argparse.ArgumentParser()
    p.add_argument("got")
    p.add_argument("want")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-5)
    a = p.parse_args()
    names = sorted(f for f in os.listdir(a.want) if f.endswith(".npy"))
    if not names:
        print("no outputs in " + a.want)
        return 1
    bad = 0
    for name in names:
        gpath = os.path.join(a.got, name)
        if not os.path.exists(gpath):
            print("%s: missing from %s" % (name, a.got))
            bad += 1
            continue
        gs, gv = read_npy(gpath)
        ws, wv = read_npy(os.path.join(a.want, name))
        if gs != ws:
            print("%s: shape %s, expected %s" % (name, gs, ws))
            bad += 1
            continue
        worst, where = 0.0, -1
        ok = True
        for i, (g, w) in enumerate(zip(gv, wv)):
            g, w = float(g), float(w)
            if math.isnan(w) or math.isnan(g):
                if math.isnan(w) != math.isnan(g):
                    ok, where = False, i
                continue
            err = abs(g - w)
            if err > worst:
                worst, where = err, i
            if err > a.atol + a.rtol * abs(w):
                ok = False
        print("%s: %s, max abs error %.3g%s" % (
            name, "ok" if ok else "MISMATCH", worst,
            "" if where < 0 else " at element %d" % where))
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
