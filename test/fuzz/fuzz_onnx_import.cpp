//===- fuzz_onnx_import.cpp - libFuzzer target: the ONNX importer ---------===//
//
// Any bytes given to cleave-compile as a model must be refused with an
// error or imported, never crash: the protobuf parser, the checks Cleave
// runs before libonnx (graph structure, window attributes), libonnx's
// checker, version converter and shape inference, and the importer's own
// op converters. Each input is written to a file in a private folder (the
// importer reads files; external data must stay in that folder, which
// holds nothing else). The importer's own code is instrumented for
// coverage and AddressSanitizer; libonnx, protobuf and MLIR are not, so
// what they do with an input guides nothing, and only a crash in them
// (not a silent memory error) is found.
//
//===----------------------------------------------------------------------===//

#include "cleave/Import/ONNXImporter.h"

#include "Cleave/IR/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

static std::string modelPath() {
  static std::string path = [] {
    char dir[] = "/tmp/cleave-fuzz-onnx-XXXXXX";
    if (!::mkdtemp(dir))
      std::abort();
    return std::string(dir) + "/model.onnx";
  }();
  return path;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = modelPath();
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  mlir::MLIRContext context;
  context.loadDialect<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  cleave::ImportOptions options;
  (void)cleave::importONNXFile(path, context, options);
  return 0;
}
