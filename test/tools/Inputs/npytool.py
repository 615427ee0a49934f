#!/usr/bin/env python3
"""Small file helpers for the tool tests.

  npytool.py compare GOT.npy WANT.npy   exit 1 unless same shape/dtype and
                                        allclose(rtol=1e-4, atol=1e-4)
  npytool.py flip FILE OFFSET           xor the byte at OFFSET (negative: from
                                        the end) with 0xff
  npytool.py set-u32 FILE OFFSET VALUE  overwrite 4 bytes, little-endian
"""
import struct
import sys

import numpy as np

cmd = sys.argv[1]
if cmd == "compare":
    got, want = np.load(sys.argv[2]), np.load(sys.argv[3])
    if got.shape != want.shape or got.dtype != want.dtype:
        sys.exit(f"mismatch: got {got.shape} {got.dtype}, want {want.shape} {want.dtype}")
    if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
        sys.exit(f"values differ: max abs error {np.abs(got - want).max()}")
    print(f"match: {got.shape} {got.dtype}")
elif cmd in ("flip", "set-u32"):
    data = bytearray(open(sys.argv[2], "rb").read())
    offset = int(sys.argv[3]) % len(data)
    if cmd == "flip":
        data[offset] ^= 0xFF
    else:
        data[offset:offset + 4] = struct.pack("<I", int(sys.argv[4]))
    open(sys.argv[2], "wb").write(bytes(data))
else:
    sys.exit(f"unknown command {cmd}")
