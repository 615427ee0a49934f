//===- Pipelines.cpp - Cleave's compiler phases as pass pipelines ---------===//

#include "cleave/Pipelines/Pipelines.h"
#include "cleave/Plan/Passes.h"
#include "cleave/Schedule/Schedule.h"

#include "cleave/Analysis/TrainingTags.h"
#include "cleave/Target/CPU/CPUCodegen.h"
#include "cleave/Target/CPU/ScratchPlacement.h"
#include "cleave/Target/CUDA/CUDACodegen.h"
#include "cleave/Target/CUDA/LaunchAssignment.h"
#include "cleave/Transforms/Autodiff/Passes.h"
#include "cleave/Transforms/Passes.h"
#include "cleave/Transforms/Training/LocalSGD.h"
#include "cleave/Transforms/Training/Pipeline.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <set>

using namespace mlir;

namespace cleave {

void buildPreparePipeline(OpPassManager &pm, bool convolutionsAsGemm,
                          bool keepFusedAttention,
                          int64_t maxFusedAttentionHeadDim) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
  fn.addPass(createDecomposeAttentionPass(DecomposeAttentionPassOptions{
      keepFusedAttention, maxFusedAttentionHeadDim}));
  fn.addPass(createDecomposeRotaryPass());
  if (convolutionsAsGemm)
    fn.addPass(createConvolutionsToGemmPass());
  fn.addPass(createCanonicalizeContractionsPass());
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
}

void configurePassManager(PassManager &pm, const PhaseOptions &options) {
  pm.enableVerifier(options.verifyPasses);
  if (options.configurePassManager)
    options.configurePassManager(pm);
}

/// --cleave-expand-gradients and --cleave-recognize-composites.
static void addRecognition(OpPassManager &pm, const PhaseOptions &options) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createExpandGradientsPass());
  if (options.recognizeComposites) {
    // Grouped GEMM commands run on the CPU backend only: CUDA plans keep
    // the experts' gathered weights and batched products, unless a capacity
    // factor rewrites every grouped matmul into ordinary ops (below).
    RecognizeCompositesPassOptions recognize;
    recognize.experts =
        options.moeCapacityFactor > 0 ||
        (options.target != Target::CUDA && !options.cpuEmulateCuda);
    fn.addPass(createRecognizeCompositesPass(recognize));
  }
}

/// --cleave-expert-bias, with a bias update rate, then
/// --cleave-expert-capacity, with a capacity factor.
static void addExpertCapacity(OpPassManager &pm, const PhaseOptions &options) {
  if (options.moeBiasUpdate > 0) {
    ExpertBiasPassOptions bias;
    bias.rate = options.moeBiasUpdate;
    pm.addPass(createExpertBiasPass(bias));
  }
  if (options.moeCapacityFactor > 0) {
    ExpertCapacityPassOptions capacity;
    capacity.factor = options.moeCapacityFactor;
    pm.addPass(createExpertCapacityPass(capacity));
  }
}

void addRecognizeComposites(OpPassManager &pm, const PhaseOptions &options) {
  addRecognition(pm, options);
  addExpertCapacity(pm, options);
}

void addTrainStepBuild(OpPassManager &pm, const PhaseOptions &options) {
  pm.addPass(createMarkIndexRangesPass());
  if (options.train) {
    BuildTrainStepPassOptions trainOptions = *options.train;
    trainOptions.markFp32Ops |= options.precision != "fp32";
    trainOptions.markBackward = true;
    // The gradient tags serve the sharding policies and the report; the
    // plan builder removes them.
    trainOptions.markGradients = true;
    pm.addPass(createBuildTrainStepPass(trainOptions));
    if (options.localSGD) {
      pm.addPass(createBuildLocalSGDPass(*options.localSGD));
      pm.addPass(createSplitSyncEntryPass());
    }
  } else if (options.precision != "fp32") {
    // A forward model: contractions and activations in the low type.
    ApplyMixedPrecisionPassOptions mixed;
    mixed.precision = options.precision;
    pm.addPass(createApplyMixedPrecisionPass(mixed));
  }
}

void addTrainStepFinish(OpPassManager &pm, const PhaseOptions &options) {
  if (!options.train)
    return;
  if (options.precision != "fp32") {
    ApplyMixedPrecisionPassOptions mixed;
    mixed.precision = options.precision;
    mixed.lowPrecisionGradients = options.lowPrecisionGradients;
    mixed.lowPrecisionParameters = options.lowPrecisionParameters;
    pm.addPass(createApplyMixedPrecisionPass(mixed));
  }
  pm.addPass(
      createInsertRecomputePass(InsertRecomputePassOptions{options.recompute}));
  if (!options.probe.empty())
    pm.addPass(createAddActivationProbesPass(
        AddActivationProbesPassOptions{options.probe}));
  // The backward tags have done their job; without them CSE treats forward
  // and backward ops alike, as it did before recompute existed.
  pm.addPass(createDropAttributePass(
      DropAttributePassOptions{mlir::cleave::attr::kBackward.str()}));
}

/// Whether the step is pipelined: after partitioning, the module holds one
/// nested module per pipeline rank.
static bool isPipelined(const PhaseOptions &options) {
  return options.train && options.train->pipelineRanks > 1;
}

void addPartitioning(OpPassManager &pm, const PhaseOptions &options) {
  if (options.shard) {
    ShardProgramOptions shard = *options.shard;
    shard.verifyPasses = options.verifyPasses;
    pm.addPass(createShardProgramPass(shard));
  }
  if (isPipelined(options))
    pm.addPass(createSplitPipelineRanksPass());
}

/// The prepared phase of one program (the passes of the module's own
/// functions).
static void addProgramPreparation(OpPassManager &pm,
                                  const PhaseOptions &options) {
  // Convolutions become GEMMs only where GEMMs go to the library. Both
  // runtimes have the fused attention commands (the CUDA kernels up to head
  // dimension plan::kCudaAttentionMaxHeadDim); the CUDA emulation on the CPU
  // spells attention out.
  bool fusedAttention = options.fusedAttention && !options.cpuEmulateCuda;
  buildPreparePipeline(
      pm, options.plan.useLibraryGemm && options.convolutionsAsGemm,
      fusedAttention,
      options.target == Target::CUDA ? plan::kCudaAttentionMaxHeadDim : 0);
  // Recomputed clones are tagged so that CSE above leaves them apart from
  // the forward ops they copy; the tag would only split identical kernels.
  pm.addPass(createDropAttributePass(
      DropAttributePassOptions{mlir::cleave::attr::kRecompute.str()}));
}

void addPreparation(OpPassManager &pm, const PhaseOptions &options) {
  // A pipelined step's module holds only its ranks' modules; a local-SGD
  // step's holds the step and `module @sync`.
  if (!isPipelined(options))
    addProgramPreparation(pm, options);
  if (isPipelined(options) || options.localSGD)
    addProgramPreparation(pm.nest<ModuleOp>(), options);
}

/// The plan builder's options for the target: device kernels cannot read
/// host globals, so only splats (which become fills) are inlined there and
/// other constants get arena buffers.
static PlanBuildOptions planBuildOptions(const PhaseOptions &options) {
  PlanBuildOptions planOptions = options.plan;
  if (options.target == Target::CUDA || options.cpuEmulateCuda)
    planOptions.inlineConstantLimit = 0;
  return planOptions;
}

void addKernelOutlining(OpPassManager &pm, const PhaseOptions &options) {
  PlanBuildOptions plan = planBuildOptions(options);
  OutlineKernelsPassOptions outline;
  outline.libraryGemm = plan.useLibraryGemm;
  outline.gemmEpilogues = plan.useGemmEpilogues;
  outline.inlineConstantLimit = plan.inlineConstantLimit;
  OpPassManager &program = isPipelined(options) ? pm.nest<ModuleOp>() : pm;
  if (options.localSGD) {
    // `module @sync` first, while it is the only nested module: it becomes
    // the plan's "sync" entry, with a kernel module of its own.
    OutlineKernelsPassOptions sync = outline;
    sync.entry = kSyncFunctionName.str();
    program.nest<ModuleOp>().addPass(createOutlineKernelsPass(sync));
  }
  program.addPass(createOutlineKernelsPass(outline));
}

void addKernelLowering(OpPassManager &pm, const PhaseOptions &options) {
  // The CPU kernel pipeline on every kernel module: the step's, each
  // pipeline rank's, local SGD's @sync's.
  OpPassManager lowering(ModuleOp::getOperationName());
  buildCPUKernelPipeline(lowering);
  pm.addPass(createKernelModulesPass(std::move(lowering)));
}

LogicalResult addPhasePasses(OpPassManager &pm, const PhaseOptions &options,
                             CompilePhase phase, std::string &error) {
  switch (phase) {
  case CompilePhase::Import:
    return success();
  case CompilePhase::TrainStep:
  case CompilePhase::Partitioned:
  case CompilePhase::Prepared:
    addRecognizeComposites(pm, options);
    addTrainStepBuild(pm, options);
    addTrainStepFinish(pm, options);
    if (phase != CompilePhase::TrainStep)
      addPartitioning(pm, options);
    if (phase == CompilePhase::Prepared)
      addPreparation(pm, options);
    return success();
  case CompilePhase::Kernels:
  case CompilePhase::LLVM:
    if (failed(addPhasePasses(pm, options, CompilePhase::Prepared, error)))
      return failure();
    addKernelOutlining(pm, options);
    if (phase == CompilePhase::LLVM)
      addKernelLowering(pm, options);
    return success();
  case CompilePhase::Plan:
    break;
  }
  error = "the plan is not IR: the last IR phase is llvm";
  return failure();
}

LogicalResult printPhasePipeline(const PhaseOptions &options,
                                 CompilePhase phase, llvm::raw_ostream &os,
                                 std::string &error) {
  OpPassManager pm("builtin.module");
  if (failed(addPhasePasses(pm, options, phase, error)))
    return failure();
  pm.printAsTextualPipeline(os);
  os << "\n";
  return success();
}

void registerPipelines() {
  PassPipelineRegistration<>(
      "cleave-prepare-pipeline",
      "Clean up an imported program, spell out attention and put "
      "convolutions and contractions in GEMM form",
      [](OpPassManager &pm) { buildPreparePipeline(pm); });
}

static double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Planning and code generation of one program (the whole step, one
/// pipeline rank's, or local SGD's @sync), whose kernels
/// --cleave-outline-kernels has outlined or buildPlan outlines.
static FailureOr<plan::Plan>
buildStagePlan(ModuleOp module, const PhaseOptions &options,
               const std::optional<RecomputeStats> &recomputeStats) {
  // Read by compileToPlan already; the IR of every phase up to here carries
  // it, as cleave-opt's passes leave it.
  module->removeAttr(mlir::cleave::attr::kRecomputeStats);

  PlanBuildOptions planOptions = planBuildOptions(options);
  planOptions.reportMemory = static_cast<bool>(options.memoryReport);
  planOptions.report = static_cast<bool>(options.stepReport);
  FailureOr<BuiltPlan> program = buildPlan(module, planOptions);
  if (failed(program))
    return failure();
  if (options.memoryReport)
    options.memoryReport(program->memoryReport);
  if (options.stepReport)
    options.stepReport(program->stepReport);

  if (!options.kernelCode) {
  } else if (options.target == Target::CUDA) {
    CUDACodegenOptions codegen;
    codegen.chip = options.cudaChip;
    codegen.hostLaunches = options.cudaHostKernels;
    FailureOr<CUDAProgram> cuda =
        compileCUDAKernels(program->kernels.get(), codegen);
    if (failed(cuda) ||
        failed(assignCUDALaunches(program->plan, *cuda, options.cudaChip,
                                  module.getLoc())))
      return failure();
    if (options.cudaHostKernels) {
      // The launches run serially on a stream thread of the host double.
      CPUCodegenOptions host;
      host.threads = options.codegenThreads;
      host.cacheDir = options.kernelCacheDir;
      host.optLevel = options.kernelOptLevel;
      host.parallelMinWork = 0;
      host.frontHalf = [](OpPassManager &pm) { buildCUDAHostLaunchPasses(pm); };
      host.pipelineKey = "cuda-host-launches";
      FailureOr<CPUKernelObject> object =
          compileCPUKernels(*cuda->hostLaunches, host);
      if (failed(object))
        return failure();
      program->plan.hostKernelObject = std::move(object->object);
    }
  } else {
    CPUCodegenOptions codegen;
    codegen.rowKernels = options.cpuRowKernels;
    codegen.threads = options.codegenThreads;
    codegen.cacheDir = options.kernelCacheDir;
    codegen.optLevel = options.kernelOptLevel;
    codegen.parallelMinWork = options.kernelParallelMinWork;
    codegen.emitAssembly = static_cast<bool>(options.kernelAssembly);
    if (options.cpuEmulateCuda) {
      codegen.frontHalf = [](OpPassManager &pm) {
        buildCUDAEmulationPipeline(pm, CUDACodegenOptions());
      };
      codegen.pipelineKey = "cuda-emulation";
      codegen.parallelMinWork = 0; // a test of the launch mapping
    }
    FailureOr<CPUKernelObject> object =
        compileCPUKernels(program->kernels.get(), codegen);
    if (failed(object))
      return failure();
    if (options.kernelAssembly)
      options.kernelAssembly(object->assembly);
    if (CompileTimings *t = options.timings) {
      t->codegenSeconds += object->stats.compileSeconds;
      t->linkSeconds += object->stats.linkSeconds;
      t->kernels += object->stats.kernels;
      t->kernelsFromCache += object->stats.fromCache;
      t->kernelCache &= object->stats.cached;
      t->codegenThreads = std::max(t->codegenThreads, object->stats.threads);
    }
    program->plan.kernelObject = std::move(object->object);
    placeCPUScratch(program->plan, object->scratchBytes);
  }
  if (recomputeStats) {
    namespace meta = plan::meta;
    plan::Plan &p = program->plan;
    plan::addMetadata(p, meta::kRecomputePolicy, recomputeStats->policy);
    plan::addMetadata(p, meta::kSavedActivationBytesBefore,
                      recomputeStats->savedBytesBefore);
    plan::addMetadata(p, meta::kSavedActivationBytesAfter,
                      recomputeStats->savedBytesAfter);
    plan::addMetadata(p, meta::kRecomputeFlops, recomputeStats->recomputeFlops);
    plan::addMetadata(p, meta::kRecomputeExtraFlops,
                      recomputeStats->extraFlops);
  }
  return std::move(program->plan);
}

static FailureOr<plan::Plan> compileToPlanImpl(ModuleOp module,
                                               const PhaseOptions &options);

/// How many of each composite --cleave-recognize-composites made.
struct RecognizedCounts {
  int64_t attention = 0, rmsNorm = 0, silu = 0, experts = 0;
};

/// Runs --cleave-expand-gradients and --cleave-recognize-composites on an
/// imported program; returns how many attentions, RMS normalizations,
/// SiLUs and expert GEMMs it recognized.
static FailureOr<RecognizedCounts>
recognizeComposites(ModuleOp module, const PhaseOptions &options) {
  auto count = [&] {
    RecognizedCounts n;
    module.walk([&](Operation *op) {
      n.attention += isa<mlir::cleave::AttentionOp>(op);
      n.rmsNorm += isa<mlir::cleave::RmsNormOp>(op);
      auto unary = dyn_cast<mlir::cleave::UnaryOp>(op);
      n.silu += unary && unary.getKind() == mlir::cleave::UnaryKind::silu;
      n.experts += isa<mlir::cleave::GroupedMatmulOp>(op);
    });
    return n;
  };
  RecognizedCounts before = count();
  PassManager pm(module.getContext());
  configurePassManager(pm, options);
  addRecognition(pm, options);
  if (failed(pm.run(module)))
    return failure();
  // Counted before a capacity factor rewrites the expert GEMMs.
  RecognizedCounts after = count();
  PassManager capacity(module.getContext());
  configurePassManager(capacity, options);
  addExpertCapacity(capacity, options);
  if (failed(capacity.run(module)))
    return failure();
  return RecognizedCounts{
      after.attention - before.attention, after.rmsNorm - before.rmsNorm,
      after.silu - before.silu, after.experts - before.experts};
}

FailureOr<plan::Plan> compileToPlan(ModuleOp module,
                                    const PhaseOptions &options) {
  auto start = std::chrono::steady_clock::now();
  CompileTimings before = options.timings ? *options.timings : CompileTimings();
  // After the import phase, so that --phase=import shows the program as
  // imported; before the training step, so that training and inference
  // both see the ops.
  std::optional<RecognizedCounts> recognized;
  if (options.stopAfter != CompilePhase::Import) {
    FailureOr<RecognizedCounts> n = recognizeComposites(module, options);
    if (failed(n))
      return failure();
    if (options.recognizeComposites)
      recognized = *n;
  }
  FailureOr<plan::Plan> plan = compileToPlanImpl(module, options);
  if (succeeded(plan) && recognized &&
      options.stopAfter == CompilePhase::Plan) {
    plan::addMetadata(*plan, plan::meta::kRecognizedAttention,
                      recognized->attention);
    plan::addMetadata(*plan, plan::meta::kRecognizedRmsNorm,
                      recognized->rmsNorm);
    plan::addMetadata(*plan, plan::meta::kRecognizedSilu, recognized->silu);
    // Only where there are some: other plans stay as they were.
    if (recognized->experts)
      plan::addMetadata(*plan, plan::meta::kRecognizedExperts,
                        recognized->experts);
  }
  if (CompileTimings *t = options.timings)
    t->passesSeconds += secondsSince(start) -
                        (t->codegenSeconds - before.codegenSeconds) -
                        (t->linkSeconds - before.linkSeconds);
  return plan;
}

static FailureOr<plan::Plan> compileToPlanImpl(ModuleOp module,
                                               const PhaseOptions &options) {
  auto stopHere = [&](CompilePhase phase, Operation *op) {
    if (options.stopAfter != phase)
      return false;
    if (options.dump)
      options.dump(op);
    return true;
  };
  auto runPhase = [&](auto add) {
    PassManager pm(module.getContext());
    configurePassManager(pm, options);
    add(pm);
    return pm.run(module);
  };
  if (stopHere(CompilePhase::Import, module))
    return plan::Plan();
  if (failed(runPhase([&](OpPassManager &pm) {
        addTrainStepBuild(pm, options);
        addTrainStepFinish(pm, options);
      })))
    return failure();
  std::optional<RecomputeStats> recomputeStats;
  if (options.train)
    recomputeStats = takeRecomputeStats(module, /*remove=*/false);
  if (stopHere(CompilePhase::TrainStep, module))
    return plan::Plan();
  if (failed(
          runPhase([&](OpPassManager &pm) { addPartitioning(pm, options); })))
    return failure();
  if (stopHere(CompilePhase::Partitioned, module))
    return plan::Plan();
  if (failed(runPhase([&](OpPassManager &pm) { addPreparation(pm, options); })))
    return failure();
  if (stopHere(CompilePhase::Prepared, module))
    return plan::Plan();
  if (failed(runPhase(
          [&](OpPassManager &pm) { addKernelOutlining(pm, options); })))
    return failure();
  if (stopHere(CompilePhase::Kernels, module))
    return plan::Plan();
  if (options.stopAfter == CompilePhase::LLVM) {
    if (failed(runPhase(
            [&](OpPassManager &pm) { addKernelLowering(pm, options); })))
      return failure();
    stopHere(CompilePhase::LLVM, module);
    return plan::Plan();
  }

  // From here on each program (a nested module) is planned on its own.
  auto takeNested = [](ModuleOp nested) {
    nested->remove();
    nested->removeAttr(SymbolTable::getSymbolAttrName());
    return OwningOpRef<ModuleOp>(nested);
  };
  if (isPipelined(options)) {
    // One program per pipeline rank, each compiled on its own.
    SmallVector<OwningOpRef<ModuleOp>> ranks;
    for (ModuleOp rank : llvm::to_vector(module.getOps<ModuleOp>()))
      ranks.push_back(takeNested(rank));
    plan::Plan pipelined;
    for (auto [r, rank] : llvm::enumerate(ranks)) {
      FailureOr<plan::Plan> stage =
          buildStagePlan(rank.get(), options, recomputeStats);
      if (failed(stage))
        return failure();
      plan::addMetadata(*stage, plan::meta::kPipelineRank, r);
      pipelined.mesh = stage->mesh;
      pipelined.target = stage->target;
      pipelined.stages.push_back(std::move(*stage));
    }
    // What the schedule should give, for cleave-run --trace to print beside
    // the measured bubble.
    namespace pl = ::cleave::schedule;
    pl::ScheduleOptions schedule;
    if (options.train &&
        pl::parseScheduleKind(options.train->schedule, schedule).empty()) {
      schedule.ranks = static_cast<int64_t>(pipelined.stages.size());
      schedule.microbatches = options.train->microbatches;
      std::string error;
      auto order = pl::buildSchedule(schedule, error);
      pl::StepCosts costs;
      pl::Simulation sim = error.empty()
                               ? pl::simulate(order, schedule, costs, error)
                               : pl::Simulation();
      if (error.empty())
        plan::addMetadata(
            pipelined, plan::meta::kPipelineExpected,
            llvm::formatv("{0} with {1} microbatches: {2:P1} by the "
                          "formula, {3:P1} simulated with equal stages",
                          options.train->schedule, schedule.microbatches,
                          pl::formulaBubble(schedule, costs), sim.bubble)
                .str());
    }
    return pipelined;
  }
  // Local SGD: `module @sync` becomes the plan's entry "sync".
  OwningOpRef<ModuleOp> syncModule;
  if (auto nested = module.lookupSymbol<ModuleOp>(kSyncFunctionName))
    syncModule = takeNested(nested);
  int64_t syncEvery = 0;
  if (auto main = module.lookupSymbol<func::FuncOp>("main"))
    if (auto every = main->getAttrOfType<IntegerAttr>(kSyncEveryAttrName))
      syncEvery = every.getInt();
  FailureOr<plan::Plan> step = buildStagePlan(module, options, recomputeStats);
  if (failed(step) || !syncModule)
    return step;
  // The plan builder compiles @main.
  syncModule->lookupSymbol<func::FuncOp>(kSyncFunctionName).setSymName("main");
  PhaseOptions entryOptions = options;
  entryOptions.memoryReport = nullptr;
  entryOptions.stepReport = nullptr;
  FailureOr<plan::Plan> entry =
      buildStagePlan(syncModule.get(), entryOptions, std::nullopt);
  if (failed(entry))
    return failure();
  // An entry's states take the step's values when it runs: no initial
  // values of its own.
  std::set<uint64_t> stateOffsets;
  for (const plan::StateTensor &st : entry->states)
    stateOffsets.insert(st.info.offset);
  llvm::erase_if(entry->constants, [&](const plan::Constant &c) {
    return stateOffsets.count(c.info.offset) != 0;
  });
  entry->entryName = plan::kSyncEntry;
  // Not a training step of its own: no learning rate, loss or data.
  entry->training = plan::TrainingInfo();
  step->training.syncEvery = syncEvery;
  step->entries.push_back(std::move(*entry));
  return step;
}

} // namespace cleave
