//===- QuantizationOps.cpp - Quantization converters (none yet) -----------===//

#include "NodeContext.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {

// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul, ConvInteger and QLinearConv are still to be added here.
void registerQuantizationConverters(llvm::StringMap<ConverterFn> &t) {}

} // namespace cleave::onnximport
