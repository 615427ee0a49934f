"""Bad input raises cleave.Error subclasses with the tools' messages; never
a crash."""

import numpy as np
import pytest

import cleave


def test_error_hierarchy():
    for cls in (cleave.CompileError, cleave.OptionError, cleave.InputError,
                cleave.RunError, cleave.ClosedError):
        assert issubclass(cls, cleave.Error)
    assert issubclass(cleave.Error, RuntimeError)
    assert issubclass(cleave.OptionError, ValueError)
    assert issubclass(cleave.InputError, ValueError)


def test_unknown_option(mlp_path):
    with pytest.raises(cleave.OptionError, match="unknown option 'no_such_thing'"):
        cleave.compile(mlp_path, no_such_thing=1)


def test_bad_option_value(mlp_path):
    with pytest.raises(cleave.OptionError, match="zero"):
        cleave.compile(mlp_path, zero="seven")
    with pytest.raises(cleave.CompileError, match="unknown target 'tpu'"):
        cleave.compile(mlp_path, target="tpu")
    with pytest.raises(cleave.OptionError, match="flag"):
        cleave.compile(mlp_path, train="yes")


def test_emit_is_not_a_python_option(mlp_path):
    with pytest.raises(cleave.OptionError, match="returns a Plan"):
        cleave.compile(mlp_path, emit="mlir")


def test_bad_model(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    with pytest.raises(cleave.CompileError, match="bad.onnx"):
        cleave.compile(bad)
    with pytest.raises(cleave.CompileError, match="cannot open"):
        cleave.compile(tmp_path / "missing.onnx")
    with pytest.raises(cleave.OptionError, match="path, bytes or an onnx.ModelProto"):
        cleave.compile(42)


def test_wrong_inputs(mlp_path):
    plan = cleave.compile(mlp_path)
    with pytest.raises(cleave.InputError,
                       match=r"input 'x': expected shape \[4, 8\] float32, got shape \[4, 7\] float32"):
        plan.run([np.zeros((4, 7), np.float32)])
    with pytest.raises(cleave.InputError, match=r"got shape \[4, 8\] float64"):
        plan.run([np.zeros((4, 8))])
    with pytest.raises(cleave.InputError, match=r"takes 1 inputs \(.x.\), got 2"):
        plan.run([np.zeros((4, 8), np.float32)] * 2)
    with pytest.raises(cleave.InputError, match="no input named 'z'"):
        plan.run({"z": np.zeros((4, 8), np.float32)})
    with pytest.raises(cleave.InputError, match="input 'x' is not given"):
        plan.run({})
    # The plan still runs after refusing bad input.
    assert plan.run([np.zeros((4, 8), np.float32)])[0].shape == (4, 3)


def test_damaged_plan_file(tmp_path, mlp_path):
    plan = cleave.compile(mlp_path)
    path = tmp_path / "p.cleave"
    plan.save(path)
    data = bytearray(path.read_bytes())
    data[40] ^= 0xFF
    (tmp_path / "damaged.cleave").write_bytes(bytes(data))
    with pytest.raises(cleave.RunError):
        cleave.load(tmp_path / "damaged.cleave")
    (tmp_path / "short.cleave").write_bytes(bytes(data[:20]))
    with pytest.raises(cleave.RunError):
        cleave.load(tmp_path / "short.cleave")
    with pytest.raises(cleave.RunError, match="cannot read plan"):
        cleave.load(tmp_path / "missing.cleave")


def test_training_errors(mlp_path, gpt_plan):
    inference = cleave.compile(mlp_path)
    with pytest.raises(cleave.OptionError, match="not a training plan"):
        cleave.Trainer(inference).fit(steps=1)
    with pytest.raises(cleave.OptionError, match="unknown training option 'stepz'"):
        cleave.Trainer(gpt_plan, stepz=3)
    with pytest.raises(cleave.OptionError, match="--log-every expects a non-negative integer"):
        cleave.Trainer(gpt_plan, synthetic=True, log_every="often").fit(steps=1)
    with pytest.raises(cleave.OptionError, match="runs on 1 rank, not 2"):
        cleave.Trainer(gpt_plan, ranks=2, synthetic=True).fit(steps=1)


def test_closed_trainer(gpt_plan):
    trainer = cleave.Trainer(gpt_plan, synthetic=True)
    trainer.step()
    trainer.close()
    with pytest.raises(cleave.ClosedError):
        trainer.step()


def test_refused_batch_leaves_the_trainer_usable(gpt_plan):
    trainer = cleave.Trainer(gpt_plan, log_every=0)
    ids = np.zeros((2, 8), np.int64)
    with pytest.raises(cleave.InputError,
                       match=r"data input 'input_ids': expected shape \[2, 8\] int64"):
        trainer.step([ids[:, :4], ids])
    # A refused batch is checked before anything runs: the trainer goes on.
    assert trainer.step([ids, ids])["step"] == 1
    trainer.close()


def test_data_beyond_the_vocabulary(gpt_plan):
    # The plan records the vocabulary (96 rows of the token embedding, 96
    # classes of the loss): a batch holding id 96 is refused, and so is
    # synthetic data drawn from more values than that.
    trainer = cleave.Trainer(gpt_plan, log_every=0)
    ids = np.zeros((2, 8), np.int64)
    bad = ids.copy()
    bad[0, 3] = 96
    with pytest.raises(cleave.Error, match=r"step 1: data input 'input_ids' "
                       r"holds 96 at element 3 of its batch, outside \[-96, 96\)"):
        trainer.step([bad, ids])
    trainer.close()
    with pytest.raises(cleave.Error, match=r"synthetic vocabulary size 97 is "
                       r"above the model's: data input 'input_ids' takes "
                       r"values in \[-96, 96\), so give at most 96"):
        cleave.Trainer(gpt_plan, synthetic=True, synthetic_vocab=97).fit(steps=1)


def test_trainer_closes_after_a_failed_step(gpt_plan):
    # Started with batches, then asked for a step without one: the loop has
    # no dataset, the step fails, and the trainer is closed.
    trainer = cleave.Trainer(gpt_plan, log_every=0)
    ids = np.zeros((2, 8), np.int64)
    trainer.step([ids, ids])
    with pytest.raises(cleave.RunError, match="no data for step 2"):
        trainer.step()
    with pytest.raises(cleave.ClosedError, match="after an error: no data for step 2"):
        trainer.step([ids, ids])


def test_closed_plan(mlp_path):
    plan = cleave.compile(mlp_path)
    plan.close()
    with pytest.raises(cleave.ClosedError, match="the plan is closed"):
        plan.run([np.zeros((4, 8), np.float32)])
    with pytest.raises(cleave.ClosedError):
        plan.stats
    with pytest.raises(cleave.ClosedError):
        cleave.Trainer(plan).fit(steps=1)


def test_model_path_is_never_an_option(tmp_path):
    # A path that looks like an option is a path (it would otherwise make
    # llvm::cl print the help and exit the interpreter).
    with pytest.raises(cleave.CompileError, match="cannot open"):
        cleave.compile("--help")
    with pytest.raises(cleave.CompileError, match="cannot open"):
        cleave.import_onnx("-version")


def test_bad_shapes_and_tensor_kinds(mlp_path):
    with pytest.raises(cleave.OptionError, match="sequence of integers"):
        cleave.compile(mlp_path, input_shapes={"x": (4, 8.5)})
    plan = cleave.compile(mlp_path)
    with pytest.raises(cleave.InputError, match="CPU array of a plan element type"):
        plan.run([np.array([[object()] * 8] * 4)])
