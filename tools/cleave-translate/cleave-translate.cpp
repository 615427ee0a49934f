//===- cleave-translate.cpp - Import an ONNX model and print its MLIR ----===//

#include "cleave/Import/ONNXImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;

static cl::OptionCategory category("cleave-translate options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required, cl::cat(category));
static cl::opt<bool> importONNX("import-onnx",
                                cl::desc("Import an ONNX model (default)"),
                                cl::init(true), cl::cat(category));
static cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("Pin an input's shape: name=2x3 (repeatable)"),
                cl::cat(category));
static cl::opt<bool> allowNewerOpset(
    "allow-newer-opset",
    cl::desc("Import a model of an opset newer than Cleave implements, with "
             "a warning"),
    cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::init("-"), cl::cat(category));

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Cleave translator: ONNX model -> cleave MLIR\n");
  cleave::ImportOptions options;
  options.allowNewerOpset = allowNewerOpset;
  for (const std::string &flag : inputShapes) {
    std::string err = cleave::parseInputShapeFlag(flag, options);
    if (!err.empty()) {
      llvm::errs() << "error: " << err << "\n";
      return 1;
    }
  }
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  auto module = cleave::importONNXFile(inputFile, context, options);
  if (failed(module))
    return 1;
  std::string err;
  auto out = mlir::openOutputFile(outputFile, &err);
  if (!out) {
    llvm::errs() << "error: " << err << "\n";
    return 1;
  }
  (*module)->print(out->os());
  out->os() << "\n";
  out->keep();
  return 0;
}
