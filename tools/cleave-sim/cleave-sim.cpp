//===- cleave-sim.cpp - Simulate a compiled plan on a cluster -------------===//
//
// cleave-sim PLAN --cluster=PRESET[:NODES]|FILE [--algorithm=ring|tree]
//            [--schedule=KIND[,pp=P][,microbatches=M]]
//            [--trace=FILE [--trace-commands=false]] [--print-cluster]
//
// Replays one step of a compiled plan (any .cleave file, pipelined or SPMD)
// on every rank of its mesh with the cost model of the cluster, and prints
// the step time, the exposed communication, the pipeline bubble, MFU and
// HFU, and each rank's memory. --trace writes the simulated timeline as a
// Chrome trace (pipeline steps as pid 0, the shape cleave-run --trace
// writes; every command as pid 1). --schedule replays a pipelined plan's
// stage programs as the virtual stages of a longer schedule
// (sim::simulateReplay; cleave-compile --sim-schedule). Plans written by
// cleave-compile --emit=sim, without kernel code, simulate like any other.
//
//===----------------------------------------------------------------------===//

#include "cleave/PlanFormat.h"
#include "cleave/Simulate/Cluster.h"
#include "cleave/Simulate/Simulator.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

static cl::opt<std::string> planPath(cl::Positional, cl::desc("<plan>"));
static cl::opt<std::string>
    clusterOpt("cluster",
               cl::desc("A preset (dgx-a100-80gb, dgx-h100, hgx-h200, cpu; "
                        "':N' for N nodes) or a JSON description"),
               cl::value_desc("preset[:nodes]|file"), cl::init("cpu"));
static cl::opt<std::string>
    algorithmOpt("algorithm",
                 cl::desc("Collective algorithm: ring, tree, or auto (the "
                          "faster per collective)"),
                 cl::init("auto"));
static cl::opt<std::string> scheduleOpt(
    "schedule",
    cl::desc("Replay a pipelined plan's stage programs as the virtual "
             "stages of this schedule at P pipeline ranks and M "
             "microbatches (see cleave-compile --sim-schedule)"),
    cl::value_desc("kind[,pp=P][,microbatches=M]"));
static cl::opt<std::string> traceOpt("trace",
                                     cl::desc("Write a Chrome trace here"),
                                     cl::value_desc("file"));
static cl::opt<bool> traceCommands(
    "trace-commands",
    cl::desc("Put every command in the trace besides the pipeline steps "
             "(--trace-commands=false: the steps only, like cleave-run "
             "--trace)"),
    cl::init(true));
static cl::opt<double> tokenBudget(
    "token-budget",
    cl::desc("Also report a whole run of this many tokens: steps, time, "
             "energy and cost"),
    cl::value_desc("tokens"), cl::init(0));
static cl::opt<double> tokensPerStepOpt(
    "tokens-per-step",
    cl::desc("With --token-budget: the tokens a step trains on (default: "
             "the elements of the plan's first integer input of rank 2 or "
             "more, its token ids)"),
    cl::value_desc("tokens"), cl::init(0));
static cl::opt<bool>
    printCluster("print-cluster",
                 cl::desc("Print the cluster description as JSON and exit"));

static int fail(const Twine &message) {
  errs() << "cleave-sim: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "Simulate a compiled Cleave plan on a cluster\n");
  cleave::sim::Cluster cluster;
  if (std::string error = cleave::sim::loadCluster(clusterOpt, cluster);
      !error.empty())
    return fail(error);
  if (printCluster) {
    outs() << cleave::sim::clusterJson(cluster);
    return 0;
  }
  if (planPath.empty())
    return fail("no plan given (cleave-sim PLAN --cluster=...)");
  cleave::sim::SimulateOptions options;
  options.traceCommands = traceCommands;
  if (algorithmOpt == "ring")
    options.algorithm = cleave::sim::Algorithm::Ring;
  else if (algorithmOpt == "tree")
    options.algorithm = cleave::sim::Algorithm::Tree;
  else if (algorithmOpt != "auto")
    return fail("--algorithm must be ring, tree or auto, not '" + algorithmOpt +
                "'");

  if (tokenBudget < 0 || tokensPerStepOpt < 0)
    return fail("--token-budget and --tokens-per-step must not be negative");
  cleave::plan::Plan plan;
  std::string error;
  if (!cleave::plan::readFile(planPath, &plan, &error))
    return fail(planPath + ": " + error);
  double perStep = tokensPerStepOpt;
  std::string perStepSource = "--tokens-per-step";
  if (tokenBudget > 0 && perStep == 0) {
    perStep = cleave::sim::tokensPerStep(plan, perStepSource);
    if (perStep == 0)
      return fail(planPath +
                  ": --token-budget needs --tokens-per-step: the "
                  "plan has no integer input of rank 2 or more to count "
                  "tokens from");
  }
  cleave::sim::SimResult result;
  if (!scheduleOpt.empty()) {
    cleave::sim::ReplaySchedule replay;
    if (std::string e = cleave::sim::parseReplaySchedule(scheduleOpt, replay);
        !e.empty())
      return fail("bad --schedule '" + scheduleOpt + "': " + e);
    if (std::string e =
            cleave::sim::simulateReplay(plan, cluster, options, replay, result);
        !e.empty())
      return fail(planPath + ": " + e);
  } else if (std::string e =
                 cleave::sim::simulatePlan(plan, cluster, options, result);
             !e.empty()) {
    return fail(planPath + ": " + e);
  }
  outs() << cleave::sim::simulationReport(result, cluster);
  if (tokenBudget > 0)
    outs() << "tokens per step " << format("%.0f", perStep) << " ("
           << perStepSource << ")\n"
           << cleave::sim::runBudgetReport(result, cluster, tokenBudget,
                                           perStep);
  if (!traceOpt.empty()) {
    std::error_code ec;
    ToolOutputFile out(traceOpt, ec, sys::fs::OF_Text);
    if (ec)
      return fail("cannot write --trace '" + traceOpt + "': " + ec.message());
    out.os() << cleave::sim::simulationTrace(result);
    out.keep();
  }
  return 0;
}
