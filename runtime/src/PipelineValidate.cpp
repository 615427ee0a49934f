//===- PipelineValidate.cpp - Structural checks of a pipelined plan -------===//
//
// A pipelined plan holds one stage plan per rank of the mesh's "pp" axis;
// each rank runs its stage's plan. What every stage must agree on is
// checked here, once, at load time: a driver then feeds every rank the same
// inputs and reads the same outputs and training record whatever stage it
// runs, and a checkpoint has one shape per state. Each stage is also
// checked as a plan of its own (validate()).
//
//===----------------------------------------------------------------------===//

#include "cleave/PlanFormat.h"

#include <cstdio>
#include <map>
#include <tuple>

namespace cleave::plan {

namespace {
std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string shardingString(const std::vector<std::vector<uint32_t>> &sharding,
                           const Mesh &mesh) {
  if (sharding.empty())
    return "replicated";
  std::string s = "[";
  for (size_t d = 0; d < sharding.size(); ++d) {
    s += d ? ", {" : "{";
    for (size_t i = 0; i < sharding[d].size(); ++i) {
      uint32_t a = sharding[d][i];
      s += (i ? ", " : "") + (a < mesh.axisNames.size()
                                  ? "'" + mesh.axisNames[a] + "'"
                                  : std::to_string(a));
    }
    s += "}";
  }
  return s + "]";
}

/// Why `t` (tensor `index` of a list of stage `stage`) differs from stage
/// 0's `ref`, or "" if they agree (offsets may differ).
std::string tensorDifference(const char *kind, size_t index,
                             const TensorInfo &t, const TensorInfo &ref,
                             const Mesh &mesh) {
  std::string position = std::string(kind) + " " + std::to_string(index);
  if (t.name != ref.name)
    return position + " is named '" + t.name + "' but stage 0's " + position +
           " is named '" + ref.name + "'";
  std::string what = position + " '" + t.name + "'";
  std::string refWhat = "stage 0's";
  if (t.dtype != ref.dtype)
    return what + " is " + dtypeName(t.dtype) + " but " + refWhat + " is " +
           dtypeName(ref.dtype);
  if (t.shape != ref.shape)
    return what + " has shape " + shapeString(t.shape) + " but " + refWhat +
           " has " + shapeString(ref.shape);
  if (t.sharding != ref.sharding)
    return what + " is sharded " + shardingString(t.sharding, mesh) + " but " +
           refWhat + " is " + shardingString(ref.sharding, mesh);
  return "";
}

/// Why training record `t` differs from stage 0's `ref`, or "".
std::string trainingDifference(const TrainingInfo &t, const TrainingInfo &ref) {
  auto differs = [](const char *field, const std::string &v,
                    const std::string &r) {
    return std::string("training field '") + field + "' is " + v +
           " but stage 0's is " + r;
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  if (t.enabled != ref.enabled)
    return differs("enabled", t.enabled ? "true" : "false",
                   ref.enabled ? "true" : "false");
  if (t.optimizer != ref.optimizer)
    return differs("optimizer", "'" + t.optimizer + "'",
                   "'" + ref.optimizer + "'");
  const std::pair<const char *, std::pair<int64_t, int64_t>> ints[] = {
      {"lr_input", {t.lrInput, ref.lrInput}},
      {"step_input", {t.stepInput, ref.stepInput}},
      {"loss_output", {t.lossOutput, ref.lossOutput}},
      {"grad_norm_output", {t.gradNormOutput, ref.gradNormOutput}},
      {"schedule",
       {static_cast<int64_t>(t.schedule), static_cast<int64_t>(ref.schedule)}},
      {"warmup_steps", {t.warmupSteps, ref.warmupSteps}},
      {"total_steps", {t.totalSteps, ref.totalSteps}},
      {"reference_batch", {t.referenceBatch, ref.referenceBatch}},
      {"batch_size", {t.batchSize, ref.batchSize}},
      {"sequence_length", {t.sequenceLength, ref.sequenceLength}}};
  for (const auto &f : ints)
    if (f.second.first != f.second.second)
      return differs(f.first, std::to_string(f.second.first),
                     std::to_string(f.second.second));
  // Bit patterns: the learning rates must be the same numbers.
  if (doubleToBits(t.baseLR) != doubleToBits(ref.baseLR))
    return differs("base_lr", num(t.baseLR), num(ref.baseLR));
  if (doubleToBits(t.minLR) != doubleToBits(ref.minLR))
    return differs("min_lr", num(t.minLR), num(ref.minLR));
  if (t.dataInputs != ref.dataInputs) {
    auto list = [](const std::vector<int64_t> &v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i)
        s += (i ? "," : "") + std::to_string(v[i]);
      return s + "]";
    };
    return differs("data_inputs", list(t.dataInputs), list(ref.dataInputs));
  }
  return "";
}
} // namespace

bool validateStages(const Plan &plan, std::string *error) {
  auto fail = [&](const std::string &msg) {
    *error = msg;
    return false;
  };
  const size_t p = plan.stages.size();
  int64_t axis = pipelineAxis(plan.mesh);
  if (axis < 0)
    return fail("the plan has " + std::to_string(p) +
                " stage plans but its mesh (" +
                (plan.mesh.empty() ? std::string("none") : plan.mesh.str()) +
                ") has no '" + kPipelineAxis + "' axis to lay them out over");
  if (static_cast<int64_t>(p) != plan.mesh.shape[axis])
    return fail("the plan has " + std::to_string(p) +
                " stage plans but its mesh's '" + kPipelineAxis +
                "' axis has " + std::to_string(plan.mesh.shape[axis]) +
                " ranks (one stage plan per pipeline rank)");
  // The top level is only the envelope.
  const std::pair<const char *, uint64_t> topLevel[] = {
      {"arena bytes", plan.arenaBytes},
      {"inputs", plan.inputs.size()},
      {"outputs", plan.outputs.size()},
      {"constants", plan.constants.size()},
      {"kernel names", plan.kernelNames.size()},
      {"kernel object bytes", plan.kernelObject.size()},
      {"commands", plan.commands.size()},
      {"init commands", plan.initCommands.size()},
      {"states", plan.states.size()},
      {"events", static_cast<uint64_t>(plan.numEvents)},
      {"training record (enabled)", plan.training.enabled ? 1u : 0u}};
  for (const auto &field : topLevel)
    if (field.second != 0)
      return fail("a pipelined plan keeps its programs in its stages, but "
                  "the top level has " +
                  std::to_string(field.second) + " " + field.first +
                  " (expected none)");

  // Global name -> (stage, index) of its first holder.
  std::map<std::string, std::pair<size_t, size_t>> states;
  for (size_t c = 0; c < p; ++c) {
    const Plan &stage = plan.stages[c];
    std::string prefix = "stage " + std::to_string(c) + ": ";
    if (stage.isPipelined())
      return fail(prefix +
                  "holds stage plans of its own (stage plans do not nest)");
    if (stage.mesh.axisNames != plan.mesh.axisNames ||
        stage.mesh.shape != plan.mesh.shape)
      return fail(prefix + "its mesh '" + stage.mesh.str() +
                  "' differs from the plan's '" + plan.mesh.str() +
                  "' (every stage runs on the plan's mesh)");
    if (stage.target != plan.target)
      return fail(prefix + "targets '" + stage.target +
                  "' but the plan targets '" + plan.target + "'");
    std::string err;
    if (!validate(stage, &err))
      return fail(prefix + err);
    const Plan &first = plan.stages[0];
    for (auto [kind, list, ref] :
         {std::make_tuple("input", &stage.inputs, &first.inputs),
          std::make_tuple("output", &stage.outputs, &first.outputs)}) {
      if (list->size() != ref->size())
        return fail(prefix + "has " + std::to_string(list->size()) + " " +
                    kind + "s but stage 0 has " + std::to_string(ref->size()) +
                    " (every stage has the same " + kind + "s)");
      for (size_t i = 0; i < list->size(); ++i) {
        std::string d =
            tensorDifference(kind, i, (*list)[i], (*ref)[i], plan.mesh);
        if (!d.empty())
          return fail(prefix + d + " (every stage has the same " + kind + "s)");
      }
    }
    std::string d = trainingDifference(stage.training, first.training);
    if (!d.empty())
      return fail(prefix + d + " (every stage has the same training record)");
    for (size_t i = 0; i < stage.states.size(); ++i) {
      const StateTensor &st = stage.states[i];
      auto [it, inserted] =
          states.emplace(st.globalName(), std::make_pair(c, i));
      if (inserted)
        continue;
      const StateTensor &other =
          plan.stages[it->second.first].states[it->second.second];
      std::vector<int64_t> g = globalShape(st.info, plan.mesh),
                           og = globalShape(other.info, plan.mesh);
      if (st.kind != other.kind || st.info.dtype != other.info.dtype || g != og)
        return fail(prefix + "state " + std::to_string(i) + " '" +
                    st.globalName() + "' is a " + stateKindName(st.kind) + " " +
                    dtypeName(st.info.dtype) + " " + shapeString(g) +
                    " but stage " + std::to_string(it->second.first) +
                    " holds it as a " + stateKindName(other.kind) + " " +
                    dtypeName(other.info.dtype) + " " + shapeString(og) +
                    " (a state held by several stages, such as a tied "
                    "parameter, is the same tensor in each)");
    }
  }
  return true;
}

} // namespace cleave::plan
