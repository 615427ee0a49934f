//===- FactorSharding.cpp - Shardings seen through sharding rules ---------===//

#include "cleave/Transforms/Sharding/FactorSharding.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::sharding {

int64_t MeshAxes::size(StringAttr axis) const {
  int64_t i = mesh.getAxisIndex(axis.getValue());
  return i < 0 ? 1 : mesh.getShape()[i];
}

int64_t MeshAxes::size(ArrayRef<StringAttr> axes) const {
  int64_t n = 1;
  for (StringAttr a : axes)
    n *= size(a);
  return n;
}

SmallVector<Axes> splitDimAxes(ArrayRef<StringAttr> axes,
                               ArrayRef<int64_t> factors,
                               const ShardingRule &rule, const MeshAxes &mesh) {
  SmallVector<Axes> out(factors.size());
  size_t next = 0;
  for (auto [i, f] : llvm::enumerate(factors)) {
    int64_t size = rule.getFactor(f).size;
    int64_t product = 1;
    while (next < axes.size() &&
           size % (product * mesh.size(axes[next])) == 0) {
      product *= mesh.size(axes[next]);
      out[i].push_back(axes[next++]);
    }
    if (product != size)
      break;
  }
  return out;
}

Axes joinDimAxes(ArrayRef<int64_t> factors, ArrayRef<Axes> factorAxes,
                 const ShardingRule &rule, const MeshAxes &mesh) {
  Axes axes;
  for (int64_t f : factors) {
    llvm::append_range(axes, factorAxes[f]);
    if (mesh.size(factorAxes[f]) != rule.getFactor(f).size)
      break;
  }
  return axes;
}

SmallVector<Axes> projectToTensor(const ShardingRule &rule, int64_t t,
                                  ArrayRef<Axes> factorAxes,
                                  const MeshAxes &mesh) {
  SmallVector<Axes> dims;
  for (const auto &factors : rule.getTensor(t))
    dims.push_back(joinDimAxes(factors, factorAxes, rule, mesh));
  return dims;
}

std::string axesToString(ArrayRef<StringAttr> axes) {
  std::string s = "[";
  for (auto [i, a] : llvm::enumerate(axes))
    s += (i ? ", \"" : "\"") + a.getValue().str() + "\"";
  return s + "]";
}

bool isPrefix(ArrayRef<StringAttr> prefix, ArrayRef<StringAttr> axes) {
  return prefix.size() <= axes.size() &&
         llvm::equal(prefix, axes.take_front(prefix.size()));
}

void keepEachAxisOnce(llvm::MutableArrayRef<Axes> factorAxes,
                      llvm::ArrayRef<int64_t> order) {
  llvm::SmallDenseSet<mlir::StringAttr> used;
  for (int64_t f : order) {
    Axes &axes = factorAxes[f];
    auto *clash =
        llvm::find_if(axes, [&](mlir::StringAttr a) { return used.count(a); });
    axes.erase(clash, axes.end());
    used.insert(axes.begin(), axes.end());
  }
}

} // namespace cleave::sharding
