//===- TrainingTags.cpp - Reading and removing the training tags ----------===//
//
// stripAttribute and takeRecomputeStats (cleave/Analysis/TrainingTags.h).
//
//===----------------------------------------------------------------------===//

#include "cleave/Analysis/TrainingTags.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace cleave {
void stripAttribute(ModuleOp module, StringRef name) {
  // A nested module is a program of its own (local SGD's @sync, a
  // pipeline rank): a pipeline nests the pass to reach it.
  module.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op == module.getOperation())
      return WalkResult::advance();
    if (isa<ModuleOp>(op))
      return WalkResult::skip();
    op->removeDiscardableAttr(name);
    return WalkResult::advance();
  });
}

std::optional<RecomputeStats> takeRecomputeStats(ModuleOp module, bool remove) {
  auto dict = module->getAttrOfType<DictionaryAttr>(
      mlir::cleave::attr::kRecomputeStats);
  if (!dict)
    return std::nullopt;
  RecomputeStats stats;
  if (auto p = dict.getAs<StringAttr>("policy"))
    stats.policy = p.getValue().str();
  auto get = [&](StringRef key) -> int64_t {
    auto a = dict.getAs<IntegerAttr>(key);
    return a ? a.getInt() : 0;
  };
  stats.savedBytesBefore = get("saved_bytes_before");
  stats.savedBytesAfter = get("saved_bytes_after");
  stats.recomputeFlops = get("recompute_flops");
  stats.extraFlops = get("extra_flops");
  stats.recomputedOps = get("recomputed_ops");
  if (remove)
    module->removeAttr(mlir::cleave::attr::kRecomputeStats);
  return stats;
}
} // namespace cleave
