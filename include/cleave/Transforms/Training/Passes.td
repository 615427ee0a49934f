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
    `trainable` and do not match `frozen`; with `trainable` empty (the
    default), every float initializer of more than one element (a
    single-element initializer is an exporter's constant, such as a `Pow`
    exponent or an attention scale, unless `trainable` names it).
    `no-decay` exempts parameters from weight decay (biases and norms in LLM
    recipes). `untie` gives each use of a matching initializer a parameter of
    its own (`<name>`, then `<name>.untied1`, ...): exporters merge
    initializers that hold equal values (LayerNorm weights of ones, zero
    biases), which would otherwise train as one tied parameter; such an
    initializer, used by several ops of one kind, gets a warning.
    With `return-gradients`, the step also returns each parameter's
    gradient (before clipping), named `grad.<name>`.

    Results of `@main` with a `cleave.updates_initializer = "<name>"`
    attribute (BatchNormalization in training mode, see the importer's
    `batchNormTraining`) give a new value of that initializer: it becomes a
    state argument of kind "buffer" (never trained), updated by the step. The loss is the model's scalar
    output, or is added: `cross_entropy:<logits>,<labels>[,<ignore_index>]`
    (mean over the labels that are not ignored; the labels become an input)
    or `mse:<output>,<target>`. Gradients come from reverse-mode autodiff;
    the gradient norm is global over all parameters and, with
    `clip-grad-norm`, bounds the update. The optimizer update (SGD,
    momentum, Nesterov, Adam, AdamW) is emitted as cleave ops; `lr` and
    `step` are 0-d f32 inputs the runtime fills every step (the learning
    rate schedule is the runtime's).

    With `loss-scale=dynamic`, two more optimizer-state scalars of the
    pseudo parameter `__trainer__` hold the scale (slot `loss_scale_log2`:
    the scale is `loss-scale-init * 2^value`, so a zeroed state is the
    initial scale) and the steps since the last overflow (`good_steps`).
    The backward pass is seeded with the scale; gradients are divided by it
    in f32; a step whose gradients are not all finite (the sum of their
    squares is not finite) leaves parameters and optimizer state unchanged
    and halves the scale; `loss-scale-window` finite steps in a row double
    it. Two more results report `loss_scale` (the scale for the next step)
    and `found_inf` (1 for a skipped step, else 0).

    Arguments and results carry the attributes the plan builder reads:
    `cleave.state` (`#cleave.state<parameter>`, `<optimizer_state>` or
    `<buffer>`),
    `cleave.parameter`,
    `cleave.slot`, `cleave.initial_value` (a parameter's initial value),
    `cleave.role` (`#cleave.role<lr>`, `<step>`, `<loss>`, `<grad_norm>`,
    `<data>`) and, on
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
    func.func @main(%w: tensor<4x2xf32> {cleave.state = #cleave.state<parameter>, ...},
                    %x: tensor<8x4xf32>, %target: tensor<8x2xf32>,
                    %lr: tensor<f32>, %step: tensor<f32>)
        -> (tensor<4x2xf32> {cleave.updates = 0}, tensor<f32>, tensor<f32>)
    ```
  }];
  let options = [
    Option<"trainable", "trainable", "std::string", "\"\"",
           "Regex of the initializer names to train (empty: every float "
           "initializer of more than one element)">,
    Option<"noDecay", "no-decay", "std::string", "\"\"",
           "Regex of parameter names exempt from weight decay">,
    Option<"untie", "untie", "std::string", "\"\"",
           "Regex of initializers to train as one parameter per use">,
    Option<"returnGradients", "return-gradients", "bool", "false",
           "Also return every parameter's gradient as `grad.<name>`">,
    Option<"dataParallel", "data-parallel", "int64_t", "1",
           "Data parallelism over N ranks: the program is the per-rank "
           "step (compiled at the per-rank batch); a cleave.mesh @mesh with "
           "axis dp=N is added, data inputs are sharded over dp on dim 0, "
           "and every gradient and the loss are all-reduced (avg) over dp">,
    Option<"sync", "sync", "std::string", "\"step\"",
           "How data-parallel replicas (data-parallel > 1) agree: step "
           "(every gradient all-reduced each step), local:<H> (local SGD: "
           "no reduction in the step; --cleave-build-local-sgd then adds "
           "the function @sync, run after every H-th step), delayed (each step applies the "
           "previous step's averaged gradients, whose all-reduce overlaps "
           "this step's forward and backward; step 0 applies zeros)">,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "Split the batch into this many microbatches (rows k, k + m, "
           "...): each runs forward and backward in turn and its gradients "
           "are added to the previous ones', so only one microbatch's "
           "activations are live at a time; each microbatch's loss is its "
           "sum over the whole batch's count (labels not ignored, elements), "
           "so the step computes the unsplit batch's loss and gradients">,
    Option<"pipelineRanks", "pipeline-ranks", "int64_t", "1",
           "Pipeline parallelism over this many ranks (mesh axis pp): the "
           "forward program is cut into pipeline-ranks x (the schedule's "
           "chunks per rank) stages (virtual stage s on rank s mod "
           "pipeline-ranks), each "
           "differentiated on its own, and the microbatches' forward and "
           "backward steps are emitted in the order of `schedule`; every "
           "op carries `cleave.pipeline_rank`, and values crossing ranks go "
           "through cleave.pipeline_transfer / cleave.pipeline_sum "
           "(cleave::splitPipelineRanks makes one program per rank)">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "gpipe | 1f1b | interleaved:<chunks> | zero-bubble">,
    Option<"stageBoundaries", "stage-boundaries", "std::string", "\"\"",
           "Comma-separated ONNX node names after which stages end "
           "(default: balanced cuts between layers)">,
    Option<"frozen", "frozen", "std::string", "\"\"",
           "Regex of initializer names to keep fixed (wins over trainable)">,
    Option<"loss", "loss", "std::string", "\"\"",
           "cross_entropy:<logits>,<labels>[,<ignore_index>] | "
           "mse:<output>,<target> | empty: the model's scalar output">,
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"",
           "sgd | momentum | nesterov | adam | adamw">,
    Option<"momentum", "momentum", "::cleave::ExactDouble", "0.9", "Momentum factor">,
    Option<"beta1", "beta1", "::cleave::ExactDouble", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "::cleave::ExactDouble", "0.999", "Adam beta2">,
    Option<"epsilon", "epsilon", "::cleave::ExactDouble", "1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "::cleave::ExactDouble", "0.0",
           "L2 penalty (sgd, momentum, nesterov, adam) or decoupled weight "
           "decay (adamw)">,
    Option<"clipGradNorm", "clip-grad-norm", "::cleave::ExactDouble", "0.0",
           "Clip gradients to this global norm (0: no clipping)">,
    Option<"moeAuxLoss", "moe-aux-loss", "::cleave::ExactDouble", "0.0",
           "Adds this times each mixture-of-experts router's load-balancing "
           "loss (Switch/GShard: E * sum_e f_e P_e) to the loss">,
    Option<"moeZLoss", "moe-z-loss", "::cleave::ExactDouble", "0.0",
           "Adds this times each router's z-loss (the mean over tokens of "
           "logsumexp(logits)^2) to the loss">,
    Option<"lossScale", "loss-scale", "std::string", "\"none\"",
           "none | dynamic | <number> (a static scale): the backward pass "
           "is seeded with the scaled loss and gradients are unscaled in f32 "
           "(for fp16 mixed precision)">,
    Option<"lossScaleInit", "loss-scale-init", "::cleave::ExactDouble", "65536.0",
           "Initial scale of dynamic loss scaling">,
    Option<"lossScaleWindow", "loss-scale-window", "int64_t", "2000",
           "Dynamic loss scaling doubles the scale after this many steps "
           "without overflow">,
    Option<"markFp32Ops", "mark-fp32-ops", "bool", "false",
           "Tag the ops built for the loss, gradient norm, clipping, loss "
           "scaling and optimizer update with `cleave.fp32`, so that "
           "--cleave-apply-mixed-precision keeps them in f32">,
    Option<"markGradients", "mark-gradients", "bool", "false",
           "Tag the op that computes each parameter's gradient with "
           "`cleave.gradient_of = \"<parameter>\"`, for sharding policies "
           "(ZeRO) that lay gradients out">,
    Option<"markBackward", "mark-backward", "bool", "false",
           "Tag the ops of the backward pass (built by autodiff) with "
           "`cleave.backward`, so that --cleave-insert-recompute knows which "
           "forward values the backward pass uses">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect",
                           "::mlir::func::FuncDialect"];
}

def ApplyMixedPrecisionPass
    : Pass<"cleave-apply-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Compute contractions and activations in bf16/fp16";
  let description = [{
    Run after `--cleave-build-train-step` (built with `mark-fp32-ops=true`).
    With `precision=bf16` or `fp16`:

    - `cleave.contract` on f32 operands converts them down and keeps an f32
      result: products accumulate in f32 (a mixed bf16/f16 -> f32 GEMM);
    - elementwise ops (unary, binary, compare, select) and shape-only data
      movement on activations compute in the low type when an operand is
      low or a contraction result; f32 operands (master parameters) are
      converted down where used;
    - softmax, log_softmax, layer_norm, reductions, gathers/scatters and any
      other op compute in f32 (low operands are converted up);
    - ops tagged `cleave.fp32` (the loss, gradient norm, clipping, loss
      scaling and optimizer update) and the elementwise ops feeding them
      stay f32; parameters and optimizer state remain f32.

    Function results keep their types. `precision=fp32` only removes the
    tags.

    ```mlir
    // Before:
    %y = cleave.contract %x, %w ... : tensor<8x4xf32>, tensor<4x2xf32> -> tensor<8x2xf32>
    %z = cleave.binary add %y, %b : tensor<8x2xf32>
    // After (precision=bf16):
    %xl = cleave.convert %x : tensor<8x4xf32> -> tensor<8x4xbf16>
    %wl = cleave.convert %w : tensor<4x2xf32> -> tensor<4x2xbf16>
    %y = cleave.contract %xl, %wl ... : tensor<8x4xbf16>, tensor<4x2xbf16> -> tensor<8x2xf32>
    %yl = cleave.convert %y : tensor<8x2xf32> -> tensor<8x2xbf16>
    %bl = cleave.convert %b : tensor<8x2xf32> -> tensor<8x2xbf16>
    %z = cleave.binary add %yl, %bl : tensor<8x2xbf16>
    ```
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"fp32\"",
           "fp32 | bf16 | fp16">,
    Option<"lowPrecisionGradients", "low-precision-gradients", "bool",
           "false",
           "Round the gradients of the parameters read in low precision to "
           "the low type where autodiff finishes them (tagged "
           "cleave.gradient_of), so that they are reduced and stored in 2 "
           "bytes">,
    Option<"lowPrecisionParameters", "low-precision-parameters", "bool",
           "false",
           "Read every f32 parameter (norms, biases, embedding tables too) "
           "through its low-precision copy; only the optimizer reads the f32 "
           "masters">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect",
                           "::mlir::func::FuncDialect"];
}

def AssignPipelineStagesPass
    : Pass<"cleave-assign-pipeline-stages", "::mlir::ModuleOp"> {
  let summary = "Cut the forward program into balanced pipeline stages";
  let description = [{
    Gives every op of `@main` (a forward program) a `cleave.stage` i64
    attribute: the program, in order, is cut into `stages` contiguous stages.
    Cuts fall between layers (the layer rule of --cleave-insert-recompute:
    ONNX node name prefixes such as `h3` or `/model/layers.11`; between any
    two ops when no op has a layer) and are chosen to minimize the cost of
    the largest stage (CostOpInterface flops), then the activation bytes
    that cross the cuts (what a stage sends the next, and receives back as
    gradients). With `boundaries`, the stages end after the last op of each
    named ONNX node instead (one fewer name than stages). A parameter or
    constant takes the stage of its first reader; one read by several
    stages (tied embedding and output head) is reported.

    Each stage is reported as a remark: its ops, its share of the flops, its
    parameter bytes and the bytes it sends on; then the balance (largest
    stage over the mean).
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "2", "Pipeline stages">,
    Option<"boundaries", "boundaries", "std::string", "\"\"",
           "Comma-separated ONNX node names: each stage but the last ends "
           "after the last op of its node">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect",
                           "::mlir::func::FuncDialect"];
}

def InsertRecomputePass
    : Pass<"cleave-insert-recompute", "::mlir::ModuleOp"> {
  let summary = "Activation recomputation (checkpointing) by policy or budget";
  let description = [{
    Run after `--cleave-build-train-step` built with `mark-backward=true`
    (and after `--cleave-apply-mixed-precision`, if any). The ops tagged
    `cleave.backward` (and any op between the first and the last of them)
    are the backward pass; the ops before it are the forward pass (loss
    included). A forward value a backward op uses is a *saved activation*:
    it lives from the forward to the backward pass. The pass decides which
    saved activations to keep; each one it drops is recomputed: its forward
    producer chain (up to kept values, parameters, inputs and constants) is
    cloned with an IRMapping right before its first backward user, so the
    forward value dies early. Clones are the same ops on the same values, so
    results are bitwise equal. They carry `cleave.recompute` (which also keeps
    CSE from merging them back into the forward ops; compileToPlan drops it
    after preparation), and forward ops left without users are erased.

    Layers: an op's layer is its `cleave.layer` string attribute, else the
    prefix of its location's name (NameLoc, the ONNX node name) up to and
    including the first run of digits that follows a letter, `.` or `_` and is
    followed by `.` or `/`: `h3.qkv` -> `h3`, `/h.3/attn/MatMul` -> `/h.3`,
    `/model/layers.11/mlp/fc` -> `/model/layers.11`. A named op without such a
    prefix (`embed_tokens`, `ln_f`, `lm_head`) is in no layer; an op without
    a name takes the layer of the forward op before it. When no forward op
    has a layer, the forward pass is cut into ceil(sqrt(n)) runs of
    consecutive ops of about equal count, and those are the layers. A
    *boundary* value is one used by a forward op of another layer (a layer's
    inputs, e.g. the residual stream), or made by an op in no layer.

    Policies:
    - `none`: keep every saved activation (only the statistics are computed);
    - `full`: keep only boundary values; recompute everything else of a
      layer before its first backward use;
    - `selective` (Korthikanti et al.): keep boundaries and the results of
      expensive ops (contractions, convolutions, gathers, scatters, ...);
      recompute the cheap ones (elementwise, broadcast, convert, reshape,
      transpose, slice, concat, pad, softmax, log-softmax, layer norm,
      reductions);
    - `budget:<bytes>`: keep saved activations of at most `<bytes>` in total
      at the least recompute cost: starting from `none`, repeatedly drop
      the kept saved activation with the most bytes freed per recomputed
      flop (CostOpInterface), until the rest fits (a warning says when no
      choice fits).

    Reshapes alias their operand, so a reshape is kept or recomputed with the
    value it reshapes, and bytes count once per buffer. The module gets a
    `cleave.recompute_stats` dictionary: `policy`, `saved_bytes_before`,
    `saved_bytes_after`, `recompute_flops` (flops of the clones),
    `extra_flops` (after minus before, erased dead ops included) and
    `recomputed_ops`; cleave-compile prints it with `--print-stats`.

    ```mlir
    // Before (policy=full): %h is saved for the backward mul.
    %h = cleave.unary tanh %x loc("h0.act")
    %y = cleave.binary mul %h, %h loc("h0.sq")
    ...
    %g = cleave.binary mul %dy, %h {cleave.backward}
    // After: %h dies after %y; a clone feeds the backward op.
    %h2 = cleave.unary tanh %x {cleave.recompute}
    %g = cleave.binary mul %dy, %h2 {cleave.backward}
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", "\"none\"",
           "none | selective | full | budget:<bytes>">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect",
                           "::mlir::func::FuncDialect"];
}

def MarkIndexRangesPass
    : Pass<"cleave-mark-index-ranges", "::mlir::ModuleOp"> {
  let summary = "Record the values each integer input of @main may hold";
  let description = [{
    Marks each integer argument of `@main` that a `cleave.gather` reads as
    indices (a token embedding's ids) with `cleave.valid_range = [-rows,
    rows)` of the smallest table it indexes. The plan records it and the
    training loop checks the data it feeds: a gather reads zeros for an
    index out of range, so such data would train on nothing. Run it on the
    imported program, whose shapes are the global ones.

    ```mlir
    // Before:
    func.func @main(%ids: tensor<4x8xi64>, %wte: tensor<50x16xf32>) ...
      %e = cleave.gather %wte, %ids {axis = 0}
    // After:
    func.func @main(%ids: tensor<4x8xi64> {cleave.valid_range = array<i64: -50, 50>}, ...
    ```
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect",
                           "::mlir::func::FuncDialect"];
}

def AddActivationProbesPass
    : Pass<"cleave-add-activation-probes", "::mlir::ModuleOp"> {
  let summary = "Return chosen forward activations of a training step";
  let description = [{
    Returns from `@main` (a training step built with `mark-backward=true`)
    the output of every ONNX node whose name matches the whole regular
    expression `pattern`: the last forward op located at that node with one
    float tensor result. The outputs are named `probe.<NNNN>.<node>` in
    program order and carry `cleave.role = #cleave.role<probe>`, so that a
    run's last step writes them (`cleave-run --output-dir`,
    `tools/cleave-parity`).
    An empty pattern, or one that matches no node, adds nothing; one that
    is not a valid regular expression is an error.

    ```mlir
    // Before (pattern=h0.fc):
    %h = cleave.contract ... loc("h0.fc")
    return %loss, ... : ...
    // After:
    return %loss, ..., %h : ...   // result named probe.0000.h0.fc
    ```
  }];
  let options = [
    Option<"pattern", "pattern", "std::string", "\"\"",
           "Regular expression over ONNX node names">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect",
                           "::mlir::func::FuncDialect"];
}

def DropAttributePass : Pass<"cleave-drop-attribute", "::mlir::ModuleOp"> {
  let summary = "Remove a discardable attribute from every op";
  let description = [{
    Removes the discardable attribute `name` from every op of the module
    (not from the module itself, nor from the ops of nested modules, which
    are programs of their own: nest the pass to reach them). The phase pipelines use it to drop
    tags whose work is done: `cleave.backward` after recompute (so that CSE
    treats forward and backward ops alike) and `cleave.recompute` after
    preparation (so that it does not split identical kernels).

    ```mlir
    // Before (name=cleave.backward):
    %g = cleave.binary mul %dy, %h {cleave.backward}
    // After:
    %g = cleave.binary mul %dy, %h
    ```
  }];
  let options = [
    Option<"name", "name", "std::string", "\"\"", "The attribute's name">,
  ];
}

def BuildLocalSGDPass : Pass<"cleave-build-local-sgd", "::mlir::ModuleOp"> {
  let summary = "Add local SGD's or DiLoCo's averaging function @sync";
  let description = [{
    For a data-parallel training step built with `sync=local:<H>` (whose
    `@main` reduces nothing over the mesh axis `dp`), marks every state of
    `@main` as varying over dp (`cleave.varying = ["dp"]`: each replica
    trains its own copy) and adds the function `@sync`, which the plan runs
    after every `every`-th step. Plain local SGD averages each parameter
    over dp (all_reduce avg). With `outer-optimizer=nesterov` it takes
    DiLoCo's outer step instead: the step gains two states per parameter,
    the global copy and the outer momentum, split over dp along the first
    dimension dp divides (ZeRO-1 style); `@sync` reduce-scatters the
    average, takes outer gradient = global copy - average, applies Nesterov
    momentum to the global copy and all-gathers it into the parameter.
    `@main` gets `cleave.sync_every = every`.

    ```mlir
    // Before (every=4):
    func.func @main(%w: tensor<4x2xf32> {cleave.state = "parameter"}, ...)
    // After:
    func.func @main(%w: tensor<4x2xf32> {cleave.state = "parameter",
                                         cleave.varying = ["dp"]}, ...)
        attributes {cleave.sync_every = 4 : i64}
    func.func @sync(%w: tensor<4x2xf32> ...) -> tensor<4x2xf32> {
      %a = cleave.all_reduce avg %w over @mesh ["dp"] ...
      return %a
    }
    ```
  }];
  let options = [
    Option<"every", "every", "int64_t", "0",
           "The steps between averagings (H of local:<H>, 1 to 1000000)">,
    Option<"outerOptimizer", "outer-optimizer", "std::string", "\"\"",
           "Empty (plain averaging) or nesterov (DiLoCo: outer gradient = "
           "global copy - average, Nesterov momentum on the global copy, "
           "sharded over dp)">,
    Option<"outerLr", "outer-lr", "::cleave::ExactDouble", "0.7",
           "DiLoCo's outer learning rate">,
    Option<"outerMomentum", "outer-momentum", "::cleave::ExactDouble", "0.9",
           "DiLoCo's outer Nesterov momentum">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect",
                           "::mlir::func::FuncDialect"];
}

def SplitSyncEntryPass : Pass<"cleave-split-sync-entry", "::mlir::ModuleOp"> {
  let summary = "Move local SGD's @sync into a module of its own";
  let description = [{
    Local SGD's `@sync` (--cleave-build-local-sgd) is compiled into the
    plan's entry "sync", apart from the step: mixed precision, recompute
    and probes are the step's business. This pass moves it into a nested
    `module @sync` that holds a copy of every other top-level op of the
    module except `@main` (the mesh, and helpers `@sync` may call) and the
    module's attributes. The passes after it work on the module's own
    functions, not on nested modules; a pipeline reaches `@sync` with a
    nested `builtin.module(...)`. A module without `@sync` is left as it
    is.

    ```mlir
    // Before:
    module {
      cleave.mesh @mesh ["dp" = 2]
      func.func @main(...) { ... }
      func.func @sync(...) { ... }
    }
    // After:
    module {
      cleave.mesh @mesh ["dp" = 2]
      func.func @main(...) { ... }
      module @sync {
        cleave.mesh @mesh ["dp" = 2]
        func.func @sync(...) { ... }
      }
    }
    ```
  }];
}

def SplitPipelineRanksPass
    : Pass<"cleave-split-pipeline-ranks", "::mlir::ModuleOp"> {
  let summary = "One nested module per pipeline rank of a pipelined step";
  let description = [{
    A pipelined training step (--cleave-build-train-step with
    `pipeline-ranks`, partitioned or not) is one program whose ops carry
    the pipeline rank that runs them. This pass replaces the module's body
    with one nested `module @rank<r>` per pipeline rank r (MPMD over the
    mesh axis "pp"; each program SPMD over the others), whose `@main`
    keeps, in order, the ops tagged r and the untagged ops they need, with
    `cleave.pipeline_rank = r`. A `cleave.pipeline_transfer` becomes a
    `cleave.send` on its source rank and a `cleave.recv` on its target
    (placed where the step that first reads it begins); a
    `cleave.pipeline_sum` becomes an exchange of each rank's operand, added
    in rank order. States a rank does not read are removed from its
    `@main`. An op of one rank that reads another's value without a
    transfer is an error naming the op.

    ```mlir
    // Before:
    func.func @main(...) attributes {cleave.pipeline_ranks = 2 : i64} {
      %h = cleave.contract ... {cleave.pipeline_rank = 0 : i64}
      %t = cleave.pipeline_transfer %h from 0 to 1
      %y = cleave.contract %t, ... {cleave.pipeline_rank = 1 : i64}
    // After:
    module @rank0 {
      func.func @main(...) attributes {cleave.pipeline_rank = 0 : i64} {
        %h = cleave.contract ...
        cleave.send %h over @mesh ["pp"] from = 0 to = 1 ...
    }
    module @rank1 {
      func.func @main(...) attributes {cleave.pipeline_rank = 1 : i64} {
        %t = cleave.recv over @mesh ["pp"] from = 0 to = 1 ...
        %y = cleave.contract %t, ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // CLEAVE_TRANSFORMS_TRAINING_PASSES_TD
