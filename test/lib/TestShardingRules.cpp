//===- TestShardingRules.cpp - Print every op's sharding rule -------------===//
//
// --cleave-test-sharding-rules: a remark with each op's factor-based sharding
// rule, an error where the rule does not match the op. For tests of the
// rules (test/Dialect/Cleave/sharding-rules.mlir).
//
//===----------------------------------------------------------------------===//

#include "TestPasses.h"

#include "Cleave/IR/CleaveOps.h"

#define DEBUG_TYPE "cleave-test-sharding-rules"

namespace cleave::test {
#define GEN_PASS_DEF_TESTSHARDINGRULESPASS
#include "TestPasses.h.inc"
} // namespace cleave::test

using namespace mlir;
using namespace mlir::cleave;

namespace {

struct TestShardingRulesPass
    : ::cleave::test::impl::TestShardingRulesPassBase<TestShardingRulesPass> {
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
