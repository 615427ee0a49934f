//===- Passes.td - Cleave training passes -----------------*- tablegen -*-===//

#ifndef CLEAVE_TRANSFORMS_TRAINING_PASSES_TD
#define CLEAVE_TRANSFORMS_TRAINING_PASSES_TD

include "mlir/Pass/PassBase.td"

def BuildTrainStepPass : Pass<"cleave-build-train-step", "::mlir::ModuleOp"> {
  let summary = "Turn a forward program into one training step";
  let description = [{
    Rewrites `@main` (a forward model whose float initializers are
    `cleave.constant`s tagged `cleave.initializer`) into one training step:

    ```
    @main(params..., optimizer_state..., batch..., lr, step)
        -> (params'..., optimizer_state'..., loss, grad_norm)
    ```

    Trainable parameters are the float initializers whose names match
    `trainable` and do not match `frozen`. The loss is the model's scalar
    output, or is added: `cross_entropy:<logits>,<labels>[,<ignore_index>]`
    (mean over the labels that are not ignored; the labels become an input)
    or `mse:<output>,<target>`. Gradients come from reverse-mode autodiff;
    the gradient norm is global over all parameters and, with
    `clip-grad-norm`, bounds the update. The optimizer update (SGD,
    momentum, Nesterov, Adam, AdamW) is emitted as cleave ops; `lr` and
    `step` are 0-d f32 inputs the runtime fills every step (the learning
    rate schedule is the runtime's).

    Arguments and results carry the attributes the plan builder reads:
    `cleave.state` ("parameter" or "optimizer_state"), `cleave.parameter`,
    `cleave.slot`, `cleave.initial_value` (a parameter's initial value),
    `cleave.role` ("lr", "step", "loss", "grad_norm", "data") and, on
    results, `cleave.updates` (the index of the state argument a result
    replaces).

    ```mlir
    // Before: a linear model with an MSE loss added by the driver.
    func.func @main(%x: tensor<8x4xf32>) -> tensor<8x2xf32> {
      %w = cleave.constant {cleave.initializer = "w"} dense<...> : tensor<4x2xf32>
      %y = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] ...
      return %y : tensor<8x2xf32>
    }
    // After (--cleave-build-train-step="loss=mse:y,target optimizer=sgd"):
    func.func @main(%w: tensor<4x2xf32> {cleave.state = "parameter", ...},
                    %x: tensor<8x4xf32>, %target: tensor<8x2xf32>,
                    %lr: tensor<f32>, %step: tensor<f32>)
        -> (tensor<4x2xf32> {cleave.updates = 0}, tensor<f32>, tensor<f32>)
    ```
  }];
  let options = [
    Option<"trainable", "trainable", "std::string", "\".*\"",
           "Regex of the initializer names to train">,
    Option<"frozen", "frozen", "std::string", "\"\"",
           "Regex of initializer names to keep fixed (wins over trainable)">,
    Option<"loss", "loss", "std::string", "\"\"",
           "cross_entropy:<logits>,<labels>[,<ignore_index>] | "
           "mse:<output>,<target> | empty: the model's scalar output">,
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"",
           "sgd | momentum | nesterov | adam | adamw">,
    Option<"momentum", "momentum", "double", "0.9", "Momentum factor">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"epsilon", "epsilon", "double", "1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.0",
           "L2 penalty (sgd, momentum, nesterov, adam) or decoupled weight "
           "decay (adamw)">,
    Option<"clipGradNorm", "clip-grad-norm", "double", "0.0",
           "Clip gradients to this global norm (0: no clipping)">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // CLEAVE_TRANSFORMS_TRAINING_PASSES_TD
