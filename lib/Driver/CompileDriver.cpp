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

#include "cleave/Import/ONNXImporter.h"
#include "cleave/InitAll.h"
#include "cleave/Pipelines/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;
namespace cl = llvm::cl;

namespace {
enum class EmitKind { Plan, MLIR };

struct Options {
  cl::OptionCategory category{"cleave-compile options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<model.onnx>"),
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
  cl::opt<EmitKind> emit{
      "emit", cl::desc("What to write"), cl::init(EmitKind::Plan),
      cl::values(clEnumValN(EmitKind::Plan, "plan",
                            "the executable plan (.cleave, default)"),
                 clEnumValN(EmitKind::MLIR, "mlir",
                            "MLIR text after the phase chosen by --phase")),
      cl::cat(category)};
  cl::opt<cleave::CompilePhase> phase{
      "phase", cl::desc("With --emit=mlir: the phase after which to print IR"),
      cl::init(cleave::CompilePhase::Import),
      cl::values(
          clEnumValN(cleave::CompilePhase::Import, "import",
                     "the cleave dialect as imported from ONNX (default)"),
          clEnumValN(cleave::CompilePhase::Prepared, "prepared",
                     "after folding, CSE and GEMM canonicalization"),
          clEnumValN(cleave::CompilePhase::Kernels, "kernels",
                     "the outlined kernel module, in cleave ops"),
          clEnumValN(cleave::CompilePhase::LLVM, "llvm",
                     "the kernel module lowered to the LLVM dialect")),
      cl::cat(category)};
  cl::opt<std::string> target{
      "target", cl::desc("Code generation target: cpu (default)"),
      cl::init("cpu"), cl::cat(category)};
  cl::opt<bool> noLibraryGemm{
      "no-library-gemm",
      cl::desc("Generate code for matmuls instead of calling BLAS"),
      cl::cat(category)};
  cl::opt<bool> stats{"print-stats",
                      cl::desc("Print the plan's commands, memory and compile "
                               "time to stderr"),
                      cl::cat(category)};
};

/// Prints diagnostics as `cleave-compile: error: node 'x': message`.
void printDiagnostic(Diagnostic &diag) {
  llvm::raw_ostream &os = llvm::errs();
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
    if (!mentions(file.getFilename().getValue()))
      os << file.getFilename().getValue() << ": ";
  }
  os << message << "\n";
  for (Diagnostic &note : diag.getNotes())
    printDiagnostic(note);
}

std::string defaultOutput(llvm::StringRef input, EmitKind emit) {
  if (emit == EmitKind::MLIR)
    return "-";
  llvm::SmallString<256> path(llvm::sys::path::filename(input));
  llvm::sys::path::replace_extension(path, ".cleave");
  return path.str().str();
}

int fail(const llvm::Twine &message) {
  llvm::errs() << "cleave-compile: error: " << message << "\n";
  return 1;
}
} // namespace

int (::cleave::compileMain)(int argc, char **argv) {
  using namespace ::cleave;
  llvm::InitLLVM init(argc, argv);
  Options opts;
  cl::HideUnrelatedOptions(opts.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "cleave-compile: compile an ONNX model into a Cleave plan (.cleave)\n\n"
      "  cleave-compile model.onnx -o model.cleave\n"
      "  cleave-compile model.onnx --emit=mlir --phase=kernels\n");
  auto start = std::chrono::steady_clock::now();

  if (opts.target != "cpu")
    return fail("target '" + opts.target +
                "' is not available in this build (supported: cpu)");

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

  DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  ::cleave::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    printDiagnostic(diag);
    return success();
  });

  FailureOr<OwningOpRef<ModuleOp>> module =
      importONNXFile(opts.input, context, importOptions);
  if (failed(module))
    return 1;

  std::string output = opts.output.empty()
                           ? defaultOutput(opts.input, opts.emit)
                           : opts.output.getValue();
  CompileOptions compileOptions;
  compileOptions.plan.useLibraryGemm = !opts.noLibraryGemm;
  compileOptions.plan.modelName =
      llvm::sys::path::filename(opts.input).str();
  std::string mlirText;
  if (opts.emit == EmitKind::MLIR) {
    compileOptions.stopAfter = opts.phase;
    compileOptions.dump = [&](Operation *op) {
      llvm::raw_string_ostream os(mlirText);
      op->print(os);
      os << "\n";
    };
  }
  FailureOr<plan::Plan> plan = compileToPlan(**module, compileOptions);
  if (failed(plan))
    return 1;
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();

  if (opts.emit == EmitKind::MLIR) {
    if (output == "-") {
      llvm::outs() << mlirText;
      return 0;
    }
    if (llvm::Error err = llvm::writeToOutput(
            output, [&](llvm::raw_ostream &os) -> llvm::Error {
              os << mlirText;
              return llvm::Error::success();
            }))
      return fail("cannot write '" + output +
                  "': " + llvm::toString(std::move(err)));
    return 0;
  }

  std::string error;
  if (!plan::validate(*plan, &error))
    return fail("the compiled plan is invalid: " + error);
  if (!plan::writeFile(output, *plan, &error))
    return fail("cannot write '" + output + "': " + error);
  if (opts.stats) {
    size_t kernels = 0, gemms = 0;
    for (const plan::Command &c : plan->commands) {
      kernels += c.kind == plan::CommandKind::Kernel;
      gemms += c.kind == plan::CommandKind::Gemm;
    }
    uint64_t constantBytes = 0;
    for (const plan::Constant &c : plan->constants)
      constantBytes += c.data.size();
    llvm::errs() << "plan: " << plan->commands.size() << " commands ("
                 << kernels << " kernels, " << gemms << " gemms), arena "
                 << plan->arenaBytes << " bytes (constants " << constantBytes
                 << "), kernel object " << plan->kernelObject.size()
                 << " bytes, compiled in " << llvm::format("%.2f", seconds)
                 << " s\n";
  }
  return 0;
}
