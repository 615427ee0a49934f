//===- VJPHelpers.cpp - Building blocks of the VJP rules ------------------===//

#include "VJPHelpers.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::autodiff {

bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

Value mergeSpread(Emitter &e, Value spread, ArrayRef<int64_t> shape,
                  int64_t dim, int64_t stride) {
  SmallVector<int64_t> merged(shape);
  int64_t r = merged[dim];
  merged[dim] = r * stride;
  Value flat = e.reshape(spread, merged);
  SmallVector<int64_t> start(merged.size(), 0), limit(merged),
      strides(merged.size(), 1);
  limit[dim] = (r - 1) * stride + 1;
  return e.slice(flat, start, limit, strides);
}

} // namespace cleave::autodiff
