//===- Compile.cpp - One compile: the model, the phases, the outputs ------===//
//
// cleave::compile: checks the options (Configure.cpp), chooses a layout
// with --auto (AutoLayout.cpp), reads the model, runs the phase pipelines
// (compileToPlan) and writes what --emit asks for, then the reports
// (Reports.cpp). Errors are printed as `cleave-compile: error: <where>:
// <what>`; outputs go to a temporary file that is renamed into place, so no
// output is written unless the compile succeeded.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "cleave/FileUtil.h"
#include "cleave/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"

#include <chrono>

using namespace mlir;

namespace cleave::compiler {

DialectRegistry compileRegistry() {
  DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  ::cleave::registerAllDialects(registry);
  return registry;
}

Driver::Driver(const CompileOptions &options, const CompileIO &io)
    : opts(options), io(io) {}

llvm::raw_ostream &Driver::errs() {
  return io.messages ? *io.messages : llvm::errs();
}
llvm::raw_ostream &Driver::outs() {
  return io.output ? *io.output : llvm::outs();
}

int Driver::fail(const llvm::Twine &message) {
  errs() << "cleave-compile: error: " << message << "\n";
  return 1;
}

void Driver::printDiagnostic(Diagnostic &diag) {
  llvm::raw_ostream &os = errs();
  os << "cleave-compile: ";
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    os << "error: ";
    break;
  case DiagnosticSeverity::Warning:
    os << "warning: ";
    break;
  case DiagnosticSeverity::Note:
    os << "note: ";
    break;
  case DiagnosticSeverity::Remark:
    os << "remark: ";
    break;
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

namespace {
/// The MLIR context of one compile: every dialect loaded, diagnostics
/// printed as cleave-compile's errors, warnings and notes.
struct CompileContext {
  MLIRContext context{compileRegistry()};
  ScopedDiagnosticHandler handler;
  explicit CompileContext(Driver &driver)
      : handler(&context, [&driver](Diagnostic &diag) {
          driver.printDiagnostic(diag);
          return success();
        }) {
    context.loadAllAvailableDialects();
  }
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}
} // namespace

FailureOr<OwningOpRef<ModuleOp>> Driver::readModel(MLIRContext &context) {
  if (!fromMLIR)
    return importONNXFile(opts.input, context, importOptions);
  OwningOpRef<ModuleOp> parsed =
      parseSourceFile<ModuleOp>(opts.input, &context);
  if (!parsed || failed(verify(*parsed)))
    return failure();
  if (!parsed->lookupSymbol<func::FuncOp>("main")) {
    fail("'" + opts.input + "' has no func.func @main");
    return failure();
  }
  return std::move(parsed);
}

int Driver::writePlan(const plan::Plan &plan) {
  std::string error;
  if (opts.emit == EmitKind::None)
    return 0;
  if (opts.emit == EmitKind::Exe) {
    // cleave-run, from the directory this compiler runs from, with the plan
    // and a trailer appended; cleave-run finds it in /proc/self/exe.
    std::string self = llvm::sys::fs::getMainExecutable(
        io.argv0.empty() ? nullptr : io.argv0.c_str(),
        reinterpret_cast<void *>(&compileRegistry));
    llvm::SmallString<256> runPath(llvm::sys::path::parent_path(self));
    llvm::sys::path::append(runPath, "cleave-run");
    std::vector<uint8_t> bytes;
    if (!readWholeFile(runPath.str().str(), &bytes, &error))
      return fail("--emit=exe needs cleave-run next to cleave-compile: " +
                  error);
    std::vector<uint8_t> planBytes = plan::serialize(plan);
    std::vector<uint8_t> trailer = plan::exeTrailer(planBytes.size());
    bytes.insert(bytes.end(), planBytes.begin(), planBytes.end());
    bytes.insert(bytes.end(), trailer.begin(), trailer.end());
    if (!writeFileAtomically(output, bytes.data(), bytes.size(), &error))
      return fail("cannot write '" + output + "': " + error);
    if (std::error_code ec = llvm::sys::fs::setPermissions(
            output, llvm::sys::fs::all_read | llvm::sys::fs::all_exe |
                        llvm::sys::fs::owner_write)) {
      llvm::sys::fs::remove(output);
      return fail("cannot make '" + output + "' executable: " + ec.message());
    }
    return 0;
  }
  if (io.planSink) {
    io.planSink(plan::serialize(plan));
    return 0;
  }
  if (!plan::writeFile(output, plan, &error))
    return fail("cannot write '" + output + "': " + error);
  return 0;
}

int Driver::printPipeline() {
  static const std::pair<const char *, CompilePhase> phases[] = {
      {"import", CompilePhase::Import},
      {"train-step", CompilePhase::TrainStep},
      {"partitioned", CompilePhase::Partitioned},
      {"prepared", CompilePhase::Prepared},
      {"kernels", CompilePhase::Kernels},
      {"llvm", CompilePhase::LLVM}};
  const auto *phase = llvm::find_if(
      phases, [&](const auto &p) { return opts.printPipeline == p.first; });
  if (phase == std::end(phases))
    return fail("unknown --print-pipeline '" + opts.printPipeline +
                "' (expected import, train-step, partitioned, prepared, "
                "kernels or llvm)");
  if (io.stopAfterOptions)
    return 0;
  std::string text, error;
  llvm::raw_string_ostream os(text);
  if (failed(printPhasePipeline(phaseOptions, phase->second, os, error)))
    return fail("--print-pipeline=" + opts.printPipeline + ": " + error);
  outs() << text;
  return 0;
}

LogicalResult Driver::addPhasePipeline(OpPassManager &pm, CompilePhase phase) {
  if (configure())
    return failure();
  std::string error;
  if (failed(addPhasePasses(pm, phaseOptions, phase, error))) {
    fail(error);
    return failure();
  }
  return success();
}

int Driver::run() {
  auto start = std::chrono::steady_clock::now();
  if (int rc = configure())
    return rc;
  if (!opts.printPipeline.empty())
    return printPipeline();
  if (opts.emit == EmitKind::Schedule) {
    if (io.stopAfterOptions)
      return 0;
    CompileContext compile(*this);
    FailureOr<OwningOpRef<ModuleOp>> module = readModel(compile.context);
    if (failed(module))
      return 1;
    return emitSchedule(**module);
  }

  // --auto: the planner's memory is a prediction (its profiles' stages
  // extrapolated to the layout); when the compiled plan of its choice is
  // over --max-memory after all, the fastest candidate that fits with its
  // prediction scaled by what the compiled ones needed over theirs is
  // compiled next.
  constexpr size_t kAutoAttempts = 4;
  const ImportOptions userImportOptions = importOptions;
  const PhaseOptions userPhaseOptions = phaseOptions;
  const CompileOptions userOptions = opts;
  for (;;) {
    importOptions = userImportOptions;
    phaseOptions = userPhaseOptions;
    opts = userOptions;
    if (opts.autoPlan) {
      bool searchOnly = false;
      if (int rc = planLayout(searchOnly))
        return rc;
      if (searchOnly || io.stopAfterOptions)
        return 0;
    } else if (opts.globalBatch || opts.explain ||
               !opts.candidatesFile.empty() || !opts.autoCp.empty() ||
               !opts.autoEp.empty()) {
      return fail(std::string(opts.explain                   ? "--explain"
                              : !opts.candidatesFile.empty() ? "--candidates"
                              : !opts.autoCp.empty()         ? "--auto-cp"
                              : !opts.autoEp.empty() ? "--auto-ep"
                                                     : "--global-batch") +
                  " needs --auto");
    }
    if (io.stopAfterOptions)
      return 0;

    CompileContext compile(*this);
    auto importStart = std::chrono::steady_clock::now();
    FailureOr<OwningOpRef<ModuleOp>> module = readModel(compile.context);
    if (failed(module))
      return 1;
    double importSeconds = secondsSince(importStart);
    FailureOr<plan::Plan> plan = compileToPlan(**module, phaseOptions);
    if (failed(plan))
      return 1;
    double seconds = secondsSince(start);

    if (opts.emit == EmitKind::MLIR || opts.emit == EmitKind::Asm) {
      if (output == "-") {
        outs() << textOutput;
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
      initParametersRandomly(*plan, initStddev, initSeed);
    // --auto holds its choice to the devices' memory where no --max-memory
    // is given, as its search did.
    std::optional<uint64_t> limit = budget;
    std::string device;
    if (!limit && opts.autoPlan && cluster.device.memoryBytes > 0) {
      limit = uint64_t(cluster.device.memoryBytes);
      device = cluster.device.name;
    }
    if (limit)
      if (std::string over = overBudget(*plan, *limit, device); !over.empty()) {
        if (!opts.autoPlan)
          return fail(over);
        if (autoAttempt.tried.size() >= kAutoAttempts)
          return fail(over + " (the " + std::to_string(kAutoAttempts) +
                      " layouts --auto chose are over it once compiled)");
        uint64_t needed = plan->arenaBytes;
        for (const plan::Plan &stage : plan->stages)
          needed = std::max(needed, stage.arenaBytes);
        autoAttempt.memoryScale = std::max(
            autoAttempt.memoryScale,
            double(needed) / std::max(1.0, autoAttempt.predictedBytes));
        errs() << "cleave-compile: --auto's choice, compiled: " << over
               << "; compiling the fastest layout predicted to fit with "
               << llvm::format("%.3f", autoAttempt.memoryScale)
               << " times its predicted memory\n";
        stepReports.clear();
        textOutput.clear();
        continue; // Each attempt's context and plan go out of scope.
      }
    if (opts.emit == EmitKind::Sim) {
      plan::addMetadata(*plan, plan::meta::kKernelCode, "none");
      for (plan::Plan &stage : plan->stages)
        plan::addMetadata(stage, plan::meta::kKernelCode, "none");
    }
    std::string error;
    if (opts.emit != EmitKind::None && !plan::validate(*plan, &error))
      return fail("the compiled plan is invalid: " + error);
    if (int rc = writePlan(*plan))
      return rc;
    if (opts.report)
      printReports(*plan, errs());
    if (io.report)
      printReports(*plan, *io.report);
    if (opts.simulate)
      if (int rc = simulate(*plan))
        return rc;
    if (opts.stats)
      printStats(*plan, seconds, importSeconds);
    return 0;
  }
}

} // namespace cleave::compiler

namespace cleave {
LogicalResult addPhasePipeline(OpPassManager &pm, const CompileOptions &options,
                               CompilePhase phase, const CompileIO &io) {
  compiler::Driver driver(options, io);
  return driver.addPhasePipeline(pm, phase);
}

int compile(const CompileOptions &options, const CompileIO &io) {
  compiler::Driver driver(options, io);
  return driver.run();
}
} // namespace cleave
