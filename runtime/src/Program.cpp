//===- Program.cpp - cleave_rt_program_* functions ------------------------===//

#include "Program.h"

#include <algorithm>
#include "cleave/FileUtil.h"
#include "cleave/Training.h"

#include <cstring>
#include <set>

using namespace cleave;
using namespace cleave::rt;

static cleave_rt_status finishLoad(plan::Plan &&p,
                                   cleave_rt_program *out_program) {
  auto *program = new cleave_rt_program_t();
  std::set<std::string> files;
  for (const plan::Constant &c : p.constants) {
    program->constantBytes += c.data.size();
    if (!c.file.empty()) {
      plan::TensorInfo global = c.info;
      global.shape = plan::globalShape(c.info, p.mesh);
      program->referencedBytes += global.byteSize();
      files.insert(c.file);
    }
  }
  program->referencedFiles = files.size();
  for (const plan::StateTensor &st : p.states)
    program->stateNames.push_back(st.globalName());
  program->meshString = p.mesh.str();
  program->plan = std::make_shared<const plan::Plan>(std::move(p));
  *out_program = program;
  return nullptr;
}

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
                    std::string("the plan has no ") + kind + " named '" +
                        name + "' (its " + kind + "s: " +
                        (known.empty() ? "none" : known) + ")");
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

cleave_rt_status cleave_rt_program_input_desc(cleave_rt_program program,
                                              size_t index,
                                              cleave_rt_tensor_desc_t *out_desc) {
  if (!program || !out_desc)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  if (index >= program->plan->inputs.size())
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "input index " + std::to_string(index) +
                          " is out of range (the plan has " +
                          std::to_string(program->plan->inputs.size()) +
                          " inputs)");
  return describe(program->plan->inputs[index], out_desc);
}

cleave_rt_status
cleave_rt_program_output_desc(cleave_rt_program program, size_t index,
                              cleave_rt_tensor_desc_t *out_desc) {
  if (!program || !out_desc)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  if (index >= program->plan->outputs.size())
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "output index " + std::to_string(index) +
                          " is out of range (the plan has " +
                          std::to_string(program->plan->outputs.size()) +
                          " outputs)");
  return describe(program->plan->outputs[index], out_desc);
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
  return program ? program->plan->arenaBytes : 0;
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
  auto p = std::make_shared<plan::Plan>(*program->plan);
  for (plan::Constant &c : p->constants) {
    if (c.file.empty())
      continue;
    size_t slash = c.file.rfind('/');
    c.file = folder + "/" +
             (slash == std::string::npos ? c.file : c.file.substr(slash + 1));
  }
  program->plan = std::move(p);
  return nullptr;
}

cleave_rt_status
cleave_rt_program_skip_referenced_values(cleave_rt_program program) {
  if (!program)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  auto p = std::make_shared<plan::Plan>(*program->plan);
  for (plan::Constant &c : p->constants)
    c.file.clear(); // Neither data nor file: nothing to copy.
  program->plan = std::move(p);
  return nullptr;
}

size_t cleave_rt_program_command_count(cleave_rt_program program) {
  return program ? program->plan->commands.size() : 0;
}

const char *cleave_rt_program_target(cleave_rt_program program) {
  return program ? program->plan->target.c_str() : "";
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
  return program ? static_cast<size_t>(program->plan->mesh.worldSize()) : 0;
}

size_t cleave_rt_program_collective_count(cleave_rt_program program) {
  if (!program)
    return 0;
  size_t n = 0;
  for (const auto &c : program->plan->commands)
    n += c.kind == cleave::plan::CommandKind::Collective;
  return n;
}

const char *cleave_rt_program_metadata(cleave_rt_program program,
                                       const char *key) {
  if (!program || !key)
    return nullptr;
  for (const auto &kv : program->plan->metadata)
    if (kv.first == key)
      return kv.second.c_str();
  return nullptr;
}

const char *cleave_rt_dtype_name(uint32_t dtype) {
  return plan::dtypeName(static_cast<plan::DType>(dtype));
}

size_t cleave_rt_dtype_size(uint32_t dtype) {
  return plan::dtypeSize(static_cast<plan::DType>(dtype));
}

size_t cleave_rt_program_state_count(cleave_rt_program program) {
  return program ? program->plan->states.size() : 0;
}

cleave_rt_status cleave_rt_program_state_desc(cleave_rt_program program,
                                              size_t index,
                                              cleave_rt_state_desc_t *out_desc) {
  if (!program || !out_desc)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  const auto &states = program->plan->states;
  if (index >= states.size())
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "state index " + std::to_string(index) +
                          " is out of range (the plan has " +
                          std::to_string(states.size()) + " states)");
  const plan::StateTensor &st = states[index];
  describe(st.info, &out_desc->tensor);
  out_desc->kind = static_cast<cleave_rt_state_kind_t>(st.kind);
  out_desc->parameter = st.parameter.c_str();
  out_desc->slot = st.slot.c_str();
  out_desc->global_name = program->stateNames[index].c_str();
  out_desc->sharded = !st.info.sharding.empty();
  return nullptr;
}

cleave_rt_status cleave_rt_program_find_state(cleave_rt_program program,
                                              const char *global_name,
                                              size_t *out_index) {
  if (!program || !out_index || !global_name)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
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
