"""import_onnx and run_passes print what cleave-compile --emit=mlir and
cleave-opt print."""

import cleave
from conftest import run_tool


def test_import_onnx_equals_cleave_compile(mlp_path, mlp):
    tool, _ = run_tool("cleave-compile", mlp_path, "--emit=mlir", "-o", "-")
    assert cleave.import_onnx(mlp_path) == tool
    # From bytes and a ModelProto the program is the same but for the
    # file name in its locations.
    text = cleave.import_onnx(mlp)
    assert "func.func @main" in text and "cleave.contract" in text


def test_import_onnx_later_phase(mlp_path):
    tool, _ = run_tool("cleave-compile", mlp_path, "--emit=mlir",
                       "--phase=prepared", "--input-shape", "x=4x8", "-o", "-")
    assert cleave.import_onnx(mlp_path, phase="prepared",
                              input_shapes={"x": [4, 8]}) == tool


def test_run_passes_equals_cleave_opt(tmp_path, mlp_path):
    source = cleave.import_onnx(mlp_path)
    (tmp_path / "in.mlir").write_text(source)
    for pipeline in ["cleave-prepare-pipeline",
                     "builtin.module(canonicalize,cse)"]:
        anchored = (pipeline if pipeline.startswith("builtin.module(")
                    else f"builtin.module({pipeline})")
        tool, _ = run_tool("cleave-opt", tmp_path / "in.mlir",
                           f"--pass-pipeline={anchored}")
        assert cleave.run_passes(source, pipeline) == tool, pipeline


def test_run_passes_errors_are_cleave_errors():
    import pytest
    with pytest.raises(cleave.CompileError, match="bad pass pipeline"):
        cleave.run_passes("module {}", "no-such-pass")
    with pytest.raises(cleave.CompileError, match="cannot parse"):
        cleave.run_passes("module { not mlir", "canonicalize")
