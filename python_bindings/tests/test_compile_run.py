"""compile (from a path, bytes, a ModelProto), Plan.run with numpy and
DLPack tensors, save/load, and the option table."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import cleave
from conftest import mlp_model, run_tool


def reference(model, x):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.fixture
def x():
    return np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)


@pytest.mark.parametrize("form", ["path", "pathlike", "bytes", "proto"])
def test_compile_each_model_form(form, mlp, mlp_path, x):
    import pathlib
    model = {"path": mlp_path, "pathlike": pathlib.Path(mlp_path),
             "bytes": mlp.SerializeToString(), "proto": mlp}[form]
    plan = cleave.compile(model)
    assert [d.name for d in plan.inputs] == ["x"]
    assert plan.inputs[0].shape == [4, 8] and plan.inputs[0].dtype == "float32"
    assert [d.name for d in plan.outputs] == ["y"]
    (y,) = plan.run([x])
    np.testing.assert_allclose(y, reference(mlp, x), rtol=1e-5, atol=1e-6)


def test_run_by_name_and_repeatedly(mlp_path, mlp, x):
    plan = cleave.compile(mlp_path)
    first = plan.run({"x": x})[0]
    again = plan.run({"x": 2 * x})[0]
    np.testing.assert_allclose(again, reference(mlp, 2 * x), rtol=1e-5, atol=1e-6)
    # Outputs are copies: a later run does not change an earlier result.
    np.testing.assert_allclose(first, reference(mlp, x), rtol=1e-5, atol=1e-6)


class DLPackOnly:
    """A tensor that is not a numpy array and offers only the DLPack
    protocol (as PyTorch, JAX and CuPy tensors do)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_run_with_dlpack_tensor(mlp_path, mlp, x):
    plan = cleave.compile(mlp_path)
    (y,) = plan.run([DLPackOnly(x)])
    np.testing.assert_allclose(y, reference(mlp, x), rtol=1e-5, atol=1e-6)


def test_run_non_contiguous_input(mlp_path, mlp):
    wide = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)
    view = wide[:, ::2]  # Not C-contiguous: copied on the way in.
    (y,) = cleave.compile(mlp_path).run([view])
    np.testing.assert_allclose(y, reference(mlp, np.ascontiguousarray(view)),
                               rtol=1e-5, atol=1e-6)


def test_options_reach_the_compiler(mlp_path, x, mlp):
    # input_shapes as a dict; a flag; a value option.
    plan = cleave.compile(mlp_path, input_shapes={"x": (4, 8)},
                          no_library_gemm=True, target="cpu")
    assert plan.stats["gemms"] == 0
    default = cleave.compile(mlp_path)
    assert default.stats["gemms"] == 2
    (y,) = plan.run([x])
    np.testing.assert_allclose(y, reference(mlp, x), rtol=1e-5, atol=1e-6)


def test_save_load_and_cleave_run(tmp_path, mlp_path, mlp, x):
    plan = cleave.compile(mlp_path)
    path = tmp_path / "mlp.cleave"
    plan.save(path)
    loaded = cleave.load(path)
    np.testing.assert_array_equal(loaded.run([x])[0], plan.run([x])[0])
    # cleave-run runs the saved plan to the same bits.
    np.save(tmp_path / "x.npy", x)
    run_tool("cleave-run", path, tmp_path / "x.npy", "--output-dir", tmp_path)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), plan.run([x])[0])


def test_plan_from_cleave_compile_is_the_same_file(tmp_path, mlp_path):
    run_tool("cleave-compile", mlp_path, "-o", tmp_path / "tool.cleave")
    cleave.compile(mlp_path).save(tmp_path / "module.cleave")
    # The same compiler on the same file: the same bytes.
    assert (tmp_path / "tool.cleave").read_bytes() == \
        (tmp_path / "module.cleave").read_bytes()


def test_stats_and_report(gpt_plan):
    stats = gpt_plan.stats
    for key in ("commands", "kernels", "gemms", "arena_bytes",
                "constant_bytes", "parameter_bytes", "optimizer_state_bytes",
                "flops"):
        assert key in stats, key
    assert stats["gemms"] > 0 and stats["kernels"] > 0
    assert stats["arena_bytes"] >= stats["parameter_bytes"] > 0
    # AdamW keeps two moments per parameter.
    assert stats["optimizer_state_bytes"] == 2 * stats["parameter_bytes"]
    assert stats["flops"] > 0
    report = gpt_plan.report()
    assert "parameters" in report and "activations" in report
    assert gpt_plan.is_training and gpt_plan.world_size == 1


def test_option_table_matches_cleave_compile_help():
    from conftest import tool
    import subprocess
    helptext = subprocess.run([tool("cleave-compile"), "--help-hidden"],
                              capture_output=True, text=True).stdout
    table = cleave.compile_options()
    names = {o["option"] for o in table}
    assert "--input-shape" in names and "--mesh" in names and "--zero" in names
    assert "--max-memory" in names
    for option in table:
        assert option["option"] in helptext, option
    kinds = {o["name"]: o["kind"] for o in table}
    assert kinds["train"] == "flag" and kinds["input_shape"] == "list"
    assert kinds["mesh"] == "value"
