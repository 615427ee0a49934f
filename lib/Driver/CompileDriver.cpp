//===- CompileDriver.cpp - The cleave-compile command line -----------------===//
//
// cleave-compile model.onnx [-o model.cleave] [--input-shape name=2x3]...
//                [--emit=plan|mlir] [--phase=import|prepared|kernels|llvm]
//
// Errors are printed as `cleave-compile: error: <where>: <what>` and the exit
// code is 1; no output file is written unless compilation succeeded (outputs
// go to a temporary file that is renamed into place).
//
//===----------------------------------------------------------------------===//

#include "cleave/Driver/CompileDriver.h"
#include "cleave/FileUtil.h"

#include "cleave/Import/ONNXImporter.h"
#include "cleave/InitAll.h"
#include "cleave/Pipeline/Schedule.h"
#include "cleave/Pipelines/Pipelines.h"
#include "cleave/Simulate/Cluster.h"
#include "cleave/Simulate/Planner.h"
#include "cleave/Simulate/Simulator.h"
#include "cleave/Target/CPU/CPUCodegen.h"
#include "cleave/Transforms/Training/LocalSGD.h"
#include "cleave/Transforms/Training/Passes.h"
#include "cleave/Transforms/Training/RecomputePolicy.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "Cleave/IR/CleaveOps.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <set>
#include <chrono>
#include <mutex>
#include <cstdio>
#include <unistd.h>

using namespace mlir;
namespace cl = llvm::cl;

namespace {
/// Where this compile prints: the invocation's streams, or stderr/stdout.
/// One compile runs at a time (the options are process-wide), so these are
/// plain globals set by runCompile for its duration.
llvm::raw_ostream *gMessages = nullptr;
llvm::raw_ostream *gOutput = nullptr;
llvm::raw_ostream &driverErrs() { return gMessages ? *gMessages : llvm::errs(); }
llvm::raw_ostream &driverOuts() { return gOutput ? *gOutput : llvm::outs(); }

enum class EmitKind { Plan, MLIR, Asm, Exe, Schedule, None, Sim };

struct Options {
  cl::OptionCategory category{"cleave-compile options"};
  cl::opt<std::string> input{cl::Positional,
                             cl::desc("<model.onnx | program.mlir>"),
                             cl::Required, cl::cat(category)};
  cl::opt<std::string> output{
      "o", cl::desc("Output file (default: the model's name with .cleave, or "
                    "'-' for stdout with --emit=mlir)"),
      cl::value_desc("path"), cl::cat(category)};
  cl::list<std::string> inputShapes{
      "input-shape",
      cl::desc("Pin the shape of a model input, e.g. --input-shape "
               "input_ids=8x1024 (repeatable)"),
      cl::value_desc("name=d0xd1..."), cl::cat(category)};
  cl::list<std::string> freezeInputs{
      "freeze-input",
      cl::desc("Freeze a model input to the value in an ONNX TensorProto "
               "file, making it a compile-time constant (for inputs that "
               "decide shapes, e.g. a Reshape's target shape; repeatable)"),
      cl::value_desc("name=value.pb"), cl::cat(category)};
  cl::opt<bool> printMemoryPlan{
      "print-memory-plan",
      cl::desc("Print the plan's nodes and buffers (offset, bytes, live "
               "range in nodes) to stderr"),
      cl::cat(category)};
  cl::opt<EmitKind> emit{
      "emit", cl::desc("What to write"), cl::init(EmitKind::Plan),
      cl::values(clEnumValN(EmitKind::Plan, "plan",
                            "the executable plan (.cleave, default)"),
                 clEnumValN(EmitKind::MLIR, "mlir",
                            "MLIR text after the phase chosen by --phase"),
                 clEnumValN(EmitKind::Asm, "asm",
                            "the x86-64 assembly of the CPU kernels, as "
                            "optimized for the plan"),
                 clEnumValN(EmitKind::Exe, "exe",
                            "a self-contained executable: cleave-run with "
                            "the plan inside, taking cleave-run's options "
                            "(no compiler libraries; runs under mpirun, "
                            "srun or --ranks)"),
                 clEnumValN(EmitKind::Schedule, "schedule",
                            "the pipeline schedule of --pipeline-stages "
                            "stages as Chrome trace JSON: the forward "
                            "program cut into balanced stages, each step "
                            "as long as its stage's flops (a backward pass "
                            "twice a forward)"),
                 clEnumValN(EmitKind::None, "none",
                            "nothing: compile the plan without its kernels' "
                            "code for --simulate, --report and "
                            "--print-stats (quick, for models of any size; "
                            "not runnable)"),
                 clEnumValN(EmitKind::Sim, "sim",
                            "the plan without its kernels' code, for "
                            "cleave-sim (quick; cleave-run refuses it)")),
      cl::cat(category)};
  cl::opt<::cleave::CompilePhase> phase{
      "phase", cl::desc("With --emit=mlir: the phase after which to print IR"),
      cl::init(::cleave::CompilePhase::Import),
      cl::values(
          clEnumValN(::cleave::CompilePhase::Import, "import",
                     "the cleave dialect as imported from ONNX (default)"),
          clEnumValN(::cleave::CompilePhase::Partitioned, "partitioned",
                     "after sharding propagation and SPMD partitioning "
                     "(with --mesh)"),
          clEnumValN(::cleave::CompilePhase::TrainStep, "train-step",
                     "after building the training step (with --train)"),
          clEnumValN(::cleave::CompilePhase::Prepared, "prepared",
                     "after folding, CSE and GEMM canonicalization"),
          clEnumValN(::cleave::CompilePhase::Kernels, "kernels",
                     "the outlined kernel module, in cleave ops"),
          clEnumValN(::cleave::CompilePhase::LLVM, "llvm",
                     "the kernel module lowered to the LLVM dialect")),
      cl::cat(category)};
  cl::opt<std::string> target{
      "target",
      cl::desc("Code generation target: cpu (default) or cuda (NVPTX kernels "
               "compiled to cubin with ptxas, GEMMs through cuBLASLt)"),
      cl::init("cpu"), cl::cat(category)};
  cl::opt<std::string> cudaArch{
      "cuda-arch",
      cl::desc("With --target=cuda: sm_90a (H100/H200, default) or sm_80 "
               "(A100)"),
      cl::init("sm_90a"), cl::cat(category)};
  cl::opt<std::string> precision{
      "precision",
      cl::desc("fp32 (default), bf16 or fp16: matmuls and activations in "
               "bf16/fp16 (f32 accumulation), statistics, loss and "
               "optimizer in f32 with f32 master weights"),
      cl::init("fp32"), cl::cat(category)};
  cl::opt<bool> lowPrecisionGradients{
      "low-precision-gradients",
      cl::desc("With --precision=bf16|fp16 and --train: round the gradients "
               "of the parameters computed in low precision to bf16/fp16 "
               "where backward finishes them, so that they are reduced over "
               "dp and stored in 2 bytes (the ZeRO paper's accounting; by "
               "default they stay f32, as Megatron keeps them)"),
      cl::cat(category)};
  cl::opt<bool> lowPrecisionParameters{
      "low-precision-parameters",
      cl::desc("With --precision=bf16|fp16 and --train: read every "
               "parameter through its bf16/fp16 copy, layer norms, biases "
               "and embedding tables too (f32 ops read the copy converted "
               "up), so that every parameter has an f32 master only the "
               "optimizer reads; with --low-precision-gradients the model "
               "states are the ZeRO paper's 16 bytes per parameter (by "
               "default the parameters the step reads in f32 keep one f32 "
               "copy and no master)"),
      cl::cat(category)};
  cl::opt<bool> cpuRowKernels{
      "cpu-row-kernels",
      cl::desc("With --target=cpu: lower reduction kernels as one loop over "
               "rows running each op on the row (the form --target=cuda maps "
               "to one thread block per row)"),
      cl::cat(category)};
  cl::opt<bool> cudaHostKernels{
      "cuda-host-kernels",
      cl::desc("With --target=cuda: also carry every GPU kernel compiled for "
               "the host, run block by block and thread by thread, so that "
               "the CUDA host doubles (tools/cuda-double-env.sh) can run the "
               "plan where there is no GPU; a real driver never reads them"),
      cl::cat(category)};
  cl::opt<bool> cpuEmulateCuda{
      "cpu-emulate-cuda",
      cl::desc("With --target=cpu: compile kernels through the CUDA target's "
               "launch mapping (row kernels, vector accesses, block "
               "reductions) and run each launch as loops over blocks and "
               "threads on the host, to test that mapping on the CPU (slow)"),
      cl::cat(category)};
  cl::opt<unsigned> jobs{
      "jobs",
      cl::desc("Threads that generate the CPU kernels' code (default 0: one "
               "per core); the plan's bytes do not depend on it"),
      cl::init(0), cl::cat(category)};
  cl::opt<bool> noKernelCache{
      "no-kernel-cache",
      cl::desc("Compile every CPU kernel instead of reading the unchanged "
               "ones from the kernel cache ($CLEAVE_CACHE_DIR/kernels, else "
               "~/.cache/cleave/kernels)"),
      cl::cat(category)};
  cl::opt<unsigned> kernelOptLevel{
      "kernel-opt-level",
      cl::desc("LLVM optimization level of the generated CPU kernels, 0-3 "
               "(default 2)"),
      cl::init(2), cl::cat(category)};
  cl::opt<int64_t> kernelParallelMinWork{
      "kernel-parallel-min-work",
      cl::desc("Scalar iterations from which a CPU kernel's loop nest runs "
               "on the runtime's threads (default 16384; 0: every kernel on "
               "the thread that calls it)"),
      cl::init(::cleave::kDefaultParallelMinWork), cl::cat(category)};
  cl::opt<bool> noLibraryGemm{
      "no-library-gemm",
      cl::desc("Generate code for matmuls instead of calling BLAS"),
      cl::cat(category)};
  cl::opt<bool> directConvolutions{
      "direct-convolutions",
      cl::desc("Generate a loop nest for every convolution instead of "
               "im2col and a library GEMM"),
      cl::cat(category)};
  cl::opt<bool> noFusedAttention{
      "no-fused-attention",
      cl::desc("Spell out attention as GEMMs and a softmax over the whole "
               "score matrix instead of the runtime's fused attention "
               "kernels (which hold a tile of the scores at a time)"),
      cl::cat(category)};
  cl::opt<bool> noRecognizeComposites{
      "no-recognize-composites",
      cl::desc("Keep attention and RMS normalization as the model spells "
               "them out (matmul-scale-mask-softmax-matmul, "
               "pow-mean-rsqrt-mul) instead of rewriting them into "
               "cleave.attention and cleave.rms_norm"),
      cl::cat(category)};
  cl::opt<bool> noGemmEpilogue{
      "no-gemm-epilogue",
      cl::desc("Keep a matmul's bias add and tanh GELU in generated kernels "
               "instead of fusing them into the library GEMM as its epilogue"),
      cl::cat(category)};
  cl::opt<bool> embedWeights{
      "embed-weights",
      cl::desc("Copy initial parameters stored in the model's external data "
               "into the plan (by default a training plan references the "
               "file, and each rank reads only its shards when it starts)"),
      cl::cat(category)};
  // Training.
  cl::OptionCategory trainCategory{"cleave-compile training options"};
  cl::opt<bool> train{"train",
                      cl::desc("Compile one training step (forward, "
                               "backward, optimizer update) instead of the "
                               "forward model"),
                      cl::cat(trainCategory)};
  cl::opt<std::string> loss{
      "loss",
      cl::desc("Loss added to the model: cross_entropy:<logits>,<labels>"
               "[,<ignore_index>] or mse:<output>,<target>; the labels or "
               "target become an input (default: the model's scalar output)"),
      cl::value_desc("spec"), cl::cat(trainCategory)};
  cl::opt<std::string> trainable{
      "trainable",
      cl::desc("Regex of the initializers to train (default: the parameters "
               "of a PyTorch export's signature, else every float "
               "initializer of more than one element)"),
      cl::value_desc("regex"), cl::cat(trainCategory)};
  cl::opt<std::string> noDecay{
      "no-decay",
      cl::desc("Regex of parameters exempt from weight decay (e.g. "
               "'.*bias|.*norm.*')"),
      cl::value_desc("regex"), cl::cat(trainCategory)};
  cl::opt<std::string> untie{
      "untie",
      cl::desc("Regex of initializers to train as one parameter per use "
               "(for initializers an exporter merged because their values "
               "were equal)"),
      cl::value_desc("regex"), cl::cat(trainCategory)};
  cl::opt<std::string> batchNorm{
      "batch-norm",
      cl::desc("BatchNormalization when training: train (default; batch "
               "statistics, running statistics updated as PyTorch's train() "
               "does, saved in checkpoints and --export-onnx) or frozen "
               "(the running statistics, as in inference)"),
      cl::init("train"), cl::value_desc("mode"), cl::cat(trainCategory)};
  cl::opt<bool> returnGradients{
      "return-gradients",
      cl::desc("The training step also returns every parameter's gradient "
               "(grad.<name>, before clipping)"),
      cl::cat(trainCategory)};
  cl::opt<int64_t> pipelineStages{
      "pipeline-stages",
      cl::desc("With --emit=schedule: pipeline ranks"),
      cl::init(0), cl::value_desc("p"), cl::cat(trainCategory)};
  cl::opt<std::string> schedule{
      "schedule",
      cl::desc("The pipeline schedule of a --mesh with a pp axis (or of "
               "--emit=schedule): gpipe, 1f1b (default), "
               "interleaved:<chunks per rank> or zero-bubble"),
      cl::init("1f1b"), cl::cat(trainCategory)};
  cl::opt<std::string> stageBoundaries{
      "stage-boundaries",
      cl::desc("With a pp mesh axis: comma-separated ONNX node names, or "
               "layers (e.g. h3: after its last node), after which pipeline "
               "stages end (default: balanced cuts between layers)"),
      cl::value_desc("nodes"), cl::cat(trainCategory)};
  cl::opt<int64_t> microbatches{
      "microbatches",
      cl::desc("With --train: split each step's batch into this many "
               "microbatches that run forward and backward one after "
               "another, adding up their gradients (gradient accumulation: "
               "the activations of one microbatch live at a time); the "
               "loss is normalized by the whole batch's count of labels, "
               "so the step computes what the unsplit batch does"),
      cl::init(1), cl::value_desc("m"), cl::cat(trainCategory)};
  cl::opt<unsigned> dataParallel{
      "data-parallel",
      cl::desc("Train data parallel over N ranks (mesh dp=N): compile the "
               "model at the per-rank batch; each rank feeds its rows of the "
               "global batch and the gradients and the loss are all-reduced "
               "(mean). Run with cleave-run --ranks N or mpirun -np N"),
      cl::value_desc("N"), cl::init(1), cl::cat(trainCategory)};
  cl::opt<std::string> sync{
      "sync",
      cl::desc("With --data-parallel: how the replicas agree. step "
               "(default): the gradients are all-reduced every step. "
               "local:H: local SGD, each replica takes H optimizer steps on "
               "its own data without communicating, then the replicas "
               "average their parameters (the plan's 'sync' entry, run by "
               "cleave-run after every H-th step). delayed: each step "
               "applies the previous step's averaged gradients, whose "
               "all-reduce overlaps this step's forward and backward (step "
               "0 applies zero gradients)"),
      cl::value_desc("step|local:H|delayed"), cl::init("step"),
      cl::cat(trainCategory)};
  cl::opt<std::string> outerOptimizer{
      "outer-optimizer",
      cl::desc("With --sync=local:H: nesterov makes the averaging DiLoCo's "
               "outer step (outer gradient = global copy - average of the "
               "replicas, Nesterov momentum, the global copy and momentum "
               "split over dp like ZeRO-1; replicas restart from the new "
               "global copy)"),
      cl::value_desc("nesterov"), cl::cat(trainCategory)};
  cl::opt<double> outerLr{"outer-lr", cl::desc("DiLoCo's outer learning rate"),
                          cl::init(0.7), cl::cat(trainCategory)};
  cl::opt<double> outerMomentum{
      "outer-momentum", cl::desc("DiLoCo's outer Nesterov momentum"),
      cl::init(0.9), cl::cat(trainCategory)};
  cl::opt<std::string> mesh{
      "mesh",
      cl::desc("Partition the program over a device mesh of named axes, "
               "e.g. dp=4,tp=2 (their product is the number of ranks): "
               "data inputs are split over dp by their batch dimension, "
               "--shard states more (without it, a tp axis splits the "
               "Megatron regions found from the program: column/row matmul "
               "pairs, attention heads, the token embedding), propagation "
               "through every op's sharding rule gives every tensor a "
               "layout, and the SPMD partitioner writes the per-rank "
               "program with its collectives"),
      cl::value_desc("axis=size,..."), cl::cat(trainCategory)};
  cl::opt<int> zero{
      "zero",
      cl::desc("With --mesh: ZeRO over the dp axis: 1 splits the optimizer "
               "states, 2 also the gradients (reduce-scattered), 3 also the "
               "parameters (all-gathered where used)"),
      cl::value_desc("stage"), cl::init(0), cl::cat(trainCategory)};
  cl::opt<bool> sequenceParallel{
      "sequence-parallel",
      cl::desc("With --mesh and a tp axis: Megatron's sequence parallelism: "
               "the layer norms, residual adds and dropouts between "
               "tensor-parallel regions work on sequence slices over tp, and "
               "the all-reduces around those regions become reduce-scatters "
               "and all-gathers"),
      cl::cat(trainCategory)};
  cl::opt<bool> overlapCollectives{
      "overlap-collectives",
      cl::desc("With --mesh: pack consecutive gradient all-reduces into "
               "buckets of --bucket-mb MiB and run every collective "
               "asynchronously, waiting right before its first reader, so "
               "that communication overlaps the rest of the step"),
      cl::cat(trainCategory)};
  cl::opt<double> bucketMB{
      "bucket-mb",
      cl::desc("With --overlap-collectives: MiB per all-reduce bucket "
               "(default 25; 0 leaves every all-reduce on its own)"),
      cl::init(25.0), cl::cat(trainCategory)};
  cl::opt<std::string> probe{
      "probe",
      cl::desc("With --train: the training step also returns the forward "
               "output of every ONNX node whose name matches the whole "
               "regular expression (outputs probe.<NNNN>.<node>, written by "
               "cleave-run --output-dir after the last step; for "
               "tools/cleave-parity)"),
      cl::value_desc("regex"), cl::cat(trainCategory)};
  cl::opt<int64_t> debugDropCollective{
      "debug-drop-collective",
      cl::desc("Testing only: with --mesh, drop the N-th all_reduce of the "
               "partitioned program (so a parity check has something to "
               "find)"),
      cl::init(-1), cl::Hidden, cl::cat(trainCategory)};
  cl::opt<bool> explainSharding{
      "explain-sharding",
      cl::desc("With --mesh: print every collective the partitioner "
               "inserted, its bytes per rank per step, the op and sharding "
               "that caused it, and the conflicts propagation settled (what "
               "lost and why), then totals per mesh axis, to stderr"),
      cl::cat(trainCategory)};
  cl::list<std::string> shard{
      "shard",
      cl::desc("With --mesh: the sharding of the parameters (and their "
               "optimizer states) whose name matches the whole regular "
               "expression, e.g. --shard='.*c_fc.weight=[{}, {\"tp\"}]' "
               "(one {axes} per dimension; repeatable, first match wins; "
               "with rules, tp splits only what they say)"),
      cl::value_desc("regex=[{..}, ..]"), cl::cat(trainCategory)};
  cl::opt<std::string> shardingFile{
      "sharding-file",
      cl::desc("With --mesh: --shard rules from a file, one regex=[{..}, ..] "
               "per line (blank lines and lines starting with # are "
               "skipped), after the --shard options"),
      cl::value_desc("path"), cl::cat(trainCategory)};
  cl::opt<std::string> frozen{
      "frozen", cl::desc("Regex of initializers to keep fixed"),
      cl::value_desc("regex"), cl::cat(trainCategory)};
  cl::opt<std::string> optimizer{
      "optimizer", cl::desc("sgd, momentum, nesterov, adam or adamw (default)"),
      cl::init("adamw"), cl::cat(trainCategory)};
  cl::opt<double> lr{"lr", cl::desc("Base learning rate (default 1e-3)"),
                     cl::init(1e-3), cl::cat(trainCategory)};
  cl::opt<double> momentum{"momentum",
                           cl::desc("Momentum factor (default 0.9)"),
                           cl::init(0.9), cl::cat(trainCategory)};
  cl::opt<double> beta1{"beta1", cl::desc("Adam beta1 (default 0.9)"),
                        cl::init(0.9), cl::cat(trainCategory)};
  cl::opt<double> beta2{"beta2", cl::desc("Adam beta2 (default 0.999)"),
                        cl::init(0.999), cl::cat(trainCategory)};
  cl::opt<double> adamEps{"adam-eps", cl::desc("Adam epsilon (default 1e-8)"),
                          cl::init(1e-8), cl::cat(trainCategory)};
  cl::opt<double> weightDecay{
      "weight-decay",
      cl::desc("Weight decay: decoupled for adamw, L2 otherwise (default 0)"),
      cl::init(0.0), cl::cat(trainCategory)};
  cl::opt<double> clipGradNorm{
      "clip-grad-norm",
      cl::desc("Clip gradients to this global norm (default 0: off)"),
      cl::init(0.0), cl::cat(trainCategory)};
  cl::opt<std::string> lossScale{
      "loss-scale",
      cl::desc("none, dynamic or a number (static scale); default: dynamic "
               "with --precision=fp16, none otherwise"),
      cl::value_desc("mode"), cl::cat(trainCategory)};
  cl::opt<double> lossScaleInit{
      "loss-scale-init",
      cl::desc("Initial dynamic loss scale (default 65536)"), cl::init(65536.0),
      cl::cat(trainCategory)};
  cl::opt<int64_t> lossScaleWindow{
      "loss-scale-window",
      cl::desc("Double the dynamic loss scale after this many steps without "
               "overflow (default 2000)"),
      cl::init(2000), cl::cat(trainCategory)};
  cl::opt<std::string> lrSchedule{
      "lr-schedule",
      cl::desc("constant (default), warmup (linear warmup, then constant) or "
               "cosine (linear warmup, then cosine decay to --min-lr)"),
      cl::init("constant"), cl::cat(trainCategory)};
  cl::opt<int64_t> warmupSteps{"warmup-steps",
                               cl::desc("Linear warmup steps (default 0)"),
                               cl::init(0), cl::cat(trainCategory)};
  cl::opt<int64_t> totalSteps{
      "total-steps", cl::desc("Steps of the cosine schedule (warmup included)"),
      cl::init(0), cl::cat(trainCategory)};
  cl::opt<double> minLR{"min-lr", cl::desc("Final learning rate of cosine"),
                        cl::init(0.0), cl::cat(trainCategory)};
  cl::opt<int64_t> lrScaleWithBatch{
      "lr-scale-with-batch",
      cl::desc("Scale the learning rate by global batch / this reference "
               "batch (linear scaling rule; default 0: off)"),
      cl::value_desc("reference batch"), cl::init(0), cl::cat(trainCategory)};

  cl::opt<std::string> recompute{
      "recompute",
      cl::desc("Activation recomputation: none (default), selective (keep "
               "linear-layer outputs and layer inputs, recompute the rest), "
               "full (keep only layer inputs) or budget:<bytes> (keep saved "
               "activations up to this size at the least recompute cost)"),
      cl::init("none"), cl::value_desc("policy"), cl::cat(trainCategory)};

  cl::opt<std::string> maxMemory{
      "max-memory",
      cl::desc("Refuse a plan that needs more than this per rank (its arena: "
               "activations, parameters, optimizer state); a number of bytes "
               "with an optional K, M, G or T suffix (powers of 1024)"),
      cl::value_desc("bytes"), cl::cat(category)};

  cl::opt<std::string> initParameters{
      "init-parameters",
      cl::desc("normal:<std>[:<seed>]: weight matrices (f32 parameters of "
               "rank >= 2) start from N(0, std^2) values the runtime "
               "generates instead of the model's initializers, which stay "
               "out of the plan (training from scratch; small plans of large "
               "models)"),
      cl::value_desc("spec"), cl::cat(trainCategory)};

  cl::opt<bool> report{
      "report",
      cl::desc("Print to stderr, per rank, the bytes of parameters, "
               "gradients, optimizer states, activations and temporaries, "
               "the exact peak of live bytes and the arena; per step, the "
               "collectives by mesh axis with their bytes and how many of "
               "them are in flight during compute; with --zero, ZeRO's "
               "formula beside the measured model states"),
      cl::cat(category)};
  cl::opt<bool> stats{"print-stats",
                      cl::desc("Print the plan's commands, memory and compile "
                               "time to stderr"),
                      cl::cat(category)};
  cl::opt<bool> simulate{
      "simulate",
      cl::desc("Simulate one step of the compiled plan on --cluster and "
               "print its time, exposed communication, bubble, MFU/HFU and "
               "memory per rank to stderr (what cleave-sim prints)"),
      cl::cat(category)};
  cl::opt<std::string> cluster{
      "cluster",
      cl::desc("The cluster --simulate runs on: a preset (dgx-a100-80gb, "
               "dgx-h100, hgx-h200, cpu; ':N' for N nodes) or a JSON "
               "description"),
      cl::value_desc("preset[:nodes]|file"), cl::init("cpu"),
      cl::cat(category)};
  cl::opt<std::string> simSchedule{
      "sim-schedule",
      cl::desc("With --simulate and a pipelined plan: replay its stage "
               "programs as the virtual stages of this schedule, at P "
               "pipeline ranks (the plan's pp must be P times the chunks "
               "per rank) and M microbatches, each stage costed from its "
               "first microbatch (compile with --schedule=1f1b and few "
               "microbatches, e.g. --emit=none --mesh pp=128 and "
               "--sim-schedule=interleaved:2,pp=64,microbatches=512)"),
      cl::value_desc("kind[,pp=P][,microbatches=M]"), cl::cat(category)};
  cl::opt<bool> autoPlan{
      "auto",
      cl::desc("Choose the parallel layout: search dp x pp x tp over the "
               "--cluster's devices, the pipeline schedule and its chunks, "
               "the microbatch size, sequence parallelism, the ZeRO stage "
               "and the recompute policy for the fastest simulated step "
               "within the devices' memory (or --max-memory), then compile "
               "it. Needs --train, --global-batch and a model of repeated "
               "layers whose inputs have a symbolic batch dimension. With "
               "--emit=none it only searches"),
      cl::cat(trainCategory)};
  cl::opt<int64_t> globalBatch{
      "global-batch",
      cl::desc("With --auto: the sequences (rows of the batch) one step "
               "trains on, over all data-parallel ranks and microbatches"),
      cl::init(0), cl::value_desc("N"), cl::cat(trainCategory)};
  cl::opt<bool> explain{
      "explain",
      cl::desc("With --auto: print the fastest candidates with their "
               "predicted step time, memory, energy and cost per step, why "
               "the runners-up lost and why the others were rejected"),
      cl::cat(trainCategory)};
  cl::opt<std::string> candidatesFile{
      "candidates",
      cl::desc("With --auto: write every candidate layout as CSV (predicted "
               "step, memory, energy and cost per step, tokens per step, "
               "and why a rejected one lost), for tools/plan_tradeoff.py"),
      cl::value_desc("file.csv"), cl::cat(trainCategory)};
  cl::opt<int64_t> keepLayers{
      "keep-layers",
      cl::desc("Compile only the first K of the model's repeated layers "
               "(nodes named by layer, e.g. h0.fc or /model/layers.0/mlp), "
               "what read the last layer reading the K-th: what --auto "
               "compiles to cost a layer"),
      cl::init(0), cl::value_desc("K"), cl::cat(trainCategory)};
  cl::opt<std::string> simTrace{
      "sim-trace",
      cl::desc("With --simulate: write the simulated step as a Chrome trace"),
      cl::value_desc("file"), cl::cat(category)};
};

/// Prints diagnostics as `cleave-compile: error: node 'x': message`.
void printDiagnostic(Diagnostic &diag) {
  llvm::raw_ostream &os = driverErrs();
  os << "cleave-compile: ";
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error: os << "error: "; break;
  case DiagnosticSeverity::Warning: os << "warning: "; break;
  case DiagnosticSeverity::Note: os << "note: "; break;
  case DiagnosticSeverity::Remark: os << "remark: "; break;
  }
  // Say where, unless the message names the place itself.
  std::string message = diag.str();
  Location loc = diag.getLocation();
  auto mentions = [&](StringRef what) {
    return StringRef(message).contains(("'" + what + "'").str());
  };
  if (auto name = dyn_cast<NameLoc>(loc)) {
    if (!mentions(name.getName().getValue()))
      os << "node '" << name.getName().getValue() << "': ";
  } else if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    if (!mentions(file.getFilename().getValue())) {
      os << file.getFilename().getValue();
      // A .mlir program's line and column (ONNX locations have none).
      if (file.getLine() > 0)
        os << ":" << file.getLine() << ":" << file.getColumn();
      os << ": ";
    }
  }
  os << message << "\n";
  for (Diagnostic &note : diag.getNotes())
    printDiagnostic(note);
}

std::string defaultOutput(llvm::StringRef input, EmitKind emit) {
  if (emit == EmitKind::Schedule) {
    llvm::SmallString<256> path(llvm::sys::path::filename(input));
    llvm::sys::path::replace_extension(path, "schedule.json");
    return path.str().str();
  }
  if (emit == EmitKind::MLIR || emit == EmitKind::Asm)
    return "-";
  llvm::SmallString<256> path(llvm::sys::path::filename(input));
  llvm::sys::path::replace_extension(path, emit == EmitKind::Exe ? ""
                                                                : ".cleave");
  return path.str().str();
}

int fail(const llvm::Twine &message) {
  driverErrs() << "cleave-compile: error: " << message << "\n";
  return 1;
}

/// The MLIR context of one compile: every dialect loaded, diagnostics
/// printed as cleave-compile's errors, warnings and notes.
struct CompileContext {
  MLIRContext context{registry()};
  ScopedDiagnosticHandler handler{&context, [](Diagnostic &diag) {
                                    printDiagnostic(diag);
                                    return success();
                                  }};
  CompileContext() { context.loadAllAvailableDialects(); }

  static DialectRegistry registry() {
    DialectRegistry registry;
    mlir::registerAllDialects(registry);
    mlir::registerAllExtensions(registry);
    ::cleave::registerAllDialects(registry);
    return registry;
  }
};

/// Reads the model into `context`: a .mlir program, which must have a
/// func.func @main, or an ONNX model imported with `importOptions`. Its
/// errors are reported.
FailureOr<OwningOpRef<ModuleOp>>
readModel(const Options &opts, const ::cleave::ImportOptions &importOptions,
          bool fromMLIR, MLIRContext &context) {
  if (!fromMLIR)
    return ::cleave::importONNXFile(opts.input, context, importOptions);
  OwningOpRef<ModuleOp> parsed =
      parseSourceFile<ModuleOp>(opts.input.getValue(), &context);
  if (!parsed || failed(verify(*parsed)))
    return failure();
  if (!parsed->lookupSymbol<func::FuncOp>("main")) {
    fail("'" + opts.input + "' has no func.func @main");
    return failure();
  }
  return std::move(parsed);
}

/// --emit=schedule: cuts the forward program into --pipeline-stages stages
/// (times the chunks of an interleaved schedule), simulates the schedule
/// with each stage's steps as long as its share of the flops, and writes
/// the timeline as Chrome trace JSON. `options` holds --schedule's kind.
int emitSchedule(ModuleOp module, const Options &opts,
                 ::cleave::pipeline::ScheduleOptions options,
                 const std::string &output) {
  namespace pl = ::cleave::pipeline;
  options.ranks = opts.pipelineStages;
  options.microbatches = opts.microbatches;
  int64_t stages = options.ranks * options.chunks;
  PassManager pm(module.getContext());
  ::cleave::AssignPipelineStagesPassOptions assign;
  assign.stages = stages;
  pm.addPass(::cleave::createAssignPipelineStagesPass(assign));
  if (failed(pm.run(module)))
    return 1;
  // Each stage's flops, relative to the mean stage.
  std::vector<double> flops(stages, 0.0);
  auto main = module.lookupSymbol<func::FuncOp>("main");
  main.walk([&](mlir::cleave::CostOpInterface op) {
    if (auto stage = op->getAttrOfType<IntegerAttr>("cleave.stage"))
      if (!isa<mlir::cleave::ConstantOp>(op))
        flops[stage.getInt()] += static_cast<double>(op.getFlops());
  });
  double total = 0;
  for (double f : flops)
    total += f;
  pl::StepCosts costs;
  for (double f : flops)
    costs.stageWeight.push_back(total > 0 ? f * stages / total : 1.0);
  std::string error;
  std::vector<std::vector<pl::Step>> order = pl::buildSchedule(options, error);
  if (order.empty())
    return fail("--schedule: " + error);
  pl::Simulation sim = pl::simulate(order, options, costs, error);
  if (!error.empty())
    return fail("--schedule: " + error);
  driverErrs() << llvm::formatv(
      "schedule {0}: {1} ranks, {2} microbatches: step time {3:F2} mean-stage "
      "forward passes, bubble {4:P1} (with equal stages the formula gives "
      "{5:P1})\n",
      opts.schedule, options.ranks, options.microbatches, sim.makespan,
      sim.bubble, pl::formulaBubble(options, costs));
  if (llvm::Error err = llvm::writeToOutput(
          output, [&](llvm::raw_ostream &os) -> llvm::Error {
            os << pl::chromeTrace(sim, options);
            return llvm::Error::success();
          }))
    return fail("cannot write '" + output +
                "': " + llvm::toString(std::move(err)));
  return 0;
}
} // namespace

/// "80G" -> 80 * 2^30; none on a bad count or an overflow.
static std::optional<uint64_t> parseByteCount(llvm::StringRef text) {
  uint64_t scale = 1;
  if (!text.empty()) {
    switch (llvm::toUpper(text.back())) {
    case 'K': scale = 1ull << 10; break;
    case 'M': scale = 1ull << 20; break;
    case 'G': scale = 1ull << 30; break;
    case 'T': scale = 1ull << 40; break;
    default: break;
    }
    if (scale != 1)
      text = text.drop_back();
  }
  uint64_t count = 0;
  if (text.getAsInteger(10, count) || count > UINT64_MAX / scale)
    return std::nullopt;
  return count * scale;
}

/// Why `plan` (each pipeline stage) needs more than `budget` bytes per
/// rank, naming its largest tensor; "" when it fits.
static std::string overBudget(const ::cleave::plan::Plan &plan,
                              uint64_t budget) {
  auto check = [&](const ::cleave::plan::Plan &program,
                   const std::string &what) -> std::string {
    if (program.arenaBytes <= budget)
      return "";
    const ::cleave::plan::TensorInfo *largest = nullptr;
    auto consider = [&](const ::cleave::plan::TensorInfo &t) {
      if (!largest || t.byteSize() > largest->byteSize())
        largest = &t;
    };
    for (const auto &t : program.inputs)
      consider(t);
    for (const auto &t : program.outputs)
      consider(t);
    for (const auto &st : program.states)
      consider(st.info);
    std::string message = what + " needs " +
                          std::to_string(program.arenaBytes) +
                          " bytes per rank, over --max-memory of " +
                          std::to_string(budget);
    if (largest)
      message += "; its largest tensor is '" + largest->name + "' (" +
                 std::to_string(largest->byteSize()) + " bytes)";
    for (const auto &[key, value] : program.metadata)
      if (key == "cpu_scratch_bytes")
        message += ", its largest kernel's temporaries " + value + " bytes";
    return message;
  };
  if (!plan.isPipelined())
    return check(plan, "the plan");
  for (auto [c, stage] : llvm::enumerate(plan.stages))
    if (std::string over = check(stage, "pipeline stage " + std::to_string(c));
        !over.empty())
      return over;
  return "";
}

/// --stats: where the compile's time went.
static void printTimings(double importSeconds,
                         const ::cleave::CompileTimings &t) {
  driverErrs() << "time: import " << llvm::format("%.2f", importSeconds)
               << " s, passes " << llvm::format("%.2f", t.passesSeconds)
               << " s";
  if (t.kernels) {
    driverErrs() << ", kernel code " << llvm::format("%.2f", t.codegenSeconds)
                 << " s (" << t.kernels << " kernels: "
                 << t.kernels - t.kernelsFromCache << " compiled";
    if (t.codegenThreads)
      driverErrs() << " on " << t.codegenThreads
                   << (t.codegenThreads == 1 ? " thread" : " threads");
    driverErrs() << ", " << t.kernelsFromCache << " from the cache";
    if (!t.kernelCache)
      driverErrs() << " (off)";
    driverErrs() << "), link " << llvm::format("%.2f", t.linkSeconds) << " s";
  }
  driverErrs() << "\n";
}

/// --stats: what a compiled program holds (one line per part).
static void printPlanStats(const ::cleave::plan::Plan &program, double seconds) {
  ::cleave::plan::PlanStats stats = ::cleave::plan::statistics(program);
  if (!program.mesh.empty())
    driverErrs() << "mesh: " << program.mesh.str() << " ("
                 << program.mesh.worldSize() << " ranks), " << stats.collectives
                 << " collectives (" << stats.asyncCollectives
                 << " asynchronous)\n";
  // Named entries (local SGD's averaging), run every syncEvery steps.
  for (const ::cleave::plan::Plan &entry : program.entries) {
    size_t entryCollectives = 0;
    for (const ::cleave::plan::Command &c : entry.commands)
      entryCollectives += c.kind == ::cleave::plan::CommandKind::Collective;
    driverErrs() << "entry " << entry.entryName;
    if (entry.entryName == ::cleave::plan::kSyncEntry)
      driverErrs() << " (after every " << program.training.syncEvery
                   << (program.training.syncEvery == 1 ? " step" : " steps")
                   << ")";
    driverErrs() << ": " << entry.commands.size() << " commands, "
                 << entryCollectives << " collectives, arena "
                 << entry.arenaBytes << " bytes, " << entry.states.size()
                 << " states borrowed\n";
  }
  if (!program.states.empty())
    driverErrs() << "state per rank: parameters " << stats.parameterBytes
                 << " bytes, optimizer states " << stats.optimizerStateBytes
                 << " bytes, buffers " << stats.bufferBytes << " bytes\n";
  driverErrs() << "plan: " << stats.commands << " commands ("
               << stats.kernels
               << (program.target.rfind("cuda-", 0) == 0 ? " kernel launches, "
                                                       : " kernels, ")
               << stats.gemms << " gemms, " << stats.attentions
               << " attentions), arena " << stats.arenaBytes
               << " bytes (constants " << stats.constantBytes
               << "), kernel object " << stats.kernelObjectBytes
               << " bytes, compiled in " << llvm::format("%.2f", seconds)
               << " s\n";
  if (!program.hostKernelObject.empty()) {
    size_t args = 0, written = 0;
    for (const auto &kernel : program.hostKernelArgs)
      for (const ::cleave::plan::HostKernelArg &a : kernel) {
        ++args;
        written += a.written;
      }
    driverErrs() << "host kernels: " << program.hostKernelArgs.size()
                 << " for the CUDA host doubles, object "
                 << program.hostKernelObject.size() << " bytes; " << args
                 << " arguments, " << written << " written\n";
  }
  if (stats.referencedBytes)
    driverErrs() << "initial parameters: " << stats.referencedBytes
                 << " bytes referenced from "
                 << llvm::join(stats.referencedFiles, ", ")
                 << " (each rank reads its shards when it starts; "
                    "--embed-weights copies them into the plan)\n";
  const size_t *epilogues = stats.gemmEpilogues;
  if (epilogues[1] + epilogues[2] + epilogues[3])
    driverErrs() << "gemm epilogues: " << epilogues[1] << " bias, "
                 << epilogues[2] << " gelu_bias, " << epilogues[3]
                 << " gelu\n";
  llvm::StringMap<std::string> meta;
  for (const auto &[key, value] : program.metadata)
    meta[key] = value;
  if (meta.count("recompute_policy"))
    driverErrs() << "recompute: policy " << meta["recompute_policy"]
                 << ", saved activations "
                 << meta["saved_activation_bytes_before"] << " -> "
                 << meta["saved_activation_bytes_after"]
                 << " bytes, recomputed flops " << meta["recompute_flops"]
                 << ", extra flops " << meta["recompute_extra_flops"]
                 << " (total " << meta["flops"] << ")\n";
  if (meta.count("activation_bytes"))
    driverErrs() << "step memory: activations per microbatch "
                 << meta["activation_bytes"] << " bytes, gradient sums "
                 << meta["accumulator_bytes"] << " bytes, made once for the "
                 << "microbatches " << meta["kept_bytes"] << " bytes\n";
}

/// --report of a pipelined plan: the schedule's bubble, simulated with
/// equal stages and by the formula, and each stage's memory.
static void printPipelineSummary(const ::cleave::plan::Plan &plan,
                                 const std::string &schedule,
                                 int64_t microbatches, llvm::raw_ostream &os) {
  namespace pl = ::cleave::pipeline;
  pl::ScheduleOptions options;
  if (!pl::parseScheduleKind(schedule, options).empty())
    return;
  options.ranks = static_cast<int64_t>(plan.stages.size());
  options.microbatches = microbatches;
  std::string error;
  auto order = pl::buildSchedule(options, error);
  pl::StepCosts costs;
  pl::Simulation sim = error.empty() ? pl::simulate(order, options, costs, error)
                                     : pl::Simulation();
  if (!error.empty())
    return;
  os << llvm::formatv("pipeline: schedule {0}, {1} ranks, {2} microbatches: "
                      "bubble {3:P1} simulated with equal stages (B = 2F), "
                      "{4:P1} by the formula\n",
                      schedule, options.ranks, microbatches, sim.bubble,
                      pl::formulaBubble(options, costs));
  for (auto [c, stage] : llvm::enumerate(plan.stages)) {
    uint64_t states = 0;
    for (const ::cleave::plan::StateTensor &st : stage.states)
      states += st.info.byteSize();
    os << llvm::formatv("  stage {0}: peak {1} bytes (arena), states {2} "
                        "bytes, at most {3} microbatches' activations held\n",
                        c, stage.arenaBytes, states,
                        c < sim.peakInFlight.size() ? sim.peakInFlight[c] : 0);
  }
}

namespace {
const char kOverview[] =
    "cleave-compile: compile an ONNX model, or a program in the cleave "
    "dialect (.mlir, as cleave-opt prints it; it may declare a cleave.mesh "
    "and use collectives), into a Cleave plan (.cleave)\n\n"
    "  cleave-compile model.onnx -o model.cleave\n"
    "  cleave-compile model.onnx --emit=mlir --phase=kernels\n"
    "  cleave-compile step.mlir -o step.cleave\n";

/// The options, registered once per process (llvm::cl keeps them in a
/// global registry): cleave-compile parses its command line into them, and
/// runCompile parses each invocation's arguments into them again.
Options &options() {
  static Options *opts = new Options;
  return *opts;
}

int compileWith(Options &opts, const ::cleave::CompileInvocation &inv,
                const char *argv0);
} // namespace

int (::cleave::compileMain)(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  Options &opts = options();
  cl::HideUnrelatedOptions({&opts.category, &opts.trainCategory});
  cl::ParseCommandLineOptions(argc, argv, kOverview);
  return compileWith(opts, {}, argv[0]);
}

std::vector<::cleave::CompileOptionInfo> (::cleave::compileOptionTable)() {
  Options &opts = options();
  std::vector<CompileOptionInfo> table;
  for (auto &[name, option] : cl::getRegisteredOptions()) {
    bool ours = llvm::is_contained(option->Categories, &opts.category) ||
                llvm::is_contained(option->Categories, &opts.trainCategory);
    if (name.empty() || option->ArgStr != name || !ours)
      continue;
    CompileOptionInfo info;
    info.name = name.str();
    info.help = option->HelpStr.str();
    info.valueName = option->ValueStr.str();
    if (dynamic_cast<cl::opt<bool> *>(option))
      info.kind = CompileOptionInfo::Flag;
    else if (dynamic_cast<cl::list<std::string> *>(option))
      info.kind = CompileOptionInfo::List;
    else
      info.kind = CompileOptionInfo::Value;
    table.push_back(std::move(info));
  }
  llvm::sort(table, [](const CompileOptionInfo &a, const CompileOptionInfo &b) {
    return a.name < b.name;
  });
  return table;
}

int (::cleave::runCompile)(const CompileInvocation &inv) {
  // The options are process-wide: one compile at a time.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  Options &opts = options();
  cl::ResetAllOptionOccurrences();
  std::vector<const char *> argv{"cleave-compile"};
  for (const std::string &arg : inv.args)
    argv.push_back(arg.c_str());
  gMessages = inv.messages;
  gOutput = inv.output;
  llvm::scope_exit restore([] {
    gMessages = nullptr;
    gOutput = nullptr;
  });
  // llvm::cl reports a bad value through llvm::errs() whatever stream it is
  // given, so stderr goes to a temporary file while the arguments parse.
  std::string parseErrors;
  bool parsed;
  {
    llvm::errs().flush();
    std::FILE *capture = std::tmpfile();
    int saved = capture ? ::dup(2) : -1;
    if (saved >= 0)
      ::dup2(::fileno(capture), 2);
    llvm::raw_string_ostream errs(parseErrors);
    parsed = cl::ParseCommandLineOptions(static_cast<int>(argv.size()),
                                         argv.data(), kOverview, &errs);
    llvm::errs().flush();
    if (saved >= 0) {
      ::dup2(saved, 2);
      ::close(saved);
      std::rewind(capture);
      char buffer[4096];
      size_t n;
      while ((n = std::fread(buffer, 1, sizeof(buffer), capture)) > 0)
        parseErrors.append(buffer, n);
    }
    if (capture)
      std::fclose(capture);
  }
  if (!parsed) {
    // llvm::cl prints "cleave-compile: <problem>" (a bad value twice);
    // say each problem once, as an error.
    llvm::SmallVector<StringRef> lines;
    StringRef(parseErrors).split(lines, '\n', -1, /*KeepEmpty=*/false);
    std::set<std::string> said;
    for (StringRef line : lines) {
      line.consume_front("cleave-compile: ");
      if (said.insert(line.trim().str()).second)
        driverErrs() << "cleave-compile: error: " << line.trim() << "\n";
    }
    if (said.empty())
      driverErrs() << "cleave-compile: error: bad command line\n";
    return 2;
  }
  return compileWith(opts, inv, argv[0]);
}

namespace {
/// --auto's attempts at a layout whose compiled plan fits --max-memory.
struct AutoAttempt {
  /// The search, made once for all attempts.
  std::optional<::cleave::sim::PlanSearch> search;
  /// The most any compiled choice needed over what the planner predicted
  /// for it: later choices must fit with their predictions scaled by it.
  double memoryScale = 1;
  /// The chosen candidate's predicted bytes per device.
  double predictedBytes = 0;
  /// The feasible candidates (by index) chosen so far.
  std::set<size_t> tried;
};

/// --auto: searches the layouts of the training step (sim::searchPlans),
/// compiling each profile the planner asks for from `importOptions` and
/// `compileOptions`, prints the search with --explain, then sets both (and
/// the options the reports read) to the chosen layout. `searchOnly`: with
/// --emit=none, nothing more to do. Returns 0, or the exit code of an
/// error it reported.
int planLayout(Options &opts, ::cleave::ImportOptions &importOptions,
               ::cleave::CompileOptions &compileOptions,
               const ::cleave::sim::Cluster &cluster,
               std::optional<uint64_t> budget, bool &searchOnly,
               bool optionsOnly, AutoAttempt &attempt) {
  namespace sim = ::cleave::sim;
  // What the planner decides is not the user's to give.
  const cl::Option *decided[] = {&opts.mesh,
                                 &opts.dataParallel,
                                 &opts.microbatches,
                                 &opts.schedule,
                                 &opts.stageBoundaries,
                                 &opts.recompute,
                                 &opts.sequenceParallel,
                                 &opts.zero,
                                 &opts.keepLayers,
                                 &opts.overlapCollectives,
                                 &opts.bucketMB,
                                 &opts.sync,
                                 &opts.simSchedule};
  for (const cl::Option *given : decided)
    if (given->getNumOccurrences())
      return fail("--auto chooses the layout; it cannot be combined with --" +
                  given->ArgStr);
  if (!opts.shard.empty() || !opts.shardingFile.empty())
    return fail("--auto chooses the layout; it cannot be combined with "
                "--shard or --sharding-file");
  if (!opts.train || !compileOptions.train)
    return fail("--auto plans a training step: it needs --train");
  if (opts.globalBatch < 1)
    return fail("--auto needs --global-batch N (the sequences one step "
                "trains on)");
  if (llvm::StringRef(opts.input).ends_with(".mlir"))
    return fail("--auto plans ONNX models (their layers are named by their "
                "nodes), not .mlir programs");
  if (opts.emit == EmitKind::MLIR || opts.emit == EmitKind::Asm ||
      opts.emit == EmitKind::Schedule)
    return fail("--auto writes a plan (--emit=plan, exe, sim or none)");
  if (optionsOnly)
    return 0;

  MLIRContext outlineContext;
  ScopedDiagnosticHandler outlineHandler(&outlineContext, [](Diagnostic &d) {
    printDiagnostic(d);
    return success();
  });
  FailureOr<::cleave::ModelOutline> outline =
      ::cleave::outlineONNXModel(opts.input, outlineContext);
  if (failed(outline))
    return 1;
  if (!outline->mismatch.empty())
    return fail("--auto costs a model by its repeated layers: " +
                outline->mismatch);
  int64_t layers = static_cast<int64_t>(outline->layers.size());
  if (layers < ::cleave::sim::kProfileLayers)
    return fail("--auto costs a model by its repeated layers (nodes named "
                "by layer, e.g. h0.fc or /model/layers.0/mlp); '" +
                opts.input + "' has " + std::to_string(layers) +
                ", fewer than " +
                std::to_string(::cleave::sim::kProfileLayers));
  // The batch inputs: a symbolic first dimension; the others must be known.
  std::vector<const ::cleave::ModelOutline::Input *> batched;
  for (const auto &input : outline->inputs) {
    if (input.shape.empty() || input.shape[0] >= 0)
      continue;
    if (importOptions.inputShapes.count(input.name))
      return fail("--auto sets the batch of input '" + input.name +
                  "'; do not pin it with --input-shape");
    for (size_t d = 1; d < input.shape.size(); ++d)
      if (input.shape[d] < 0)
        return fail("--auto sets only the batch (first) dimension of input '" +
                    input.name + "'; its dimension " + std::to_string(d) +
                    " is symbolic too");
    batched.push_back(&input);
  }
  if (batched.empty())
    return fail("--auto sets the batch of the model's inputs: '" + opts.input +
                "' has no input with a symbolic first dimension (export with "
                "a dynamic batch: torch.onnx.export's dynamic_axes, "
                "tools/models/make_gpt.py --dynamic-batch)");
  auto pinBatch = [&](::cleave::ImportOptions &io, int64_t rows) {
    for (const auto *input : batched) {
      llvm::SmallVector<int64_t> shape(input->shape.begin(),
                                       input->shape.end());
      shape[0] = rows;
      io.inputShapes[input->name] = shape;
    }
  };
  auto meshOf = [](int64_t dp, int64_t pp, int64_t tp) {
    std::vector<std::pair<std::string, int64_t>> mesh;
    for (auto [name, size] : {std::pair<const char *, int64_t>{"dp", dp},
                              {"pp", pp},
                              {"tp", tp}})
      if (size > 1)
        mesh.push_back({name, size});
    return mesh;
  };
  // Stage boundaries cutting the layers into `stages` equal runs.
  auto boundaries = [&](int64_t stages, int64_t count) {
    std::string cut;
    for (int64_t i = 1; i < stages; ++i)
      cut += (cut.empty() ? "" : ",") +
             outline->layers[count / stages * i - 1];
    return cut;
  };
  auto layoutOptions = [&](::cleave::CompileOptions &co, int64_t dp, int64_t pp,
                           int64_t tp, bool sp, int zero, int64_t microbatches,
                           const std::string &schedule,
                           const std::string &recompute, int64_t stages,
                           int64_t count, bool overlap, double bucketMB) {
    // pp pipeline ranks run `stages` stage programs (pp * chunks).
    co.train->microbatches = microbatches;
    co.train->pipelineRanks = pp;
    co.train->schedule = pp > 1 ? schedule : "1f1b";
    co.train->stageBoundaries = pp > 1 ? boundaries(stages, count) : "";
    co.recompute = recompute;
    ::cleave::ShardProgramOptions shard;
    shard.mesh = meshOf(dp, pp, tp);
    shard.sequenceParallel = sp;
    shard.zero = zero;
    shard.overlap = overlap;
    shard.bucketMB = bucketMB;
    if (shard.mesh.empty())
      co.shard.reset();
    else
      co.shard = std::move(shard);
  };

  // The profiles' model, cut once.
  FailureOr<std::string> cut = ::cleave::cutONNXModel(
      opts.input, ::cleave::sim::kProfileLayers, outlineContext);
  if (failed(cut))
    return 1;
  auto profileModel = std::make_shared<const std::string>(std::move(*cut));

  sim::PlannerOptions planner;
  planner.devices = cluster.devices();
  planner.globalBatch = opts.globalBatch;
  planner.layers = layers;
  planner.memoryLimit = budget ? double(*budget) : cluster.device.memoryBytes;
  planner.compileProfile = [&](const sim::ProfileKey &key,
                               ::cleave::plan::Plan &out) -> std::string {
    ::cleave::ImportOptions io = importOptions;
    io.modelBytes = profileModel;
    pinBatch(io, sim::kProfileDataParallel * sim::kProfileMicrobatches *
                     key.microbatchSize);
    ::cleave::CompileOptions co = compileOptions;
    co.kernelCode = false;
    co.verifyPasses = false;
    co.timings = nullptr;
    co.stepReport = nullptr;
    co.memoryReport = nullptr;
    co.dump = nullptr;
    co.kernelAssembly = nullptr;
    layoutOptions(co, sim::kProfileDataParallel, sim::kProfileLayers, key.tp,
                  key.sequenceParallel, key.zero, sim::kProfileMicrobatches,
                  "1f1b", key.recompute, sim::kProfileLayers,
                  sim::kProfileLayers,
                  /*overlap=*/false, opts.bucketMB);
    // Profiles compile on several threads at once: one thread each.
    MLIRContext context(CompileContext::registry(),
                        MLIRContext::Threading::DISABLED);
    context.loadAllAvailableDialects();
    std::string errors;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error && errors.empty())
        errors = d.str();
      return success();
    });
    FailureOr<OwningOpRef<ModuleOp>> module =
        ::cleave::importONNXFile(opts.input, context, io);
    if (failed(module))
      return errors.empty() ? "the model did not import" : errors;
    FailureOr<::cleave::plan::Plan> plan = compileToPlan(**module, co);
    if (failed(plan))
      return errors.empty() ? "it did not compile" : errors;
    out = std::move(*plan);
    return "";
  };
  bool first = !attempt.search;
  if (first) {
    attempt.search.emplace();
    if (std::string e = sim::searchPlans(planner, cluster, *attempt.search);
        !e.empty())
      return fail("--auto: " + e);
  }
  const sim::PlanSearch &search = *attempt.search;
  // The fastest candidate not chosen yet that fits with its prediction
  // scaled; else the fastest not chosen yet (the scale comes from other
  // layouts, and may not hold for it).
  auto untried = [&](bool scaled) {
    for (size_t i = 0; i < search.feasible.size(); ++i)
      if (!attempt.tried.count(i) &&
          (!scaled || planner.memoryLimit <= 0 ||
           search.feasible[i].memoryBytes * attempt.memoryScale <=
               planner.memoryLimit))
        return i;
    return search.feasible.size();
  };
  size_t choice = untried(/*scaled=*/true);
  if (choice == search.feasible.size())
    choice = untried(/*scaled=*/false);
  if (opts.explain && first)
    driverErrs() << sim::explainSearch(search, cluster, planner, 8);
  if (!opts.candidatesFile.empty() && first) {
    // Tokens per step: the global batch times the other dimensions of the
    // first integer batch input (B x T token ids), else of the first.
    double tokens = double(opts.globalBatch);
    for (const auto *input : batched) {
      double per = 1;
      for (size_t d = 1; d < input->shape.size(); ++d)
        per *= double(input->shape[d]);
      tokens = double(opts.globalBatch) * per;
      break;
    }
    std::string csv = sim::candidatesCsv(search, cluster, planner, tokens);
    std::string error;
    if (!::cleave::writeFileAtomically(opts.candidatesFile, csv.data(),
                                       csv.size(), &error))
      return fail("cannot write --candidates '" + opts.candidatesFile +
                  "': " + error);
  }
  if (search.feasible.empty()) {
    // The layout that needs the least memory says most.
    const sim::Candidate *closest = nullptr;
    for (const sim::Candidate &c : search.rejected)
      if (c.memoryBytes > 0 &&
          (!closest || c.memoryBytes < closest->memoryBytes))
        closest = &c;
    if (!closest && !search.rejected.empty())
      closest = &search.rejected.front();
    std::string why = closest ? closest->layout() + ": " + closest->rejected
                              : std::string("no candidate");
    return fail("--auto found no layout of '" + opts.input + "' for " +
                std::to_string(planner.devices) + " devices of " +
                cluster.name + " within " +
                std::to_string(uint64_t(planner.memoryLimit)) +
                " bytes each (e.g. " + why +
                "; --explain lists every candidate)");
  }
  if (choice >= search.feasible.size())
    return fail("--auto: every layout predicted to fit (" +
                std::to_string(attempt.tried.size()) +
                ") is over --max-memory once compiled");
  const sim::Candidate &best = search.feasible[choice];
  attempt.predictedBytes = best.memoryBytes;
  attempt.tried.insert(choice);
  driverErrs() << llvm::formatv(
      "cleave-compile: --auto chose {0} (predicted step {1:F3} ms, {2} per "
      "device; {3} candidates in {4:F1} s)\n",
      best.options(), best.stepSeconds * 1e3,
      sim::formatMemory(best.memoryBytes),
      search.feasible.size() + search.rejected.size(), search.searchSeconds);
  pinBatch(importOptions, opts.globalBatch);
  layoutOptions(compileOptions, best.dp, best.pp, best.tp,
                best.sequenceParallel, best.zero, best.microbatches,
                best.schedule(), best.recompute, best.pp * best.chunks, layers,
                best.overlap, best.bucketMB);
  // What the reports read.
  opts.microbatches = best.microbatches;
  opts.schedule = best.schedule();
  opts.zero = best.zero;
  searchOnly = opts.emit == EmitKind::None;
  return 0;
}

int compileWith(Options &opts, const ::cleave::CompileInvocation &inv,
                const char *argv0) {
  using namespace ::cleave;
  auto start = std::chrono::steady_clock::now();

  if (opts.target != "cpu" && opts.target != "cuda")
    return fail("unknown target '" + opts.target +
                "' (supported: cpu, cuda)");
  if (opts.cudaArch != "sm_90a" && opts.cudaArch != "sm_90" &&
      opts.cudaArch != "sm_80")
    return fail("unsupported --cuda-arch '" + opts.cudaArch +
                "' (supported: sm_90a, sm_90, sm_80)");

  ImportOptions importOptions;
  for (const std::string &flag : opts.inputShapes) {
    std::string error = parseInputShapeFlag(flag, importOptions);
    if (!error.empty())
      return fail(error);
  }
  for (const std::string &flag : opts.freezeInputs) {
    std::string error = parseFreezeInputFlag(flag, importOptions);
    if (!error.empty())
      return fail(error);
  }

  if (opts.batchNorm != "train" && opts.batchNorm != "frozen")
    return fail("unknown --batch-norm '" + opts.batchNorm +
                "' (expected train or frozen)");
  importOptions.batchNormTraining = opts.train && opts.batchNorm == "train";
  importOptions.keepParameters = opts.train;
  // A model declared without its weights trains from drawn ones only.
  importOptions.absentWeights = opts.train && !opts.initParameters.empty();
  if (opts.keepLayers < 0)
    return fail("--keep-layers must not be negative");
  importOptions.keepLayers = opts.keepLayers;
  // A .mlir file is a program in the cleave dialect (global, or already
  // per-rank with a cleave.mesh and collectives), as cleave-opt prints it.
  bool fromMLIR = llvm::StringRef(opts.input).ends_with(".mlir");
  if ((!opts.simSchedule.empty() || !opts.simTrace.empty()) && !opts.simulate)
    return fail(std::string(opts.simSchedule.empty() ? "--sim-trace"
                                                     : "--sim-schedule") +
                " needs --simulate");
  if (fromMLIR && (!opts.inputShapes.empty() || !opts.freezeInputs.empty()))
    return fail("--input-shape and --freeze-input apply to ONNX models, not "
                "to a .mlir program");

  std::string output = opts.output.empty()
                           ? defaultOutput(opts.input, opts.emit)
                           : opts.output.getValue();
  if (opts.emit == EmitKind::Schedule) {
    ::cleave::pipeline::ScheduleOptions schedule;
    if (std::string error =
            ::cleave::pipeline::parseScheduleKind(opts.schedule, schedule);
        !error.empty())
      return fail("--schedule: " + error);
    if (opts.pipelineStages < 1)
      return fail("--emit=schedule needs --pipeline-stages (at least 1)");
    if (inv.stopAfterOptions)
      return 0;
    CompileContext compile;
    FailureOr<OwningOpRef<ModuleOp>> module =
        readModel(opts, importOptions, fromMLIR, compile.context);
    if (failed(module))
      return 1;
    return emitSchedule(**module, opts, schedule, output);
  }
  if (opts.pipelineStages.getNumOccurrences())
    return fail("--pipeline-stages applies to --emit=schedule; a plan's "
                "pipeline is the pp axis of --mesh (e.g. --mesh pp=4,dp=2)");
  // Pipeline ranks: the mesh's pp axis.
  int64_t pipelineRanks = 1;
  if (!opts.mesh.empty()) {
    ::cleave::ShardProgramOptions parsed;
    if (std::string error = ::cleave::parseMeshSpec(opts.mesh, parsed.mesh);
        !error.empty())
      return fail(error);
    for (const auto &[name, size] : parsed.mesh)
      if (name == "pp")
        pipelineRanks = size;
  }
  if (pipelineRanks == 1 && (opts.schedule.getNumOccurrences() ||
                             opts.stageBoundaries.getNumOccurrences()))
    return fail("--schedule and --stage-boundaries need a pipeline: a pp "
                "axis in --mesh (or --emit=schedule)");
  if (pipelineRanks > 1 && !opts.train)
    return fail("a pp mesh axis needs --train (pipelines run training steps)");
  if (pipelineRanks > 1 && opts.overlapCollectives)
    return fail("--overlap-collectives is not supported with a pp mesh axis "
                "yet");
  if (pipelineRanks > 1 && !opts.probe.empty())
    return fail("--probe is not supported with a pp mesh axis");

  CompileOptions compileOptions;
  compileOptions.target =
      opts.target == "cuda" ? ::cleave::Target::CUDA : ::cleave::Target::CPU;
  compileOptions.cudaChip = opts.cudaArch;
  if (opts.train) {
    BuildTrainStepPassOptions train;
    train.trainable = opts.trainable;
    train.frozen = opts.frozen;
    train.noDecay = opts.noDecay;
    train.untie = opts.untie;
    train.returnGradients = opts.returnGradients;
    if (opts.dataParallel < 1 || opts.dataParallel > 4096)
      return fail("--data-parallel must be from 1 to 4096");
    train.dataParallel = opts.dataParallel;
    if (opts.microbatches < 1 || opts.microbatches > 4096)
      return fail("--microbatches must be from 1 to 4096");
    if (opts.microbatches > 1 && !opts.probe.empty())
      return fail("--probe returns one forward pass's activations; it "
                  "needs --microbatches=1");
    train.microbatches = opts.microbatches;
    {
      ::cleave::SyncMode mode;
      if (std::string error = ::cleave::parseSyncMode(
              opts.sync, opts.outerOptimizer, opts.outerLr,
              opts.outerMomentum, mode);
          !error.empty())
        return fail(error);
      if (mode.kind != ::cleave::SyncMode::Step && !opts.mesh.empty()) {
        // Name what the mesh asks for beyond plain data parallelism.
        std::string what;
        ::cleave::ShardProgramOptions parsed;
        (void)::cleave::parseMeshSpec(opts.mesh, parsed.mesh);
        for (const auto &[name, size] : parsed.mesh)
          if (name == "tp")
            what += ", tensor parallelism over tp";
          else if (name == "pp")
            what += ", a pipeline over pp";
        if (opts.zero)
          what += ", ZeRO-" + std::to_string(opts.zero);
        return fail(
            "--sync=" + opts.sync + " is not supported with --mesh " +
            opts.mesh + (what.empty() ? "" : " (" + what.substr(2) + ")") +
            ": the partitioner derives every reduction from shardings and "
            "has none for a value that differs per data-parallel replica "
            "(local SGD's parameters and optimizer states, a delayed "
            "step's unreduced gradients); data parallelism alone works "
            "with --data-parallel=N");
      }
      if (mode.kind != ::cleave::SyncMode::Step && opts.dataParallel < 2)
        return fail("--sync=" + opts.sync +
                    " needs data-parallel replicas: give --data-parallel=N "
                    "with N > 1");
      if (mode.nesterov && !opts.initParameters.empty())
        return fail("--outer-optimizer with --init-parameters: DiLoCo's "
                    "global copy starts from the model's initializers, not "
                    "from generated values");
    }
    train.sync = opts.sync;
    train.outerOptimizer = opts.outerOptimizer;
    train.outerLr = opts.outerLr;
    train.outerMomentum = opts.outerMomentum;
    train.pipelineRanks = pipelineRanks;
    train.schedule = opts.schedule;
    train.stageBoundaries = opts.stageBoundaries;
    train.loss = opts.loss;
    train.optimizer = opts.optimizer;
    train.momentum = opts.momentum;
    train.beta1 = opts.beta1;
    train.beta2 = opts.beta2;
    train.epsilon = opts.adamEps;
    train.weightDecay = opts.weightDecay;
    train.clipGradNorm = opts.clipGradNorm;
    train.lossScale = !opts.lossScale.empty() ? opts.lossScale.getValue()
                      : opts.precision == "fp16" ? std::string("dynamic")
                                                 : std::string("none");
    train.lossScaleInit = opts.lossScaleInit;
    train.lossScaleWindow = opts.lossScaleWindow;
    compileOptions.train = train;
    compileOptions.probe = opts.probe;
  } else if (!opts.probe.empty()) {
    return fail("--probe needs --train");
  } else if (!opts.loss.empty()) {
    return fail("--loss needs --train");
  } else if (opts.dataParallel != 1) {
    return fail("--data-parallel needs --train");
  } else if (opts.sync != "step" || !opts.outerOptimizer.empty()) {
    return fail("--sync and --outer-optimizer need --train");
  } else if (opts.microbatches != 1 && opts.emit != EmitKind::Schedule) {
    return fail("--microbatches needs --train");
  }
  if (!opts.mesh.empty()) {
    if (opts.dataParallel != 1)
      return fail("--mesh replaces --data-parallel; give one of them");
    ::cleave::ShardProgramOptions shardOptions;
    if (std::string error =
            ::cleave::parseMeshSpec(opts.mesh, shardOptions.mesh);
        !error.empty())
      return fail(error);
    // Rank placement: a rank is the row-major index of its coordinates, so
    // the last axis varies fastest. tp goes last (its ranks exchange the
    // most, inside a node), then pp, then dp (across nodes); other axes
    // keep their place before them.
    {
      auto place = [](const std::string &axis) {
        return axis == "dp" ? 1 : axis == "pp" ? 2 : axis == "tp" ? 3 : 0;
      };
      auto placed = shardOptions.mesh;
      std::stable_sort(placed.begin(), placed.end(),
                       [&](const auto &a, const auto &b) {
                         return place(a.first) < place(b.first);
                       });
      if (placed != shardOptions.mesh) {
        std::string order;
        for (const auto &[name, size] : placed)
          order += (order.empty() ? "" : ",") + name + "=" +
                   std::to_string(size);
        driverErrs() << "cleave-compile: note: --mesh " << opts.mesh
                     << " laid out as " << order
                     << " (rank = row-major index: tp fastest, inside a "
                        "node; then pp; then dp, across nodes)\n";
        shardOptions.mesh = std::move(placed);
      }
    }
    // regex=[{axes}, ...] from --shard, then from --sharding-file.
    auto addRule = [&](StringRef rule, const std::string &source) -> bool {
      size_t eq = rule.find("=[");
      if (eq == StringRef::npos)
        return false;
      shardOptions.shardings.push_back({rule.take_front(eq).str(),
                                        rule.drop_front(eq + 1).str(),
                                        source});
      return true;
    };
    for (const std::string &rule : opts.shard)
      if (!addRule(rule, "--shard"))
        return fail("bad --shard '" + rule +
                    "' (expected regex=[{axes}, ...], e.g. "
                    "w1=[{}, {\"tp\"}])");
    if (!opts.shardingFile.empty()) {
      auto file = llvm::MemoryBuffer::getFile(opts.shardingFile, /*IsText=*/true);
      if (!file)
        return fail("cannot read --sharding-file '" + opts.shardingFile +
                    "': " + file.getError().message());
      SmallVector<StringRef> lines;
      (*file)->getBuffer().split(lines, '\n');
      for (auto [i, line] : llvm::enumerate(lines)) {
        StringRef rule = line.trim();
        std::string source =
            opts.shardingFile.getValue() + ":" + std::to_string(i + 1);
        if (rule.empty() || rule.starts_with("#"))
          continue;
        if (!addRule(rule, source))
          return fail(source + ": bad sharding rule '" + rule.str() +
                      "' (expected regex=[{axes}, ...], e.g. "
                      "w1=[{}, {\"tp\"}])");
      }
    }
    shardOptions.zero = opts.zero;
    shardOptions.dropCollective = opts.debugDropCollective;
    shardOptions.overlap = opts.overlapCollectives;
    shardOptions.sequenceParallel = opts.sequenceParallel;
    if (!(opts.bucketMB >= 0.0) || opts.bucketMB > 65536.0)
      return fail("--bucket-mb must be from 0 to 65536");
    shardOptions.bucketMB = opts.bucketMB;
    if (opts.explainSharding)
      shardOptions.explain = [](const std::string &report) {
        driverErrs() << report;
      };
    compileOptions.shard = std::move(shardOptions);
  } else if (!opts.shard.empty()) {
    return fail("--shard needs --mesh");
  } else if (!opts.shardingFile.empty()) {
    return fail("--sharding-file needs --mesh");
  } else if (opts.explainSharding) {
    return fail("--explain-sharding needs --mesh");
  } else if (opts.zero != 0) {
    return fail("--zero needs --mesh with a dp axis");
  } else if (opts.overlapCollectives) {
    return fail("--overlap-collectives needs --mesh");
  } else if (opts.sequenceParallel) {
    return fail("--sequence-parallel needs --mesh with a tp axis");
  }
  // The optimizer name and learning-rate schedule of a training plan (built
  // by --train, or a .mlir program that is already a training step).
  {
    plan::TrainingInfo &info = compileOptions.plan.training;
    // A hand-written step's update is whatever the program computes: no
    // optimizer name.
    info.optimizer = fromMLIR && !opts.train ? std::string()
                                               : opts.optimizer.getValue();
    info.baseLR = opts.lr;
    info.minLR = opts.minLR;
    info.warmupSteps = opts.warmupSteps;
    info.totalSteps = opts.totalSteps;
    info.referenceBatch = opts.lrScaleWithBatch;
    if (opts.lrSchedule == "constant")
      info.schedule = opts.warmupSteps > 0 ? plan::LRSchedule::LinearWarmup
                                           : plan::LRSchedule::Constant;
    else if (opts.lrSchedule == "warmup")
      info.schedule = plan::LRSchedule::LinearWarmup;
    else if (opts.lrSchedule == "cosine")
      info.schedule = plan::LRSchedule::Cosine;
    else
      return fail("unknown --lr-schedule '" + opts.lrSchedule +
                  "' (expected constant, warmup or cosine)");
    if (info.schedule == plan::LRSchedule::Cosine &&
        opts.totalSteps <= opts.warmupSteps)
      return fail("--lr-schedule=cosine needs --total-steps greater than "
                  "--warmup-steps");
  }
  if (opts.precision != "fp32" && opts.precision != "bf16" &&
      opts.precision != "fp16")
    return fail("unknown --precision '" + opts.precision +
                "' (expected fp32, bf16 or fp16)");
  if (!opts.train && !opts.lossScale.empty())
    return fail("--loss-scale needs --train");
  if (!opts.train && opts.recompute != "none")
    return fail("--recompute needs --train");
  ::cleave::RecomputePolicy recompute;
  if (std::string error = parseRecomputePolicy(opts.recompute, recompute);
      !error.empty())
    return fail("--recompute: " + error);
  if (opts.lowPrecisionGradients && (!opts.train || opts.precision == "fp32"))
    return fail("--low-precision-gradients needs --train and "
                "--precision=bf16 or fp16");
  compileOptions.recompute = opts.recompute;
  compileOptions.precision = opts.precision;
  compileOptions.lowPrecisionGradients = opts.lowPrecisionGradients;
  if (opts.lowPrecisionParameters && (!opts.train || opts.precision == "fp32"))
    return fail("--low-precision-parameters needs --train and "
                "--precision=bf16 or fp16");
  compileOptions.lowPrecisionParameters = opts.lowPrecisionParameters;
  compileOptions.plan.useLibraryGemm = !opts.noLibraryGemm;
  compileOptions.plan.useGemmEpilogues = !opts.noGemmEpilogue;
  compileOptions.convolutionsAsGemm = !opts.directConvolutions;
  compileOptions.fusedAttention = !opts.noFusedAttention;
  compileOptions.recognizeComposites = !opts.noRecognizeComposites;
  compileOptions.plan.referenceExternalData = !opts.embedWeights;
  compileOptions.plan.drawWeightMatrices = !opts.initParameters.empty();
  compileOptions.cpuRowKernels = opts.cpuRowKernels;
  compileOptions.cpuEmulateCuda = opts.cpuEmulateCuda;
  compileOptions.cudaHostKernels = opts.cudaHostKernels;
  if (opts.kernelOptLevel > 3)
    return fail("bad --kernel-opt-level " +
                std::to_string(opts.kernelOptLevel) + " (expected 0 to 3)");
  compileOptions.kernelOptLevel = opts.kernelOptLevel;
  compileOptions.codegenThreads = opts.jobs;
  if (opts.kernelParallelMinWork < 0)
    return fail("--kernel-parallel-min-work must not be negative");
  compileOptions.kernelParallelMinWork = opts.kernelParallelMinWork;
  if (!opts.noKernelCache)
    compileOptions.kernelCacheDir = defaultKernelCacheDir();
  CompileTimings timings;
  compileOptions.timings = &timings;
  if (opts.cpuRowKernels && opts.target != "cpu")
    return fail("--cpu-row-kernels applies to --target=cpu only");
  if (opts.cpuEmulateCuda && opts.target != "cpu")
    return fail("--cpu-emulate-cuda applies to --target=cpu only");
  if (opts.cudaHostKernels && opts.target != "cuda")
    return fail("--cuda-host-kernels applies to --target=cuda only");
  compileOptions.plan.modelName =
      llvm::sys::path::filename(opts.input).str();
  llvm::SmallString<256> absolute(opts.input.getValue());
  if (!llvm::sys::fs::make_absolute(absolute))
    compileOptions.plan.sourceModel = absolute.str().str();
  std::string textOutput;
  if (opts.emit == EmitKind::MLIR) {
    compileOptions.stopAfter = opts.phase;
    compileOptions.dump = [&](Operation *op) {
      llvm::raw_string_ostream os(textOutput);
      op->print(os);
      os << "\n";
    };
  }
  if (opts.emit == EmitKind::Asm) {
    if (opts.target != "cpu")
      return fail("--emit=asm prints the CPU kernels' assembly; it needs "
                  "--target=cpu");
    compileOptions.kernelAssembly = [&](const std::string &text) {
      textOutput += text;
    };
  }
  compileOptions.kernelCode =
      opts.emit != EmitKind::None && opts.emit != EmitKind::Sim;
  if (opts.printMemoryPlan)
    compileOptions.memoryReport = [](const std::string &report) {
      driverErrs() << report;
    };
  if (opts.report && opts.emit == EmitKind::MLIR)
    return fail("--report describes a plan; it cannot be combined with "
                "--emit=mlir");
  // One report per program: the step's, or each pipeline stage's.
  std::vector<StepReport> stepReports;
  if (opts.report ||
      (inv.report && (opts.emit == EmitKind::Plan ||
                      opts.emit == EmitKind::None ||
                      opts.emit == EmitKind::Sim)))
    compileOptions.stepReport = [&](const StepReport &report) {
      stepReports.push_back(report);
    };
  // --init-parameters, --max-memory and --simulate's cluster apply to the
  // compiled plan; their values are checked before the model is read.
  double initStddev = 0;
  unsigned long long initSeed = 0;
  if (!opts.initParameters.empty()) {
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(opts.initParameters).split(parts, ':');
    if (parts.size() < 2 || parts.size() > 3 || parts[0] != "normal" ||
        parts[1].getAsDouble(initStddev) || !std::isfinite(initStddev) ||
        initStddev < 0 ||
        (parts.size() == 3 && parts[2].getAsInteger(10, initSeed)))
      return fail("bad --init-parameters '" + opts.initParameters +
                  "' (expected normal:<std>[:<seed>], e.g. normal:0.02)");
    if (!opts.train && !fromMLIR)
      return fail("--init-parameters needs --train");
  }
  std::optional<uint64_t> budget;
  if (!opts.maxMemory.empty()) {
    budget = parseByteCount(opts.maxMemory);
    if (!budget)
      return fail("bad --max-memory '" + opts.maxMemory +
                  "' (expected bytes with an optional K, M, G or T suffix, "
                  "e.g. 80G)");
  }
  ::cleave::sim::Cluster cluster;
  if (opts.simulate || opts.autoPlan)
    if (std::string e = ::cleave::sim::loadCluster(opts.cluster, cluster);
        !e.empty())
      return fail(e);
  ::cleave::sim::ReplaySchedule replay;
  if (!opts.simSchedule.empty())
    if (std::string e =
            ::cleave::sim::parseReplaySchedule(opts.simSchedule, replay);
        !e.empty())
      return fail("bad --sim-schedule '" + opts.simSchedule + "': " + e);
  // --auto: the planner's memory is a prediction (its profiles' stages
  // extrapolated to the layout); when the compiled plan of its choice is
  // over --max-memory after all, the fastest candidate that fits with its
  // prediction scaled by what the compiled ones needed over theirs is
  // compiled next.
  constexpr size_t kAutoAttempts = 4;
  AutoAttempt autoAttempt;
  const ImportOptions userImportOptions = importOptions;
  const CompileOptions userCompileOptions = compileOptions;
compileChoice:
  importOptions = userImportOptions;
  compileOptions = userCompileOptions;
  if (opts.autoPlan) {
    bool searchOnly = false;
    if (int rc =
            planLayout(opts, importOptions, compileOptions, cluster, budget,
                       searchOnly, inv.stopAfterOptions, autoAttempt))
      return rc;
    if (searchOnly || inv.stopAfterOptions)
      return 0;
  } else if (opts.globalBatch.getNumOccurrences() ||
             opts.explain.getNumOccurrences() ||
             opts.candidatesFile.getNumOccurrences()) {
    return fail(std::string(opts.explain.getNumOccurrences() ? "--explain"
                            : opts.candidatesFile.getNumOccurrences()
                                ? "--candidates"
                                : "--global-batch") +
                " needs --auto");
  }
  if (inv.stopAfterOptions)
    return 0;

  CompileContext compile;
  auto importStart = std::chrono::steady_clock::now();
  FailureOr<OwningOpRef<ModuleOp>> module =
      readModel(opts, importOptions, fromMLIR, compile.context);
  if (failed(module))
    return 1;
  double importSeconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - importStart)
                             .count();
  FailureOr<plan::Plan> plan = compileToPlan(**module, compileOptions);
  if (failed(plan))
    return 1;
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();

  if (opts.emit == EmitKind::MLIR || opts.emit == EmitKind::Asm) {
    if (output == "-") {
      driverOuts() << textOutput;
      return 0;
    }
    if (llvm::Error err = llvm::writeToOutput(
            output, [&](llvm::raw_ostream &os) -> llvm::Error {
              os << textOutput;
              return llvm::Error::success();
            }))
      return fail("cannot write '" + output +
                  "': " + llvm::toString(std::move(err)));
    return 0;
  }

  if (!opts.initParameters.empty())
    ::cleave::initParametersRandomly(*plan, initStddev, initSeed);
  std::string error;
  if (budget)
    if (std::string over = overBudget(*plan, *budget); !over.empty()) {
      if (!opts.autoPlan)
        return fail(over);
      if (autoAttempt.tried.size() >= kAutoAttempts)
        return fail(over + " (the " + std::to_string(kAutoAttempts) +
                    " layouts --auto chose are over it once compiled)");
      uint64_t needed = plan->arenaBytes;
      for (const plan::Plan &stage : plan->stages)
        needed = std::max(needed, stage.arenaBytes);
      autoAttempt.memoryScale =
          std::max(autoAttempt.memoryScale,
                   double(needed) / std::max(1.0, autoAttempt.predictedBytes));
      driverErrs() << "cleave-compile: --auto's choice, compiled: " << over
                   << "; compiling the fastest layout predicted to fit with "
                   << llvm::format("%.3f", autoAttempt.memoryScale)
                   << " times its predicted memory\n";
      goto compileChoice; // Each attempt's context and plan go out of scope.
    }
  if (opts.emit == EmitKind::Sim) {
    plan->metadata.push_back({plan::kKernelCodeKey, "none"});
    for (plan::Plan &stage : plan->stages)
      stage.metadata.push_back({plan::kKernelCodeKey, "none"});
  }
  if (opts.emit != EmitKind::None && !plan::validate(*plan, &error))
    return fail("the compiled plan is invalid: " + error);
  if (opts.emit == EmitKind::None) {
  } else if (opts.emit == EmitKind::Exe) {
    // cleave-run, from the directory this compiler runs from, with the plan
    // and a trailer appended; cleave-run finds it in /proc/self/exe.
    std::string self = llvm::sys::fs::getMainExecutable(
        argv0, reinterpret_cast<void *>(&defaultOutput));
    llvm::SmallString<256> runPath(llvm::sys::path::parent_path(self));
    llvm::sys::path::append(runPath, "cleave-run");
    std::vector<uint8_t> bytes;
    if (!::cleave::readWholeFile(runPath.str().str(), &bytes, &error))
      return fail("--emit=exe needs cleave-run next to cleave-compile: " +
                  error);
    std::vector<uint8_t> planBytes = plan::serialize(*plan);
    std::vector<uint8_t> trailer = plan::exeTrailer(planBytes.size());
    bytes.insert(bytes.end(), planBytes.begin(), planBytes.end());
    bytes.insert(bytes.end(), trailer.begin(), trailer.end());
    if (!::cleave::writeFileAtomically(output, bytes.data(), bytes.size(),
                                       &error))
      return fail("cannot write '" + output + "': " + error);
    if (std::error_code ec = llvm::sys::fs::setPermissions(
            output, llvm::sys::fs::all_read | llvm::sys::fs::all_exe |
                        llvm::sys::fs::owner_write)) {
      llvm::sys::fs::remove(output);
      return fail("cannot make '" + output + "' executable: " + ec.message());
    }
  } else if (inv.planSink) {
    inv.planSink(plan::serialize(*plan));
  } else if (!plan::writeFile(output, *plan, &error)) {
    return fail("cannot write '" + output + "': " + error);
  }
  auto printReports = [&](llvm::raw_ostream &os) {
    for (auto [c, report] : llvm::enumerate(stepReports)) {
      const plan::Plan &program = plan->isPipelined() ? plan->stages[c] : *plan;
      if (plan->isPipelined())
        os << "pipeline stage " << c << " (pp rank " << c << "):\n";
      printStepReport(report, os);
      if (program.training.enabled && !program.mesh.empty()) {
        int64_t dpRanks = 1;
        for (auto [name, size] :
             llvm::zip(program.mesh.axisNames, program.mesh.shape))
          if (name == "dp")
            dpRanks = size;
        StringRef optimizer = program.training.optimizer;
        unsigned optimizerBytes =
            optimizer == "adam" || optimizer == "adamw"          ? 8
            : optimizer == "momentum" || optimizer == "nesterov" ? 4
                                                                 : 0;
        if (dpRanks > 1)
          printZeroFormula(report, opts.zero, dpRanks, optimizerBytes, os);
      }
    }
    if (plan->isPipelined())
      printPipelineSummary(*plan, opts.schedule, opts.microbatches, os);
  };
  if (opts.report)
    printReports(driverErrs());
  if (inv.report)
    printReports(*inv.report);
  if (opts.simulate) {
    ::cleave::sim::SimulateOptions simOptions;
    simOptions.traceCommands = !opts.simTrace.empty();
    ::cleave::sim::SimResult result;
    if (!opts.simSchedule.empty()) {
      if (std::string e = ::cleave::sim::simulateReplay(
              *plan, cluster, simOptions, replay, result);
          !e.empty())
        return fail("--sim-schedule: " + e);
    } else if (std::string e = ::cleave::sim::simulatePlan(
                   *plan, cluster, simOptions, result);
               !e.empty()) {
      return fail("--simulate: " + e);
    }
    driverErrs() << ::cleave::sim::simulationReport(result, cluster);
    std::string trace =
        opts.simTrace.empty() ? "" : ::cleave::sim::simulationTrace(result);
    if (!opts.simTrace.empty() &&
        !::cleave::writeFileAtomically(opts.simTrace, trace.data(),
                                       trace.size(), &error))
      return fail("cannot write --sim-trace '" + opts.simTrace + "': " + error);
  }
  if (opts.stats) {
    if (plan->isPipelined()) {
      driverErrs() << "pipeline: " << plan->stages.size()
                   << " stages over mesh " << plan->mesh.str() << "\n";
      for (auto [c, stage] : llvm::enumerate(plan->stages)) {
        driverErrs() << "stage " << c << ": ";
        printPlanStats(stage, seconds);
      }
    } else {
      printPlanStats(*plan, seconds);
    }
    llvm::StringMap<std::string> meta;
    for (const auto &[key, value] : plan->metadata)
      meta[key] = value;
    if (meta.count("recognized_attention"))
      driverErrs() << "recognized: " << meta["recognized_attention"]
                   << " attention, " << meta["recognized_rms_norm"]
                   << " rms_norm, " << meta["recognized_silu"]
                   << " silu (--no-recognize-composites keeps them "
                      "spelled out)\n";
    printTimings(importSeconds, timings);
  }
  return 0;
}
} // namespace
