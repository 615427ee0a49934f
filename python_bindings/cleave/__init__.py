"""Cleave from Python: compile ONNX models and PyTorch modules into plans,
inspect them, run them and train them.

The module is a thin layer over the C++ functions the tools run:
``cleave.compile`` passes its keyword arguments to cleave-compile's option
table (``input_shapes=`` is ``--input-shape``, ``zero=1`` is ``--zero=1``),
``Plan.run`` is the runtime cleave-run uses, and ``Trainer`` drives the same
training loop, with the same logs and checkpoints, as ``cleave-run --steps``.

    import cleave
    plan = cleave.compile("gpt.onnx", train=True, loss="cross_entropy",
                          optimizer="adamw", init_parameters="normal:0.02")
    trainer = cleave.Trainer(plan, synthetic=True, seed=1)
    history = trainer.fit(steps=50, log_every=10)
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import _cleave
from ._cleave import (
    ClosedError,
    CompileError,
    Error,
    InputError,
    OptionError,
    RunError,
    TensorDesc,
)

__all__ = [
    "ClosedError",
    "CompileError",
    "Error",
    "InputError",
    "OptionError",
    "Plan",
    "RunError",
    "TensorDesc",
    "Trainer",
    "compile",
    "compile_options",
    "compile_torch",
    "import_onnx",
    "load",
    "run_passes",
]

ModelLike = Union[str, "os.PathLike[str]", bytes, Any]

# Keyword arguments spelled in Python's plural for cleave-compile's
# repeatable options.
_PLURALS = {
    "input_shapes": "input-shape",
    "freeze_inputs": "freeze-input",
    "shardings": "sharding",
}
# Options that choose what cleave-compile writes: the module always returns
# a Plan (use import_onnx, run_passes and Plan.save instead).
_NOT_FROM_PYTHON = {"o", "emit", "phase"}


def compile_options() -> list[dict[str, str]]:
    """cleave-compile's option table: one dict per option with its name
    (as a keyword argument: dashes become underscores), its kind ('flag',
    'value' or 'list'), the value it takes and its help."""
    return [
        {
            "name": name.replace("-", "_"),
            "option": "--" + name,
            "kind": kind,
            "value": value_name,
            "help": help_text,
        }
        for name, kind, value_name, help_text in _cleave.option_table()
        if name not in _NOT_FROM_PYTHON
    ]


def _option_kinds() -> dict[str, str]:
    return {name: kind for name, kind, _, _ in _cleave.option_table()}


def _format_value(value: Any) -> Any:
    """A keyword argument's value as the option takes it: shapes as text
    (``(8, 128)`` -> ``"8x128"``), paths as str; bools, numbers and str as
    they are."""
    if isinstance(value, (tuple, list)):
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                   for v in value):
            raise OptionError(f"a shape is a sequence of integers, not {value!r}")
        return "x".join(str(int(v)) for v in value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _format_text(value: Any) -> str:
    """A value as command-line text (bools as true/false)."""
    value = _format_value(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments as {option name: value} for the compiler, checked
    against its option table (values are checked by the compiler)."""
    kinds = _option_kinds()
    given: dict[str, Any] = {}
    for key, value in options.items():
        name = _PLURALS.get(key, key.replace("_", "-"))
        if name in _NOT_FROM_PYTHON:
            raise OptionError(
                f"option '{key}' chooses what cleave-compile writes; from "
                "Python, compile returns a Plan (see import_onnx, "
                "run_passes and Plan.save)")
        kind = kinds.get(name)
        if kind is None:
            close = [n.replace("-", "_") for n in kinds
                     if n.startswith(name[:4]) and n not in _NOT_FROM_PYTHON]
            hint = f" (did you mean {', '.join(sorted(close))}?)" if close else ""
            raise OptionError(
                f"unknown option '{key}': cleave-compile has no --{name}{hint}")
        if value is None:
            continue
        if kind == "flag":
            if not isinstance(value, bool):
                raise OptionError(
                    f"option '{key}' is a flag: give True or False, not "
                    f"{value!r}")
            given[name] = value
        elif kind == "list":
            if isinstance(value, Mapping):
                items = [f"{k}={_format_value(v)}" for k, v in value.items()]
            elif isinstance(value, (str, bytes, os.PathLike)):
                items = [str(_format_value(value))]
            else:
                items = [str(_format_value(v)) for v in value]
            given[name] = items
        else:
            given[name] = _format_value(value)
    return given


class _ModelFile:
    """A model given as a path, bytes or an onnx.ModelProto, as a path
    (bytes and ModelProtos go to a temporary file for the compile)."""

    def __init__(self, model: ModelLike, name: Optional[str] = None):
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self.source_bytes: Optional[bytes] = None
        if isinstance(model, (str, os.PathLike)):
            self.path = os.fspath(model)
            return
        if isinstance(model, (bytes, bytearray, memoryview)):
            data = bytes(model)
        elif hasattr(model, "SerializeToString"):
            data = model.SerializeToString()
            graph_name = getattr(getattr(model, "graph", None), "name", "")
            name = name or (graph_name + ".onnx" if graph_name else None)
        else:
            raise OptionError(
                "model must be a path, bytes or an onnx.ModelProto, not "
                f"{type(model).__name__}")
        self.source_bytes = data
        self._tmp = tempfile.TemporaryDirectory(prefix="cleave-")
        safe = "".join(c if c.isalnum() or c in "._-" else "_"
                       for c in (name or "model.onnx"))
        self.path = os.path.join(self._tmp.name, safe)
        with open(self.path, "wb") as f:
            f.write(data)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "_ModelFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _print_messages(messages: str) -> None:
    if messages:
        sys.stderr.write(messages)
        sys.stderr.flush()


def compile(model: ModelLike, *, input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
            train: Optional[bool] = None, loss: Optional[str] = None,
            optimizer: Optional[str] = None, precision: Optional[str] = None,
            recompute: Optional[str] = None, target: Optional[str] = None,
            mesh: Optional[str] = None, **options: Any) -> "Plan":
    """Compiles an ONNX model (a path, bytes or an onnx.ModelProto) into a
    Plan, exactly as cleave-compile does. Every cleave-compile option is a
    keyword argument with its name (dashes as underscores): flags take
    True/False, repeatable options a list (or, for ``input_shapes`` and
    ``freeze_inputs``, a dict such as ``{"x": (8, 128)}``). Errors raise
    CompileError (or OptionError) with cleave-compile's message."""
    named = dict(input_shapes=input_shapes, train=train, loss=loss,
                 optimizer=optimizer, precision=precision,
                 recompute=recompute, target=target, mesh=mesh)
    named.update(options)
    given = _options(named)
    with _ModelFile(model) as f:
        plan_bytes, _, messages, report = _cleave.compile(f.path, given)
        _print_messages(messages)
        plan = Plan._from_bytes(plan_bytes, report=report)
        plan._source_bytes = f.source_bytes
        if f.source_bytes is None:
            plan._source_path = os.path.abspath(f.path)
    return plan


def import_onnx(model: ModelLike, *, phase: str = "import", **options: Any) -> str:
    """The model in the cleave dialect, as ``cleave-compile --emit=mlir
    --phase=PHASE`` prints it (``import`` by default; ``train-step``,
    ``partitioned``, ``prepared``, ``kernels`` and ``llvm`` go further and
    take the compile options that phase needs)."""
    given = _options(options)
    given.update({"emit": "mlir", "phase": phase, "o": "-"})
    with _ModelFile(model) as f:
        _, text, messages, _ = _cleave.compile(f.path, given)
        _print_messages(messages)
    return text


def run_passes(mlir: str, pipeline: str) -> str:
    """Runs a textual pass pipeline on MLIR text and returns the result as
    ``cleave-opt --pass-pipeline=...`` prints it. A pipeline without an
    anchor runs on the module: ``"cleave-prepare-pipeline"``."""
    return _cleave.run_passes(mlir, pipeline)


def load(path: Union[str, "os.PathLike[str]"]) -> "Plan":
    """Loads a plan file written by cleave-compile or Plan.save."""
    try:
        with open(os.fspath(path), "rb") as f:
            data = f.read()
    except OSError as e:
        raise RunError(f"cannot read plan '{os.fspath(path)}': {e.strerror}") from None
    plan = Plan._from_bytes(data)
    plan._path = os.path.abspath(os.fspath(path))
    return plan


def compile_torch(module: Any, example_inputs: Any, *,
                  input_names: Optional[Sequence[str]] = None,
                  output_names: Optional[Sequence[str]] = None,
                  opset_version: Optional[int] = None, exporter: str = "dynamo",
                  **options: Any) -> "Plan":
    """Exports a torch.nn.Module and compiles it with ``options`` as
    ``compile`` takes them. The export goes through torch.export and the
    dynamo exporter (``optimize=False``, opset 18 unless ``opset_version``
    says newer), so the plan's parameters are exactly the module's
    ``named_parameters()``, ties included; ``exporter="torchscript"`` asks
    for the TorchScript exporter (opset 17 by default) instead. A trainer of
    the plan gives its ``state_dict()`` under the module's own keys, as
    torch tensors, for ``module.load_state_dict``. torch is needed only for
    this function."""
    from . import _torch
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    data, state_map = _torch.export_module(
        module, example_inputs, input_names=input_names,
        output_names=output_names, opset_version=opset_version,
        exporter=exporter)
    plan = compile(data, **options)
    plan._torch_state = state_map
    return plan


class Plan:
    """A compiled plan: its inputs and outputs, statistics and report; run
    it with ``run`` or train it with ``Trainer``."""

    def __init__(self) -> None:
        raise TypeError("plans come from cleave.compile or cleave.load")

    @classmethod
    def _from_bytes(cls, data: bytes, report: str = "") -> "Plan":
        plan = cls.__new__(cls)
        plan._program = _cleave.Program(data)
        plan._report = report
        plan._stats = None
        plan._source_bytes = None
        plan._source_path = None
        plan._path = None
        plan._torch_state = None
        return plan

    @property
    def inputs(self) -> list[TensorDesc]:
        """The inputs (name, dtype, shape), in order."""
        return self._live().inputs

    @property
    def outputs(self) -> list[TensorDesc]:
        """The outputs (name, dtype, shape), in order."""
        return self._live().outputs

    @property
    def stats(self) -> dict[str, Any]:
        """Commands, kernels, GEMMs, collectives, arena and constant bytes,
        state bytes by kind and flops (of a pipelined plan: per stage)."""
        if self._stats is None:  # The plan never changes: count it once.
            self._stats = self._live().stats()
        return self._stats

    @property
    def world_size(self) -> int:
        """The ranks the plan runs on (its mesh's size)."""
        return self._live().world_size

    @property
    def is_training(self) -> bool:
        """Whether the plan is a training step (compiled with train=True)."""
        return self._live().is_training

    def metadata(self, key: str) -> Optional[str]:
        """A metadata entry of the plan (``flops``, ``source_model``, ...)."""
        return self._live().metadata(key)

    def report(self) -> str:
        """The step report cleave-compile --report prints (empty for a plan
        loaded from a file)."""
        return self._report

    def run(self, inputs: Union[Mapping[str, Any], Sequence[Any]], *,
            backend: str = "cpu") -> list[np.ndarray]:
        """Runs the plan once. ``inputs`` is a dict by name or a list in
        input order of numpy arrays or any DLPack-capable CPU tensor
        (PyTorch, JAX, ...); returns the outputs as numpy arrays."""
        ordered = _ordered(inputs, self.inputs, "input")
        arrays = [_as_array(a, d.name) for a, d in zip(ordered, self.inputs)]
        with _tensor_arguments("input"):
            return self._live().run(arrays, backend)

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the plan file (atomically), loadable by cleave-run and
        cleave.load."""
        path = os.fspath(path)
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                f.write(self._live().serialized())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise RunError(f"cannot write '{path}': {e.strerror}") from None

    def _live(self) -> "_cleave.Program":
        if self._program is None:
            raise ClosedError("the plan is closed")
        return self._program

    def close(self) -> None:
        """Frees the plan and its executor; using it afterwards raises
        ClosedError."""
        self._program = None

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._program is None:
            return "<cleave.Plan (closed)>"
        kind = "training" if self.is_training else "inference"
        return (f"<cleave.Plan {self.metadata('model') or ''} ({kind}, "
                f"{len(self.inputs)} inputs, {len(self.outputs)} outputs, "
                f"{self.world_size} rank{'s' if self.world_size != 1 else ''})>")


class _tensor_arguments:
    """Turns the extension's refusal of an argument it cannot read as a
    C-contiguous CPU tensor (a GPU tensor, an object array) into an
    InputError."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        if kind is TypeError and "incompatible function arguments" in str(error):
            raise InputError(
                f"every {self.what} must be a CPU array of a plan element type "
                "(numpy, or a DLPack tensor in host memory)") from None
        return False


def _as_array(value: Any, name: str) -> Any:
    """numpy arrays and DLPack-capable tensors pass through (the extension
    reads them through DLPack); Python numbers and lists become arrays."""
    if isinstance(value, np.ndarray) or hasattr(value, "__dlpack__"):
        return value
    try:
        return np.asarray(value)
    except Exception as e:  # noqa: BLE001 - any conversion failure
        raise InputError(f"{name}: cannot be read as an array: {e}") from None


def _ordered(values: Union[Mapping[str, Any], Sequence[Any]],
             descs: Sequence[TensorDesc], what: str) -> list[Any]:
    names = [d.name for d in descs]
    if isinstance(values, Mapping):
        unknown = [k for k in values if k not in names]
        if unknown:
            raise InputError(
                f"the plan has no {what} named '{unknown[0]}' (its {what}s: "
                f"{', '.join(repr(n) for n in names) or 'none'})")
        missing = [n for n in names if n not in values]
        if missing:
            raise InputError(f"{what} '{missing[0]}' is not given")
        return [values[n] for n in names]
    if not isinstance(values, Sequence) or isinstance(values, (str, bytes)):
        values = [values]
    if len(values) != len(names):
        raise InputError(f"the plan takes {len(names)} {what}s "
                         f"({', '.join(repr(n) for n in names)}), got {len(values)}")
    return list(values)


_Batch = Union[Mapping[str, Any], Sequence[Any]]


class Trainer:
    """Trains a training plan with the training loop of cleave-run: the
    same data order, learning-rate schedule, logs and checkpoints (a
    checkpoint written by one resumes in the other).

    ``ranks`` runs a plan compiled for a mesh on that many ranks as threads
    of this process (the local communicator; default: the mesh's size).
    With ``communicator="mpi"`` this process is one rank of an ``mpirun``
    or ``srun`` job (every process runs the same script); only rank 0
    prints logs, writes files and gets ``state_dict`` values. MPI is
    initialized by the first such trainer and finalized when it closes, so
    a process has one.
    Every other keyword argument is a cleave-run training option by name
    (``seed=1``, ``log_every=10``, ``checkpoint_dir="ckpt"``,
    ``save_every=100``, ``resume="ckpt"``, ``tokens="train.bin"``,
    ``synthetic=True``, ``data={"x": "x.npy"}`` or ``data={"x": array}``).
    The options take effect when training starts (the first ``fit`` or
    ``step``), with those given to ``fit`` added."""

    def __init__(self, plan: Plan, ranks: Optional[int] = None, *,
                 communicator: str = "local", backend: str = "cpu",
                 comm_timeout: float = 300.0, **options: Any):
        if not isinstance(plan, Plan):
            raise OptionError(f"Trainer needs a cleave.Plan, not {type(plan).__name__}")
        self.plan = plan
        self.ranks = ranks or 0
        self.communicator = communicator
        self.backend = backend
        self.comm_timeout = comm_timeout
        self._options = dict(options)
        self._check_options(self._options)
        self._trainer: Optional[_cleave.Trainer] = None
        self._closed = False
        self.history: list[dict[str, Any]] = []
        self._tmp: Optional[tempfile.TemporaryDirectory] = None

    # Options -----------------------------------------------------------

    @staticmethod
    def _check_options(options: Mapping[str, Any]) -> None:
        names = set(_cleave.train_option_names())
        for key in options:
            if key.replace("_", "-") not in names:
                raise OptionError(
                    f"unknown training option '{key}' (cleave-run has no "
                    f"--{key.replace('_', '-')}; its training options: "
                    f"{', '.join(sorted(n.replace('-', '_') for n in names))})")

    def _start(self, batches_given: bool) -> _cleave.Trainer:
        if self._closed:
            raise ClosedError("the trainer is closed")
        if self._trainer is not None:
            return self._trainer
        pairs: list[tuple[str, Optional[str]]] = []
        arrays: list[tuple[str, Any]] = []
        for key, value in self._options.items():
            name = key.replace("_", "-")
            if value is None or value is False:
                continue
            if value is True:
                pairs.append((name, None))
            elif name == "data":
                if not isinstance(value, Mapping):
                    raise OptionError(
                        "data must be a dict of data input name -> .npy path "
                        "or array (or pass an iterable of batches to fit)")
                for input_name, source in value.items():
                    if isinstance(source, (str, os.PathLike)):
                        pairs.append(("data", f"{input_name}={os.fspath(source)}"))
                    else:
                        arrays.append((input_name, np.ascontiguousarray(
                            _to_numpy(source, f"data '{input_name}'"))))
            else:
                pairs.append((name, _format_text(value)))
        if self.plan._source_bytes is not None and "onnx_model" not in self._options:
            # A plan compiled from bytes: its source model, for export_onnx.
            self._tmp = tempfile.TemporaryDirectory(prefix="cleave-")
            path = os.path.join(self._tmp.name, "source.onnx")
            with open(path, "wb") as f:
                f.write(self.plan._source_bytes)
            pairs.append(("onnx-model", path))
        self._trainer = _cleave.Trainer(
            self.plan._live(), self.ranks, pairs, arrays, batches_given,
            self.backend, self.comm_timeout, self.communicator)
        return self._trainer

    # Training ----------------------------------------------------------

    @property
    def data_inputs(self) -> list[TensorDesc]:
        """The plan's data inputs with their global shapes (a batch of all
        data-parallel ranks together)."""
        return self._started().data_inputs

    @property
    def rank(self) -> int:
        """This process's rank: 0, or its rank in an MPI job."""
        return self._started().rank

    @property
    def steps_done(self) -> int:
        """Steps trained so far (from the checkpoint's step when resumed)."""
        return self._trainer.steps_done if self._trainer else 0

    def _started(self) -> _cleave.Trainer:
        return self._start(batches_given=True)

    def step(self, batch: Optional[_Batch] = None) -> dict[str, Any]:
        """One training step on ``batch`` (a dict by data input name or a
        list in data input order; global tensors) or, without one, on the
        next batch of the trainer's data. Returns the step's metrics: step,
        loss, lr, grad_norm, tokens_per_s (or samples_per_s), step_ms,
        peak_bytes (and loss_scale, skipped with fp16)."""
        trainer = self._start(batches_given=batch is not None)
        arrays = None
        if batch is not None:
            descs = trainer.data_inputs
            arrays = [_as_array(a, f"data input '{d.name}'")
                      for a, d in zip(_ordered(batch, descs, "data input"), descs)]
        with _tensor_arguments("data input"):
            metrics = trainer.step(arrays)
        self.history.append(metrics)
        return metrics

    def fit(self, data: Optional[Union[Mapping[str, Any], Iterable[_Batch]]] = None, *,
            steps: int, callback: Optional[Callable[[dict[str, Any]], Optional[bool]]] = None,
            **options: Any) -> list[dict[str, Any]]:
        """Trains until ``steps`` steps are done (counted from the start, as
        cleave-run's --steps; a resumed trainer continues to it).

        ``data`` is a dict of data input name -> .npy path or array (samples
        along the first dimension, batches drawn as cleave-run draws them),
        or any iterable of batches (each a dict or a list of arrays); without
        it, the data given to the constructor (``tokens=``, ``synthetic=``,
        ...). Other keyword arguments are training options as in the
        constructor (``log_every``, ``checkpoint_dir``, ``save_every``,
        ``resume``, ``log_json``, ...), before training starts.
        ``callback(metrics)`` runs after every step; returning False stops.
        Returns the metrics of the steps run."""
        batches: Optional[Iterator[_Batch]] = None
        if data is not None:
            if isinstance(data, Mapping):
                options["data"] = data
            else:
                batches = iter(data)
        if options:
            if self._trainer is not None:
                raise OptionError(
                    "training has started: give the options "
                    f"({', '.join(options)}) to the first fit or to the "
                    "constructor")
            self._check_options(options)
            self._options.update(options)
        trainer = self._start(batches_given=batches is not None)
        trainer.set_total_steps(steps)
        run: list[dict[str, Any]] = []
        while trainer.steps_done < steps:
            if batches is not None:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                metrics = self.step(batch)
            else:
                metrics = trainer.step(None)
                self.history.append(metrics)
            run.append(metrics)
            if callback is not None and callback(metrics) is False:
                break
        trainer.finish()
        return run

    # State -------------------------------------------------------------

    def save_checkpoint(self, directory: Union[str, "os.PathLike[str]"]) -> str:
        """Saves a checkpoint as cleave-run's --checkpoint-dir does
        (DIR/step-N, resumable by either); returns its path."""
        return self._started().save_checkpoint(os.fspath(directory))

    def state_dict(self, *, optimizer: bool = False) -> dict[str, Any]:
        """The parameters and buffers (with ``optimizer=True``, the
        optimizer states too) as numpy arrays, by their names in the ONNX
        model. For a plan from ``compile_torch``, the module's own
        ``state_dict`` instead: every key of the module (ties and untrained
        buffers included) as a torch tensor, ready for
        ``module.load_state_dict``; ``optimizer=True`` adds the optimizer
        states under Cleave's names."""
        states = self._started().state_dict()
        result = {name: array for name, (kind, array) in states.items()
                  if optimizer or kind != "optimizer"}
        torch_state = self.plan._torch_state
        if torch_state is None:
            return result
        trained = {name: array for name, (kind, array) in states.items()
                   if kind != "optimizer"}
        mapped: dict[str, Any] = torch_state.state_dict(trained)
        if optimizer:
            import torch
            mapped.update({name: torch.from_numpy(np.array(array, copy=True))
                           for name, (kind, array) in states.items()
                           if kind == "optimizer"})
        return mapped

    def export_onnx(self, path: Union[str, "os.PathLike[str]"], *,
                    source_model: Optional[str] = None) -> None:
        """Writes the source ONNX model with the trained parameters."""
        trainer = self._started()
        source = source_model or self._options.get("onnx_model")
        if source is None and self._tmp is not None:
            source = os.path.join(self._tmp.name, "source.onnx")
        trainer.export(safetensors="", onnx=os.fspath(path),
                       source_model=os.fspath(source) if source else "")

    def export_safetensors(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the trained parameters and buffers as safetensors."""
        self._started().export(safetensors=os.fspath(path), onnx="",
                               source_model="")

    def close(self) -> None:
        """Stops the ranks and frees the executors."""
        if self._trainer is not None:
            self._trainer.close()
        self._trainer = None
        self._closed = True
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _to_numpy(value: Any, name: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except Exception as e:  # noqa: BLE001
            raise InputError(f"{name}: cannot be read through DLPack: {e}") from None
    return np.asarray(value)
