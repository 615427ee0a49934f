#!/usr/bin/env python3
"""Simulates the GPT runs of Narayanan et al. (SC'21) Table 1 and compares
the simulated TFLOP/s per GPU with the published ones: calibrate.py on the
set calibration/megatron-sc21-table1.csv (the table with the published launch
settings of its runs), which the simulator's A100 figures are fitted on.

--fit searches the A100's bf16 GEMM efficiency and the fused kernels' share of
memory bandwidth on this table (calibrate.py --search); --planner prints the
planner's choice beside each row's layout. To measure the error on runs the
simulator was not fitted on, run calibrate.py with --validate.

    sc21_calibration.py [--build build] [--rows 1,2,3] [--chunks N]
        [--microbatch-size N] [--work DIR] [--fit] [--planner]
        [--gpu kernel_bandwidth_fraction=0.8] [--jobs N]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibrate  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--build", default=None)
ap.add_argument("--table", default="megatron-sc21-table1", help="the set's CSV (default: the repository's)")
ap.add_argument("--rows", default=None, help="1-based rows to run (default: all)")
ap.add_argument("--chunks", type=int, default=0)
ap.add_argument("--microbatch-size", type=int, default=0)
ap.add_argument("--gpu", action="append", default=[], metavar="KEY=VALUE")
ap.add_argument("--fit", action="store_true")
ap.add_argument("--planner", action="store_true")
ap.add_argument("--jobs", type=int, default=1)
ap.add_argument("--work", default=None)
ap.add_argument("--python", default=None)
args = ap.parse_args()

argv = ["--fit", args.table, "--chunks", str(args.chunks), "--microbatch-size", str(args.microbatch_size),
        "--jobs", str(args.jobs)]
argv += ["--rows", "%s:%s" % (args.table, args.rows)] if args.rows else []
argv += ["--search"] if args.fit else []
argv += ["--planner"] if args.planner else []
for flag in ("build", "work", "python"):
    if getattr(args, flag):
        argv += ["--" + flag, getattr(args, flag)]
for g in args.gpu:
    argv += ["--gpu", g]
sys.exit(calibrate.main(argv))
