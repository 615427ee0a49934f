//===- RandomInit.cpp - Parameters initialized by the runtime -------------===//
//
// --init-parameters=normal:<std>[:<seed>]: trainable weight matrices start
// from N(0, std^2) values the runtime generates (RandomNormal init
// commands) instead of the model's initializers, which then stay out of the
// plan. Megatron-style initialization for training from scratch, and plans
// of large models that are small enough to ship without their weights.
//
//===----------------------------------------------------------------------===//

#include "cleave/Plan/PlanBuilder.h"

#include <algorithm>
#include <string>

namespace cleave {

/// A parameter's stream: the seed mixed with its name (FNV-1a), so that a
/// parameter draws the same values in every plan that holds it (one rank,
/// any mesh, any pipeline stage).
static uint64_t parameterSeed(uint64_t seed, const std::string &name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name)
    h = (h ^ c) * 0x100000001b3ull;
  return seed + 0x9e3779b97f4a7c15ull * (h | 1);
}

int64_t initParametersRandomly(plan::Plan &plan, double stddev, uint64_t seed) {
  int64_t count = 0;
  if (plan.isPipelined()) {
    // Each stage its own parameters; a tied one draws the same values in
    // both stages.
    for (plan::Plan &stage : plan.stages)
      count += initParametersRandomly(stage, stddev, seed);
    plan::addMetadata(plan, plan::meta::kInitParameters,
                      "normal std " + std::to_string(stddev) + " seed " +
                          std::to_string(seed));
    return count;
  }
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const plan::StateTensor &state = plan.states[i];
    if (state.kind != plan::StateKind::Parameter ||
        state.info.dtype != plan::DType::F32 || state.info.shape.size() < 2)
      continue;
    // The initializer's constant shares the state's offset.
    auto constant = std::find_if(plan.constants.begin(), plan.constants.end(),
                                 [&](const plan::Constant &c) {
                                   return c.info.offset == state.info.offset;
                                 });
    if (constant != plan.constants.end())
      plan.constants.erase(constant);
    plan::Command init;
    init.kind = plan::CommandKind::RandomNormal;
    init.params = {state.info.numElements(),
                   static_cast<int64_t>(parameterSeed(seed, state.parameter)),
                   plan::doubleToBits(0.0), plan::doubleToBits(stddev)};
    // A sharded parameter names its state: each rank draws its shard's
    // elements by their index in the global tensor, so every mesh gets the
    // values one rank would.
    if (!state.info.sharding.empty())
      init.params.push_back(static_cast<int64_t>(i));
    init.buffers = {state.info.offset};
    plan.initCommands.push_back(std::move(init));
    ++count;
  }
  plan::addMetadata(plan, plan::meta::kInitParameters,
                    "normal std " + std::to_string(stddev) + " seed " +
                        std::to_string(seed) + " (" + std::to_string(count) +
                        " weight matrices)");
  return count;
}

} // namespace cleave
