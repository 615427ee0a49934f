#!/usr/bin/env python3
"""Checks that every Cleave pass and pipeline of cleave-opt has a lit test.

    tools/check_pass_tests.py --cleave-opt build/bin/cleave-opt [--root DIR]

Lists every `--cleave-*` flag of `cleave-opt --help` (passes and pass
pipelines) and looks under test/ for a test of each: a file named after the
flag without its `cleave-` prefix (`propagate-sharding.mlir` for
`--cleave-propagate-sharding`), or a RUN line that runs it (`--cleave-x`, or
`cleave-x` in a `--pass-pipeline`). A flag without one fails the check,
unless ALLOWED_MISSING lists it with the reason; an ALLOWED_MISSING entry
that has a test now, or that cleave-opt no longer lists, fails too, so the
list only shrinks.

Exit 1 with one line per flag without a test.
"""
import argparse
import os
import re
import subprocess
import sys

# Flags without a test of their own yet, each with why; the check fails when
# one gets a test, so that it is taken off this list.
ALLOWED_MISSING = {
}

FLAG = re.compile(r"^\s+--(cleave-[a-z0-9-]+)(?=[\s=]|$)")


def cleave_flags(cleave_opt):
    """The `--cleave-*` passes and pipelines cleave-opt lists, in order. Only
    flags at the indentation of pass names: their options are indented
    deeper."""
    help_text = subprocess.run([cleave_opt, "--help"], check=True,
                               capture_output=True, text=True).stdout
    flags, indent = [], None
    in_passes = False
    for line in help_text.splitlines():
        if re.match(r"^\s+--(pass-pipeline|passes)\b", line):
            continue
        if "Compiler passes to run" in line:
            in_passes = True
            continue
        if not in_passes:
            continue
        m = FLAG.match(line)
        if not m:
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth == indent and m.group(1) not in flags:
            flags.append(m.group(1))
    return flags


def tested_flags(test_root, flags):
    """The flags that a file under `test_root` is named after or runs."""
    names = set()
    run_lines = []
    for dirpath, _, files in os.walk(test_root):
        for name in files:
            names.add(os.path.splitext(name)[0])
            path = os.path.join(dirpath, name)
            if not name.endswith((".mlir", ".test", ".py")):
                continue
            with open(path, errors="replace") as f:
                run_lines.extend(line for line in f if "RUN:" in line)
    runs = "".join(run_lines)
    tested = set()
    for flag in flags:
        if flag[len("cleave-"):] in names or re.search(
                r"(?<![\w-])(--?)?" + re.escape(flag) + r"(?![\w-])", runs):
            tested.add(flag)
    return tested


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleave-opt", required=True)
    parser.add_argument("--root", default=os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    flags = cleave_flags(args.cleave_opt)
    if not flags:
        print(f"pass-tests: {args.cleave_opt} --help lists no --cleave-* "
              "pass")
        return 1
    tested = tested_flags(os.path.join(args.root, "test"), flags)
    missing = [f for f in flags if f not in tested and f not in ALLOWED_MISSING]
    now_tested = sorted(f for f in ALLOWED_MISSING if f in tested)
    gone = sorted(f for f in ALLOWED_MISSING if f not in flags)
    for flag in missing:
        print(f"--{flag}: no test under test/ is named "
              f"{flag[len('cleave-'):]}.mlir or runs it")
    for flag in now_tested:
        print(f"--{flag}: has a test now: take it off ALLOWED_MISSING in "
              "tools/check_pass_tests.py")
    for flag in gone:
        print(f"--{flag}: cleave-opt no longer lists it: take it off "
              "ALLOWED_MISSING in tools/check_pass_tests.py")
    print(f"pass-tests: {len(flags)} --cleave-* flags, {len(missing)} "
          f"without a test, {len(ALLOWED_MISSING) - len(now_tested) - len(gone)}"
          f" allowed to miss one")
    return 1 if missing or now_tested or gone else 0


if __name__ == "__main__":
    sys.exit(main())
