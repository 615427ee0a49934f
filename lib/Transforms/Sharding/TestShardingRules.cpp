//===- TestShardingRules.cpp - Print every op's sharding rule --------------===//

#include "cleave/Transforms/Sharding/Passes.h"

#include "Cleave/IR/CleaveOps.h"

namespace cleave {
#define GEN_PASS_DEF_TESTSHARDINGRULESPASS
#include "cleave/Transforms/Sharding/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {
struct TestShardingRulesPass
    : ::cleave::impl::TestShardingRulesPassBase<TestShardingRulesPass> {
  void runOnOperation() override {
    bool failedCheck = false;
    getOperation().walk([&](ShardingRuleOpInterface op) {
      ShardingRule rule = op.getShardingRule();
      if (std::string problem = rule.check(op); !problem.empty()) {
        op->emitError() << "sharding rule " << rule.str()
                        << " does not match the op: " << problem;
        failedCheck = true;
        return;
      }
      op->emitRemark() << rule.str();
    });
    if (failedCheck)
      signalPassFailure();
  }
};
} // namespace
