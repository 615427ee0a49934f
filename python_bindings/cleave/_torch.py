"""PyTorch modules in and out of Cleave: the export behind
``cleave.compile_torch`` and the mapping that gives a trainer's state back
under the module's own ``state_dict`` keys. torch is imported only when one
of these runs."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ._cleave import OptionError

#: The opset the dynamo exporter writes by default (the oldest it supports).
DEFAULT_OPSET = 18
#: The TorchScript exporter's default opset, for ``exporter="torchscript"``.
TORCHSCRIPT_OPSET = 17


@dataclass
class TorchStateMap:
    """How a module's ``state_dict`` keys map to the exported model's
    initializers. Tied parameters (GPT-2's embedding and LM head) are one
    initializer under one of their names; every key of the tie maps to it.
    ``initial`` holds the module's state at export, which fills the keys
    that are not trained states of the plan (buffers the exporter made
    constants, parameters of unused submodules), so that the dictionary a
    trainer returns is complete for ``load_state_dict``."""

    onnx_name: dict[str, str] = field(default_factory=dict)
    initial: dict[str, Any] = field(default_factory=dict)

    def state_dict(self, states: Mapping[str, np.ndarray]) -> dict[str, Any]:
        import torch
        result = {}
        for key, tensor in self.initial.items():
            name = self.onnx_name.get(key)
            if name is not None and name in states:
                value = torch.from_numpy(np.array(states[name], copy=True))
                result[key] = value.to(tensor.dtype).reshape(tensor.shape)
            else:
                result[key] = tensor.clone()
        return result


def _state_map(module: Any, initializer_names: set[str]) -> TorchStateMap:
    """Maps every ``state_dict`` key of `module` to the initializer that
    holds its tensor (by tensor identity, so ties resolve to the one name
    the exporter kept)."""
    state = module.state_dict(keep_vars=True)
    by_tensor: dict[int, list[str]] = {}
    for key, tensor in state.items():
        by_tensor.setdefault(id(tensor), []).append(key)
    mapping = TorchStateMap()
    for key, tensor in state.items():
        mapping.initial[key] = tensor.detach().clone()
        kept = [k for k in by_tensor[id(tensor)] if k in initializer_names]
        if kept:
            mapping.onnx_name[key] = kept[0]
    return mapping


def _optimize_keeping_state(model: Any, module: Any) -> None:
    """Runs the optimizer that ``torch.onnx.export(optimize=True)`` runs
    (constant folding, Split for SplitToSequence, its rewrite rules) with
    the module's parameters and buffers shown to it as graph inputs: it
    folds what only shapes and constants compute, but never a parameter
    into a constant, and never merges equal parameters or drops a zero
    bias, so every state stays an initializer of its own."""
    import onnxscript.optimizer
    graph = model.graph
    keys = set(module.state_dict().keys())
    hidden = []
    for name in sorted(n for n in graph.initializers if n in keys):
        value = graph.initializers.pop(name)
        hidden.append((value, value.const_value))
        value.const_value = None
        graph.inputs.append(value)
    try:
        onnxscript.optimizer.optimize_ir(model)
    finally:
        for value, tensor in hidden:
            graph.inputs.remove(value)
            value.const_value = tensor
            graph.register_initializer(value)


def export_module(module: Any, example_inputs: Sequence[Any], *,
                  input_names: Optional[Sequence[str]],
                  output_names: Optional[Sequence[str]],
                  opset_version: Optional[int], exporter: str
                  ) -> tuple[bytes, TorchStateMap]:
    """Exports `module` to ONNX bytes. The dynamo exporter (torch.export)
    runs with ``optimize=False``: its optimizer folds parameters into new
    constants (transposed copies, sliced tables) and merges or drops equal
    ones, after which the file no longer says what PyTorch trains. The
    TorchScript exporter is there only when asked for (it no longer covers
    current transformers models)."""
    try:
        import torch
    except ImportError:
        raise OptionError("compile_torch needs PyTorch (pip install torch)") from None
    if exporter not in ("dynamo", "torchscript"):
        raise OptionError(f"exporter must be 'dynamo' or 'torchscript', not '{exporter}'")
    args = tuple(example_inputs)
    was_training = module.training
    module.eval()  # Dropout off while tracing; Cleave's training step adds it back.
    try:
        with tempfile.TemporaryDirectory(prefix="cleave-torch-") as tmp:
            path = os.path.join(tmp, type(module).__name__ + ".onnx")
            if exporter == "dynamo":
                opset = opset_version or DEFAULT_OPSET
                if opset < DEFAULT_OPSET:
                    raise OptionError(
                        f"the dynamo exporter writes opset {DEFAULT_OPSET} or newer, "
                        f"not {opset}; pass exporter='torchscript' for older opsets")
                program = torch.onnx.export(
                    module, args, dynamo=True, optimize=False, opset_version=opset,
                    input_names=input_names, output_names=output_names, verbose=False)
                if program is None:
                    raise OptionError("torch.onnx.export returned no ONNX program")
                _optimize_keeping_state(program.model, module)
                for node in program.model.graph.all_nodes():
                    # Source lines of this machine: not part of the model.
                    node.metadata_props.pop("pkg.torch.onnx.stack_trace", None)
                program.save(path, external_data=False)
            else:
                torch.onnx.export(module, args, path, dynamo=False,
                                  opset_version=opset_version or TORCHSCRIPT_OPSET,
                                  input_names=input_names, output_names=output_names)
            with open(path, "rb") as f:
                data = f.read()
    finally:
        module.train(was_training)
    import onnx
    model = onnx.load_model_from_string(data)
    return data, _state_map(module, {t.name for t in model.graph.initializer})
