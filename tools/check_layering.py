#!/usr/bin/env python3
"""Checks that Cleave's libraries include one way: down the flow.

    tools/check_layering.py [--root DIR]

Each source file under dialects/, lib/, runtime/, tools/ and
python_bindings/src belongs to a layer (LAYERS, lowest first), and so does
each header it includes (by its include path, or by the folder a relative
include reaches). A file may include its own layer and the layers below it;
an include of a higher layer is an arrow against the flow and fails the
check, unless KNOWN lists it with the reason it is still there. A KNOWN
entry that no longer occurs fails too, so the list only shrinks.

Exit 1 with one line per new arrow (file:line, from layer -> to layer).
"""
import argparse
import os
import re
import sys

# Lowest first. A layer may use every layer before it.
LAYERS = [
    "runtime",      # the plan format and the runtime: no compiler code
    "schedule",     # lib/Pipeline: pipeline schedules, plain C++
    "ir",           # dialects/Cleave/IR
    "import",       # lib/Import
    "autodiff",     # lib/Transforms/Autodiff
    "transforms",   # lib/Transforms (recognition, decomposition), Conversion
    "sharding",     # lib/Transforms/Sharding
    "training",     # lib/Transforms/Training
    "plan",         # lib/Plan
    "target",       # lib/Target/CPU, lib/Target/CUDA
    "simulate",     # lib/Simulate
    "pipelines",    # lib/Pipelines: the phase pass pipelines
    "compiler",     # lib/Compiler, lib/Registration
    "tools",        # tools/, python_bindings/src
]
RANK = {name: i for i, name in enumerate(LAYERS)}

# Arrows against the flow that are still there, each with why; the check
# fails when one disappears, so that it is taken off this list.
KNOWN = {
    ("lib/Import/ONNX/TrainingOps.cpp", "autodiff"):
        "ONNX training ops call buildGradients; a gradient marker op that "
        "autodiff expands would cut this",
    ("lib/Import/ONNX/AttentionOps.cpp", "autodiff"):
        "uses VJPHelpers.h, a private header of autodiff",
    ("lib/Transforms/Sharding/Partition.cpp", "training"):
        "recompute tags (Training/Recompute.h) belong in a lib/Analysis",
    ("lib/Transforms/Sharding/ShardProgram.cpp", "training"):
        "recompute and gradient tags (Training/Recompute.h) belong in a "
        "lib/Analysis",
    ("lib/Transforms/Sharding/PartitionByRule.cpp", "training"):
        "recompute tags (Training/Recompute.h) belong in a lib/Analysis",
    ("lib/Transforms/Sharding/ReshardCollectives.cpp", "training"):
        "recompute tags (Training/Recompute.h) belong in a lib/Analysis",
    ("lib/Transforms/Autodiff/TestGradients.cpp", "transforms"):
        "a test pass among the production ones; it moves to test/lib",
    ("lib/Target/CUDA/CUDAPipeline.cpp", "target"):
        "the CUDA target reuses CPU target passes; a Target/Common would "
        "hold them",
}


def layer_of_path(path):
    """The layer of a file by where it is (repository-relative)."""
    p = path.replace(os.sep, "/")
    rules = [
        ("runtime/", "runtime"),
        ("dialects/", "ir"),
        ("lib/Pipeline/", "schedule"),
        ("lib/Import/", "import"),
        ("lib/Transforms/Autodiff/", "autodiff"),
        ("lib/Transforms/Sharding/", "sharding"),
        ("lib/Transforms/Training/", "training"),
        ("lib/Transforms/", "transforms"),
        ("lib/Conversion/", "transforms"),
        ("lib/Plan/", "plan"),
        ("lib/Target/", "target"),
        ("lib/Simulate/", "simulate"),
        ("lib/Pipelines/", "pipelines"),
        ("lib/Compiler/", "compiler"),
        ("lib/Registration/", "compiler"),
        ("tools/", "tools"),
        ("python_bindings/", "tools"),
        ("include/cleave/Import/", "import"),
        ("include/cleave/Transforms/Autodiff", "autodiff"),
        ("include/cleave/Transforms/Sharding/", "sharding"),
        ("include/cleave/Transforms/Training/", "training"),
        ("include/cleave/Transforms/", "transforms"),
        ("include/cleave/Conversion/", "transforms"),
        ("include/cleave/Plan/", "plan"),
        ("include/cleave/Target/", "target"),
        ("include/cleave/Simulate/", "simulate"),
        ("include/cleave/Pipeline/", "schedule"),
        ("include/cleave/Pipelines/", "pipelines"),
        ("include/cleave/Compiler/", "compiler"),
        ("include/cleave/InitAll.h", "compiler"),
    ]
    for prefix, layer in rules:
        if p.startswith(prefix):
            return layer
    return None


def layer_of_include(root, source, included):
    """The layer of an included header: a project header by its include
    path or a relative path; None for system and library headers."""
    if included.startswith(("cleave/", "Cleave/")):
        for base in ("include", "runtime/include", "dialects", "build/include"):
            if os.path.exists(os.path.join(root, base, included)):
                return layer_of_path(os.path.join(base, included))
        if included.startswith("Cleave/"):
            return "ir"  # generated dialect headers
        return layer_of_path(os.path.join("include", included))
    local = os.path.normpath(os.path.join(os.path.dirname(source), included))
    if os.path.exists(os.path.join(root, local)):
        return layer_of_path(local)
    return None


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))))
    root = parser.parse_args().root
    new, seen = [], set()
    files = 0
    for top in ("dialects", "lib", "runtime", "tools", "python_bindings/src",
                "include/cleave"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".cpp", ".h", ".hpp")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                layer = layer_of_path(path)
                if layer is None:
                    continue
                files += 1
                with open(os.path.join(root, path), errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        to = layer_of_include(root, path, m.group(1))
                        if to is None or RANK[to] <= RANK[layer]:
                            continue
                        if to == "target" and layer == "target":
                            continue
                        key = (path.replace(os.sep, "/"), to)
                        if key in KNOWN:
                            seen.add(key)
                            continue
                        new.append(f"{path}:{number}: {layer} includes "
                                   f"{m.group(1)} ({to}), a higher layer")
    # Target/CUDA -> Target/CPU is one layer by rank; name it apart.
    cuda = os.path.join(root, "lib/Target/CUDA")
    for dirpath, _, names in os.walk(cuda):
        for name in sorted(names):
            path = os.path.relpath(os.path.join(dirpath, name), root)
            with open(os.path.join(root, path), errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m and ("Target/CPU" in m.group(1) or "../CPU/" in m.group(1)):
                        key = (path.replace(os.sep, "/"), "target")
                        if key in KNOWN:
                            seen.add(key)
                        else:
                            new.append(f"{path}:{number}: the CUDA target "
                                       f"includes {m.group(1)} of the CPU target")
    gone = sorted(set(KNOWN) - seen)
    for line in new:
        print(line)
    for path, to in gone:
        print(f"{path}: no longer includes the {to} layer: take it off "
              "KNOWN in tools/check_layering.py")
    print(f"layering: {files} files, {len(new)} new arrows against the flow, "
          f"{len(seen)} known ones left, {len(gone)} gone from the list")
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
