//===- Registry.cpp - ONNX op type -> converter table ---------------------===//

#include "NodeContext.h"

namespace cleave::onnximport {

const llvm::StringMap<ConverterFn> &getConverterRegistry() {
  static const llvm::StringMap<ConverterFn> table = [] {
    llvm::StringMap<ConverterFn> t;
    registerElementwiseConverters(t);
    registerMathConverters(t);
    registerNNConverters(t);
    registerTensorConverters(t);
    registerShapeConverters(t);
    registerReductionConverters(t);
    registerLossConverters(t);
    return t;
  }();
  return table;
}

} // namespace cleave::onnximport
