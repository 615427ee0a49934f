//===- CompileOptions.cpp - The option table of a compile -----------------===//
//
// Every option of CompileOptions, once: its flag, the value it takes, its
// help and its category. cleave-compile, the Python module and the flag
// reference in docs/ all read this table.
//
//===----------------------------------------------------------------------===//

#include "cleave/Compiler/CompileOptions.h"

#include "llvm/ADT/STLExtras.h"

#include <type_traits>

namespace cleave {

CompileOptionVisitor::~CompileOptionVisitor() = default;

namespace {
/// Adds the options of one category to a visitor.
struct Table {
  CompileOptionVisitor &visitor;
  bool training = false;

  template <typename T>
  void operator()(T &field, const char *name, const char *valueName,
                  const char *help, bool hidden = false) {
    CompileOptionInfo info;
    info.name = name;
    info.valueName = valueName;
    info.help = help;
    info.training = training;
    info.hidden = hidden;
    if constexpr (std::is_same_v<T, bool>)
      info.kind = CompileOptionInfo::Flag;
    else if constexpr (std::is_same_v<T, std::vector<std::string>>)
      info.kind = CompileOptionInfo::List;
    else
      info.kind = CompileOptionInfo::Value;
    visitor.visit(info, field);
  }
};
} // namespace

void visitCompileOptions(CompileOptions &o, CompileOptionVisitor &visitor) {
  Table add{visitor};
  // What to write.
  {
    CompileOptionInfo emit{"emit", CompileOptionInfo::Value, "",
                           "What to write"};
    visitor.visit(
        emit, o.emit,
        {{EmitKind::Plan, "plan", "the executable plan (.cleave, default)"},
         {EmitKind::MLIR, "mlir",
          "MLIR text after the phase chosen by --phase"},
         {EmitKind::Asm, "asm",
          "the x86-64 assembly of the CPU kernels, as optimized for the plan"},
         {EmitKind::Exe, "exe",
          "a self-contained executable: cleave-run with the plan inside, "
          "taking cleave-run's options (no compiler libraries; runs under "
          "mpirun, srun or --ranks)"},
         {EmitKind::Schedule, "schedule",
          "the pipeline schedule of --pipeline-stages stages as Chrome trace "
          "JSON: the forward program cut into balanced stages, each step as "
          "long as its stage's flops (a backward pass twice a forward)"},
         {EmitKind::None, "none",
          "nothing: compile the plan without its kernels' code for "
          "--simulate, --report and --print-stats (quick, for models of any "
          "size; not runnable)"},
         {EmitKind::Sim, "sim",
          "the plan without its kernels' code, for cleave-sim (quick; "
          "cleave-run refuses it)"}});
    CompileOptionInfo phase{"phase", CompileOptionInfo::Value, "",
                            "With --emit=mlir: the phase after which to print "
                            "IR"};
    visitor.visit(
        phase, o.phase,
        {{CompilePhase::Import, "import",
          "the cleave dialect as imported from ONNX (default)"},
         {CompilePhase::Partitioned, "partitioned",
          "after sharding propagation and SPMD partitioning (with --mesh)"},
         {CompilePhase::TrainStep, "train-step",
          "after building the training step (with --train)"},
         {CompilePhase::Prepared, "prepared",
          "after folding, CSE and GEMM canonicalization"},
         {CompilePhase::Kernels, "kernels",
          "after --cleave-outline-kernels: @main with its kernel groups "
          "tagged, and the kernels in a nested module @kernels"},
         {CompilePhase::LLVM, "llvm",
          "the kernels phase with module @kernels lowered to the LLVM "
          "dialect"}});
  }
  add(o.output, "o", "path",
      "Output file (default: the model's name with .cleave, or "
      "'-' for stdout with --emit=mlir)");
  add(o.inputShapes, "input-shape", "name=d0xd1...",
      "Pin the shape of a model input, e.g. --input-shape "
      "input_ids=8x1024 (repeatable)");
  add(o.freezeInputs, "freeze-input", "name=value.pb",
      "Freeze a model input to the value in an ONNX TensorProto "
      "file, making it a compile-time constant (for inputs that "
      "decide shapes, e.g. a Reshape's target shape; repeatable)");
  add(o.allowNewerOpset, "allow-newer-opset", "",
      "Import a model whose ONNX opset is newer than the newest Cleave "
      "implements (28), with a warning, each op read as its newest "
      "version Cleave knows (by default such a model is refused)");
  add(o.printMemoryPlan, "print-memory-plan", "",
      "Print the plan's nodes and buffers (offset, bytes, live "
      "range in nodes) to stderr");
  add(o.printPipeline, "print-pipeline", "phase",
      "Print the pass pipeline that takes the imported program to this "
      "phase (import, train-step, partitioned, prepared) as cleave-opt "
      "--pass-pipeline takes it, "
      "and compile nothing: cleave-opt --pass-pipeline=\"$(cleave-compile "
      "ARGS --print-pipeline=P)\" on the --phase=import output prints what "
      "--emit=mlir --phase=P prints");
  add(o.target, "target", "",
      "Code generation target: cpu (default) or cuda (NVPTX kernels "
      "compiled to cubin with ptxas, GEMMs through cuBLASLt)");
  add(o.cudaArch, "cuda-arch", "",
      "With --target=cuda: sm_90a (H100/H200, default) or sm_80 "
      "(A100)");
  add(o.precision, "precision", "",
      "fp32 (default), bf16 or fp16: matmuls and activations in "
      "bf16/fp16 (f32 accumulation), statistics, loss and "
      "optimizer in f32 with f32 master weights");
  add(o.lowPrecisionGradients, "low-precision-gradients", "",
      "With --precision=bf16|fp16 and --train: round the gradients "
      "of the parameters computed in low precision to bf16/fp16 "
      "where backward finishes them, so that they are reduced over "
      "dp and stored in 2 bytes (the ZeRO paper's accounting; by "
      "default they stay f32, as Megatron keeps them)");
  add(o.lowPrecisionParameters, "low-precision-parameters", "",
      "With --precision=bf16|fp16 and --train: read every "
      "parameter through its bf16/fp16 copy, layer norms, biases "
      "and embedding tables too (f32 ops read the copy converted "
      "up), so that every parameter has an f32 master only the "
      "optimizer reads; with --low-precision-gradients the model "
      "states are the ZeRO paper's 16 bytes per parameter (by "
      "default the parameters the step reads in f32 keep one f32 "
      "copy and no master)");
  add(o.cpuRowKernels, "cpu-row-kernels", "",
      "With --target=cpu: lower reduction kernels as one loop over "
      "rows running each op on the row (the form --target=cuda maps "
      "to one thread block per row)");
  add(o.cudaHostKernels, "cuda-host-kernels", "",
      "With --target=cuda: also carry every GPU kernel compiled for "
      "the host, run block by block and thread by thread, so that "
      "the CUDA host doubles (tools/cuda-double-env.sh) can run the "
      "plan where there is no GPU; a real driver never reads them");
  add(o.cpuEmulateCuda, "cpu-emulate-cuda", "",
      "With --target=cpu: compile kernels through the CUDA target's "
      "launch mapping (row kernels, vector accesses, block "
      "reductions) and run each launch as loops over blocks and "
      "threads on the host, to test that mapping on the CPU (slow)");
  add(o.jobs, "jobs", "",
      "Threads that generate the CPU kernels' code (default 0: one "
      "per core); the plan's bytes do not depend on it");
  add(o.noKernelCache, "no-kernel-cache", "",
      "Compile every CPU kernel instead of reading the unchanged "
      "ones from the kernel cache ($CLEAVE_CACHE_DIR/kernels, else "
      "~/.cache/cleave/kernels)");
  add(o.kernelOptLevel, "kernel-opt-level", "",
      "LLVM optimization level of the generated CPU kernels, 0-3 "
      "(default 2)");
  add(o.kernelParallelMinWork, "kernel-parallel-min-work", "",
      "Scalar iterations from which a CPU kernel's loop nest runs "
      "on the runtime's threads (default 16384; 0: every kernel on "
      "the thread that calls it)");
  add(o.noLibraryGemm, "no-library-gemm", "",
      "Generate code for matmuls instead of calling BLAS");
  add(o.directConvolutions, "direct-convolutions", "",
      "Generate a loop nest for every convolution instead of "
      "im2col and a library GEMM");
  add(o.noFusedAttention, "no-fused-attention", "",
      "Spell out attention as GEMMs and a softmax over the whole "
      "score matrix instead of the runtime's fused attention "
      "kernels (which hold a tile of the scores at a time)");
  add(o.noRecognizeComposites, "no-recognize-composites", "",
      "Keep attention and RMS normalization as the model spells "
      "them out (matmul-scale-mask-softmax-matmul, "
      "pow-mean-rsqrt-mul) instead of rewriting them into "
      "cleave.attention and cleave.rms_norm");
  add(o.noGemmEpilogue, "no-gemm-epilogue", "",
      "Keep a matmul's bias add and tanh GELU in generated kernels "
      "instead of fusing them into the library GEMM as its epilogue");
  add(o.embedWeights, "embed-weights", "",
      "Copy initial parameters stored in the model's external data "
      "into the plan (by default a training plan references the "
      "file, and each rank reads only its shards when it starts)");
  add(o.maxMemory, "max-memory", "bytes",
      "Refuse a plan that needs more than this per rank (its arena: "
      "activations, parameters, optimizer state); a number of bytes "
      "with an optional K, M, G or T suffix (powers of 1024)");
  add(o.report, "report", "",
      "Print to stderr, per rank, the bytes of parameters, "
      "gradients, optimizer states, activations and temporaries, "
      "the exact peak of live bytes and the arena; per step, the "
      "collectives by mesh axis with their bytes and how many of "
      "them are in flight during compute; with --zero, ZeRO's "
      "formula beside the measured model states");
  add(o.stats, "print-stats", "",
      "Print the plan's commands, memory and compile "
      "time to stderr");
  add(o.simulate, "simulate", "",
      "Simulate one step of the compiled plan on --cluster and "
      "print its time, exposed communication, bubble, MFU/HFU and "
      "memory per rank to stderr (what cleave-sim prints)");
  add(o.cluster, "cluster", "preset[:nodes]|file",
      "The cluster --simulate runs on: a preset (dgx-a100-80gb, "
      "dgx-h100, hgx-h200, cpu; ':N' for N nodes) or a JSON "
      "description");
  add(o.simSchedule, "sim-schedule", "kind[,pp=P][,microbatches=M]",
      "With --simulate and a pipelined plan: replay its stage "
      "programs as the virtual stages of this schedule, at P "
      "pipeline ranks (the plan's pp must be P times the chunks "
      "per rank) and M microbatches, each stage costed from its "
      "first microbatch (compile with --schedule=1f1b and few "
      "microbatches, e.g. --emit=none --mesh pp=128 and "
      "--sim-schedule=interleaved:2,pp=64,microbatches=512)");
  add(o.simTrace, "sim-trace", "file",
      "With --simulate: write the simulated step as a Chrome trace");

  add.training = true;
  add(o.train, "train", "",
      "Compile one training step (forward, "
      "backward, optimizer update) instead of the "
      "forward model");
  add(o.loss, "loss", "spec",
      "Loss added to the model: cross_entropy:<logits>,<labels>"
      "[,<ignore_index>] or mse:<output>,<target>; the labels or "
      "target become an input (default: the model's scalar output)");
  add(o.trainable, "trainable", "regex",
      "Regex of the initializers to train (default: the parameters "
      "of a PyTorch export's signature, else every float "
      "initializer of more than one element)");
  add(o.noDecay, "no-decay", "regex",
      "Regex of parameters exempt from weight decay (e.g. "
      "'.*bias|.*norm.*')");
  add(o.untie, "untie", "regex",
      "Regex of initializers to train as one parameter per use "
      "(for initializers an exporter merged because their values "
      "were equal)");
  add(o.batchNorm, "batch-norm", "mode",
      "BatchNormalization when training: train (default; batch "
      "statistics, running statistics updated as PyTorch's train() "
      "does, saved in checkpoints and --export-onnx) or frozen "
      "(the running statistics, as in inference)");
  add(o.returnGradients, "return-gradients", "",
      "The training step also returns every parameter's gradient "
      "(grad.<name>, before clipping)");
  add(o.pipelineStages, "pipeline-stages", "p",
      "With --emit=schedule: pipeline ranks");
  add(o.schedule, "schedule", "",
      "The pipeline schedule of a --mesh with a pp axis (or of "
      "--emit=schedule): gpipe, 1f1b (default), "
      "interleaved:<chunks per rank> or zero-bubble");
  add(o.stageBoundaries, "stage-boundaries", "nodes",
      "With a pp mesh axis: comma-separated ONNX node names, or "
      "layers (e.g. h3: after its last node), after which pipeline "
      "stages end (default: balanced cuts between layers)");
  add(o.microbatches, "microbatches", "m",
      "With --train: split each step's batch into this many "
      "microbatches that run forward and backward one after "
      "another, adding up their gradients (gradient accumulation: "
      "the activations of one microbatch live at a time); the "
      "loss is normalized by the whole batch's count of labels, "
      "so the step computes what the unsplit batch does");
  add(o.dataParallel, "data-parallel", "N",
      "Train data parallel over N ranks (mesh dp=N): compile the "
      "model at the per-rank batch; each rank feeds its rows of the "
      "global batch and the gradients and the loss are all-reduced "
      "(mean). Run with cleave-run --ranks N or mpirun -np N");
  add(o.sync, "sync", "step|local:H|delayed",
      "With --data-parallel: how the replicas agree. step "
      "(default): the gradients are all-reduced every step. "
      "local:H: local SGD, each replica takes H optimizer steps on "
      "its own data without communicating, then the replicas "
      "average their parameters (the plan's 'sync' entry, run by "
      "cleave-run after every H-th step). delayed: each step "
      "applies the previous step's averaged gradients, whose "
      "all-reduce overlaps this step's forward and backward (step "
      "0 applies zero gradients)");
  add(o.outerOptimizer, "outer-optimizer", "nesterov",
      "With --sync=local:H: nesterov makes the averaging DiLoCo's "
      "outer step (outer gradient = global copy - average of the "
      "replicas, Nesterov momentum, the global copy and momentum "
      "split over dp like ZeRO-1; replicas restart from the new "
      "global copy)");
  add(o.outerLr, "outer-lr", "", "DiLoCo's outer learning rate");
  add(o.outerMomentum, "outer-momentum", "",
      "DiLoCo's outer Nesterov momentum");
  add(o.mesh, "mesh", "axis=size,...",
      "Partition the program over a device mesh of named axes, "
      "e.g. dp=4,tp=2 (their product is the number of ranks): "
      "data inputs are split over dp by their batch dimension, "
      "--shard states more (without it, a tp axis splits the "
      "Megatron regions found from the program: column/row matmul "
      "pairs, attention heads, the token embedding), propagation "
      "through every op's sharding rule gives every tensor a "
      "layout, and the SPMD partitioner writes the per-rank "
      "program with its collectives");
  add(o.zero, "zero", "stage",
      "With --mesh: ZeRO over the dp axis: 1 splits the optimizer "
      "states, 2 also the gradients (reduce-scattered), 3 also the "
      "parameters (all-gathered where used)");
  add(o.sequenceParallel, "sequence-parallel", "",
      "With --mesh and a tp axis: Megatron's sequence parallelism: "
      "the layer norms, residual adds and dropouts between "
      "tensor-parallel regions work on sequence slices over tp, and "
      "the all-reduces around those regions become reduce-scatters "
      "and all-gathers");
  add(o.contextParallel, "context-parallel", "all-to-all|ring|auto",
      "With --mesh and a cp axis (which splits the data inputs' "
      "sequence, dimension 1): how attention works on a split "
      "sequence. all-to-all (Ulysses) exchanges the sequence split "
      "for a split of the key/value heads before each attention and "
      "back after it, and refuses an attention whose heads do not "
      "divide over cp; ring keeps the sequence split and passes "
      "key/value blocks around the cp ranks, merging the blocks' "
      "attention by log-sum-exp (any head count; CPU ranks only); "
      "auto (the default) exchanges where that sends fewer bytes "
      "than gathering the keys and values, and gathers otherwise");
  add(o.overlapCollectives, "overlap-collectives", "",
      "With --mesh: pack consecutive gradient all-reduces into "
      "buckets of --bucket-mb MiB and run every collective "
      "asynchronously, waiting right before its first reader, so "
      "that communication overlaps the rest of the step");
  add(o.bucketMB, "bucket-mb", "",
      "With --overlap-collectives: MiB per all-reduce bucket "
      "(default 25; 0 leaves every all-reduce on its own)");
  add(o.probe, "probe", "regex",
      "With --train: the training step also returns the forward "
      "output of every ONNX node whose name matches the whole "
      "regular expression (outputs probe.<NNNN>.<node>, written by "
      "cleave-run --output-dir after the last step; for "
      "tools/cleave-parity)");
  add(o.debugDropCollective, "debug-drop-collective", "",
      "Testing only: with --mesh, drop the N-th all_reduce of the "
      "partitioned program (so a parity check has something to "
      "find)",
      /*hidden=*/true);
  add(o.debugRingFault, "debug-ring-fault", "",
      "Testing only: with --context-parallel=ring, the keys' "
      "positions at ring step N are the neighbouring block's (so "
      "that a parity check has something to find)",
      /*hidden=*/true);
  add(o.explainSharding, "explain-sharding", "",
      "With --mesh: print every collective the partitioner "
      "inserted, its bytes per rank per step, the op and sharding "
      "that caused it, and the conflicts propagation settled (what "
      "lost and why), then totals per mesh axis, to stderr");
  add(o.shard, "shard", "regex=[{..}, ..]",
      "With --mesh: the sharding of the parameters (and their "
      "optimizer states) whose name matches the whole regular "
      "expression, e.g. --shard='.*c_fc.weight=[{}, {\"tp\"}]' "
      "(one {axes} per dimension; repeatable, first match wins; "
      "with rules, tp splits only what they say)");
  add(o.shardingFile, "sharding-file", "path",
      "With --mesh: --shard rules from a file, one regex=[{..}, ..] "
      "per line (blank lines and lines starting with # are "
      "skipped), after the --shard options");
  add(o.frozen, "frozen", "regex", "Regex of initializers to keep fixed");
  add(o.optimizer, "optimizer", "",
      "sgd, momentum, nesterov, adam or adamw (default)");
  add(o.lr, "lr", "", "Base learning rate (default 1e-3)");
  add(o.momentum, "momentum", "", "Momentum factor (default 0.9)");
  add(o.beta1, "beta1", "", "Adam beta1 (default 0.9)");
  add(o.beta2, "beta2", "", "Adam beta2 (default 0.999)");
  add(o.adamEps, "adam-eps", "", "Adam epsilon (default 1e-8)");
  add(o.weightDecay, "weight-decay", "",
      "Weight decay: decoupled for adamw, L2 otherwise (default 0)");
  add(o.clipGradNorm, "clip-grad-norm", "",
      "Clip gradients to this global norm (default 0: off)");
  add(o.moeAuxLoss, "moe-aux-loss", "coef",
      "Add coef times each mixture-of-experts router's load-balancing loss "
      "(Switch/GShard: E * sum over experts of the fraction of tokens "
      "routed to it times its mean router probability) to the loss "
      "(default 0: off)");
  add(o.moeCapacityFactor, "moe-capacity-factor", "F",
      "Give each mixture-of-experts expert F x (routed rows per batch row / "
      "experts) slots per batch row, rounded up (GShard's capacity form): "
      "rows past their expert's slots are dropped (zero results), and "
      "under an ep mesh axis the rows travel by all_to_all (default 0: "
      "dropless, every routed row computed)");
  add(o.moeBiasUpdate, "moe-bias-update", "rate",
      "DeepSeek-V3's auxiliary-loss-free balancing: each router picks its "
      "experts by its scores plus a bias per expert (gating by the scores "
      "alone), and each training step moves an expert's bias by rate x "
      "sign(mean load - its load) (default 0: off; DeepSeek-V3 uses 1e-3)");
  add(o.moeZLoss, "moe-z-loss", "coef",
      "Add coef times each router's z-loss (mean over tokens of "
      "logsumexp(logits)^2) to the loss (default 0: off)");
  add(o.lossScale, "loss-scale", "mode",
      "none, dynamic or a number (static scale); default: dynamic "
      "with --precision=fp16, none otherwise");
  add(o.lossScaleInit, "loss-scale-init", "",
      "Initial dynamic loss scale (default 65536)");
  add(o.lossScaleWindow, "loss-scale-window", "",
      "Double the dynamic loss scale after this many steps without "
      "overflow (default 2000)");
  add(o.lrSchedule, "lr-schedule", "",
      "constant (default), warmup (linear warmup, then constant) or "
      "cosine (linear warmup, then cosine decay to --min-lr)");
  add(o.warmupSteps, "warmup-steps", "", "Linear warmup steps (default 0)");
  add(o.totalSteps, "total-steps", "",
      "Steps of the cosine schedule (warmup included)");
  add(o.minLR, "min-lr", "", "Final learning rate of cosine");
  add(o.lrScaleWithBatch, "lr-scale-with-batch", "reference batch",
      "Scale the learning rate by global batch / this reference "
      "batch (linear scaling rule; default 0: off)");
  add(o.recompute, "recompute", "policy",
      "Activation recomputation: none (default), selective (keep "
      "linear-layer outputs and layer inputs, recompute the rest), "
      "full (keep only layer inputs) or budget:<bytes> (keep saved "
      "activations up to this size at the least recompute cost)");
  add(o.initParameters, "init-parameters", "spec",
      "normal:<std>[:<seed>]: weight matrices (f32 parameters of "
      "rank >= 2) start from N(0, std^2) values the runtime "
      "generates instead of the model's initializers, which stay "
      "out of the plan (training from scratch; small plans of large "
      "models)");
  add(o.autoPlan, "auto", "",
      "Choose the parallel layout: search dp x pp x tp x cp over the "
      "--cluster's devices (cp with --context-parallel all-to-all "
      "and ring, or the one mode given), the pipeline schedule and "
      "its chunks, the microbatch size, sequence parallelism, the "
      "ZeRO stage and the recompute policy for the fastest simulated "
      "step within the devices' memory (or --max-memory), then "
      "compile it. Needs --train, --global-batch and a model of "
      "repeated layers whose inputs have a symbolic batch dimension. "
      "With --emit=none it only searches");
  add(o.globalBatch, "global-batch", "N",
      "With --auto: the sequences (rows of the batch) one step "
      "trains on, over all data-parallel ranks and microbatches");
  add(o.explain, "explain", "",
      "With --auto: print the fastest candidates with their "
      "predicted step time, memory, energy and cost per step, why "
      "the runners-up lost and why the others were rejected");
  add(o.candidatesFile, "candidates", "file.csv",
      "With --auto: write every candidate layout as CSV (predicted "
      "step, memory, energy and cost per step, tokens per step, "
      "and why a rejected one lost), for tools/plan_tradeoff.py");
  add(o.autoCp, "auto-cp", "N,...",
      "With --auto: the context-parallel sizes to try (default: 1 "
      "and the powers of two up to the devices per node that divide "
      "the devices and the inputs' sequence, dimension 1); 1 alone "
      "searches no context parallelism");
  add(o.autoEp, "auto-ep", "N,...",
      "With --auto: the expert-parallel sizes to try (default: 1 and "
      "the powers of two that divide the devices and every expert "
      "weight's experts, for a model with a mixture of experts); 1 "
      "alone searches no expert parallelism");
  add(o.keepLayers, "keep-layers", "K",
      "Compile only the first K of the model's repeated layers "
      "(nodes named by layer, e.g. h0.fc or /model/layers.0/mlp), "
      "what read the last layer reading the K-th: what --auto "
      "compiles to cost a layer");
}

namespace {
/// Collects the table's entries.
struct Collect : CompileOptionVisitor {
  std::vector<CompileOptionInfo> table;
  void visit(const CompileOptionInfo &info, bool &) override { add(info); }
  void visit(const CompileOptionInfo &info, int64_t &) override { add(info); }
  void visit(const CompileOptionInfo &info, double &) override { add(info); }
  void visit(const CompileOptionInfo &info, std::string &) override {
    add(info);
  }
  void visit(const CompileOptionInfo &info,
             std::optional<std::string> &) override {
    add(info);
  }
  void visit(const CompileOptionInfo &info,
             std::vector<std::string> &) override {
    add(info);
  }
  void visit(const CompileOptionInfo &info, EmitKind &,
             const std::vector<CompileOptionValue<EmitKind>> &values) override {
    addEnum(info, values);
  }
  void
  visit(const CompileOptionInfo &info, CompilePhase &,
        const std::vector<CompileOptionValue<CompilePhase>> &values) override {
    addEnum(info, values);
  }
  /// An enumerated option's help names its values.
  template <typename E>
  void addEnum(CompileOptionInfo info,
               const std::vector<CompileOptionValue<E>> &values) {
    for (auto [i, value] : llvm::enumerate(values))
      info.help +=
          std::string(i ? "; " : ": ") + value.name + " (" + value.help + ")";
    add(info);
  }
  void add(const CompileOptionInfo &info) { table.push_back(info); }
};
} // namespace

std::vector<CompileOptionInfo> compileOptionTable() {
  Collect collect;
  CompileOptions options;
  visitCompileOptions(options, collect);
  llvm::sort(collect.table,
             [](const CompileOptionInfo &a, const CompileOptionInfo &b) {
               return a.name < b.name;
             });
  return std::move(collect.table);
}

} // namespace cleave
