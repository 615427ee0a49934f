//===- Driver.h - One compile in flight (lib/Compiler only) -----*- C++ -*-===//
//
// cleave::compile's state: the options, where the compile prints, and what
// checking the options gave (the import and phase options, the output path,
// the memory budget, the cluster). Its parts live in:
//   Compile.cpp     the compile itself, the model, the outputs;
//   Configure.cpp   options -> import and phase options, with their checks;
//   AutoLayout.cpp  --auto's layout search;
//   Reports.cpp     --print-stats, --report, --simulate, --emit=schedule.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_COMPILER_DRIVER_H
#define CLEAVE_LIB_COMPILER_DRIVER_H

#include "cleave/Compiler/Compile.h"
#include "cleave/Import/ONNXImporter.h"
#include "cleave/Pipelines/Pipelines.h"
#include "cleave/Schedule/Schedule.h"
#include "cleave/Simulate/Cluster.h"
#include "cleave/Simulate/Planner.h"
#include "cleave/Simulate/Simulator.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cleave::compiler {

/// --auto's attempts at a layout whose compiled plan fits --max-memory.
struct AutoAttempt {
  /// The search, made once for all attempts.
  std::optional<sim::PlanSearch> search;
  /// The most any compiled choice needed over what the planner predicted
  /// for it: later choices must fit with their predictions scaled by it.
  double memoryScale = 1;
  /// The chosen candidate's predicted bytes per device.
  double predictedBytes = 0;
  /// The feasible candidates (by index) chosen so far.
  std::set<size_t> tried;
};

/// The dialects every compile's context holds.
mlir::DialectRegistry compileRegistry();

/// One compile. Not copyable: the phase options' callbacks point into it.
class Driver {
public:
  Driver(const CompileOptions &options, const CompileIO &io);
  Driver(const Driver &) = delete;
  Driver &operator=(const Driver &) = delete;

  /// The whole compile; returns its exit code.
  int run();
  /// Checks the options, then adds the passes that take the imported
  /// program to `phase` (cleave::addPhasePipeline).
  mlir::LogicalResult addPhasePipeline(mlir::OpPassManager &pm,
                                       CompilePhase phase);

  llvm::raw_ostream &errs();
  llvm::raw_ostream &outs();
  /// Prints `cleave-compile: error: <message>`; returns 1.
  int fail(const llvm::Twine &message);
  /// Prints a diagnostic as `cleave-compile: error: node 'x': message`.
  void printDiagnostic(mlir::Diagnostic &diag);

private:
  // Configure.cpp
  /// Checks the options and derives the import and phase options, the
  /// output, the budget and the cluster from them.
  int configure();
  int configureTraining(int64_t pipelineRanks);
  int configurePartitioning();
  int configureCodegen();
  int configureOutputs();

  // AutoLayout.cpp
  /// --auto: searches the layouts of the training step (sim::searchPlans)
  /// and sets the import and phase options (and the options the reports
  /// read) to the chosen one. `searchOnly`: with --emit=none, nothing more
  /// to do. Returns 0, or the exit code of an error it reported.
  int planLayout(bool &searchOnly);

  // Reports.cpp
  /// --emit=schedule of `module` (the forward program).
  int emitSchedule(mlir::ModuleOp module);
  /// --report (and CompileIO::report) of `plan`.
  void printReports(const plan::Plan &plan, llvm::raw_ostream &os);
  /// --print-stats of `plan`.
  void printStats(const plan::Plan &plan, double seconds, double importSeconds);
  /// --simulate of `plan`.
  int simulate(const plan::Plan &plan);

  // Compile.cpp
  /// Reads the input: a .mlir program with a func.func @main, or an ONNX
  /// model imported with `importOptions`.
  mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
  readModel(mlir::MLIRContext &context);
  /// --print-pipeline.
  int printPipeline();
  /// Writes the plan (or the executable) as --emit says.
  int writePlan(const plan::Plan &plan);

  /// The options; --auto sets the layout it chose in them.
  CompileOptions opts;
  const CompileIO &io;

  // What configure() derives.
  ImportOptions importOptions;
  PhaseOptions phaseOptions;
  /// The input is a program in the cleave dialect (.mlir).
  bool fromMLIR = false;
  std::string output;
  std::optional<uint64_t> budget;
  sim::Cluster cluster;
  sim::ReplaySchedule replay;
  schedule::ScheduleOptions scheduleEmit;
  double initStddev = 0;
  unsigned long long initSeed = 0;

  // What the compile collects.
  std::vector<StepReport> stepReports;
  std::string textOutput;
  CompileTimings timings;
  AutoAttempt autoAttempt;
};

/// "80G" -> 80 * 2^30; none on a bad count or an overflow.
std::optional<uint64_t> parseByteCount(llvm::StringRef text);

/// Why `plan` (each pipeline stage) needs more than `budget` bytes per
/// rank, naming its largest tensor; "" when it fits. The budget is
/// --max-memory's, or with `device` the memory of one such device.
std::string overBudget(const plan::Plan &plan, uint64_t budget,
                       const std::string &device = "");

} // namespace cleave::compiler

#endif // CLEAVE_LIB_COMPILER_DRIVER_H
