"""Trainer: the training loop of cleave-run, from Python."""

import os

import numpy as np
import onnx
import pytest

import cleave
from conftest import GPT, GPT_OPTIONS, read_jsonl, run_tool


def f32(v):
    return np.float32(v)


def test_fifty_steps_bitwise_equal_to_cleave_run(tmp_path, gpt_plan, gpt_plan_file):
    run_tool("cleave-run", gpt_plan_file, "--steps", 50, "--synthetic",
             "--seed", 7, "--log-json", tmp_path / "run.jsonl")
    tool = [f32(r["loss"]) for r in read_jsonl(tmp_path / "run.jsonl")]
    with cleave.Trainer(gpt_plan, synthetic=True, seed=7, log_every=0) as t:
        history = t.fit(steps=50)
    assert len(history) == 50 and [m["step"] for m in history] == list(range(1, 51))
    assert [f32(m["loss"]) for m in history] == tool
    for key in ("lr", "grad_norm", "tokens_per_s", "step_ms", "peak_bytes"):
        assert key in history[0], key


def test_resume_from_cleave_run_checkpoint(tmp_path, gpt_plan, gpt_plan_file):
    run_tool("cleave-run", gpt_plan_file, "--steps", 12, "--synthetic",
             "--seed", 3, "--log-json", tmp_path / "straight.jsonl")
    run_tool("cleave-run", gpt_plan_file, "--steps", 6, "--synthetic",
             "--seed", 3, "--save-every", 6, "--checkpoint-dir", tmp_path / "ck")
    straight = [f32(r["loss"]) for r in read_jsonl(tmp_path / "straight.jsonl")]
    with cleave.Trainer(gpt_plan, synthetic=True, resume=tmp_path / "ck",
                        log_every=0) as t:
        resumed = t.fit(steps=12)
    assert [m["step"] for m in resumed] == list(range(7, 13))
    assert [f32(m["loss"]) for m in resumed] == straight[6:]


def test_cleave_run_resumes_a_python_checkpoint(tmp_path, gpt_plan, gpt_plan_file):
    with cleave.Trainer(gpt_plan, synthetic=True, seed=5, log_every=0) as t:
        first = t.fit(steps=4)
        path = t.save_checkpoint(tmp_path / "ck")
        rest = t.fit(steps=8)
    assert path.endswith("step-4")
    run_tool("cleave-run", gpt_plan_file, "--steps", 8, "--synthetic",
             "--resume", tmp_path / "ck", "--log-json", tmp_path / "r.jsonl")
    assert [f32(r["loss"]) for r in read_jsonl(tmp_path / "r.jsonl")] == \
        [f32(m["loss"]) for m in rest]
    assert len(first) == 4


def test_numpy_arrays_as_the_dataset(tmp_path, gpt_plan, gpt_plan_file):
    r = np.random.default_rng(0)
    ids = r.integers(0, 96, (10, 8)).astype(np.int64)
    labels = np.roll(ids, -1, axis=1)
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "labels.npy", labels)
    run_tool("cleave-run", gpt_plan_file, "--steps", 6,
             "--data", f"input_ids={tmp_path / 'ids.npy'}",
             "--data", f"labels={tmp_path / 'labels.npy'}",
             "--log-json", tmp_path / "npy.jsonl")
    tool = [f32(x["loss"]) for x in read_jsonl(tmp_path / "npy.jsonl")]
    with cleave.Trainer(gpt_plan, log_every=0) as t:
        history = t.fit({"input_ids": ids, "labels": labels}, steps=6)
    assert [f32(m["loss"]) for m in history] == tool


def test_iterable_of_batches_and_callback(gpt_plan):
    r = np.random.default_rng(1)

    def batches():
        while True:
            ids = r.integers(0, 96, (2, 8))
            yield {"input_ids": ids, "labels": np.roll(ids, -1, axis=1)}

    seen = []
    with cleave.Trainer(gpt_plan, log_every=0) as t:
        history = t.fit(batches(), steps=100,
                        callback=lambda m: seen.append(m["step"]) or m["step"] < 5)
    assert seen == [1, 2, 3, 4, 5] and len(history) == 5
    # A finite iterable ends the fit early.
    ids = np.zeros((2, 8), np.int64)
    with cleave.Trainer(gpt_plan, log_every=0) as t:
        assert len(t.fit([[ids, ids]] * 3, steps=10)) == 3


def test_step_loop_matches_fit(gpt_plan):
    r = np.random.default_rng(2)
    data = [r.integers(0, 96, (2, 8)) for _ in range(4)]
    with cleave.Trainer(gpt_plan, log_every=0) as a, \
            cleave.Trainer(gpt_plan, log_every=0) as b:
        stepped = [a.step({"input_ids": d, "labels": np.roll(d, -1, 1)})["loss"]
                   for d in data]
        fitted = [m["loss"] for m in
                  b.fit(([d, np.roll(d, -1, 1)] for d in data), steps=4)]
    assert stepped == fitted


def test_state_dict_and_export(tmp_path, gpt_plan):
    model = onnx.load(GPT)
    initializers = {i.name for i in model.graph.initializer}
    with cleave.Trainer(gpt_plan, synthetic=True, log_every=0) as t:
        before = t.state_dict()
        t.fit(steps=3)
        after = t.state_dict()
        with_optimizer = t.state_dict(optimizer=True)
        t.export_onnx(tmp_path / "trained.onnx")
        t.export_safetensors(tmp_path / "trained.safetensors")
    # Every parameter under its initializer's name (the other initializers
    # are constants of the export: shapes, scalars).
    assert set(before) <= initializers and len(before) > 10
    assert len(with_optimizer) == 3 * len(before)
    changed = [n for n in before if not np.array_equal(before[n], after[n])]
    assert changed, "training changed no parameter"
    trained = {i.name: onnx.numpy_helper.to_array(i)
               for i in onnx.load(str(tmp_path / "trained.onnx")).graph.initializer}
    for name, value in after.items():
        np.testing.assert_array_equal(trained[name], value)
    assert (tmp_path / "trained.safetensors").stat().st_size > 0


def test_plan_from_bytes_exports_onnx(tmp_path):
    with open(GPT, "rb") as f:
        plan = cleave.compile(f.read(), **GPT_OPTIONS)
    with cleave.Trainer(plan, synthetic=True, log_every=0) as t:
        t.fit(steps=1)
        t.export_onnx(tmp_path / "out.onnx")
        params = t.state_dict()
    out = {i.name: onnx.numpy_helper.to_array(i)
           for i in onnx.load(str(tmp_path / "out.onnx")).graph.initializer}
    assert set(params) <= set(out)
    for name, value in params.items():
        np.testing.assert_array_equal(out[name], value)


def test_two_ranks_equal_cleave_run_ranks(tmp_path, gpt_plan):
    plan = cleave.compile(GPT, mesh="dp=2", **GPT_OPTIONS)
    assert plan.world_size == 2
    plan.save(tmp_path / "dp2.cleave")
    run_tool("cleave-run", tmp_path / "dp2.cleave", "--ranks", 2, "--steps", 5,
             "--synthetic", "--seed", 4, "--log-json", tmp_path / "dp2.jsonl")
    tool = [f32(r["loss"]) for r in read_jsonl(tmp_path / "dp2.jsonl")]
    with cleave.Trainer(plan, ranks=2, synthetic=True, seed=4, log_every=0) as t:
        losses = [f32(m["loss"]) for m in t.fit(steps=5)]
        params = t.state_dict()
    assert losses == tool
    # The global parameters, as one rank holds them.
    with cleave.Trainer(gpt_plan, synthetic=True) as one:
        single = one.state_dict()
    assert set(params) == set(single)
    for name, value in single.items():
        assert params[name].shape == value.shape, name


def test_data_inputs_metadata_and_repr(gpt_plan):
    assert gpt_plan.metadata("model") == "gpt2_tied.onnx"
    assert gpt_plan.metadata("no such key") is None
    assert int(gpt_plan.metadata("flops")) == gpt_plan.stats["flops"]
    # The vocabulary: the embedding's rows for the ids, the logits' classes
    # (and the ignore index) for the labels.
    assert gpt_plan.metadata("valid_range.input_ids") == "-96,96"
    assert gpt_plan.metadata("valid_range.labels") == "0,96,-100"
    assert repr(gpt_plan).startswith("<cleave.Plan gpt2_tied.onnx (training")
    with cleave.Trainer(gpt_plan, synthetic=True) as t:
        inputs = {d.name: (d.dtype, d.shape) for d in t.data_inputs}
        assert inputs == {"input_ids": ("int64", [2, 8]),
                          "labels": ("int64", [2, 8])}
        assert t.rank == 0 and t.steps_done == 0
        t.step()
        assert t.steps_done == 1 and len(t.history) == 1


def test_mixture_of_experts_metrics():
    # Each step's dict carries the plan's metrics: every MoE layer's rows
    # per expert (all of a batch's routed rows) and the rows dropped past
    # capacity, as cleave-run's JSON log has them.
    model = os.path.join(os.path.dirname(__file__), "..", "..", "test",
                         "models", "mixtral_b4.onnx")
    plan = cleave.compile(model, train=True,
                          loss="cross_entropy:logits,labels",
                          moe_capacity_factor=1.0)
    with cleave.Trainer(plan, synthetic=True, seed=1, log_every=0) as t:
        first = t.fit(steps=1)[0]
    assert first["moe.expert_load.shape"] == [2, 4]
    load = np.array(first["moe.expert_load"]).reshape(2, 4)
    # 4 sequences of 8 tokens, 2 experts each, per layer.
    assert load.sum(axis=1).tolist() == [64.0, 64.0]
    assert 0 <= first["moe.dropped_rows"] <= 128
