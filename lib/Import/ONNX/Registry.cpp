//===- Registry.cpp - ONNX op type -> converter table ---------------------===//

#include "NodeContext.h"
#include "TrainingOps.h"

namespace cleave::onnximport {

// Defined in MoreNNOps.cpp, RecurrentOps.cpp, ResizeOps.cpp, SignalOps.cpp,
// QuantizationOps.cpp.
void registerMoreNNConverters(llvm::StringMap<ConverterFn> &table);
void registerRecurrentConverters(llvm::StringMap<ConverterFn> &table);
void registerResizeConverters(llvm::StringMap<ConverterFn> &table);
void registerSignalConverters(llvm::StringMap<ConverterFn> &table);
void registerQuantizationConverters(llvm::StringMap<ConverterFn> &table);
// Defined in ScatterGatherOps.cpp and GridSampleOps.cpp.
void registerScatterGatherConverters(llvm::StringMap<ConverterFn> &table);
void registerGridSampleConverters(llvm::StringMap<ConverterFn> &table);
// Defined in AttentionOps.cpp and MoeOps.cpp.
void registerAttentionConverters(llvm::StringMap<ConverterFn> &table);
void registerMoeConverters(llvm::StringMap<ConverterFn> &table);

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
    registerSequenceConverters(t);
    registerMoreNNConverters(t);
    registerRecurrentConverters(t);
    registerResizeConverters(t);
    registerSignalConverters(t);
    registerQuantizationConverters(t);
    registerScatterGatherConverters(t);
    registerGridSampleConverters(t);
    registerAttentionConverters(t);
    registerMoeConverters(t);      // com.microsoft.MoE
    registerTrainingConverters(t); // TrainingOps.cpp
    return t;
  }();
  return table;
}

} // namespace cleave::onnximport
