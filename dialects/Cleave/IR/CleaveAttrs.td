//===- CleaveAttrs.td - Every attribute of the dialect --*- tablegen -*-===//
//
// The dialect's attributes, for one attribute parser and printer: the
// shardings (CleaveSharding.td) and the enumerated metadata values below.
// Metadata attributes are discardable `cleave.*` attributes on ops and on
// function arguments and results; CleaveMetadata.cpp lists every name with
// the kind of value it holds, and the dialect verifies them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_CLEAVEATTRS_TD
#define CLEAVE_IR_CLEAVEATTRS_TD

include "Cleave/IR/CleaveSharding.td"
include "Cleave/IR/CleaveMetadataEnums.td"

def Cleave_StateKindAttr : EnumAttr<Cleave_Dialect, Cleave_StateKind, "state"> {
  let summary = "What a state argument holds (`cleave.state`)";
  let description = [{
    On a training step's argument that the step updates (a result's
    `cleave.updates` names it): `parameter` (trained, initialized from
    `cleave.initial_value`), `optimizer_state` (a slot of a parameter's
    optimizer, zeroed unless it has an initial value) or `buffer` (updated
    by the forward pass, such as BatchNorm's running statistics).

    ```mlir
    func.func @main(%w: tensor<4xf32> {cleave.name = "w",
                                       cleave.state = #cleave.state<parameter>})
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Cleave_RoleAttr : EnumAttr<Cleave_Dialect, Cleave_Role, "role"> {
  let summary = "What an input or output means (`cleave.role`)";
  let description = [{
    On a training step's arguments: `data` (a batch input), `lr` (the
    learning rate), `step` (the step number). On its results: `loss`,
    `grad_norm`, `loss_scale` and `found_inf` (dynamic loss scaling),
    `gradient` (a returned gradient), `probe` (an activation probe),
    `metric` (a figure the training loop logs each step under its name,
    such as `moe.expert_load`).

    ```mlir
    -> (tensor<f32> {cleave.name = "loss", cleave.role = #cleave.role<loss>})
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Cleave_InitializerKindAttr
    : EnumAttr<Cleave_Dialect, Cleave_InitializerKind, "initializer_kind"> {
  let summary = "What an imported initializer becomes (`cleave.initializer_kind`)";
  let description = [{
    On the `cleave.constant` of an ONNX initializer when the model carries
    training information: `parameter` (trained), `buffer` (updated by the
    forward pass) or `constant` (frozen).

    ```mlir
    %w = cleave.constant {cleave.initializer = "w",
        cleave.initializer_kind = #cleave.initializer_kind<parameter>}
        dense<0.5> : tensor<4xf32>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // CLEAVE_IR_CLEAVEATTRS_TD
