//===- AssignPipelineStages.cpp - Balanced pipeline stages ----------------===//
//
// Cuts a forward program into contiguous stages at layer boundaries, the
// cuts chosen by dynamic programming over the candidate positions: the
// largest stage's flops first, then the activation bytes crossing the cuts.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Training/Passes.h"

#include "Layers.h"

#include "Cleave/IR/CleaveOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>

namespace cleave {
#define GEN_PASS_DEF_ASSIGNPIPELINESTAGESPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;
using ::cleave::training::StageAssignment;

namespace {

int64_t bytesOf(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.getElementType().isIntOrFloat())
    return 0;
  return type.getNumElements() *
         std::max<int64_t>(1,
                           type.getElementType().getIntOrFloatBitWidth() / 8);
}

/// A partition's score: the largest stage's flops, then the bytes crossing
/// its cuts.
struct Score {
  int64_t largest = std::numeric_limits<int64_t>::max();
  int64_t crossing = std::numeric_limits<int64_t>::max();
  bool operator<(const Score &o) const {
    return largest != o.largest ? largest < o.largest : crossing < o.crossing;
  }
};

struct AssignPipelineStagesPass
    : ::cleave::impl::AssignPipelineStagesPassBase<AssignPipelineStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      mlir::emitError(module.getLoc())
          << "pipeline stages need a func.func @main";
      return signalPassFailure();
    }
    FailureOr<StageAssignment> assignment =
        ::cleave::training::assignPipelineStages(main, stages, boundaries);
    if (failed(assignment))
      return signalPassFailure();
    for (auto [op, stage] : assignment->stageOf)
      setStage(op, stage);
    for (const std::string &remark : assignment->remarks)
      mlir::emitRemark(main.getLoc()) << remark;
    for (const auto &[name, readers] : assignment->shared) {
      InFlightDiagnostic remark = mlir::emitRemark(main.getLoc())
                                  << "tied parameter " << name << " on stages";
      for (int64_t r : readers)
        remark << " " << r;
      remark << ": its gradient is the sum of the stages'";
    }
  }
};
} // namespace

namespace cleave::training {

FailureOr<StageAssignment>
assignPipelineStages(func::FuncOp main, int64_t stages, StringRef boundaries) {
  if (!main.getBody().hasOneBlock()) {
    mlir::emitError(main.getLoc())
        << "pipeline stages need a single-block function";
    return failure();
  }
  StageAssignment result;
  result.stages = stages;
  Block &block = main.getBody().front();
  // The ops that compute, in order; constants follow their readers.
  SmallVector<Operation *> ops;
  DenseMap<Operation *, int64_t> index;
  for (Operation &op : block.without_terminator())
    if (!isa<ConstantOp>(op)) {
      index[&op] = ops.size();
      ops.push_back(&op);
    }
  int64_t n = ops.size(), p = stages;
  if (p < 1 || p > n) {
    mlir::emitError(main.getLoc())
        << "cannot cut " << n << " ops into " << p << " pipeline stages";
    return failure();
  }

  // Flops before each position.
  SmallVector<int64_t> prefix(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    auto cost = dyn_cast<CostOpInterface>(ops[i]);
    prefix[i + 1] = prefix[i] + (cost ? cost.getFlops() : 0);
  }
  auto flops = [&](int64_t a, int64_t b) { return prefix[b] - prefix[a]; };

  // Bytes crossing a cut before position j: values made before j and read
  // at j or later (the function's results count as read at the end).
  SmallVector<int64_t> crossing(n + 1, 0);
  {
    SmallVector<int64_t> change(n + 2, 0);
    for (int64_t i = 0; i < n; ++i)
      for (Value r : ops[i]->getResults()) {
        int64_t last = i;
        for (Operation *user : r.getUsers())
          last = std::max(
              last, user == block.getTerminator() ? n : index.lookup(user));
        if (last > i) {
          change[i + 1] += bytesOf(r);
          change[last + 1] -= bytesOf(r);
        }
      }
    int64_t live = 0;
    for (int64_t j = 0; j <= n; ++j) {
      live += change[j];
      crossing[j] = live;
    }
  }

  // Cut positions: between layers, or after the named nodes.
  SmallVector<int64_t> cuts;
  if (!boundaries.empty()) {
    SmallVector<StringRef> names;
    StringRef(boundaries).split(names, ',', -1, /*KeepEmpty=*/false);
    if ((int64_t)names.size() != p - 1) {
      mlir::emitError(main.getLoc())
          << "--stage-boundaries names " << names.size() << " nodes for " << p
          << " stages (one fewer than the stages)";
      return failure();
    }
    for (StringRef name : names) {
      // A node's name, or a layer's (after its last node).
      int64_t last = -1, lastOfLayer = -1;
      for (int64_t i = 0; i < n; ++i) {
        std::optional<StringRef> op =
            ::cleave::training::locName(ops[i]->getLoc());
        if (op == name.trim())
          last = i;
        if (op && ::cleave::layerPrefix(*op) == name.trim())
          lastOfLayer = i;
      }
      if (last < 0)
        last = lastOfLayer;
      if (last < 0) {
        mlir::emitError(main.getLoc())
            << "stage boundary '" << name.trim()
            << "' is neither an ONNX node nor a layer of the program";
        return failure();
      }
      if (!cuts.empty() && last + 1 <= cuts.back()) {
        mlir::emitError(main.getLoc())
            << "stage boundary '" << name.trim()
            << "' does not come after the one before it";
        return failure();
      }
      if (last + 1 >= n) {
        mlir::emitError(main.getLoc())
            << "stage boundary '" << name.trim()
            << "' ends the program: the last stage would be empty";
        return failure();
      }
      cuts.push_back(last + 1);
    }
  } else {
    // Layers as --cleave-insert-recompute finds them.
    SmallVector<std::string> layer(n);
    bool named = false;
    std::string previous;
    for (int64_t i = 0; i < n; ++i) {
      if (auto attr = getLayer(ops[i]))
        previous = attr.getValue().str();
      else if (auto name = ::cleave::training::locName(ops[i]->getLoc()))
        previous = ::cleave::training::layerPrefix(*name).str();
      named |= !previous.empty();
      layer[i] = previous;
    }
    SmallVector<int64_t> candidates;
    for (int64_t j = 1; j < n; ++j)
      if (!named || layer[j] != layer[j - 1])
        candidates.push_back(j);
    if ((int64_t)candidates.size() < p - 1) {
      mlir::emitError(main.getLoc())
          << "cannot cut the program into " << p << " pipeline stages: it "
          << "has " << candidates.size() + 1 << " layers";
      return failure();
    }
    // best[k][c]: the first k + 1 stages ending at position pos[c].
    SmallVector<int64_t> pos = {0};
    llvm::append_range(pos, candidates);
    pos.push_back(n);
    int64_t c = pos.size();
    std::vector<std::vector<Score>> best(p, std::vector<Score>(c));
    std::vector<std::vector<int64_t>> from(p, std::vector<int64_t>(c, -1));
    for (int64_t e = 1; e < c; ++e)
      best[0][e] = {flops(0, pos[e]), 0};
    for (int64_t k = 1; k < p; ++k)
      for (int64_t e = k + 1; e < c; ++e)
        for (int64_t s = k; s < e; ++s) {
          const Score &prev = best[k - 1][s];
          if (prev.largest == std::numeric_limits<int64_t>::max())
            continue;
          Score score{std::max(prev.largest, flops(pos[s], pos[e])),
                      prev.crossing + crossing[pos[s]]};
          if (score < best[k][e]) {
            best[k][e] = score;
            from[k][e] = s;
          }
        }
    for (int64_t k = p - 1, e = c - 1; k > 0; --k) {
      e = from[k][e];
      cuts.push_back(pos[e]);
    }
    std::reverse(cuts.begin(), cuts.end());
  }

  // Stages: ops by position; constants by their first reader.
  SmallVector<int64_t> start = {0};
  llvm::append_range(start, cuts);
  start.push_back(n);
  auto stageOf = [&](int64_t i) {
    return int64_t(llvm::upper_bound(start, i) - start.begin()) - 1;
  };
  for (int64_t i = 0; i < n; ++i)
    result.stageOf[ops[i]] = stageOf(i);
  SmallVector<int64_t> paramBytes(p, 0);
  for (Operation &op : block.without_terminator()) {
    auto constant = dyn_cast<ConstantOp>(op);
    if (!constant)
      continue;
    SmallVector<int64_t> readers;
    for (Operation *user : constant->getUsers())
      if (index.count(user))
        readers.push_back(stageOf(index.lookup(user)));
    llvm::sort(readers);
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    int64_t stage = readers.empty() ? 0 : readers.front();
    result.stageOf[constant] = stage;
    if (auto name = getInitializerName(constant)) {
      paramBytes[stage] += bytesOf(constant.getResult());
      if (readers.size() > 1)
        result.shared.push_back(
            {name.getValue().str(),
             std::vector<int64_t>(readers.begin(), readers.end())});
    }
  }

  int64_t total = std::max<int64_t>(flops(0, n), 1), largest = 0;
  for (int64_t k = 0; k < p; ++k) {
    int64_t f = flops(start[k], start[k + 1]);
    result.flops.push_back(f);
    largest = std::max(largest, f);
    std::string remark = llvm::formatv(
        "stage {0}: ops {1}..{2}, {3} flops ({4:P1}), parameters {5} bytes", k,
        start[k], start[k + 1] - 1, f, double(f) / total, paramBytes[k]);
    if (k + 1 < p)
      remark +=
          ", sends " + std::to_string(crossing[start[k + 1]]) + " bytes on";
    result.remarks.push_back(remark);
  }
  result.remarks.push_back(
      llvm::formatv("balance: largest stage {0:F3} of the mean",
                    double(largest) * p / total));
  return result;
}

} // namespace cleave::training
