//===- PlanValidate.cpp - Structural checks of a plan ---------------------===//
//
// Everything the executors rely on is checked here, once, at load time: after
// validate() succeeds no command can touch memory outside the arena. The
// GEMM and attention commands' checks are in PlanValidateKernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "PlanValidator.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <set>

namespace cleave::plan {

using detail::Validator;

static std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

bool Validator::checkRange(const std::string &what, uint64_t offset,
                           uint64_t bytes) {
  if (offset > plan.arenaBytes || bytes > plan.arenaBytes - offset)
    return fail(what + ": buffer offset " + std::to_string(offset) + " + " +
                std::to_string(bytes) + " bytes lies outside the arena of " +
                std::to_string(plan.arenaBytes) + " bytes");
  return true;
}

bool Validator::checkAlignedRange(const std::string &what, uint64_t offset,
                                  uint64_t bytes, uint64_t align) {
  if (align > 1 && offset % align != 0)
    return fail(what + ": buffer offset " + std::to_string(offset) +
                " is not a multiple of its element size " +
                std::to_string(align));
  return checkRange(what, offset, bytes);
}

bool Validator::checkTensor(const std::string &what, const TensorInfo &t) {
  if (!isKnownDType(static_cast<uint32_t>(t.dtype)))
    return fail(what + ": unknown dtype code " +
                std::to_string(static_cast<uint32_t>(t.dtype)));
  for (int64_t d : t.shape)
    if (d < 0)
      return fail(what + ": negative dimension in shape " +
                  shapeString(t.shape));
  int64_t n = t.numElements();
  if (n < 0 || (n > 0 && t.byteSize() == 0))
    return fail(what + ": shape " + shapeString(t.shape) +
                " has too many elements");
  if (!t.sharding.empty()) {
    if (t.sharding.size() != t.shape.size())
      return fail(what + ": sharding lists " +
                  std::to_string(t.sharding.size()) + " dimensions for rank " +
                  std::to_string(t.shape.size()));
    std::set<uint32_t> used;
    for (const auto &axes : t.sharding)
      for (uint32_t a : axes) {
        if (a >= plan.mesh.shape.size())
          return fail(what + ": sharding names mesh axis " + std::to_string(a) +
                      " but the mesh has " +
                      std::to_string(plan.mesh.shape.size()) + " axes");
        if (!used.insert(a).second)
          return fail(what + ": sharding uses mesh axis '" +
                      plan.mesh.axisNames[a] + "' twice");
      }
  }
  return checkRange(what, t.offset, t.byteSize());
}

bool Validator::checkMesh() {
  const Mesh &m = plan.mesh;
  if (m.axisNames.size() != m.shape.size())
    return fail("mesh: " + std::to_string(m.axisNames.size()) +
                " axis names for " + std::to_string(m.shape.size()) + " sizes");
  if (m.shape.size() > 16)
    return fail("mesh: " + std::to_string(m.shape.size()) +
                " axes (at most 16)");
  std::set<std::string> names;
  int64_t world = 1;
  for (size_t i = 0; i < m.shape.size(); ++i) {
    if (m.axisNames[i].empty() || !names.insert(m.axisNames[i]).second)
      return fail("mesh: axis name '" + m.axisNames[i] +
                  "' is empty or used twice");
    if (m.shape[i] < 1 || m.shape[i] > (int64_t{1} << 24) / world)
      return fail("mesh: axis '" + m.axisNames[i] + "' has size " +
                  std::to_string(m.shape[i]) +
                  " (sizes are at least 1, at most 2^24 ranks in all)");
    world *= m.shape[i];
  }
  if (plan.numEvents < 0 ||
      static_cast<uint64_t>(plan.numEvents) > plan.commands.size())
    return fail("event count " + std::to_string(plan.numEvents) +
                " is out of range");
  return true;
}

bool Validator::checkCollective(const std::string &what0, const Command &c) {
  const CollectiveInfo &k = c.collective;
  std::string what =
      what0 + " " + collectiveOpName(k.op) + " #" + std::to_string(k.id);
  if (plan.mesh.empty())
    return fail(what + ": the plan has no mesh");
  if (std::string(collectiveOpName(k.op)) == "unknown")
    return fail(what + ": unknown collective op " +
                std::to_string(static_cast<uint32_t>(k.op)));
  if (!isKnownDType(static_cast<uint32_t>(k.dtype)))
    return fail(what + ": unknown dtype code " +
                std::to_string(static_cast<uint32_t>(k.dtype)));
  bool reduces =
      k.op == CollectiveOp::AllReduce || k.op == CollectiveOp::ReduceScatter;
  if (reduces) {
    if (std::string(reduceOpName(k.reduce)) == "unknown")
      return fail(what + ": unknown reduction " +
                  std::to_string(static_cast<uint32_t>(k.reduce)));
    bool isFloat = k.dtype == DType::F32 || k.dtype == DType::F64 ||
                   k.dtype == DType::F16 || k.dtype == DType::BF16;
    if (k.reduce == ReduceOp::Avg && !isFloat)
      return fail(what + ": avg needs a float dtype, got " +
                  dtypeName(k.dtype));
    if (isNarrowType(k.dtype))
      return fail(what + ": reductions of " + dtypeName(k.dtype) +
                  " are not supported (reduce in a wider type)");
  }
  if (k.axes.empty())
    return fail(what + ": names no mesh axis");
  std::set<uint32_t> seen;
  int64_t g = 1;
  for (uint32_t a : k.axes) {
    if (a >= plan.mesh.shape.size() || !seen.insert(a).second)
      return fail(what + ": mesh axis " + std::to_string(a) +
                  " is out of range or named twice");
    g *= plan.mesh.shape[a];
  }
  if (k.count < 0 || k.count > (INT64_MAX / 16) / g)
    return fail(what + ": element count " + std::to_string(k.count) +
                " is out of range");
  uint64_t elem = dtypeSize(k.dtype);
  uint64_t in = static_cast<uint64_t>(k.count) * elem, out = in;
  auto view = [&](int64_t outer, int64_t inner, int64_t total,
                  const char *name) {
    if (outer < 1 || inner < 0 || inner > total || outer > total + 1 ||
        (inner > 0 && outer > total / inner) || outer * inner * g != total)
      return fail(what + ": " + name + " view [" + std::to_string(outer) +
                  ", " + std::to_string(g) + ", " + std::to_string(inner) +
                  "] does not cover " + std::to_string(total) + " elements");
    return true;
  };
  auto index = [&](int64_t i, const char *name) {
    if (i < 0 || i >= g)
      return fail(what + ": " + name + " " + std::to_string(i) +
                  " is not a group index (the group has " + std::to_string(g) +
                  " ranks)");
    return true;
  };
  size_t buffers = 2;
  switch (k.op) {
  case CollectiveOp::AllReduce:
    break;
  case CollectiveOp::AllGather:
    if (!view(k.splitOuter, k.splitInner, k.count * g, "gather"))
      return false;
    out = in * g;
    break;
  case CollectiveOp::ReduceScatter:
  case CollectiveOp::AllSlice:
    if (!view(k.splitOuter, k.splitInner, k.count, "scatter"))
      return false;
    out = in / g;
    break;
  case CollectiveOp::AllToAll:
    if (!view(k.splitOuter, k.splitInner, k.count, "split") ||
        !view(k.concatOuter, k.concatInner, k.count, "concat"))
      return false;
    break;
  case CollectiveOp::Broadcast:
    if (!index(k.root, "root"))
      return false;
    break;
  case CollectiveOp::Permute: {
    if (k.pairs.size() % 2 != 0)
      return fail(what + ": pairs hold an odd number of indices");
    std::set<int64_t> sources, targets;
    for (size_t i = 0; i < k.pairs.size(); i += 2) {
      if (!index(k.pairs[i], "source") || !index(k.pairs[i + 1], "target"))
        return false;
      if (!sources.insert(k.pairs[i]).second ||
          !targets.insert(k.pairs[i + 1]).second)
        return fail(what + ": a group index is a source or a target twice");
    }
    break;
  }
  case CollectiveOp::Send:
  case CollectiveOp::Recv:
    if (!index(k.root, "source") || !index(k.peer, "target"))
      return false;
    if (k.root == k.peer)
      return fail(what + ": source and target are the same group index");
    if (k.pairs.size() > 1)
      return fail(what + ": carries " + std::to_string(k.pairs.size()) +
                  " values in pairs, expected at most a message tag");
    buffers = 1;
    break;
  }
  if (!c.params.empty() || c.buffers.size() != buffers)
    return fail(what + ": has " + std::to_string(c.params.size()) +
                " parameters and " + std::to_string(c.buffers.size()) +
                " buffers, expected 0 and " + std::to_string(buffers));
  // The runtime reduces elements in place: they must be aligned.
  if (k.op == CollectiveOp::Recv)
    return checkAlignedRange(what + " destination", c.buffers[0], in, elem);
  if (!checkAlignedRange(what + " source", c.buffers[0], in, elem))
    return false;
  if (buffers == 2 &&
      !checkAlignedRange(what + " destination", c.buffers[1], out, elem))
    return false;
  // In place, or apart: the runtime copies the source into the destination
  // before it combines, which a partial overlap would corrupt.
  if (buffers == 2 && c.buffers[0] != c.buffers[1] &&
      c.buffers[0] < c.buffers[1] + out && c.buffers[1] < c.buffers[0] + in)
    return fail(what + ": source at " + std::to_string(c.buffers[0]) +
                " and destination at " + std::to_string(c.buffers[1]) +
                " overlap");
  if (c.stream == kCommStream && k.op == CollectiveOp::Send)
    return fail(what + ": a send cannot be asynchronous");
  return true;
}

bool Validator::checkEvents() {
  // started[e]: index of the command that starts event e; waited[e].
  std::vector<int64_t> started(plan.numEvents, -1), waited(plan.numEvents, -1);
  for (size_t i = 0; i < plan.commands.size(); ++i) {
    const Command &c = plan.commands[i];
    std::string what =
        "command " + std::to_string(i) + " (" + commandKindName(c.kind) + ")";
    if (c.stream != kComputeStream && c.stream != kCommStream)
      return fail(what + ": unknown stream " + std::to_string(c.stream));
    bool async = c.kind == CommandKind::Collective && c.stream == kCommStream;
    if (!async && c.kind != CommandKind::Wait) {
      if (c.stream != kComputeStream || c.event != -1)
        return fail(what + ": only asynchronous collectives run on the "
                           "communication stream or complete an event");
      continue;
    }
    if (c.event < 0 || c.event >= plan.numEvents)
      return fail(what + ": event " + std::to_string(c.event) +
                  " is out of range (the plan has " +
                  std::to_string(plan.numEvents) + " events)");
    if (async) {
      if (started[c.event] >= 0)
        return fail(what + ": event " + std::to_string(c.event) +
                    " is already completed by command " +
                    std::to_string(started[c.event]));
      started[c.event] = i;
      continue;
    }
    if (c.stream != kComputeStream || !c.params.empty() || !c.buffers.empty())
      return fail(what + ": a wait runs on the compute stream and has no "
                         "parameters or buffers");
    if (started[c.event] < 0)
      return fail(what + ": waits for event " + std::to_string(c.event) +
                  ", which no earlier command completes");
    if (waited[c.event] >= 0)
      return fail(what + ": event " + std::to_string(c.event) +
                  " is already waited for by command " +
                  std::to_string(waited[c.event]));
    waited[c.event] = i;
  }
  for (int64_t e = 0; e < plan.numEvents; ++e)
    if (started[e] >= 0 && waited[e] < 0)
      return fail("event " + std::to_string(e) + " of command " +
                  std::to_string(started[e]) + " is never waited for");
  return true;
}

bool Validator::run() {
  if (plan.alignment == 0 || (plan.alignment & (plan.alignment - 1)) != 0)
    return fail("alignment " + std::to_string(plan.alignment) +
                " is not a power of two");
  if (!checkMesh())
    return false;
  std::string metadataError;
  if (!checkMetadata(plan.metadata, &metadataError))
    return fail(metadataError);
  steps = pipelineSteps(plan);
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].empty())
      return fail(std::string("metadata '") + meta::kPipelineSteps.name +
                  "': step " + std::to_string(i) + " has an empty name");
  std::set<std::string> names;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const TensorInfo &t = plan.inputs[i];
    if (!checkTensor("input " + std::to_string(i) + " '" + t.name + "'", t))
      return false;
    if (!names.insert(t.name).second)
      return fail("input name '" + t.name + "' is used twice");
  }
  names.clear();
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const TensorInfo &t = plan.outputs[i];
    if (!checkTensor("output " + std::to_string(i) + " '" + t.name + "'", t))
      return false;
    if (!names.insert(t.name).second)
      return fail("output name '" + t.name + "' is used twice");
  }
  for (size_t i = 0; i < plan.constants.size(); ++i) {
    const Constant &c = plan.constants[i];
    std::string what =
        "constant " + std::to_string(i) + " '" + c.info.name + "'";
    if (!checkTensor(what, c.info))
      return false;
    // A sharded constant (a sharded parameter's initial value) holds the
    // global tensor.
    TensorInfo global = c.info;
    global.shape = globalShape(c.info, plan.mesh);
    if (!c.info.sharding.empty() &&
        (global.numElements() < 0 ||
         (global.numElements() > 0 && global.byteSize() == 0)))
      return fail(what + ": global shape " + shapeString(global.shape) +
                  " has too many elements");
    if (!c.file.empty()) {
      if (!c.data.empty())
        return fail(what + ": has both data and a file reference");
      if (c.fileOffset > c.fileSize ||
          global.byteSize() > c.fileSize - c.fileOffset)
        return fail(what + ": its " + std::to_string(global.byteSize()) +
                    " bytes at offset " + std::to_string(c.fileOffset) +
                    " lie beyond the end of '" + c.file + "' (" +
                    std::to_string(c.fileSize) + " bytes)");
      continue;
    }
    if (c.data.size() != global.byteSize())
      return fail(what + ": holds " + std::to_string(c.data.size()) +
                  " bytes of data but its " +
                  (c.info.sharding.empty() ? "shape " : "global shape ") +
                  shapeString(global.shape) + " " + dtypeName(c.info.dtype) +
                  " needs " + std::to_string(global.byteSize()));
  }
  if (!plan.kernelNames.empty()) {
    // A plan to simulate has its kernels' names and costs but no code.
    if (!(plan.kernelObject.empty() && withoutKernelCode(plan)) &&
        (plan.kernelObject.size() < 4 || std::memcmp(plan.kernelObject.data(),
                                                     "\x7f"
                                                     "ELF",
                                                     4) != 0))
      return fail("the plan names " + std::to_string(plan.kernelNames.size()) +
                  " kernels but its kernel object is not an ELF file");
    for (size_t i = 0; i < plan.kernelNames.size(); ++i)
      if (plan.kernelNames[i].empty() ||
          plan.kernelNames[i].find('\0') != std::string::npos)
        return fail("kernel name " + std::to_string(i) +
                    " is empty or contains a NUL byte");
  }
  if (!plan.hostKernelObject.empty() || !plan.hostKernelArgs.empty()) {
    if (!isCudaTarget(plan.target))
      return fail("host kernels belong to CUDA plans, this plan targets '" +
                  plan.target + "'");
    if (plan.hostKernelObject.size() < 4 ||
        std::memcmp(plan.hostKernelObject.data(),
                    "\x7f"
                    "ELF",
                    4) != 0)
      return fail("the host kernel object is not an ELF file");
    if (plan.hostKernelArgs.size() != plan.kernelNames.size())
      return fail("the host kernel table describes " +
                  std::to_string(plan.hostKernelArgs.size()) +
                  " kernels, the plan names " +
                  std::to_string(plan.kernelNames.size()));
  }
  for (size_t i = 0; i < plan.commands.size(); ++i) {
    if (plan.commands[i].kind == CommandKind::RandomNormal)
      return fail("command " + std::to_string(i) +
                  ": random_normal may only be an init command");
    if (!checkCommand("command", i, plan.commands[i]))
      return false;
  }
  for (size_t i = 0; i < plan.initCommands.size(); ++i) {
    const Command &c = plan.initCommands[i];
    if (c.kind == CommandKind::Collective || c.kind == CommandKind::Wait ||
        c.stream != kComputeStream || c.event != -1)
      return fail("init command " + std::to_string(i) + " (" +
                  commandKindName(c.kind) +
                  "): init commands run on one rank's compute stream and "
                  "cannot communicate");
    if (c.kind == CommandKind::Marker)
      return fail("init command " + std::to_string(i) +
                  " (marker): markers belong to the step's commands, not "
                  "to the init commands");
    if (!checkCommand("init command", i, c))
      return false;
  }
  if (!checkEvents() || !checkMarkers() || !checkStates() || !checkTraining())
    return false;
  if (!validateEntries(plan, error))
    return false;
  return !plan.isPipelined() || validateStages(plan, error);
}

bool Validator::checkMarkers() {
  // open[i]: the command that began step i and has not ended it, or -1.
  std::vector<int64_t> open(steps.size(), -1);
  for (size_t i = 0; i < plan.commands.size(); ++i) {
    const Command &c = plan.commands[i];
    if (c.kind != CommandKind::Marker)
      continue;
    // checkCommand has checked the index and the phase.
    size_t step = static_cast<size_t>(c.params[0]);
    bool begins = c.params[1] == 0;
    std::string what = "command " + std::to_string(i) + " (marker): step " +
                       std::to_string(step) + " '" + steps[step] + "'";
    if (begins && open[step] >= 0)
      return fail(what + " begins again before the begin of command " +
                  std::to_string(open[step]) + " has ended");
    if (!begins && open[step] < 0)
      return fail(what + " ends without having begun");
    open[step] = begins ? static_cast<int64_t>(i) : -1;
  }
  for (size_t step = 0; step < steps.size(); ++step)
    if (open[step] >= 0)
      return fail("command " + std::to_string(open[step]) + " (marker): step " +
                  std::to_string(step) + " '" + steps[step] +
                  "' begins and never ends");
  return true;
}

bool Validator::checkStates() {
  std::set<std::string> names, parameters;
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StateTensor &st = plan.states[i];
    std::string what = "state " + std::to_string(i) + " '" + st.info.name + "'";
    if (!checkTensor(what, st.info))
      return false;
    if (st.kind != StateKind::Parameter &&
        st.kind != StateKind::OptimizerState && st.kind != StateKind::Buffer)
      return fail(what + ": unknown state kind " +
                  std::to_string(static_cast<uint32_t>(st.kind)) +
                  " (expected 1 = parameter, 2 = optimizer state or 3 = "
                  "buffer)");
    if (st.parameter.empty())
      return fail(what + ": names no parameter");
    if (st.kind != StateKind::OptimizerState && !st.slot.empty())
      return fail(what +
                  ": a parameter or buffer has no optimizer slot, got '" +
                  st.slot + "'");
    if (st.kind == StateKind::OptimizerState && st.slot.empty())
      return fail(what + ": optimizer state of '" + st.parameter +
                  "' has no slot name");
    if (!names.insert(st.globalName()).second)
      return fail(what + ": '" + st.globalName() +
                  "' is held by two state tensors");
    if (st.kind == StateKind::Parameter)
      parameters.insert(st.parameter);
  }
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StateTensor &st = plan.states[i];
    if (st.kind == StateKind::OptimizerState &&
        !parameters.count(st.parameter) &&
        st.parameter != kTrainerStateParameter)
      return fail("state " + std::to_string(i) + " '" + st.info.name +
                  "': optimizer state '" + st.slot +
                  "' belongs to parameter '" + st.parameter +
                  "', which is not a parameter state of the plan");
  }
  return true;
}

/// True for an f32 tensor of exactly one element.
static bool isF32Scalar(const TensorInfo &t) {
  return t.dtype == DType::F32 && t.numElements() == 1;
}

bool Validator::checkTraining() {
  const TrainingInfo &t = plan.training;
  if (!t.enabled)
    return true;
  auto index = [&](const char *what, int64_t i,
                   const std::vector<TensorInfo> &list, const char *listName,
                   bool optional) {
    if (optional && i == -1)
      return true;
    if (i < 0 || static_cast<uint64_t>(i) >= list.size())
      return fail(std::string("training: ") + what + " index " +
                  std::to_string(i) + " is out of range (the plan has " +
                  std::to_string(list.size()) + " " + listName + ")");
    if (!isF32Scalar(list[i]))
      return fail(std::string("training: ") + what + " '" + list[i].name +
                  "' must be a float32 scalar, got " +
                  shapeString(list[i].shape) + " " + dtypeName(list[i].dtype));
    return true;
  };
  if (!index("learning-rate input", t.lrInput, plan.inputs, "inputs", false) ||
      !index("step input", t.stepInput, plan.inputs, "inputs", true) ||
      !index("loss output", t.lossOutput, plan.outputs, "outputs", false) ||
      !index("gradient-norm output", t.gradNormOutput, plan.outputs, "outputs",
             true))
    return false;
  if (t.lrInput == t.stepInput)
    return fail("training: the learning-rate and step inputs are the same "
                "input " +
                std::to_string(t.lrInput));
  if (t.schedule != LRSchedule::Constant &&
      t.schedule != LRSchedule::LinearWarmup &&
      t.schedule != LRSchedule::Cosine)
    return fail("training: unknown learning-rate schedule " +
                std::to_string(static_cast<uint32_t>(t.schedule)));
  if (!std::isfinite(t.baseLR) || t.baseLR < 0 || !std::isfinite(t.minLR) ||
      t.minLR < 0)
    return fail("training: learning rates must be finite and non-negative "
                "(base " +
                std::to_string(t.baseLR) + ", min " + std::to_string(t.minLR) +
                ")");
  const std::pair<const char *, int64_t> counts[] = {
      {"warmup steps", t.warmupSteps},
      {"total steps", t.totalSteps},
      {"reference batch", t.referenceBatch},
      {"batch size", t.batchSize},
      {"sequence length", t.sequenceLength}};
  for (const auto &c : counts)
    if (c.second < 0)
      return fail(std::string("training: ") + c.first + " " +
                  std::to_string(c.second) + " is negative");
  std::set<int64_t> seen;
  for (int64_t i : t.dataInputs) {
    if (i < 0 || static_cast<uint64_t>(i) >= plan.inputs.size())
      return fail("training: data input index " + std::to_string(i) +
                  " is out of range (the plan has " +
                  std::to_string(plan.inputs.size()) + " inputs)");
    if (i == t.lrInput || i == t.stepInput)
      return fail("training: input " + std::to_string(i) + " '" +
                  plan.inputs[i].name +
                  "' is both a data input and the learning-rate/step input");
    if (!seen.insert(i).second)
      return fail("training: data input " + std::to_string(i) + " '" +
                  plan.inputs[i].name + "' is listed twice");
  }
  return true;
}

bool Validator::checkCommand(const char *label, size_t index,
                             const Command &c) {
  std::string what = std::string(label) + " " + std::to_string(index) + " (" +
                     commandKindName(c.kind) + ")";
  auto counts = [&](size_t params, size_t buffers) {
    if (c.params.size() != params)
      return fail(what + ": has " + std::to_string(c.params.size()) +
                  " parameters, expected " + std::to_string(params));
    if (c.buffers.size() != buffers)
      return fail(what + ": has " + std::to_string(c.buffers.size()) +
                  " buffers, expected " + std::to_string(buffers));
    return true;
  };
  bool cuda = isCudaTarget(plan.target);
  switch (c.kind) {
  case CommandKind::GpuLaunch: {
    if (!cuda)
      return fail(what +
                  ": GPU launches need a CUDA plan (target 'cuda-...'), "
                  "this plan targets '" +
                  plan.target + "'");
    if (c.params.size() != kGpuLaunchNumParams)
      return fail(what + ": has " + std::to_string(c.params.size()) +
                  " parameters, expected " +
                  std::to_string(kGpuLaunchNumParams) +
                  " (kernel index, grid x/y/z, block x/y/z, shared bytes)");
    int64_t k = c.params[kGpuKernelIndex];
    if (k < 0 || static_cast<uint64_t>(k) >= plan.kernelNames.size())
      return fail(what + ": kernel index " + std::to_string(k) +
                  " is out of range (the plan has " +
                  std::to_string(plan.kernelNames.size()) + " kernels)");
    static const char *const dims[] = {"grid x",  "grid y",  "grid z",
                                       "block x", "block y", "block z"};
    for (size_t d = 0; d < 6; ++d) {
      int64_t v = c.params[kGpuGridX + d];
      if (v < 1 || v > UINT32_MAX)
        return fail(what + ": " + dims[d] + " = " + std::to_string(v) +
                    " is not a positive 32-bit count");
    }
    int64_t shared = c.params[kGpuSharedBytes];
    if (shared < 0 || shared > UINT32_MAX)
      return fail(what + ": shared memory of " + std::to_string(shared) +
                  " bytes is out of range");
    if (!plan.hostKernelArgs.empty()) {
      // The host kernels' table says how many arguments the kernel takes
      // and how many bytes each one reaches.
      const std::vector<HostKernelArg> &args =
          plan.hostKernelArgs[static_cast<size_t>(k)];
      if (c.buffers.size() != args.size())
        return fail(what + ": launches kernel '" +
                    plan.kernelNames[static_cast<size_t>(k)] + "' with " +
                    std::to_string(c.buffers.size()) +
                    " arguments, its host kernel takes " +
                    std::to_string(args.size()));
      for (size_t j = 0; j < c.buffers.size(); ++j)
        if (!checkRange(what + " argument " + std::to_string(j), c.buffers[j],
                        args[j].bytes))
          return false;
      return true;
    }
    for (size_t j = 0; j < c.buffers.size(); ++j)
      if (!checkRange(what + " argument " + std::to_string(j), c.buffers[j], 0))
        return false;
    return true;
  }
  case CommandKind::Kernel: {
    if (cuda)
      return fail(what +
                  ": host kernel commands cannot appear in a CUDA plan "
                  "(target '" +
                  plan.target + "'); use gpu_launch");
    if (c.params.size() != 1)
      return fail(what + ": has " + std::to_string(c.params.size()) +
                  " parameters, expected 1 (the kernel index)");
    int64_t k = c.params[0];
    if (k < 0 || static_cast<uint64_t>(k) >= plan.kernelNames.size())
      return fail(what + ": kernel index " + std::to_string(k) +
                  " is out of range (the plan has " +
                  std::to_string(plan.kernelNames.size()) + " kernels)");
    for (size_t j = 0; j < c.buffers.size(); ++j)
      if (!checkRange(what + " argument " + std::to_string(j), c.buffers[j], 0))
        return false;
    return true;
  }
  case CommandKind::Copy:
    if (!counts(1, 2))
      return false;
    if (c.params[0] < 0)
      return fail(what + ": negative byte count " +
                  std::to_string(c.params[0]));
    return checkRange(what + " source", c.buffers[0], c.params[0]) &&
           checkRange(what + " destination", c.buffers[1], c.params[0]);
  case CommandKind::Fill:
    if (!counts(2, 1))
      return false;
    if (c.params[0] < 0)
      return fail(what + ": negative byte count " +
                  std::to_string(c.params[0]));
    if (c.params[1] < 0 || c.params[1] > 255)
      return fail(what + ": fill value " + std::to_string(c.params[1]) +
                  " is not a byte (0..255)");
    return checkRange(what + " destination", c.buffers[0], c.params[0]);
  case CommandKind::Gemm: {
    size_t n = c.params.size();
    if (n != kGemmNumParams && n != kGemmNumParams + 1 &&
        n != kGemmNumParamsWithEpilogue)
      return fail(
          what + ": has " + std::to_string(n) + " parameters, expected " +
          std::to_string(kGemmNumParams) + " (" +
          std::to_string(kGemmNumParams + 1) + " with the output dtype, " +
          std::to_string(kGemmNumParamsWithEpilogue) + " with an epilogue)");
    int64_t epilogue = n > kGemmEpilogue ? c.params[kGemmEpilogue] : 0;
    if (epilogue < 0 || epilogue > static_cast<int64_t>(GemmEpilogue::Gelu))
      return fail(what + ": unknown epilogue " + std::to_string(epilogue) +
                  " (expected 0 = none, 1 = bias, 2 = gelu_bias or 3 = gelu)");
    size_t buffers =
        gemmEpilogueHasBias(static_cast<GemmEpilogue>(epilogue)) ? 4 : 3;
    if (c.buffers.size() != buffers)
      return fail(what + ": has " + std::to_string(c.buffers.size()) +
                  " buffers, expected " + std::to_string(buffers) +
                  (buffers == 4 ? " (A, B, C and the bias)" : " (A, B and C)"));
    return checkGemm(what, c);
  }
  case CommandKind::Attention:
  case CommandKind::AttentionBackward:
    if (!checkAttention(what, c))
      return false;
    // The CUDA kernels take no positions and write no lse.
    if (cuda && attentionIsBlock(c))
      return fail(what + ": block attention (ring context parallelism) runs "
                         "on the CPU backend only");
    // The CUDA kernels keep a row of q/k and of v in registers.
    if (cuda && (c.params[kAttnBatch] > 65535 || c.params[kAttnQHeads] > 65535))
      return fail(what + ": the CUDA attention kernels take up to 65535 "
                         "batches and heads (a grid dimension each)");
    if (cuda &&
        (c.params[kAttnQLen] > INT32_MAX || c.params[kAttnKVLen] > INT32_MAX))
      return fail(what + ": the CUDA attention kernels take sequences of up "
                         "to 2^31 - 1");
    if (cuda && (c.params[kAttnHeadDim] > kCudaAttentionMaxHeadDim ||
                 c.params[kAttnValueDim] > kCudaAttentionMaxHeadDim))
      return fail(what +
                  ": the CUDA attention kernels take head dimensions "
                  "up to " +
                  std::to_string(kCudaAttentionMaxHeadDim) + ", got " +
                  std::to_string(c.params[kAttnHeadDim]) + " and " +
                  std::to_string(c.params[kAttnValueDim]) +
                  " (compile with --no-fused-attention)");
    return true;
  case CommandKind::GroupedGemm:
    if (cuda)
      return fail(what + ": grouped GEMMs (mixture-of-experts layers) run on "
                         "the CPU backend only");
    return checkGroupedGemm(what, c);
  case CommandKind::RandomNormal: {
    if (c.params.size() == 5) {
      // The shard of a sharded state.
      int64_t s = c.params[4];
      if (s < 0 || static_cast<uint64_t>(s) >= plan.states.size())
        return fail(what + ": state index " + std::to_string(s) +
                    " is out of range (the plan has " +
                    std::to_string(plan.states.size()) + " states)");
      const TensorInfo &t = plan.states[s].info;
      if (t.sharding.empty() || t.offset != c.buffers.at(0) ||
          t.numElements() != c.params[0] || t.dtype != DType::F32)
        return fail(what + ": state " + std::to_string(s) + " '" + t.name +
                    "' is not a sharded float32 state of " +
                    std::to_string(c.params[0]) +
                    " elements at the command's buffer");
    } else if (!counts(4, 1)) {
      return false;
    }
    if (c.params[0] < 0 || c.params[0] > INT64_MAX / 4)
      return fail(what + ": element count " + std::to_string(c.params[0]) +
                  " is out of range");
    double stddev = bitsToDouble(c.params[3]);
    if (!std::isfinite(bitsToDouble(c.params[2])) || !std::isfinite(stddev) ||
        stddev < 0)
      return fail(what + ": mean and standard deviation must be finite and "
                         "the deviation non-negative");
    return checkAlignedRange(what + " destination", c.buffers[0],
                             c.params[0] * 4, 4);
  }
  case CommandKind::Collective:
    return checkCollective(what, c);
  case CommandKind::Wait:
    return true; // checkEvents
  case CommandKind::Marker:
    if (!counts(2, 0))
      return false;
    if (c.params[0] < 0 || static_cast<uint64_t>(c.params[0]) >= steps.size())
      return fail(what + ": step index " + std::to_string(c.params[0]) +
                  " is out of range (the plan names " +
                  std::to_string(steps.size()) + " steps in metadata '" +
                  meta::kPipelineSteps.name + "')");
    if (c.params[1] != 0 && c.params[1] != 1)
      return fail(what + ": phase " + std::to_string(c.params[1]) +
                  " is not 0 (begin) or 1 (end)");
    return true; // checkMarkers checks the order
  }
  return fail(what + ": unknown command kind " +
              std::to_string(static_cast<uint32_t>(c.kind)));
}

bool validate(const Plan &plan, std::string *error) {
  return Validator(plan, error).run();
}

} // namespace cleave::plan
