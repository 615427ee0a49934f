//===- cleave-compile.cpp - Compile an ONNX model into a Cleave plan ------===//
//
// cleave-compile model.onnx [-o model.cleave] [--input-shape name=2x3]...
//                [--emit=plan|mlir|...] [--phase=import|...|llvm]
//
// The command line fills a CompileOptions (CommandLine.h); cleave::compile
// does the rest. Exit codes: 0, 1 for an error, 2 for a bad command line.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"

#include "cleave/Compiler/Compile.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // --mlir-print-ir-after-all, --mlir-print-ir-after-change and the rest of
  // MLIR's pass manager options, applied to every pass manager a compile
  // makes.
  mlir::registerPassManagerCLOptions();
  // --mlir-print-debuginfo and the rest of the IR printer's options, for
  // --emit=mlir: with locations (ONNX node names), printed IR read back by
  // cleave-opt is the same program.
  mlir::registerAsmPrinterCLOptions();
  cleave::CompileCommandLine commandLine;
  commandLine.hideOtherOptions();
  if (!commandLine.parse(argc, argv, llvm::errs()))
    return 2;
  cleave::CompileIO io;
  io.argv0 = argv[0];
  io.configurePassManager = [](mlir::PassManager &pm) {
    (void)mlir::applyPassManagerCLOptions(pm);
  };
  return cleave::compile(commandLine.options(), io);
}
