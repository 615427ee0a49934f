//===- Program.cpp - cleave_rt_program_* functions ------------------------===//

#include "Program.h"

#include "cleave/FileUtil.h"
#include "cleave/Training.h"
#include <algorithm>

#include <cstring>
#include <set>

using namespace cleave;
using namespace cleave::rt;

/// The plans a handle's counts cover: its own, or every stage of a whole
/// pipelined file.
static std::vector<const plan::Plan *>
coveredPlans(const cleave_rt_program_t &p) {
  std::vector<const plan::Plan *> plans;
  if (p.wholePipeline())
    for (const plan::Plan &stage : p.file->stages)
      plans.push_back(&stage);
  else
    plans.push_back(p.plan.get());
  return plans;
}

/// A new handle on `file` (stage -1), on its stage `stage`, or on its
/// named entry `entry` (>= 0).
static cleave_rt_program makeHandle(PlanRef file, int64_t stage,
                                    int64_t entry = -1) {
  auto *program = new cleave_rt_program_t();
  program->file = file;
  program->stage = stage;
  program->entry = entry;
  if (entry >= 0)
    program->plan = PlanRef(file, &file->entries[entry]);
  else if (stage >= 0)
    program->plan = PlanRef(file, &file->stages[stage]);
  else if (file->isPipelined())
    program->plan = PlanRef(file, &file->stages[0]);
  else
    program->plan = file;
  std::set<std::string> files;
  for (const plan::Plan *p : coveredPlans(*program))
    for (const plan::Constant &c : p->constants) {
      program->constantBytes += c.data.size();
      if (!c.file.empty()) {
        plan::TensorInfo global = c.info;
        global.shape = plan::globalShape(c.info, p->mesh);
        program->referencedBytes += global.byteSize();
        files.insert(c.file);
      }
    }
  program->referencedFiles = files.size();
  if (!program->wholePipeline())
    for (const plan::StateTensor &st : program->plan->states)
      program->stateNames.push_back(st.globalName());
  program->meshString = file->mesh.str();
  return program;
}

static cleave_rt_status finishLoad(plan::Plan &&p,
                                   cleave_rt_program *out_program) {
  if (plan::withoutKernelCode(p))
    return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                      "the plan was compiled without kernel code "
                      "(cleave-compile --emit=sim): it can be simulated "
                      "(cleave-sim), not run");
  *out_program =
      makeHandle(std::make_shared<const plan::Plan>(std::move(p)), -1);
  return nullptr;
}

/// Replaces the handle's plans by `file` (a changed copy of its file):
/// executors made before keep the plans they hold.
static void rebind(cleave_rt_program program,
                   std::shared_ptr<plan::Plan> file) {
  cleave_rt_program fresh =
      makeHandle(std::move(file), program->stage, program->entry);
  *program = std::move(*fresh);
  delete fresh;
}

/// Calls fn on every constant of `file`, in its stages too.
template <typename Fn> static void forEachConstant(plan::Plan &file, Fn fn) {
  for (plan::Constant &c : file.constants)
    fn(c);
  for (plan::Plan &stage : file.stages)
    for (plan::Constant &c : stage.constants)
      fn(c);
  for (plan::Plan &entry : file.entries)
    for (plan::Constant &c : entry.constants)
      fn(c);
}

namespace cleave::rt {

std::string describePipeline(const plan::Plan &file) {
  int64_t axis = plan::pipelineAxis(file.mesh);
  int64_t p = axis >= 0 ? file.mesh.shape[axis] : 0;
  int64_t world = file.mesh.worldSize();
  return std::string("the plan is pipelined over ") + plan::kPipelineAxis +
         "=" + std::to_string(p) + " (mesh " + file.mesh.str() + ", " +
         std::to_string(world) + (world == 1 ? " rank)" : " ranks)");
}

cleave_rt_status planForRank(cleave_rt_program program, int64_t rank,
                             PlanRef *out) {
  const plan::Plan &file = *program->file;
  int64_t world = file.mesh.worldSize();
  if (rank < 0 || rank >= world)
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "rank " + std::to_string(rank) +
                          " is out of range (the mesh has " +
                          std::to_string(world) + " ranks)");
  if (!file.isPipelined() || program->entry >= 0) {
    *out = program->plan;
    return nullptr;
  }
  int64_t stage = plan::stageOfRank(file, rank);
  if (program->stage >= 0 && program->stage != stage)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "rank " + std::to_string(rank) + " runs stage " +
                          std::to_string(stage) + " of the pipeline (its " +
                          plan::kPipelineAxis + " coordinate), not stage " +
                          std::to_string(program->stage));
  *out = PlanRef(program->file, &file.stages[stage]);
  return nullptr;
}

} // namespace cleave::rt

static cleave_rt_status describe(const plan::TensorInfo &t,
                                 cleave_rt_tensor_desc_t *out_desc) {
  out_desc->name = t.name.c_str();
  out_desc->dtype = static_cast<uint32_t>(t.dtype);
  out_desc->rank = t.shape.size();
  out_desc->dims = t.shape.data();
  out_desc->byte_size = t.byteSize();
  return nullptr;
}

static cleave_rt_status find(const std::vector<plan::TensorInfo> &list,
                             const char *kind, const char *name,
                             size_t *out_index) {
  if (!name)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "name is NULL");
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].name == name) {
      *out_index = i;
      return nullptr;
    }
  std::string known;
  for (const plan::TensorInfo &t : list)
    known += (known.empty() ? "'" : ", '") + t.name + "'";
  return makeStatus(CLEAVE_RT_NOT_FOUND,
                    std::string("the plan has no ") + kind + " named '" + name +
                        "' (its " + kind +
                        "s: " + (known.empty() ? "none" : known) + ")");
}

extern "C" {

cleave_rt_status cleave_rt_program_load_file(const char *path,
                                             cleave_rt_program *out_program) {
  if (!path || !out_program)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "path and out_program must not be NULL");
  std::vector<uint8_t> bytes;
  std::string error;
  if (!readWholeFile(path, &bytes, &error))
    return makeStatus(CLEAVE_RT_NOT_FOUND, error);
  plan::Plan p;
  if (!plan::deserialize(bytes.data(), bytes.size(), &p, &error))
    return makeStatus(CLEAVE_RT_DATA_LOSS,
                      "invalid plan '" + std::string(path) + "': " + error);
  return finishLoad(std::move(p), out_program);
}

cleave_rt_status cleave_rt_program_load_memory(const void *data, size_t size,
                                               cleave_rt_program *out_program) {
  if ((!data && size) || !out_program)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "data and out_program must not be NULL");
  plan::Plan p;
  std::string error;
  static const uint8_t empty = 0;
  if (!plan::deserialize(data ? static_cast<const uint8_t *>(data) : &empty,
                         size, &p, &error))
    return makeStatus(CLEAVE_RT_DATA_LOSS, "invalid plan: " + error);
  return finishLoad(std::move(p), out_program);
}

void cleave_rt_program_destroy(cleave_rt_program program) { delete program; }

size_t cleave_rt_program_input_count(cleave_rt_program program) {
  return program ? program->plan->inputs.size() : 0;
}

size_t cleave_rt_program_output_count(cleave_rt_program program) {
  return program ? program->plan->outputs.size() : 0;
}

/// Null, or CLEAVE_RT_OUT_OF_RANGE when `index` is not below the plan's
/// `count` things called `what` ("input index 3 is out of range (the plan
/// has 2 inputs)").
static cleave_rt_status checkPlanIndex(const char *what, size_t index,
                                       size_t count) {
  if (index < count)
    return nullptr;
  return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                    std::string(what) + " index " + std::to_string(index) +
                        " is out of range (the plan has " +
                        std::to_string(count) + " " + what + "s)");
}

/// The description of the plan's input or output (`list`) `index`.
static cleave_rt_status
describeAt(cleave_rt_program program, const char *what,
           std::vector<plan::TensorInfo> plan::Plan::*list, size_t index,
           cleave_rt_tensor_desc_t *out_desc) {
  if (!program || !out_desc)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  const std::vector<plan::TensorInfo> &tensors = (*program->plan).*list;
  CLEAVE_RT_RETURN_IF_ERROR(checkPlanIndex(what, index, tensors.size()));
  return describe(tensors[index], out_desc);
}

cleave_rt_status
cleave_rt_program_input_desc(cleave_rt_program program, size_t index,
                             cleave_rt_tensor_desc_t *out_desc) {
  return describeAt(program, "input", &plan::Plan::inputs, index, out_desc);
}

cleave_rt_status
cleave_rt_program_output_desc(cleave_rt_program program, size_t index,
                              cleave_rt_tensor_desc_t *out_desc) {
  return describeAt(program, "output", &plan::Plan::outputs, index, out_desc);
}

cleave_rt_status cleave_rt_program_find_input(cleave_rt_program program,
                                              const char *name,
                                              size_t *out_index) {
  if (!program || !out_index)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  return find(program->plan->inputs, "input", name, out_index);
}

cleave_rt_status cleave_rt_program_find_output(cleave_rt_program program,
                                               const char *name,
                                               size_t *out_index) {
  if (!program || !out_index)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  return find(program->plan->outputs, "output", name, out_index);
}

uint64_t cleave_rt_program_peak_bytes(cleave_rt_program program) {
  if (!program)
    return 0;
  uint64_t peak = 0;
  for (const plan::Plan *p : coveredPlans(*program))
    peak = std::max(peak, p->arenaBytes);
  return peak;
}

uint64_t cleave_rt_program_constant_bytes(cleave_rt_program program) {
  return program ? program->constantBytes : 0;
}

uint64_t cleave_rt_program_referenced_bytes(cleave_rt_program program) {
  return program ? program->referencedBytes : 0;
}

size_t cleave_rt_program_referenced_files(cleave_rt_program program) {
  return program ? program->referencedFiles : 0;
}

cleave_rt_status cleave_rt_program_set_weights_dir(cleave_rt_program program,
                                                   const char *dir) {
  if (!program || !dir)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  std::string folder = dir;
  if (folder.empty())
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "empty weights folder");
  while (folder.size() > 1 && folder.back() == '/')
    folder.pop_back();
  // Executors hold their own reference to the plan, so a changed copy
  // leaves those already made as they are.
  auto p = std::make_shared<plan::Plan>(*program->file);
  forEachConstant(*p, [&](plan::Constant &c) {
    if (c.file.empty())
      return;
    size_t slash = c.file.rfind('/');
    c.file = folder + "/" +
             (slash == std::string::npos ? c.file : c.file.substr(slash + 1));
  });
  rebind(program, std::move(p));
  return nullptr;
}

cleave_rt_status
cleave_rt_program_skip_referenced_values(cleave_rt_program program) {
  if (!program)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  auto p = std::make_shared<plan::Plan>(*program->file);
  // Neither data nor file: nothing to copy.
  forEachConstant(*p, [](plan::Constant &c) { c.file.clear(); });
  rebind(program, std::move(p));
  return nullptr;
}

size_t cleave_rt_program_command_count(cleave_rt_program program) {
  if (!program)
    return 0;
  size_t n = 0;
  for (const plan::Plan *p : coveredPlans(*program))
    n += p->commands.size();
  return n;
}

const char *cleave_rt_program_target(cleave_rt_program program) {
  return program ? program->file->target.c_str() : "";
}

enum class TensorList { Input, Output, State };

static cleave_rt_status shardOf(cleave_rt_program program, TensorList which,
                                size_t index, size_t meshRank,
                                int64_t *globalDims, int64_t *offsets,
                                int *sharded) {
  if (!program || !sharded)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  const plan::Plan &p = *program->plan;
  size_t size = which == TensorList::Input    ? p.inputs.size()
                : which == TensorList::Output ? p.outputs.size()
                                              : p.states.size();
  if (which == TensorList::State && program->wholePipeline())
    return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                      describePipeline(*program->file) +
                          ": its states are per stage "
                          "(cleave_rt_program_stage)");
  if (index >= size)
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      std::string(which == TensorList::Input    ? "input"
                                  : which == TensorList::Output ? "output"
                                                                : "state") +
                          " index " + std::to_string(index) +
                          " is out of range");
  const plan::TensorInfo &t = which == TensorList::Input ? p.inputs[index]
                              : which == TensorList::Output
                                  ? p.outputs[index]
                                  : p.states[index].info;
  // A scalar has no dimensions to write (its arrays may be NULL).
  if (!t.shape.empty() && (!globalDims || !offsets))
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  const plan::Mesh &mesh = program->plan->mesh;
  if (static_cast<int64_t>(meshRank) >= mesh.worldSize())
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "rank " + std::to_string(meshRank) +
                          " is out of range (the mesh has " +
                          std::to_string(mesh.worldSize()) + " ranks)");
  std::vector<int64_t> g = plan::globalShape(t, mesh);
  std::vector<int64_t> o =
      plan::shardOffsets(t, mesh, static_cast<int64_t>(meshRank));
  std::copy(g.begin(), g.end(), globalDims);
  std::copy(o.begin(), o.end(), offsets);
  *sharded = !t.sharding.empty() && g != t.shape;
  return nullptr;
}

cleave_rt_status cleave_rt_program_input_shard(cleave_rt_program program,
                                               size_t index, size_t mesh_rank,
                                               int64_t *global_dims,
                                               int64_t *offsets,
                                               int *out_sharded) {
  return shardOf(program, TensorList::Input, index, mesh_rank, global_dims,
                 offsets, out_sharded);
}

cleave_rt_status cleave_rt_program_output_shard(cleave_rt_program program,
                                                size_t index, size_t mesh_rank,
                                                int64_t *global_dims,
                                                int64_t *offsets,
                                                int *out_sharded) {
  return shardOf(program, TensorList::Output, index, mesh_rank, global_dims,
                 offsets, out_sharded);
}

cleave_rt_status cleave_rt_program_state_shard(cleave_rt_program program,
                                               size_t index, size_t mesh_rank,
                                               int64_t *global_dims,
                                               int64_t *offsets,
                                               int *out_sharded) {
  return shardOf(program, TensorList::State, index, mesh_rank, global_dims,
                 offsets, out_sharded);
}

const char *cleave_rt_program_mesh(cleave_rt_program program) {
  return program ? program->meshString.c_str() : "";
}

size_t cleave_rt_program_world_size(cleave_rt_program program) {
  return program ? static_cast<size_t>(program->file->mesh.worldSize()) : 0;
}

/// Commands of `kind` in the plans the handle covers.
static size_t countCommands(cleave_rt_program program, plan::CommandKind kind) {
  if (!program)
    return 0;
  size_t n = 0;
  for (const plan::Plan *p : coveredPlans(*program))
    for (const auto &c : p->commands)
      n += c.kind == kind;
  return n;
}

size_t cleave_rt_program_collective_count(cleave_rt_program program) {
  return countCommands(program, plan::CommandKind::Collective);
}

size_t cleave_rt_program_marker_count(cleave_rt_program program) {
  return countCommands(program, plan::CommandKind::Marker);
}

const char *cleave_rt_program_metadata(cleave_rt_program program,
                                       const char *key) {
  if (!program || !key)
    return nullptr;
  auto find = [&](const plan::Plan &p) -> const char * {
    const std::string *value = plan::findMetadata(p, key);
    return value ? value->c_str() : nullptr;
  };
  // A stage's own metadata first, then the file's.
  const char *value = program->stage >= 0 ? find(*program->plan) : nullptr;
  return value ? value : find(*program->file);
}

size_t cleave_rt_program_stage_count(cleave_rt_program program) {
  return program && program->stage < 0 ? program->file->stages.size() : 0;
}

cleave_rt_status cleave_rt_program_stage_of_rank(cleave_rt_program program,
                                                 size_t mesh_rank,
                                                 size_t *out_stage) {
  if (!program || !out_stage)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  int64_t world = program->file->mesh.worldSize();
  if (static_cast<int64_t>(mesh_rank) >= world)
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "rank " + std::to_string(mesh_rank) +
                          " is out of range (the mesh has " +
                          std::to_string(world) + " ranks)");
  *out_stage = static_cast<size_t>(
      plan::stageOfRank(*program->file, static_cast<int64_t>(mesh_rank)));
  return nullptr;
}

cleave_rt_status cleave_rt_program_stage(cleave_rt_program program,
                                         size_t mesh_rank,
                                         cleave_rt_program *out_stage) {
  if (!program || !out_stage)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  PlanRef ignored;
  CLEAVE_RT_RETURN_IF_ERROR(
      planForRank(program, static_cast<int64_t>(mesh_rank), &ignored));
  int64_t stage =
      program->file->isPipelined()
          ? plan::stageOfRank(*program->file, static_cast<int64_t>(mesh_rank))
          : -1;
  *out_stage = makeHandle(program->file, stage);
  return nullptr;
}

cleave_rt_status cleave_rt_program_stage_at(cleave_rt_program program,
                                            size_t stage,
                                            cleave_rt_program *out_stage) {
  if (!program || !out_stage)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  const plan::Plan &file = *program->file;
  if (!file.isPipelined()) {
    if (stage != 0)
      return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                        "stage " + std::to_string(stage) +
                            " is out of range (the plan is not pipelined: "
                            "its one stage is itself)");
    *out_stage = makeHandle(program->file, -1);
    return nullptr;
  }
  if (stage >= file.stages.size())
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "stage " + std::to_string(stage) +
                          " is out of range (the plan has " +
                          std::to_string(file.stages.size()) + " stages)");
  *out_stage = makeHandle(program->file, static_cast<int64_t>(stage));
  return nullptr;
}

size_t cleave_rt_program_stage_index(cleave_rt_program program) {
  return program && program->stage >= 0 ? static_cast<size_t>(program->stage)
                                        : 0;
}

const char *cleave_rt_dtype_name(uint32_t dtype) {
  return plan::dtypeName(static_cast<plan::DType>(dtype));
}

size_t cleave_rt_dtype_size(uint32_t dtype) {
  return plan::dtypeSize(static_cast<plan::DType>(dtype));
}

size_t cleave_rt_program_state_count(cleave_rt_program program) {
  return program ? program->stateNames.size() : 0;
}

/// Refuses the state queries of a whole pipelined file.
static cleave_rt_status statesPerStage(cleave_rt_program program) {
  if (!program->wholePipeline())
    return nullptr;
  return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                    describePipeline(*program->file) +
                        ": its states are per stage (cleave_rt_program_stage)");
}

cleave_rt_status
cleave_rt_program_state_desc(cleave_rt_program program, size_t index,
                             cleave_rt_state_desc_t *out_desc) {
  if (!program || !out_desc)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  CLEAVE_RT_RETURN_IF_ERROR(statesPerStage(program));
  const auto &states = program->plan->states;
  CLEAVE_RT_RETURN_IF_ERROR(checkPlanIndex("state", index, states.size()));
  const plan::StateTensor &st = states[index];
  describe(st.info, &out_desc->tensor);
  out_desc->kind = static_cast<cleave_rt_state_kind_t>(st.kind);
  out_desc->parameter = st.parameter.c_str();
  out_desc->slot = st.slot.c_str();
  out_desc->global_name = program->stateNames[index].c_str();
  out_desc->sharded = !st.info.sharding.empty();
  return nullptr;
}

cleave_rt_status cleave_rt_program_state_replica(cleave_rt_program program,
                                                 size_t index, size_t mesh_rank,
                                                 int64_t *out_replicas,
                                                 int64_t *out_replica) {
  if (!program || !out_replicas || !out_replica)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  CLEAVE_RT_RETURN_IF_ERROR(statesPerStage(program));
  const auto &states = program->plan->states;
  CLEAVE_RT_RETURN_IF_ERROR(checkPlanIndex("state", index, states.size()));
  const plan::Mesh &mesh = program->file->mesh;
  if (static_cast<int64_t>(mesh_rank) >= mesh.worldSize())
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "rank " + std::to_string(mesh_rank) +
                          " is out of range (the mesh has " +
                          std::to_string(mesh.worldSize()) + " ranks)");
  const std::vector<uint32_t> &axes = states[index].varyingAxes;
  *out_replicas = 1;
  *out_replica = 0;
  if (axes.empty())
    return nullptr;
  plan::Group g = plan::groupOf(mesh, axes, static_cast<int64_t>(mesh_rank));
  *out_replicas = static_cast<int64_t>(g.ranks.size());
  *out_replica = g.index;
  return nullptr;
}

size_t cleave_rt_program_entry_count(cleave_rt_program program) {
  return program && program->entry < 0 ? program->file->entries.size() : 0;
}

cleave_rt_status cleave_rt_program_entry(cleave_rt_program program,
                                         const char *name,
                                         cleave_rt_program *out_entry) {
  if (!program || !name || !out_entry)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  const auto &entries = program->file->entries;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].entryName == name) {
      *out_entry = makeHandle(program->file, -1, static_cast<int64_t>(i));
      return nullptr;
    }
  return makeStatus(CLEAVE_RT_NOT_FOUND,
                    std::string("the plan has no entry '") + name + "'");
}

cleave_rt_status cleave_rt_program_find_state(cleave_rt_program program,
                                              const char *global_name,
                                              size_t *out_index) {
  if (!program || !out_index || !global_name)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  CLEAVE_RT_RETURN_IF_ERROR(statesPerStage(program));
  const auto &names = program->stateNames;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == global_name) {
      *out_index = i;
      return nullptr;
    }
  return makeStatus(CLEAVE_RT_NOT_FOUND, "the plan has no state tensor '" +
                                             std::string(global_name) + "'");
}

cleave_rt_status
cleave_rt_program_training_info(cleave_rt_program program,
                                cleave_rt_training_info_t *out_info) {
  if (!program || !out_info)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  const plan::TrainingInfo &t = program->plan->training;
  cleave_rt_training_info_t info;
  info.enabled = t.enabled ? 1 : 0;
  info.optimizer = t.optimizer.c_str();
  info.lr_input = t.lrInput;
  info.step_input = t.stepInput;
  info.loss_output = t.lossOutput;
  info.grad_norm_output = t.gradNormOutput;
  info.schedule = static_cast<cleave_rt_lr_schedule_t>(t.schedule);
  info.base_lr = t.baseLR;
  info.min_lr = t.minLR;
  info.warmup_steps = t.warmupSteps;
  info.total_steps = t.totalSteps;
  info.reference_batch = t.referenceBatch;
  info.batch_size = t.batchSize;
  info.sequence_length = t.sequenceLength;
  info.data_input_count = t.dataInputs.size();
  info.data_inputs = t.dataInputs.data();
  info.sync_every = t.syncEvery;
  *out_info = info;
  return nullptr;
}

double cleave_rt_learning_rate(const cleave_rt_training_info_t *info,
                               int64_t step, int64_t global_batch) {
  if (!info)
    return 0.0;
  plan::TrainingInfo t;
  t.schedule = static_cast<plan::LRSchedule>(info->schedule);
  t.baseLR = info->base_lr;
  t.minLR = info->min_lr;
  t.warmupSteps = info->warmup_steps;
  t.totalSteps = info->total_steps;
  t.referenceBatch = info->reference_batch;
  return learningRate(t, step, global_batch);
}

} // extern "C"
