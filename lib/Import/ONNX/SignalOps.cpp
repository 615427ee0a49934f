//===- SignalOps.cpp - Window functions -----------------------------------===//
//
// HannWindow, HammingWindow and BlackmanWindow depend only on their
// (compile-time) size, so they fold to constants.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

LogicalResult convertWindow(NodeContext &ctx) {
  auto sizes = ctx.constInts(0, "size");
  if (failed(sizes))
    return failure();
  if (sizes->size() != 1 || (*sizes)[0] < 0) {
    ctx.error() << "size must be one non-negative integer";
    return failure();
  }
  int64_t size = (*sizes)[0];
  std::string why;
  Type et = convertElementType(ctx.b.getContext(),
                               ctx.attrInt("output_datatype", 1), why);
  if (!et || !(isa<FloatType>(et) || isa<IntegerType>(et))) {
    ctx.error() << "output_datatype is not supported" << (why.empty() ? "" : ": ")
                << why;
    return failure();
  }
  bool periodic = ctx.attrInt("periodic", 1) != 0;
  double n = periodic ? size : size - 1;
  StringRef op = ctx.opType();
  ConstTensor c;
  c.elemType = et;
  c.shape = {size};
  c.allocate();
  for (int64_t i = 0; i < size; ++i) {
    double a = n > 0 ? 2 * M_PI * i / n : 0, v;
    if (op == "HannWindow")
      v = 0.5 - 0.5 * std::cos(a);
    else if (op == "HammingWindow")
      v = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(a);
    else
      v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    c.set(i, v, static_cast<int64_t>(v));
  }
  ctx.setOutput(0, ctx.constant(c));
  return success();
}

} // namespace

void registerSignalConverters(llvm::StringMap<ConverterFn> &t) {
  t["HannWindow"] = convertWindow;
  t["HammingWindow"] = convertWindow;
  t["BlackmanWindow"] = convertWindow;
}

} // namespace cleave::onnximport
