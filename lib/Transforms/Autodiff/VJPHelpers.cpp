//===- VJPHelpers.cpp - Building blocks of the VJP rules ------------------===//

#include "VJPHelpers.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::autodiff {

bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

} // namespace cleave::autodiff
