//===- cleave-schedule.cpp - Inspect pipeline schedules -------------------===//
//
// cleave-schedule --schedule=gpipe|1f1b|interleaved:v|zero-bubble
//                 --stages=p --microbatches=m [--forward=1] [--backward=2]
//                 [--weight-share=0.5] [--trace=FILE]
//
// Prints each pipeline rank's unrolled order of steps (F<mb>, B<mb>, and
// for zero-bubble the input-gradient B<mb> and weight-gradient W<mb>; .c<k>
// names the chunk of an interleaved rank), then the simulated step time,
// the bubble beside its textbook formula, and the activations each rank
// holds at most (microbatches whose forward it ran and whose backward, or
// weight gradient when split, it has not). --trace writes the simulated
// timeline as Chrome trace JSON (chrome://tracing, Perfetto), one row per rank.
// Durations are per rank's share of the model: a backward pass costs
// --backward, of which --weight-share is the weight gradient (the part
// zero-bubble schedules defer).
//
//===----------------------------------------------------------------------===//

#include "cleave/Schedule/Schedule.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace cleave::schedule;

static cl::opt<std::string>
    scheduleOpt("schedule",
                cl::desc("gpipe, 1f1b, interleaved:<chunks per rank> or "
                         "zero-bubble"),
                cl::init("1f1b"));
static cl::opt<int64_t> stagesOpt("stages", cl::desc("Pipeline ranks (p)"),
                                  cl::init(4));
static cl::opt<int64_t> microbatchesOpt("microbatches",
                                        cl::desc("Microbatches per step (m)"),
                                        cl::init(8));
static cl::opt<double> forwardOpt("forward",
                                  cl::desc("Duration of a forward pass"),
                                  cl::init(1.0));
static cl::opt<double> backwardOpt("backward",
                                   cl::desc("Duration of a backward pass"),
                                   cl::init(2.0));
static cl::opt<double>
    weightShareOpt("weight-share",
                   cl::desc("Share of a backward pass that computes weight "
                            "gradients (split off by zero-bubble)"),
                   cl::init(0.5));
static cl::opt<std::string> traceOpt("trace",
                                     cl::desc("Write a Chrome trace here"),
                                     cl::value_desc("file"));

static int fail(const Twine &message) {
  errs() << "cleave-schedule: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Cleave pipeline schedules\n");

  ScheduleOptions options;
  options.ranks = stagesOpt;
  options.microbatches = microbatchesOpt;
  if (std::string error = parseScheduleKind(scheduleOpt, options);
      !error.empty())
    return fail(error);
  if (!(forwardOpt > 0) || !(backwardOpt > 0) || !(weightShareOpt >= 0) ||
      !(weightShareOpt < 1))
    return fail("--forward and --backward must be positive and "
                "--weight-share in [0, 1)");
  StepCosts costs;
  costs.forward = forwardOpt;
  costs.backwardWeight = backwardOpt * weightShareOpt;
  costs.backwardInput = backwardOpt - costs.backwardWeight;

  std::string error;
  std::vector<std::vector<Step>> order = buildSchedule(options, error);
  if (order.empty())
    return fail(error);
  Simulation sim = simulate(order, options, costs, error);
  if (!error.empty())
    return fail(error);

  outs() << "schedule " << scheduleOpt << ": " << options.ranks << " ranks, "
         << options.microbatches << " microbatches";
  if (options.chunks > 1)
    outs() << ", " << options.chunks << " chunks per rank";
  outs() << "\n";
  for (auto [r, steps] : llvm::enumerate(order)) {
    outs() << "rank " << r << ":";
    for (const Step &s : steps)
      outs() << " " << stepName(s, options);
    outs() << "\n";
  }
  outs() << formatv("step time {0:F2} (F = {1}, B = {2}); bubble {3:P1} "
                    "simulated, {4:P1} by the formula\n",
                    sim.makespan, costs.forward,
                    costs.backwardInput + costs.backwardWeight, sim.bubble,
                    formulaBubble(options, costs));
  // A chunk's forward holds 1/v of a microbatch's activations.
  outs() << "activations held at most, in microbatches, per rank:";
  for (int64_t n : sim.peakInFlight) {
    if (options.chunks > 1)
      outs() << formatv(" {0:F2}", double(n) / options.chunks);
    else
      outs() << " " << n;
  }
  outs() << "\n";

  if (!traceOpt.empty()) {
    std::error_code ec;
    ToolOutputFile out(traceOpt, ec, sys::fs::OF_Text);
    if (ec)
      return fail("cannot write --trace '" + traceOpt + "': " + ec.message());
    out.os() << chromeTrace(sim, options);
    out.keep();
  }
  return 0;
}
