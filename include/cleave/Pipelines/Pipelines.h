//===- Pipelines.h - Cleave's compiler phases as pass pipelines -*- C++ -*-===//
//
// Each phase of the compiler is one function here, so cleave-compile,
// cleave-opt (as a registered pipeline) and the Python bindings run exactly
// the same passes.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINES_PIPELINES_H
#define CLEAVE_PIPELINES_PIPELINES_H

#include "cleave/Plan/PlanBuilder.h"
#include "cleave/PlanFormat.h"
#include "cleave/Target/CPU/CPUCodegen.h"
#include "cleave/Transforms/Sharding/ShardProgram.h"
#include "cleave/Transforms/Training/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <functional>
#include <optional>
#include <string>

namespace cleave {

/// `--cleave-prepare-pipeline`: cleans up an imported program (folding,
/// CSE), spells out attention (except what the runtime's fused attention
/// kernels run, with `keepFusedAttention`: head dimensions up to
/// `maxFusedAttentionHeadDim` unless 0), rewrites convolutions as im2col and
/// a GEMM (unless `convolutionsAsGemm` is false) and puts contractions in
/// GEMM form, ready for planning.
void buildPreparePipeline(mlir::OpPassManager &pm,
                          bool convolutionsAsGemm = true,
                          bool keepFusedAttention = false,
                          int64_t maxFusedAttentionHeadDim = 0);

/// Registers the pipelines above with the global pass registry.
void registerPipelines();

struct PhaseOptions;

/// Every pass manager the phases make: the verifier as
/// PhaseOptions::verifyPasses says, then PhaseOptions::configurePassManager.
void configurePassManager(mlir::PassManager &pm, const PhaseOptions &options);

/// The train-step phase, in three parts:
/// --cleave-expand-gradients and --cleave-recognize-composites (unless
/// PhaseOptions::recognizeComposites is off), with a bias update rate
/// --cleave-expert-bias, and with a capacity factor
/// --cleave-expert-capacity; then --cleave-mark-index-ranges
/// and --cleave-build-train-step (or, for a forward model in bf16/fp16,
/// --cleave-apply-mixed-precision; with local SGD, --cleave-build-local-sgd
/// and --cleave-split-sync-entry, which moves @sync into the nested
/// `module @sync`), then mixed precision, --cleave-insert-recompute,
/// --cleave-add-activation-probes and
/// --cleave-drop-attribute{name=cleave.backward}, which work on the step
/// alone.
void addRecognizeComposites(mlir::OpPassManager &pm,
                            const PhaseOptions &options);
void addTrainStepBuild(mlir::OpPassManager &pm, const PhaseOptions &options);
void addTrainStepFinish(mlir::OpPassManager &pm, const PhaseOptions &options);
/// The partitioned phase: --cleave-shard-program (with a mesh), then for a
/// pipelined step --cleave-split-pipeline-ranks (one nested `module
/// @rank<r>` per pipeline rank).
void addPartitioning(mlir::OpPassManager &pm, const PhaseOptions &options);
/// The prepared phase: --cleave-prepare-pipeline's passes with the target's
/// choices, then --cleave-drop-attribute{name=cleave.recompute}, on every
/// program: the module's own functions, and each nested module (a pipeline
/// rank's, local SGD's @sync) in a nested pipeline.
void addPreparation(mlir::OpPassManager &pm, const PhaseOptions &options);
/// The kernels phase: --cleave-outline-kernels with the target's grouping
/// options, on the module (one program) or on each pipeline rank's module.
void addKernelOutlining(mlir::OpPassManager &pm, const PhaseOptions &options);
/// The llvm phase: the CPU kernel pipeline (buildCPUKernelPipeline) on each
/// program's `module @kernels`.
void addKernelLowering(mlir::OpPassManager &pm, const PhaseOptions &options);

/// Where compileToPlan stops to show IR: after import (no passes run), after
/// building the training step, after partitioning, after preparation, after
/// outlining the kernels (the module with its nested kernel modules in
/// cleave ops), or with the kernel modules lowered to the LLVM dialect.
enum class CompilePhase {
  Import,
  TrainStep,
  Partitioned,
  Prepared,
  Kernels,
  LLVM,
  Plan
};

/// The code generation target of a plan.
enum class Target { CPU, CUDA };

/// Where compileToPlan's time went (cleave-compile --print-stats), summed
/// over the programs it compiles (one per pipeline rank).
struct CompileTimings {
  /// The training step, partitioning, pipelining, preparation and planning.
  double passesSeconds = 0;
  /// Generating the kernels' code (reading the kernel cache included).
  double codegenSeconds = 0;
  /// Linking the kernels' objects.
  double linkSeconds = 0;
  size_t kernels = 0;
  size_t kernelsFromCache = 0;
  /// Whether every program's kernels went through the kernel cache.
  bool kernelCache = true;
  /// Threads that compiled kernels (the most of any program).
  unsigned codegenThreads = 0;
};

struct PhaseOptions {
  PlanBuildOptions plan;
  Target target = Target::CPU;
  /// With Target::CUDA: the SM to compile for ("sm_90a", "sm_80").
  std::string cudaChip = "sm_90a";
  /// Convolutions whose groups have at least 4 outputs become im2col and a
  /// library GEMM (ConvolutionsToGemmPass) when plan.useLibraryGemm is set;
  /// false keeps every convolution a generated kernel.
  bool convolutionsAsGemm = true;
  /// With Target::CPU: attention (and its gradient) in f32, bf16 or f16 runs
  /// as the runtime's fused attention commands instead of being spelled out
  /// into GEMMs and a softmax (DecomposeAttentionPass's keep-fused).
  bool fusedAttention = true;
  /// With Target::CPU: lower reduction kernels as row kernels, the form
  /// the CUDA target maps to one block per row (tests that rewrite on the
  /// CPU).
  bool cpuRowKernels = false;
  /// With Target::CPU: compile kernels through the CUDA launch mapping and
  /// run the launches as host loops (buildCUDAEmulationPipeline), to test
  /// that mapping on the CPU.
  bool cpuEmulateCuda = false;
  /// With Target::CUDA: the plan also carries its kernels compiled for the
  /// host (plan::Plan::hostKernelObject), for the CUDA host doubles.
  bool cudaHostKernels = false;
  /// With Target::CPU: threads that compile kernels (0: one per core).
  unsigned codegenThreads = 0;
  /// With Target::CPU: the kernel cache's directory (empty: no cache; see
  /// CPUCodegenOptions::cacheDir).
  std::string kernelCacheDir;
  /// With Target::CPU: the LLVM optimization level of the kernels (0-3).
  int kernelOptLevel = 2;
  /// With Target::CPU: loop nests of at least this many scalar iterations
  /// run on the runtime's threads (CPUCodegenOptions::parallelMinWork).
  int64_t kernelParallelMinWork = kDefaultParallelMinWork;
  /// With Target::CPU: if set, receives the x86-64 assembly of the kernels
  /// (CPUKernelObject::assembly), once per program compiled.
  std::function<void(const std::string &)> kernelAssembly;
  /// If set, receives where the compile's time went.
  CompileTimings *timings = nullptr;
  /// Set: compile a training step (--cleave-build-train-step) instead of
  /// the forward model.
  std::optional<BuildTrainStepPassOptions> train;
  /// With a training step built with sync=local:<H>: local SGD's or
  /// DiLoCo's averaging function (--cleave-build-local-sgd), compiled into
  /// the plan's entry "sync".
  std::optional<BuildLocalSGDPassOptions> localSGD;
  /// With a training step: return the forward output of every ONNX node
  /// whose name matches this regular expression (cleave::addActivationProbes).
  std::string probe;
  /// Set: partition the (training or forward) program over a mesh
  /// (cleave::shardProgram) after the training step is built.
  std::optional<ShardProgramOptions> shard;
  /// "fp32" (default), "bf16" or "fp16": with a training step, run
  /// --cleave-apply-mixed-precision after building it (and tag its loss and
  /// optimizer ops to stay f32).
  std::string precision = "fp32";
  /// With bf16/fp16 training: gradients of the parameters read in low
  /// precision are rounded, reduced and stored in the low type
  /// (--cleave-apply-mixed-precision's low-precision-gradients).
  bool lowPrecisionGradients = false;
  /// With bf16/fp16 training: every parameter is read through its
  /// low-precision copy, so every parameter has an f32 master
  /// (--cleave-apply-mixed-precision's low-precision-parameters).
  bool lowPrecisionParameters = false;
  /// With a training step: the --cleave-insert-recompute policy (none,
  /// selective, full, budget:<bytes>); its statistics go to the plan's
  /// metadata (recompute_policy, saved_activation_bytes_before/after,
  /// recompute_flops, recompute_extra_flops).
  std::string recompute = "none";
  /// Generate the kernels' code. Without it the plan has its commands,
  /// memory plan, kernel costs and metadata but no kernel object: enough to
  /// report and simulate, in a fraction of the time, not to run.
  bool kernelCode = true;
  /// Rewrite the spelled-out attention and RMS normalization of the
  /// imported program into cleave.attention and cleave.rms_norm
  /// (--cleave-recognize-composites) before anything else; how many goes to
  /// the plan's metadata (recognized_attention, recognized_rms_norm).
  bool recognizeComposites = true;
  /// Above 0: each expert's capacity per batch row, as a factor of the
  /// routed rows per expert (--cleave-expert-capacity after recognition);
  /// 0: dropless grouped matmuls.
  double moeCapacityFactor = 0;
  /// Above 0: each router picks its experts by its scores plus a bias per
  /// expert that each training step moves by this rate toward an even load
  /// (--cleave-expert-bias after recognition, before the capacity form).
  double moeBiasUpdate = 0;
  /// If set, applied to every pass manager the phases make (after the
  /// verifier): cleave-compile applies MLIR's pass manager options here
  /// (--mlir-print-ir-after-all, --mlir-print-ir-after-change, ...).
  std::function<void(mlir::PassManager &)> configurePassManager;
  /// Verify the program after every pass. The planner's profiles turn it
  /// off: each is the pipeline a verified compile runs, and verification
  /// was a tenth of a profile's time.
  bool verifyPasses = true;
  /// Stop after this phase; `dump` receives the IR of that phase.
  CompilePhase stopAfter = CompilePhase::Plan;
  std::function<void(mlir::Operation *)> dump;
  /// If set, receives the memory planner's report (see
  /// BuiltPlan::memoryReport).
  std::function<void(const std::string &)> memoryReport;
  /// If set, receives the step's report (see BuiltPlan::stepReport).
  std::function<void(const StepReport &)> stepReport;
};

/// Adds to `pm` (on builtin.module) the passes that take the imported
/// program to `phase`: the import phase has none. Fails with `error` for the
/// plan (not IR) and for the kernels and llvm phases of a local-SGD step.
mlir::LogicalResult addPhasePasses(mlir::OpPassManager &pm,
                                   const PhaseOptions &options,
                                   CompilePhase phase, std::string &error);

/// Prints the textual pass pipeline that takes the imported program to
/// `phase` (what cleave-opt --pass-pipeline runs to reproduce
/// cleave-compile --emit=mlir --phase=PHASE). Fails with `error` where
/// addPhasePasses does.
mlir::LogicalResult printPhasePipeline(const PhaseOptions &options,
                                       CompilePhase phase,
                                       llvm::raw_ostream &os,
                                       std::string &error);

/// Runs every phase after import on `module`. Returns the plan (empty when
/// stopping early), or failure after emitting diagnostics.
mlir::FailureOr<plan::Plan> compileToPlan(mlir::ModuleOp module,
                                          const PhaseOptions &options);

} // namespace cleave

#endif // CLEAVE_PIPELINES_PIPELINES_H
