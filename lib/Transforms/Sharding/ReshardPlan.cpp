//===- ReshardPlan.cpp - Reshards planned apart from their IR -------------===//
//
// The steps of a reshard and of a partial sum's completion, as layouts
// (ReshardPlan.h): no IR is built here.
//
//===----------------------------------------------------------------------===//

#include "ReshardPlan.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::partition;
using namespace ::cleave::sharding;

/// The length of the longest common prefix of two axis lists.
static size_t commonPrefix(ArrayRef<StringAttr> a, ArrayRef<StringAttr> b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n])
    ++n;
  return n;
}

SmallVector<ReshardStep> partition::planReshard(ArrayRef<Axes> from,
                                                ArrayRef<Axes> to) {
  SmallVector<ReshardStep> steps;
  DimAxes current(from.begin(), from.end());
  // Moves: the axes `to` drops from the end of dimension a and appends, in
  // the same order, to dimension b (whose axes so far `to` keeps), change
  // dimension in one all-to-all. The group index orders both sides as a
  // gather and a slice over the same axes would.
  for (int64_t a = 0, e = current.size(); a < e; ++a) {
    if (isPrefix(current[a], to[a]))
      continue;
    size_t keep = commonPrefix(current[a], to[a]);
    if (keep != to[a].size())
      continue; // `to` puts other axes there: gather, then slice.
    ArrayRef<StringAttr> moved = ArrayRef(current[a]).drop_front(keep);
    for (int64_t b = 0; b < e; ++b) {
      if (b == a || !isPrefix(current[b], to[b]) ||
          to[b].size() < current[b].size() + moved.size() ||
          !llvm::equal(ArrayRef(to[b]).slice(current[b].size(), moved.size()),
                       moved))
        continue;
      DimAxes before = current;
      Axes axes(moved.begin(), moved.end());
      llvm::append_range(current[b], axes);
      current[a].resize(keep);
      ReshardStep step{ReshardStep::Kind::AllToAll, a, std::move(axes),
                       std::move(before), current};
      step.toDim = b;
      steps.push_back(std::move(step));
      break;
    }
  }
  // Gathers first, so that an axis moving between dimensions is free before
  // a slice takes it. Each keeps the common prefix and gathers the rest.
  for (int64_t d = 0, e = current.size(); d < e; ++d) {
    if (isPrefix(current[d], to[d]))
      continue;
    size_t keep = commonPrefix(current[d], to[d]);
    Axes gathered(current[d].begin() + keep, current[d].end());
    DimAxes before = current;
    current[d].resize(keep);
    steps.push_back({ReshardStep::Kind::AllGather, d, std::move(gathered),
                     std::move(before), current});
  }
  for (int64_t d = 0, e = current.size(); d < e; ++d) {
    if (current[d].size() == to[d].size())
      continue;
    Axes sliced(to[d].begin() + current[d].size(), to[d].end());
    DimAxes before = current;
    current[d] = to[d];
    steps.push_back({ReshardStep::Kind::AllSlice, d, std::move(sliced),
                     std::move(before), current});
  }
  return steps;
}

DimAxes partition::slicedBeforeReduction(ArrayRef<Axes> produced,
                                         ArrayRef<Axes> target,
                                         ArrayRef<StringAttr> partial) {
  DimAxes sliced(produced.begin(), produced.end());
  // An axis another dimension is split over is not free to slice with: it
  // moves there after the reduction (an all_to_all), or the layout would
  // split two dimensions over one axis.
  auto usedElsewhere = [&](StringAttr a, int64_t d) {
    for (int64_t o = 0, e = sliced.size(); o < e; ++o)
      if (o != d && llvm::is_contained(sliced[o], a))
        return true;
    return false;
  };
  for (int64_t d = 0, e = produced.size(); d < e; ++d) {
    if (!isPrefix(produced[d], target[d]))
      continue;
    ArrayRef<StringAttr> extra =
        ArrayRef(target[d]).drop_front(produced[d].size());
    if (llvm::none_of(extra, [&](StringAttr a) {
          return llvm::is_contained(partial, a) || usedElsewhere(a, d);
        }))
      sliced[d] = target[d];
  }
  return sliced;
}

std::optional<int64_t> partition::scatterDim(ArrayRef<Axes> produced,
                                             ArrayRef<Axes> target,
                                             ArrayRef<StringAttr> partial) {
  std::optional<int64_t> dim;
  for (int64_t d = 0, e = produced.size(); d < e; ++d) {
    if (produced[d] == target[d])
      continue;
    if (dim || !isPrefix(produced[d], target[d]) ||
        !llvm::equal(ArrayRef(target[d]).drop_front(produced[d].size()),
                     partial))
      return std::nullopt;
    dim = d;
  }
  return dim;
}

CompletionPlan partition::planCompletion(ArrayRef<Axes> produced,
                                         ArrayRef<Axes> target,
                                         ArrayRef<StringAttr> partial) {
  CompletionPlan plan;
  DimAxes layout = slicedBeforeReduction(produced, target, partial);
  plan.before = planReshard(produced, layout);
  Axes over(partial.begin(), partial.end());
  if (std::optional<int64_t> d = scatterDim(layout, target, partial)) {
    // Partial sums the result wants split over the same axes: one
    // reduce_scatter instead of an all_reduce and a slice.
    DimAxes before = layout;
    layout[*d] = target[*d];
    plan.reduction = {ReshardStep::Kind::ReduceScatter, *d, std::move(over),
                      std::move(before), layout};
  } else {
    plan.reduction = {ReshardStep::Kind::AllReduce, -1, std::move(over), layout,
                      layout};
  }
  plan.after = planReshard(layout, target);
  return plan;
}
