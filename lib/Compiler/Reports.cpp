//===- Reports.cpp - What a compile prints besides its output -------------===//
//
// --print-stats, --report, --max-memory's refusal, --simulate and
// --emit=schedule.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "cleave/FileUtil.h"
#include "cleave/Transforms/Training/Passes.h"

#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace cleave::compiler {

/// Why `plan` (each pipeline stage) needs more than `budget` bytes per
/// rank, naming its largest tensor; "" when it fits.
std::string overBudget(const plan::Plan &plan, uint64_t budget,
                       const std::string &device) {
  auto check = [&](const plan::Plan &program,
                   const std::string &what) -> std::string {
    if (program.arenaBytes <= budget)
      return "";
    const plan::TensorInfo *largest = nullptr;
    auto consider = [&](const plan::TensorInfo &t) {
      if (!largest || t.byteSize() > largest->byteSize())
        largest = &t;
    };
    for (const auto &t : program.inputs)
      consider(t);
    for (const auto &t : program.outputs)
      consider(t);
    for (const auto &st : program.states)
      consider(st.info);
    std::string message =
        what + " needs " + std::to_string(program.arenaBytes) +
        " bytes per rank, over " +
        (device.empty() ? "--max-memory of " + std::to_string(budget)
                        : "the memory of one " + device + " (" +
                              std::to_string(budget) + " bytes)");
    if (largest)
      message += "; its largest tensor is '" + largest->name + "' (" +
                 std::to_string(largest->byteSize()) + " bytes)";
    if (auto scratch = plan::getMetadata(program, plan::meta::kCpuScratchBytes))
      message += ", its largest kernel's temporaries " +
                 std::to_string(*scratch) + " bytes";
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
static void printTimings(llvm::raw_ostream &os, double importSeconds,
                         const CompileTimings &t) {
  os << "time: import " << llvm::format("%.2f", importSeconds) << " s, passes "
     << llvm::format("%.2f", t.passesSeconds) << " s";
  if (t.kernels) {
    os << ", kernel code " << llvm::format("%.2f", t.codegenSeconds) << " s ("
       << t.kernels << " kernels: " << t.kernels - t.kernelsFromCache
       << " compiled";
    if (t.codegenThreads)
      os << " on " << t.codegenThreads
         << (t.codegenThreads == 1 ? " thread" : " threads");
    os << ", " << t.kernelsFromCache << " from the cache";
    if (!t.kernelCache)
      os << " (off)";
    os << "), link " << llvm::format("%.2f", t.linkSeconds) << " s";
  }
  os << "\n";
}

/// --stats: what a compiled program holds (one line per part).
static void printPlanStats(llvm::raw_ostream &os, const plan::Plan &program,
                           double seconds) {
  plan::PlanStats stats = plan::statistics(program);
  if (!program.mesh.empty())
    os << "mesh: " << program.mesh.str() << " (" << program.mesh.worldSize()
       << " ranks), " << stats.collectives << " collectives ("
       << stats.asyncCollectives << " asynchronous)\n";
  // Named entries (local SGD's averaging), run every syncEvery steps.
  for (const plan::Plan &entry : program.entries) {
    size_t entryCollectives = 0;
    for (const plan::Command &c : entry.commands)
      entryCollectives += c.kind == plan::CommandKind::Collective;
    os << "entry " << entry.entryName;
    if (entry.entryName == plan::kSyncEntry)
      os << " (after every " << program.training.syncEvery
         << (program.training.syncEvery == 1 ? " step" : " steps") << ")";
    os << ": " << entry.commands.size() << " commands, " << entryCollectives
       << " collectives, arena " << entry.arenaBytes << " bytes, "
       << entry.states.size() << " states borrowed\n";
  }
  if (!program.states.empty())
    os << "state per rank: parameters " << stats.parameterBytes
       << " bytes, optimizer states " << stats.optimizerStateBytes
       << " bytes, buffers " << stats.bufferBytes << " bytes\n";
  os << "plan: " << stats.commands << " commands (" << stats.kernels
     << (program.target.rfind("cuda-", 0) == 0 ? " kernel launches, "
                                               : " kernels, ")
     << stats.gemms << " gemms, " << stats.attentions << " attentions"
     << (stats.groupedGemms
             ? ", " + std::to_string(stats.groupedGemms) + " grouped gemms"
             : std::string())
     << "), arena " << stats.arenaBytes << " bytes (constants "
     << stats.constantBytes << "), kernel object " << stats.kernelObjectBytes
     << " bytes, compiled in " << llvm::format("%.2f", seconds) << " s\n";
  if (!program.hostKernelObject.empty()) {
    size_t args = 0, written = 0;
    for (const auto &kernel : program.hostKernelArgs)
      for (const plan::HostKernelArg &a : kernel) {
        ++args;
        written += a.written;
      }
    os << "host kernels: " << program.hostKernelArgs.size()
       << " for the CUDA host doubles, object "
       << program.hostKernelObject.size() << " bytes; " << args
       << " arguments, " << written << " written\n";
  }
  if (stats.referencedBytes)
    os << "initial parameters: " << stats.referencedBytes
       << " bytes referenced from " << llvm::join(stats.referencedFiles, ", ")
       << " (each rank reads its shards when it starts; "
          "--embed-weights copies them into the plan)\n";
  const size_t *epilogues = stats.gemmEpilogues;
  if (epilogues[1] + epilogues[2] + epilogues[3])
    os << "gemm epilogues: " << epilogues[1] << " bias, " << epilogues[2]
       << " gelu_bias, " << epilogues[3] << " gelu\n";
  namespace meta = plan::meta;
  auto number = [&](plan::IntegerKey key) {
    return plan::getMetadata(program, key).value_or(0);
  };
  if (auto policy = plan::getMetadata(program, meta::kRecomputePolicy))
    os << "recompute: policy " << *policy << ", saved activations "
       << number(meta::kSavedActivationBytesBefore) << " -> "
       << number(meta::kSavedActivationBytesAfter)
       << " bytes, recomputed flops " << number(meta::kRecomputeFlops)
       << ", extra flops " << number(meta::kRecomputeExtraFlops) << " (total "
       << number(meta::kFlops) << ")\n";
  if (plan::getMetadata(program, meta::kActivationBytes))
    os << "step memory: activations per microbatch "
       << number(meta::kActivationBytes) << " bytes, gradient sums "
       << number(meta::kAccumulatorBytes) << " bytes, made once for the "
       << "microbatches " << number(meta::kKeptBytes) << " bytes\n";
}

/// --report of a pipelined plan: the schedule's bubble, simulated with
/// equal stages and by the formula, and each stage's memory.
static void printPipelineSummary(const plan::Plan &plan,
                                 const std::string &schedule,
                                 int64_t microbatches, llvm::raw_ostream &os) {
  namespace pl = schedule;
  pl::ScheduleOptions options;
  if (!pl::parseScheduleKind(schedule, options).empty())
    return;
  options.ranks = static_cast<int64_t>(plan.stages.size());
  options.microbatches = microbatches;
  std::string error;
  auto order = pl::buildSchedule(options, error);
  pl::StepCosts costs;
  pl::Simulation sim = error.empty()
                           ? pl::simulate(order, options, costs, error)
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
    for (const plan::StateTensor &st : stage.states)
      states += st.info.byteSize();
    os << llvm::formatv("  stage {0}: peak {1} bytes (arena), states {2} "
                        "bytes, at most {3} microbatches' activations held\n",
                        c, stage.arenaBytes, states,
                        c < sim.peakInFlight.size() ? sim.peakInFlight[c] : 0);
  }
}

/// --emit=schedule: cuts the forward program into --pipeline-stages stages
/// (times the chunks of an interleaved schedule), simulates the schedule
/// with each stage's steps as long as its share of the flops, and writes
/// the timeline as Chrome trace JSON.
int Driver::emitSchedule(ModuleOp module) {
  namespace pl = schedule;
  const pl::ScheduleOptions &options = scheduleEmit;
  int64_t stages = options.ranks * options.chunks;
  PassManager pm(module.getContext());
  AssignPipelineStagesPassOptions assign;
  assign.stages = stages;
  pm.addPass(createAssignPipelineStagesPass(assign));
  if (failed(pm.run(module)))
    return 1;
  // Each stage's flops, relative to the mean stage.
  std::vector<double> flops(stages, 0.0);
  auto main = module.lookupSymbol<func::FuncOp>("main");
  main.walk([&](mlir::cleave::CostOpInterface op) {
    if (std::optional<int64_t> stage = mlir::cleave::getStage(op))
      if (!isa<mlir::cleave::ConstantOp>(op))
        flops[*stage] += static_cast<double>(op.getFlops());
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
  errs() << llvm::formatv(
      "schedule {0}: {1} ranks, {2} microbatches: step time {3:F2} mean-stage "
      "forward passes, bubble {4:P1} (with equal stages the formula gives "
      "{5:P1})\n",
      opts.scheduleOrDefault(), options.ranks, options.microbatches,
      sim.makespan, sim.bubble, pl::formulaBubble(options, costs));
  if (llvm::Error err = llvm::writeToOutput(
          output, [&](llvm::raw_ostream &os) -> llvm::Error {
            os << pl::chromeTrace(sim, options);
            return llvm::Error::success();
          }))
    return fail("cannot write '" + output +
                "': " + llvm::toString(std::move(err)));
  return 0;
}

void Driver::printReports(const plan::Plan &plan, llvm::raw_ostream &os) {
  for (auto [c, report] : llvm::enumerate(stepReports)) {
    const plan::Plan &program = plan.isPipelined() ? plan.stages[c] : plan;
    if (plan.isPipelined())
      os << "pipeline stage " << c << " (pp rank " << c << "):\n";
    printStepReport(report, os);
    if (program.training.enabled && !program.mesh.empty()) {
      // ZeRO's axes; the experts, split over ep, take the others.
      int64_t dpRanks = 1, expertRanks = 1;
      std::string zeroAxes;
      auto ranksOf = [&](StringRef axis) -> int64_t {
        for (auto [name, size] :
             llvm::zip(program.mesh.axisNames, program.mesh.shape))
          if (name == axis)
            return size;
        return 0;
      };
      for (StringRef axis : mlir::cleave::getZeroAxes(ranksOf)) {
        dpRanks *= ranksOf(axis);
        if (axis != "ep")
          expertRanks *= ranksOf(axis);
        zeroAxes += (zeroAxes.empty() ? "" : ", ") + axis.str();
      }
      StringRef optimizer = program.training.optimizer;
      unsigned optimizerBytes =
          optimizer == "adam" || optimizer == "adamw"          ? 8
          : optimizer == "momentum" || optimizer == "nesterov" ? 4
                                                               : 0;
      if (dpRanks > 1)
        printZeroFormula(report, opts.zero, dpRanks, expertRanks, zeroAxes,
                         optimizerBytes, os);
    }
  }
  if (plan.isPipelined())
    printPipelineSummary(plan, opts.scheduleOrDefault(), opts.microbatches, os);
}

int Driver::simulate(const plan::Plan &plan) {
  sim::SimulateOptions simOptions;
  simOptions.traceCommands = !opts.simTrace.empty();
  sim::SimResult result;
  if (!opts.simSchedule.empty()) {
    if (std::string e =
            sim::simulateReplay(plan, cluster, simOptions, replay, result);
        !e.empty())
      return fail("--sim-schedule: " + e);
  } else if (std::string e =
                 sim::simulatePlan(plan, cluster, simOptions, result);
             !e.empty()) {
    return fail("--simulate: " + e);
  }
  errs() << sim::simulationReport(result, cluster);
  if (opts.simTrace.empty())
    return 0;
  std::string trace = sim::simulationTrace(result), error;
  if (!writeFileAtomically(opts.simTrace, trace.data(), trace.size(), &error))
    return fail("cannot write --sim-trace '" + opts.simTrace + "': " + error);
  return 0;
}

void Driver::printStats(const plan::Plan &plan, double seconds,
                        double importSeconds) {
  llvm::raw_ostream &os = errs();
  if (plan.isPipelined()) {
    os << "pipeline: " << plan.stages.size() << " stages over mesh "
       << plan.mesh.str() << "\n";
    for (auto [c, stage] : llvm::enumerate(plan.stages)) {
      os << "stage " << c << ": ";
      printPlanStats(os, stage, seconds);
    }
  } else {
    printPlanStats(os, plan, seconds);
  }
  namespace meta = plan::meta;
  if (auto attention = plan::getMetadata(plan, meta::kRecognizedAttention)) {
    os << "recognized: " << *attention << " attention, "
       << plan::getMetadata(plan, meta::kRecognizedRmsNorm).value_or(0)
       << " rms_norm, "
       << plan::getMetadata(plan, meta::kRecognizedSilu).value_or(0) << " silu";
    if (auto experts = plan::getMetadata(plan, meta::kRecognizedExperts))
      os << ", " << *experts << " expert gemms";
    os << " (--no-recognize-composites keeps them spelled out)\n";
  }
  printTimings(os, importSeconds, timings);
}

} // namespace cleave::compiler
