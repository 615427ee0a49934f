"""A Trainer per process of an mpirun job (communicator='mpi'), against
cleave-run on the same plan."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import cleave
from conftest import GPT, GPT_OPTIONS, read_jsonl, run_tool

SCRIPT = """
import json, sys
import cleave
plan = cleave.load(sys.argv[1])
with cleave.Trainer(plan, communicator="mpi", synthetic=True, seed=4,
                    log_every=0) as t:
    losses = [m["loss"] for m in t.fit(steps=5)]
    params = t.state_dict()
    if t.rank == 0:
        json.dump({"losses": losses, "params": sorted(params)}, open(sys.argv[2], "w"))
    else:
        assert params == {}, "only rank 0 holds the gathered states"
"""


def test_two_processes_equal_cleave_run(tmp_path):
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun is missing (tools/setup.sh installs openmpi-bin)"
    plan = cleave.compile(GPT, mesh="dp=2", **GPT_OPTIONS)
    plan.save(tmp_path / "dp2.cleave")
    run_tool("cleave-run", tmp_path / "dp2.cleave", "--ranks", 2, "--steps", 5,
             "--synthetic", "--seed", 4, "--log-json", tmp_path / "tool.jsonl")
    (tmp_path / "train.py").write_text(SCRIPT)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.dirname(os.path.dirname(cleave.__file__)))
    done = subprocess.run(
        [mpirun, "--oversubscribe", "-np", "2", sys.executable,
         str(tmp_path / "train.py"), str(tmp_path / "dp2.cleave"),
         str(tmp_path / "out.json")],
        env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    import json
    out = json.load(open(tmp_path / "out.json"))
    tool = [np.float32(r["loss"]) for r in read_jsonl(tmp_path / "tool.jsonl")]
    assert [np.float32(v) for v in out["losses"]] == tool
    assert len(out["params"]) > 10


def test_mpi_world_must_match_the_plan(gpt_plan):
    # One process (no mpirun) for a one-rank plan is fine; ranks= is refused.
    with pytest.raises(cleave.OptionError, match="give no ranks"):
        cleave.Trainer(gpt_plan, 1, communicator="mpi", synthetic=True).fit(steps=1)
    with pytest.raises(cleave.OptionError, match="unknown communicator 'nccl'"):
        cleave.Trainer(gpt_plan, communicator="nccl", synthetic=True).fit(steps=1)
