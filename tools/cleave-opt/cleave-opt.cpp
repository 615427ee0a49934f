//===- cleave-opt.cpp - Every Cleave dialect, pass and pipeline -----------===//

#include "cleave/Compiler/Compile.h"
#include "cleave/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

namespace cleave::test {
/// The test-only passes of test/lib (--cleave-test-*).
void registerTestPasses();
} // namespace cleave::test

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  cleave::registerAllPasses();
  cleave::registerPhasePipelines();
  cleave::test::registerTestPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  cleave::registerAllDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Cleave optimizer driver: runs Cleave and MLIR passes\n",
      registry));
}
