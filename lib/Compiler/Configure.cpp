//===- Configure.cpp - Check the options, derive the phase options --------===//
//
// Every option value and combination is checked here, before the model is
// read (CompileIO::stopAfterOptions stops after it), and turned into the
// import options and the phase pipelines' options.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "cleave/Target/CPU/CPUCodegen.h"
#include "cleave/Transforms/Training/LocalSGD.h"
#include "cleave/Transforms/Training/RecomputePolicy.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace mlir;

namespace cleave::compiler {

namespace {
/// The output a compile writes without -o.
std::string defaultOutput(llvm::StringRef input, EmitKind emit) {
  if (emit == EmitKind::Schedule) {
    llvm::SmallString<256> path(llvm::sys::path::filename(input));
    llvm::sys::path::replace_extension(path, "schedule.json");
    return path.str().str();
  }
  if (emit == EmitKind::MLIR || emit == EmitKind::Asm)
    return "-";
  llvm::SmallString<256> path(llvm::sys::path::filename(input));
  llvm::sys::path::replace_extension(path,
                                     emit == EmitKind::Exe ? "" : ".cleave");
  return path.str().str();
}
} // namespace

std::optional<uint64_t> parseByteCount(llvm::StringRef text) {
  uint64_t scale = 1;
  if (!text.empty()) {
    switch (llvm::toUpper(text.back())) {
    case 'K':
      scale = 1ull << 10;
      break;
    case 'M':
      scale = 1ull << 20;
      break;
    case 'G':
      scale = 1ull << 30;
      break;
    case 'T':
      scale = 1ull << 40;
      break;
    default:
      break;
    }
    if (scale != 1)
      text = text.drop_back();
  }
  uint64_t count = 0;
  if (text.getAsInteger(10, count) || count > UINT64_MAX / scale)
    return std::nullopt;
  return count * scale;
}

int Driver::configure() {
  if (opts.target != "cpu" && opts.target != "cuda")
    return fail("unknown target '" + opts.target + "' (supported: cpu, cuda)");
  if (opts.cudaArch != "sm_90a" && opts.cudaArch != "sm_90" &&
      opts.cudaArch != "sm_80")
    return fail("unsupported --cuda-arch '" + opts.cudaArch +
                "' (supported: sm_90a, sm_90, sm_80)");

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
  importOptions.trainableNamed = !opts.trainable.empty();
  // A model declared without its weights trains from drawn ones only.
  importOptions.absentWeights = opts.train && !opts.initParameters.empty();
  if (opts.keepLayers < 0)
    return fail("--keep-layers must not be negative");
  importOptions.keepLayers = opts.keepLayers;
  importOptions.allowNewerOpset = opts.allowNewerOpset;
  // A .mlir file is a program in the cleave dialect (global, or already
  // per-rank with a cleave.mesh and collectives), as cleave-opt prints it.
  fromMLIR = llvm::StringRef(opts.input).ends_with(".mlir");
  if ((!opts.simSchedule.empty() || !opts.simTrace.empty()) && !opts.simulate)
    return fail(std::string(opts.simSchedule.empty() ? "--sim-trace"
                                                     : "--sim-schedule") +
                " needs --simulate");
  if (fromMLIR && (!opts.inputShapes.empty() || !opts.freezeInputs.empty()))
    return fail("--input-shape and --freeze-input apply to ONNX models, not "
                "to a .mlir program");

  output =
      opts.output.empty() ? defaultOutput(opts.input, opts.emit) : opts.output;
  if (opts.emit == EmitKind::Schedule) {
    schedule::ScheduleOptions schedule;
    if (std::string error =
            schedule::parseScheduleKind(opts.scheduleOrDefault(), schedule);
        !error.empty())
      return fail("--schedule: " + error);
    if (opts.pipelineStages < 1)
      return fail("--emit=schedule needs --pipeline-stages (at least 1)");
    scheduleEmit = schedule;
    scheduleEmit.ranks = opts.pipelineStages;
    scheduleEmit.microbatches = opts.microbatches;
    return 0;
  }
  if (opts.pipelineStages != 0)
    return fail("--pipeline-stages applies to --emit=schedule; a plan's "
                "pipeline is the pp axis of --mesh (e.g. --mesh pp=4,dp=2)");
  // Pipeline ranks: the mesh's pp axis.
  int64_t pipelineRanks = 1;
  if (!opts.mesh.empty()) {
    ShardProgramOptions parsed;
    if (std::string error = parseMeshSpec(opts.mesh, parsed.mesh);
        !error.empty())
      return fail(error);
    for (const auto &[name, size] : parsed.mesh)
      if (name == "pp")
        pipelineRanks = size;
  }
  if (pipelineRanks == 1 && (opts.schedule || !opts.stageBoundaries.empty()))
    return fail("--schedule and --stage-boundaries need a pipeline: a pp "
                "axis in --mesh (or --emit=schedule)");
  if (pipelineRanks > 1 && !opts.train)
    return fail("a pp mesh axis needs --train (pipelines run training steps)");
  if (pipelineRanks > 1 && opts.overlapCollectives)
    return fail("--overlap-collectives is not supported with a pp mesh axis "
                "yet");
  if (pipelineRanks > 1 && !opts.probe.empty())
    return fail("--probe is not supported with a pp mesh axis");

  phaseOptions.target = opts.target == "cuda" ? Target::CUDA : Target::CPU;
  phaseOptions.cudaChip = opts.cudaArch;
  if (int rc = configureTraining(pipelineRanks))
    return rc;
  if (int rc = configurePartitioning())
    return rc;
  if (int rc = configureCodegen())
    return rc;
  return configureOutputs();
}

/// --train and its options: the training step's pass options.
int Driver::configureTraining(int64_t pipelineRanks) {
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
      SyncMode mode;
      if (std::string error =
              parseSyncMode(opts.sync, opts.outerOptimizer, opts.outerLr,
                            opts.outerMomentum, mode);
          !error.empty())
        return fail(error);
      if (mode.kind != SyncMode::Step && !opts.mesh.empty()) {
        // Name what the mesh asks for beyond plain data parallelism.
        std::string what;
        ShardProgramOptions parsed;
        (void)parseMeshSpec(opts.mesh, parsed.mesh);
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
      if (mode.kind != SyncMode::Step && opts.dataParallel < 2)
        return fail("--sync=" + opts.sync +
                    " needs data-parallel replicas: give --data-parallel=N "
                    "with N > 1");
      if (mode.nesterov && !opts.initParameters.empty())
        return fail("--outer-optimizer with --init-parameters: DiLoCo's "
                    "global copy starts from the model's initializers, not "
                    "from generated values");
      if (mode.kind == SyncMode::Local) {
        BuildLocalSGDPassOptions localSGD;
        localSGD.every = mode.every;
        localSGD.outerOptimizer = opts.outerOptimizer;
        localSGD.outerLr = opts.outerLr;
        localSGD.outerMomentum = opts.outerMomentum;
        phaseOptions.localSGD = localSGD;
      }
    }
    train.sync = opts.sync;
    train.pipelineRanks = pipelineRanks;
    train.schedule = opts.scheduleOrDefault();
    train.stageBoundaries = opts.stageBoundaries;
    train.loss = opts.loss;
    train.optimizer = opts.optimizer;
    train.momentum = opts.momentum;
    train.beta1 = opts.beta1;
    train.beta2 = opts.beta2;
    train.epsilon = opts.adamEps;
    train.weightDecay = opts.weightDecay;
    train.clipGradNorm = opts.clipGradNorm;
    train.moeAuxLoss = opts.moeAuxLoss;
    train.moeZLoss = opts.moeZLoss;
    train.lossScale = !opts.lossScale.empty()    ? opts.lossScale
                      : opts.precision == "fp16" ? std::string("dynamic")
                                                 : std::string("none");
    train.lossScaleInit = opts.lossScaleInit;
    train.lossScaleWindow = opts.lossScaleWindow;
    phaseOptions.train = train;
    phaseOptions.probe = opts.probe;
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
  return 0;
}

/// --mesh and its options: the partitioner's options.
int Driver::configurePartitioning() {
  if (!opts.mesh.empty()) {
    if (opts.dataParallel != 1)
      return fail("--mesh replaces --data-parallel; give one of them");
    ShardProgramOptions shardOptions;
    if (std::string error = parseMeshSpec(opts.mesh, shardOptions.mesh);
        !error.empty())
      return fail(error);
    // Rank placement: a rank is the row-major index of its coordinates, so
    // the last axis varies fastest. tp goes last (its ranks exchange the
    // most, inside a node), then ep (its all-to-alls, every layer, inside a
    // node where tp x ep fit), then pp (one activation per stage boundary),
    // then dp (across nodes); other axes keep their place before them.
    // sim::layoutMesh writes --auto's layouts in this order.
    {
      auto place = [](const std::string &axis) {
        return axis == "dp"   ? 1
               : axis == "pp" ? 2
               : axis == "ep" ? 3
               : axis == "tp" ? 4
                              : 0;
      };
      auto placed = shardOptions.mesh;
      std::stable_sort(placed.begin(), placed.end(),
                       [&](const auto &a, const auto &b) {
                         return place(a.first) < place(b.first);
                       });
      if (placed != shardOptions.mesh) {
        std::string order;
        for (const auto &[name, size] : placed)
          order +=
              (order.empty() ? "" : ",") + name + "=" + std::to_string(size);
        errs() << "cleave-compile: note: --mesh " << opts.mesh
               << " laid out as " << order
               << " (rank = row-major index: tp fastest, inside a "
                  "node; then ep; then pp; then dp, across nodes)\n";
        shardOptions.mesh = std::move(placed);
      }
    }
    // regex=[{axes}, ...] from --shard, then from --sharding-file.
    auto addRule = [&](StringRef rule, const std::string &source) -> bool {
      size_t eq = rule.find("=[");
      if (eq == StringRef::npos)
        return false;
      shardOptions.shardings.push_back(
          {rule.take_front(eq).str(), rule.drop_front(eq + 1).str(), source});
      return true;
    };
    for (const std::string &rule : opts.shard)
      if (!addRule(rule, "--shard"))
        return fail("bad --shard '" + rule +
                    "' (expected regex=[{axes}, ...], e.g. "
                    "w1=[{}, {\"tp\"}])");
    if (!opts.shardingFile.empty()) {
      auto file =
          llvm::MemoryBuffer::getFile(opts.shardingFile, /*IsText=*/true);
      if (!file)
        return fail("cannot read --sharding-file '" + opts.shardingFile +
                    "': " + file.getError().message());
      SmallVector<StringRef> lines;
      (*file)->getBuffer().split(lines, '\n');
      for (auto [i, line] : llvm::enumerate(lines)) {
        StringRef rule = line.trim();
        std::string source = opts.shardingFile + ":" + std::to_string(i + 1);
        if (rule.empty() || rule.starts_with("#"))
          continue;
        if (!addRule(rule, source))
          return fail(source + ": bad sharding rule '" + rule.str() +
                      "' (expected regex=[{axes}, ...], e.g. "
                      "w1=[{}, {\"tp\"}])");
      }
    }
    // Checked here, before it narrows to the partitioner's int.
    if (opts.zero < 0 || opts.zero > 3)
      return fail("--zero must be 0, 1, 2 or 3");
    shardOptions.zero = static_cast<int>(opts.zero);
    shardOptions.dropCollective = opts.debugDropCollective;
    shardOptions.ringFault = opts.debugRingFault;
    shardOptions.overlap = opts.overlapCollectives;
    shardOptions.sequenceParallel = opts.sequenceParallel;
    if (!opts.contextParallel.empty() &&
        llvm::none_of(shardOptions.mesh,
                      [](const auto &axis) { return axis.first == "cp"; }))
      return fail("--context-parallel needs --mesh with a cp axis");
    if (!opts.contextParallel.empty())
      shardOptions.contextParallel = opts.contextParallel;
    if (opts.contextParallel == "ring" && opts.target == "cuda")
      return fail("--context-parallel=ring runs on CPU ranks only (the CUDA "
                  "attention kernels take no block positions); use "
                  "all-to-all on --target=cuda");
    if (opts.debugRingFault >= 0 && opts.contextParallel != "ring")
      return fail("--debug-ring-fault needs --context-parallel=ring");
    if (!(opts.bucketMB >= 0.0) || opts.bucketMB > 65536.0)
      return fail("--bucket-mb must be from 0 to 65536");
    shardOptions.bucketMB = opts.bucketMB;
    if (opts.explainSharding)
      shardOptions.explain = [this](const std::string &report) {
        errs() << report;
      };
    phaseOptions.shard = std::move(shardOptions);
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
  } else if (!opts.contextParallel.empty() && !opts.autoPlan) {
    // With --auto it is the mode the planner's cp candidates take.
    return fail("--context-parallel needs --mesh with a cp axis");
  }
  return 0;
}

/// The learning-rate schedule, precision, recompute and code generation.
int Driver::configureCodegen() {
  // The optimizer name and learning-rate schedule of a training plan (built
  // by --train, or a .mlir program that is already a training step).
  {
    plan::TrainingInfo &info = phaseOptions.plan.training;
    // A hand-written step's update is whatever the program computes: no
    // optimizer name.
    info.optimizer = fromMLIR && !opts.train ? std::string() : opts.optimizer;
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
  if (!opts.train && (opts.moeAuxLoss != 0 || opts.moeZLoss != 0))
    return fail("--moe-aux-loss and --moe-z-loss need --train");
  if (opts.moeAuxLoss < 0 || opts.moeZLoss < 0 ||
      !std::isfinite(opts.moeAuxLoss) || !std::isfinite(opts.moeZLoss))
    return fail("--moe-aux-loss and --moe-z-loss take a finite coefficient "
                ">= 0");
  if (opts.moeCapacityFactor < 0 || !std::isfinite(opts.moeCapacityFactor))
    return fail("--moe-capacity-factor takes a finite factor > 0");
  if (opts.moeCapacityFactor > 0 && opts.noRecognizeComposites)
    return fail("--moe-capacity-factor applies to the grouped expert GEMMs "
                "that --no-recognize-composites turns off");
  phaseOptions.moeCapacityFactor = opts.moeCapacityFactor;
  if (opts.moeBiasUpdate < 0 || !std::isfinite(opts.moeBiasUpdate))
    return fail("--moe-bias-update takes a finite rate > 0");
  if (opts.moeBiasUpdate > 0 && !opts.train)
    return fail("--moe-bias-update needs --train (the step moves the biases)");
  if (opts.moeBiasUpdate > 0 && opts.noRecognizeComposites)
    return fail("--moe-bias-update applies to the routers of the grouped "
                "expert GEMMs that --no-recognize-composites turns off");
  phaseOptions.moeBiasUpdate = opts.moeBiasUpdate;
  RecomputePolicy recompute;
  if (std::string error = parseRecomputePolicy(opts.recompute, recompute);
      !error.empty())
    return fail("--recompute: " + error);
  if (opts.lowPrecisionGradients && (!opts.train || opts.precision == "fp32"))
    return fail("--low-precision-gradients needs --train and "
                "--precision=bf16 or fp16");
  phaseOptions.recompute = opts.recompute;
  phaseOptions.precision = opts.precision;
  phaseOptions.lowPrecisionGradients = opts.lowPrecisionGradients;
  if (opts.lowPrecisionParameters && (!opts.train || opts.precision == "fp32"))
    return fail("--low-precision-parameters needs --train and "
                "--precision=bf16 or fp16");
  phaseOptions.lowPrecisionParameters = opts.lowPrecisionParameters;
  phaseOptions.plan.useLibraryGemm = !opts.noLibraryGemm;
  phaseOptions.plan.useGemmEpilogues = !opts.noGemmEpilogue;
  phaseOptions.convolutionsAsGemm = !opts.directConvolutions;
  phaseOptions.fusedAttention = !opts.noFusedAttention;
  phaseOptions.recognizeComposites = !opts.noRecognizeComposites;
  phaseOptions.plan.referenceExternalData = !opts.embedWeights;
  phaseOptions.plan.drawWeightMatrices = !opts.initParameters.empty();
  phaseOptions.cpuRowKernels = opts.cpuRowKernels;
  phaseOptions.cpuEmulateCuda = opts.cpuEmulateCuda;
  phaseOptions.cudaHostKernels = opts.cudaHostKernels;
  if (opts.kernelOptLevel < 0 || opts.kernelOptLevel > 3)
    return fail("bad --kernel-opt-level " +
                std::to_string(opts.kernelOptLevel) + " (expected 0 to 3)");
  phaseOptions.kernelOptLevel = opts.kernelOptLevel;
  if (opts.jobs < 0 || opts.jobs > 4096)
    return fail("--jobs must be from 0 to 4096");
  phaseOptions.codegenThreads = static_cast<unsigned>(opts.jobs);
  if (opts.kernelParallelMinWork < 0)
    return fail("--kernel-parallel-min-work must not be negative");
  phaseOptions.kernelParallelMinWork = opts.kernelParallelMinWork;
  if (!opts.noKernelCache)
    phaseOptions.kernelCacheDir = defaultKernelCacheDir();
  phaseOptions.timings = &timings;
  phaseOptions.configurePassManager = io.configurePassManager;
  if (opts.cpuRowKernels && opts.target != "cpu")
    return fail("--cpu-row-kernels applies to --target=cpu only");
  if (opts.cpuEmulateCuda && opts.target != "cpu")
    return fail("--cpu-emulate-cuda applies to --target=cpu only");
  if (opts.cudaHostKernels && opts.target != "cuda")
    return fail("--cuda-host-kernels applies to --target=cuda only");
  phaseOptions.plan.modelName = llvm::sys::path::filename(opts.input).str();
  llvm::SmallString<256> absolute(opts.input);
  if (!llvm::sys::fs::make_absolute(absolute))
    phaseOptions.plan.sourceModel = absolute.str().str();
  return 0;
}

/// What --emit writes, the reports, and the values --init-parameters,
/// --max-memory and --simulate apply to the compiled plan.
int Driver::configureOutputs() {
  if (opts.emit == EmitKind::MLIR) {
    phaseOptions.stopAfter = opts.phase;
    phaseOptions.dump = [&](Operation *op) {
      llvm::raw_string_ostream os(textOutput);
      op->print(os);
      os << "\n";
    };
  }
  if (opts.emit == EmitKind::Asm) {
    if (opts.target != "cpu")
      return fail("--emit=asm prints the CPU kernels' assembly; it needs "
                  "--target=cpu");
    phaseOptions.kernelAssembly = [&](const std::string &text) {
      textOutput += text;
    };
  }
  phaseOptions.kernelCode =
      opts.emit != EmitKind::None && opts.emit != EmitKind::Sim;
  if (opts.printMemoryPlan)
    phaseOptions.memoryReport = [this](const std::string &report) {
      errs() << report;
    };
  if (opts.report && opts.emit == EmitKind::MLIR)
    return fail("--report describes a plan; it cannot be combined with "
                "--emit=mlir");
  // One report per program: the step's, or each pipeline stage's.
  if (opts.report || (io.report && (opts.emit == EmitKind::Plan ||
                                    opts.emit == EmitKind::None ||
                                    opts.emit == EmitKind::Sim)))
    phaseOptions.stepReport = [&](const StepReport &report) {
      stepReports.push_back(report);
    };
  // --init-parameters, --max-memory and --simulate's cluster apply to the
  // compiled plan; their values are checked before the model is read.
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
  if (!opts.maxMemory.empty()) {
    budget = parseByteCount(opts.maxMemory);
    if (!budget)
      return fail("bad --max-memory '" + opts.maxMemory +
                  "' (expected bytes with an optional K, M, G or T suffix, "
                  "e.g. 80G)");
  }
  if (opts.simulate || opts.autoPlan)
    if (std::string e = sim::loadCluster(opts.cluster, cluster); !e.empty())
      return fail(e);
  if (!opts.simSchedule.empty())
    if (std::string e = sim::parseReplaySchedule(opts.simSchedule, replay);
        !e.empty())
      return fail("bad --sim-schedule '" + opts.simSchedule + "': " + e);
  return 0;
}

} // namespace cleave::compiler
