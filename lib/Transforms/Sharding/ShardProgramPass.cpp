//===- ShardProgramPass.cpp - --cleave-shard-program ----------------------===//
//
// The pass over shardProgram (ShardProgram.cpp): its options as pass
// options, so that cleave-opt runs what cleave-compile --mesh runs. The
// --explain-sharding report is not an option: cleave-compile's factory
// (createShardProgramPass) hands the pass its callback.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Sharding/PartitionOpInterface.h"
#include "cleave/Transforms/Sharding/Passes.h"
#include "cleave/Transforms/Sharding/ShardProgram.h"

#define DEBUG_TYPE "cleave-shard-program"

namespace cleave {
#define GEN_PASS_DEF_SHARDPROGRAMPASS
#include "cleave/Transforms/Sharding/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace cleave {
namespace {
struct ShardProgramPass : impl::ShardProgramPassBase<ShardProgramPass> {
  using Base::Base;
  std::function<void(const std::string &)> explain;

  /// The partitioner runs as a dynamic pipeline of this pass, so the
  /// cleave ops' partitioning models are registered here.
  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    mlir::cleave::partition::registerPartitionExternalModels(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ShardProgramOptions options;
    if (std::string error = parseMeshSpec(mesh, options.mesh); !error.empty()) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (!shardSources.empty() && shardSources.size() != shard.size()) {
      module.emitError() << "--cleave-shard-program: " << shard.size()
                         << " rules but " << shardSources.size()
                         << " rule sources";
      return signalPassFailure();
    }
    for (auto [i, rule] : llvm::enumerate(shard)) {
      StringRef text(rule);
      size_t eq = text.find("=[");
      std::string source =
          shardSources.empty() ? "--shard" : std::string(shardSources[i]);
      if (eq == StringRef::npos) {
        module.emitError() << source << ": bad sharding rule '" << rule
                           << "' (expected regex=[{axes}, ...], e.g. "
                              "w1=[{}, {\"tp\"}])";
        return signalPassFailure();
      }
      options.shardings.push_back(
          {text.take_front(eq).str(), text.drop_front(eq + 1).str(), source});
    }
    if (zero < 0 || zero > 3) {
      module.emitError("--zero must be 0, 1, 2 or 3");
      return signalPassFailure();
    }
    options.zero = static_cast<int>(zero);
    options.sequenceParallel = sequenceParallel;
    options.contextParallel = contextParallel;
    options.overlap = overlap;
    options.bucketMB = bucketMB;
    options.dropCollective = dropCollective;
    options.ringFault = ringFault;
    options.explain = explain;
    options.runPipeline = [&](OpPassManager &pm) {
      return runPipeline(pm, module);
    };
    if (failed(shardProgram(module, options)))
      signalPassFailure();
  }
};
} // namespace

std::unique_ptr<Pass> createShardProgramPass(const ShardProgramOptions &o) {
  ShardProgramPassOptions options;
  for (const auto &[name, size] : o.mesh)
    options.mesh +=
        (options.mesh.empty() ? "" : ",") + name + "=" + std::to_string(size);
  for (const ShardProgramOptions::ShardingRule &rule : o.shardings) {
    options.shard.push_back(rule.pattern + "=" + rule.spec);
    options.shardSources.push_back(rule.source);
  }
  options.zero = o.zero;
  options.sequenceParallel = o.sequenceParallel;
  options.contextParallel = o.contextParallel;
  options.overlap = o.overlap;
  options.bucketMB = o.bucketMB;
  options.dropCollective = o.dropCollective;
  options.ringFault = o.ringFault;
  auto pass = std::make_unique<ShardProgramPass>(options);
  pass->explain = o.explain;
  return pass;
}

} // namespace cleave
