//===- ExpertBias.cpp - Route by scores plus a bias per expert ------------===//
//
// --cleave-expert-bias{rate=R}: DeepSeek-V3's auxiliary-loss-free load
// balancing. Each router's top-k picks its experts by the scores plus a
// bias per expert and weighs them by the scores alone:
//
//   ids     = top_k(scores + bias).indices
//   weights = gather_elements(scores, ids)     (the gradient's path)
//
// The bias is an initializer of zeros tagged cleave.expert_bias = R (a
// buffer of the training step, never a parameter); the training step moves it
// once per step by R * sign(mean load - load) (BuildTrainStep.cpp), so an
// expert given more than its share of the step's rows is picked less
// afterwards.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "cleave/Analysis/ExpertWeights.h"

#include "Cleave/IR/CleaveMetadata.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/Utils/Emitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_EXPERTBIASPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct ExpertBiasPass : ::cleave::impl::ExpertBiasPassBase<ExpertBiasPass> {
  using ExpertBiasPassBase::ExpertBiasPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    double r = double(rate);
    if (!(r > 0) || !std::isfinite(r)) {
      module.emitError() << "--moe-bias-update=" << r
                         << ": expected a finite rate > 0";
      return signalPassFailure();
    }
    auto main = module.lookupSymbol<func::FuncOp>("main");
    llvm::SetVector<Operation *> routers;
    if (main)
      main.walk([&](GroupedMatmulOp op) {
        ::cleave::topKsFeeding(op.getGroupIds(), routers);
      });
    if (routers.empty()) {
      module.emitError()
          << "--moe-bias-update: the program has no router (a top-k whose "
             "indices reach a cleave.grouped_matmul, which "
             "--recognize-composites finds in mixture-of-experts exports)";
      return signalPassFailure();
    }
    llvm::StringSet<> names;
    main.walk([&](ConstantOp c) {
      if (auto name = getInitializerName(c))
        names.insert(name.getValue());
    });
    OpBuilder b(module.getContext());
    Type f32 = b.getF32Type();
    for (auto [n, op] : llvm::enumerate(routers)) {
      auto topk = cast<TopKOp>(op);
      auto scores = cast<RankedTensorType>(topk.getOperand().getType());
      if (scores.getRank() != 2 || topk.getDimension() != 1 ||
          !topk.getLargest() || scores.isDynamicDim(1)) {
        topk.emitOpError()
            << "routes a mixture of experts' rows but is not a top-k of the "
               "largest tokens x experts scores along the experts: "
               "--moe-bias-update cannot bias it";
        return signalPassFailure();
      }
      int64_t experts = scores.getDimSize(1);
      std::string base = getNodeName(topk.getLoc()).str();
      if (base.empty())
        base = "router" + std::to_string(n);
      std::string name = base + ".expert_bias";
      for (int i = 1; names.contains(name); ++i)
        name = base + ".expert_bias" + std::to_string(i);
      names.insert(name);

      // The bias, at the top of @main as the importer puts initializers.
      b.setInsertionPointToStart(&main.front());
      auto biasType = RankedTensorType::get({experts}, f32);
      auto bias = ConstantOp::create(b, topk.getLoc(),
                                     DenseElementsAttr::get(biasType, 0.0f));
      setInitializerName(bias, name);
      bias->setAttr(attr::kExpertBias, b.getF64FloatAttr(r));

      b.setInsertionPoint(topk);
      ::cleave::Emitter e{b, topk.getLoc()};
      Value s = topk.getOperand();
      Value pick = e.add(e.convert(s, f32),
                         e.broadcastInDim(bias, scores.clone(f32), {1}));
      auto picked = TopKOp::create(
          b, topk.getLoc(), topk.getValues().getType().clone(f32),
          topk.getIndices().getType(), pick, topk.getK(), topk.getDimension(),
          topk.getLargest(), topk.getSorted());
      Value weights =
          GatherElementsOp::create(b, topk.getLoc(), topk.getValues().getType(),
                                   s, picked.getIndices(), topk.getDimension());
      topk.getValues().replaceAllUsesWith(weights);
      topk.getIndices().replaceAllUsesWith(picked.getIndices());
      topk.erase();
    }
  }
};

} // namespace
