#!/usr/bin/env python3
"""Checks --export-onnx of a model whose parameters were made again from a
PyTorch export's transposed copies: each copy holds the transpose of the
trained parameter (from --export-safetensors), and a parameter is written
only where the source file held it.

usage: check_folded_export.py SOURCE.onnx TRAINED.onnx TRAINED.safetensors PARAM=COPY...
"""
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    return {name: np.frombuffer(raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]],
                                np.float32).reshape(e["shape"])
            for name, e in header.items() if name != "__metadata__"}


source = {t.name: numpy_helper.to_array(t) for t in onnx.load(sys.argv[1]).graph.initializer}
trained_model = onnx.load(sys.argv[2])
onnx.checker.check_model(trained_model)
trained = {t.name: numpy_helper.to_array(t) for t in trained_model.graph.initializer}
state = read_safetensors(sys.argv[3])
for pair in sys.argv[4:]:
    param, copy = pair.split("=")
    assert np.array_equal(trained[copy], state[param].T), copy
    assert not np.array_equal(trained[copy], source[copy]), copy
    print(f"{copy}: the transpose of the trained {param}, not the exported value")
    if param in source:
        assert np.array_equal(trained[param], state[param]), param
        print(f"{param}: the trained value")
print("initializers: " + " ".join(sorted(trained)))
