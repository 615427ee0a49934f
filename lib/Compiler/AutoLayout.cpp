//===- AutoLayout.cpp - --auto: choose the parallel layout ----------------===//
//
// Searches dp x ep x pp x tp x cp (with cp's attention partitioning), the
// schedule, the microbatch size, sequence parallelism, ZeRO and recompute
// for the fastest simulated step that fits the devices' memory
// (sim::searchPlans), compiling the small profiles the planner asks for,
// and sets the compile's options to the chosen layout. ep is searched for
// models with experts (recognized on the profiles' cut model first).
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "cleave/Analysis/ExpertWeights.h"
#include "cleave/FileUtil.h"

#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FormatVariadic.h"

#include <memory>
#include <numeric>

using namespace mlir;

namespace cleave::compiler {

/// A list of sizes, "1,2,4", given to `flag` into `out`; returns an error
/// or "".
static std::string parseSizes(const std::string &flag, const std::string &text,
                              const char *what, std::vector<int64_t> &out) {
  llvm::SmallVector<llvm::StringRef> sizes;
  llvm::StringRef(text).split(sizes, ',');
  for (llvm::StringRef size : sizes) {
    int64_t n = 0;
    if (size.trim().getAsInteger(10, n) || n < 1)
      return "bad " + flag + " '" + text + "' (expected " + what +
             " such as 1,2,4)";
    out.push_back(n);
  }
  return "";
}

/// --auto-cp's sizes and --context-parallel's mode (with --auto: the one
/// attention partitioning its cp candidates take) into `planner`; returns
/// an error or "".
static std::string contextParallelChoices(const CompileOptions &opts,
                                          sim::PlannerOptions &planner) {
  if (!opts.contextParallel.empty()) {
    if (opts.contextParallel != "all-to-all" &&
        opts.contextParallel != "ring" && opts.contextParallel != "auto")
      return "--context-parallel='" + opts.contextParallel +
             "': expected all-to-all, ring or auto";
    planner.contextParallelModes = {opts.contextParallel};
  }
  if (opts.autoCp.empty())
    return "";
  return parseSizes("--auto-cp", opts.autoCp, "context-parallel sizes",
                    planner.contextParallel);
}

int Driver::planLayout(bool &searchOnly) {
  // What the planner decides is not the user's to give.
  CompileOptions defaults;
  std::pair<bool, const char *> decided[] = {
      {!opts.mesh.empty(), "mesh"},
      {opts.dataParallel != defaults.dataParallel, "data-parallel"},
      {opts.microbatches != defaults.microbatches, "microbatches"},
      {opts.schedule.has_value(), "schedule"},
      {!opts.stageBoundaries.empty(), "stage-boundaries"},
      {opts.recompute != defaults.recompute, "recompute"},
      {opts.sequenceParallel, "sequence-parallel"},
      {opts.zero != defaults.zero, "zero"},
      {opts.keepLayers != defaults.keepLayers, "keep-layers"},
      {opts.overlapCollectives, "overlap-collectives"},
      {opts.bucketMB != defaults.bucketMB, "bucket-mb"},
      {opts.sync != defaults.sync, "sync"},
      {!opts.simSchedule.empty(), "sim-schedule"}};
  for (auto [given, name] : decided)
    if (given)
      return fail(llvm::Twine("--auto chooses the layout; it cannot be "
                              "combined with --") +
                  name);
  if (!opts.shard.empty() || !opts.shardingFile.empty())
    return fail("--auto chooses the layout; it cannot be combined with "
                "--shard or --sharding-file");
  if (!opts.train || !phaseOptions.train)
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
  if (io.stopAfterOptions)
    return 0;

  MLIRContext outlineContext;
  ScopedDiagnosticHandler outlineHandler(&outlineContext,
                                         [this](Diagnostic &d) {
                                           printDiagnostic(d);
                                           return success();
                                         });
  FailureOr<ModelOutline> outline =
      outlineONNXModel(opts.input, outlineContext);
  if (failed(outline))
    return 1;
  if (!outline->mismatch.empty())
    return fail("--auto costs a model by its repeated layers: " +
                outline->mismatch);
  int64_t layers = static_cast<int64_t>(outline->layers.size());
  if (layers < sim::kProfileLayers)
    return fail("--auto costs a model by its repeated layers (nodes named "
                "by layer, e.g. h0.fc or /model/layers.0/mlp); '" +
                opts.input + "' has " + std::to_string(layers) +
                ", fewer than " + std::to_string(sim::kProfileLayers));
  // The batch inputs: a symbolic first dimension; the others must be known.
  std::vector<const ModelOutline::Input *> batched;
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
  auto pinBatch = [&](ImportOptions &imports, int64_t rows) {
    for (const auto *input : batched) {
      llvm::SmallVector<int64_t> shape(input->shape.begin(),
                                       input->shape.end());
      shape[0] = rows;
      imports.inputShapes[input->name] = shape;
    }
  };
  // The meshes are sim::layoutMesh's, in the order --mesh lays them out,
  // which Candidate::options() prints too: the profiles are costed at the
  // rank placement the chosen layout compiles to, printed or not. cp's
  // exchanges are as heavy as tp's, so beside tp inside a node would suit
  // them better; on a cluster of several nodes a cp group placed outermost
  // spans nodes and is costed over their links. Placing cp beside tp is a
  // change to --mesh's layout (and then to this order), not one the planner
  // can make alone.
  // Stage boundaries cutting the layers into `stages` equal runs.
  auto boundaries = [&](int64_t stages, int64_t count) {
    std::string cut;
    for (int64_t i = 1; i < stages; ++i)
      cut += (cut.empty() ? "" : ",") + outline->layers[count / stages * i - 1];
    return cut;
  };
  auto layoutOptions = [&](PhaseOptions &co, int64_t dp, int64_t ep, int64_t pp,
                           int64_t tp, bool sp, int64_t cp,
                           const std::string &cpMode, int zero,
                           int64_t microbatches, const std::string &schedule,
                           const std::string &recompute, int64_t stages,
                           int64_t count, bool overlap, double bucketMB) {
    // pp pipeline ranks run `stages` stage programs (pp * chunks).
    co.train->microbatches = microbatches;
    co.train->pipelineRanks = pp;
    co.train->schedule = pp > 1 ? schedule : "1f1b";
    co.train->stageBoundaries = pp > 1 ? boundaries(stages, count) : "";
    co.recompute = recompute;
    ShardProgramOptions shard;
    shard.mesh = sim::layoutMesh(dp, ep, pp, tp, cp);
    shard.sequenceParallel = sp;
    if (cp > 1)
      shard.contextParallel = cpMode;
    shard.zero = zero;
    shard.overlap = overlap;
    shard.bucketMB = bucketMB;
    if (shard.mesh.empty())
      co.shard.reset();
    else
      co.shard = std::move(shard);
  };

  // The profiles' model, cut once.
  FailureOr<std::string> cut =
      cutONNXModel(opts.input, sim::kProfileLayers, outlineContext);
  if (failed(cut))
    return 1;
  auto profileModel = std::make_shared<const std::string>(std::move(*cut));

  sim::PlannerOptions planner;
  planner.devices = cluster.devices();
  planner.globalBatch = opts.globalBatch;
  planner.layers = layers;
  planner.memoryLimit = budget ? double(*budget) : cluster.device.memoryBytes;
  // cp splits dimension 1 of every batch input of rank 2 or more: the
  // sizes it may take divide all of them.
  for (const auto *input : batched)
    if (input->shape.size() >= 2)
      planner.sequence = std::gcd(planner.sequence, input->shape[1]);
  if (std::string e = contextParallelChoices(opts, planner); !e.empty())
    return fail(e);
  // ep: the sizes that split the experts of every layer, where the model
  // has any (recognized on the cut model, as the profiles will be).
  int64_t experts = 0;
  {
    MLIRContext context(compileRegistry(), MLIRContext::Threading::DISABLED);
    context.loadAllAvailableDialects();
    ScopedDiagnosticHandler handler(&context, [this](Diagnostic &d) {
      printDiagnostic(d);
      return success();
    });
    ImportOptions imports = importOptions;
    imports.modelBytes = profileModel;
    pinBatch(imports, 1);
    FailureOr<OwningOpRef<ModuleOp>> module =
        importONNXFile(opts.input, context, imports);
    if (failed(module))
      return 1;
    PassManager pm(&context);
    addRecognizeComposites(pm, phaseOptions);
    if (failed(pm.run(**module)))
      return 1;
    experts = commonExpertCount(**module);
  }
  std::vector<int64_t> eps;
  if (!opts.autoEp.empty()) {
    if (std::string e =
            parseSizes("--auto-ep", opts.autoEp, "expert-parallel sizes", eps);
        !e.empty())
      return fail(e);
    for (int64_t ep : eps)
      if (ep > 1 && (!experts || experts % ep))
        return fail("--auto-ep " + std::to_string(ep) + ": " +
                    (experts
                         ? "the model's " + std::to_string(experts) +
                               " experts do not divide over it"
                         : std::string("the model has no experts to split (no "
                                       "grouped matmul or contraction batched "
                                       "over its weights' experts)")));
  } else {
    eps.push_back(1);
    for (int64_t ep = 2; experts && ep <= planner.devices; ep *= 2)
      if (experts % ep == 0 && planner.devices % ep == 0)
        eps.push_back(ep);
  }
  planner.expertParallel = eps;
  planner.compileProfile = [&](const sim::ProfileKey &key,
                               plan::Plan &out) -> std::string {
    ImportOptions imports = importOptions;
    imports.modelBytes = profileModel;
    pinBatch(imports, sim::kProfileDataParallel * key.ep *
                          sim::kProfileMicrobatches * key.microbatchSize);
    PhaseOptions co = phaseOptions;
    co.kernelCode = false;
    co.verifyPasses = false;
    co.timings = nullptr;
    co.stepReport = nullptr;
    co.memoryReport = nullptr;
    co.dump = nullptr;
    co.kernelAssembly = nullptr;
    layoutOptions(co, sim::kProfileDataParallel, key.ep, sim::kProfileLayers,
                  key.tp, key.sequenceParallel, key.cp, key.contextParallel,
                  key.zero, sim::kProfileMicrobatches, "1f1b", key.recompute,
                  sim::kProfileLayers, sim::kProfileLayers,
                  /*overlap=*/false, opts.bucketMB);
    // Profiles compile on several threads at once: one thread each.
    MLIRContext context(compileRegistry(), MLIRContext::Threading::DISABLED);
    context.loadAllAvailableDialects();
    std::string errors;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error && errors.empty())
        errors = d.str();
      return success();
    });
    FailureOr<OwningOpRef<ModuleOp>> module =
        importONNXFile(opts.input, context, imports);
    if (failed(module))
      return errors.empty() ? "the model did not import" : errors;
    FailureOr<plan::Plan> plan = compileToPlan(**module, co);
    if (failed(plan))
      return errors.empty() ? "it did not compile" : errors;
    out = std::move(*plan);
    return "";
  };
  bool first = !autoAttempt.search;
  if (first) {
    autoAttempt.search.emplace();
    if (std::string e = sim::searchPlans(planner, cluster, *autoAttempt.search);
        !e.empty())
      return fail("--auto: " + e);
  }
  const sim::PlanSearch &search = *autoAttempt.search;
  // The fastest candidate not chosen yet that fits with its prediction
  // scaled; else the fastest not chosen yet (the scale comes from other
  // layouts, and may not hold for it).
  auto untried = [&](bool scaled) {
    for (size_t i = 0; i < search.feasible.size(); ++i)
      if (!autoAttempt.tried.count(i) &&
          (!scaled || planner.memoryLimit <= 0 ||
           search.feasible[i].memoryBytes * autoAttempt.memoryScale <=
               planner.memoryLimit))
        return i;
    return search.feasible.size();
  };
  size_t choice = untried(/*scaled=*/true);
  if (choice == search.feasible.size())
    choice = untried(/*scaled=*/false);
  if (opts.explain && first)
    errs() << sim::explainSearch(search, cluster, planner, 8);
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
    if (!writeFileAtomically(opts.candidatesFile, csv.data(), csv.size(),
                             &error))
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
    return fail(
        "--auto found no layout of '" + opts.input + "' for " +
        std::to_string(planner.devices) + " devices of " + cluster.name +
        " within " + std::to_string(uint64_t(planner.memoryLimit)) +
        " bytes each (e.g. " + why + "; --explain lists every candidate)");
  }
  if (choice >= search.feasible.size())
    return fail("--auto: every layout predicted to fit (" +
                std::to_string(autoAttempt.tried.size()) +
                ") is over --max-memory once compiled");
  const sim::Candidate &best = search.feasible[choice];
  autoAttempt.predictedBytes = best.memoryBytes;
  autoAttempt.tried.insert(choice);
  errs() << llvm::formatv(
      "cleave-compile: --auto chose {0} (predicted step {1:F3} ms, {2} per "
      "device; {3} candidates in {4:F1} s)\n",
      best.options(), best.stepSeconds * 1e3,
      sim::formatMemory(best.memoryBytes),
      search.feasible.size() + search.rejected.size(), search.searchSeconds);
  pinBatch(importOptions, opts.globalBatch);
  layoutOptions(phaseOptions, best.dp, best.ep, best.pp, best.tp,
                best.sequenceParallel, best.cp, best.contextParallel, best.zero,
                best.microbatches, best.schedule(), best.recompute,
                best.pp * best.chunks, layers, best.overlap, best.bucketMB);
  // What the reports read.
  opts.microbatches = best.microbatches;
  opts.schedule = best.schedule();
  opts.zero = best.zero;
  searchOnly = opts.emit == EmitKind::None;
  return 0;
}

} // namespace cleave::compiler
