//===- Executor.cpp - cleave_rt_executor_* functions ----------------------===//
//
// Device-independent checks and bookkeeping; the work is done by a Backend.
//
//===----------------------------------------------------------------------===//

#include "MemoryMeasure.h"
#include "Program.h"

#include <chrono>
#include <cstring>

using namespace cleave;
using namespace cleave::rt;

struct cleave_rt_executor_t {
  PlanRef plan;
  std::unique_ptr<Backend> backend;
  std::vector<bool> inputSet;
  std::string deviceInfo; ///< Filled on the first device_info call.
  /// cleave_rt_executor_measure_memory: the bytes each run poisons (empty
  /// when not measuring), and the last measured run's figures.
  bool measureMemory = false;
  std::vector<ByteRange> poisoned;
  bool measured = false;
  cleave_rt_memory_usage_t usage = {};
};

static std::string shapeString(const plan::TensorInfo &t) {
  std::string s = "[";
  for (size_t i = 0; i < t.shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(t.shape[i]);
  return s + "] " + plan::dtypeName(t.dtype);
}

int64_t cleave::rt::Backend::nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

extern "C" {

cleave_rt_status cleave_rt_executor_create(cleave_rt_program program,
                                           const char *backend,
                                           cleave_rt_executor *out_executor) {
  return cleave_rt_executor_create_ranked(program, backend, nullptr,
                                          out_executor);
}

cleave_rt_status
cleave_rt_executor_create_ranked(cleave_rt_program program, const char *backend,
                                 cleave_rt_communicator comm,
                                 cleave_rt_executor *out_executor) {
  if (!program || !out_executor)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "program and out_executor must not be NULL");
  const plan::Mesh &mesh = program->file->mesh;
  int64_t world = mesh.worldSize();
  Communicator *c = comm ? comm->impl.get() : nullptr;
  std::string ranks = std::to_string(world) + " ranks (cleave-run --ranks " +
                      std::to_string(world) + ", or mpirun -np " +
                      std::to_string(world) + ")";
  if (!c && world > 1 && program->file->isPipelined())
    return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                      describePipeline(*program->file) + ": run it on " +
                          ranks + ", each rank running its stage");
  if (!c && world > 1)
    return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                      "the plan is partitioned over mesh " + mesh.str() + " (" +
                          std::to_string(world) +
                          " ranks) and needs a communicator of " + ranks);
  if (c && c->worldSize() != world)
    return makeStatus(
        CLEAVE_RT_FAILED_PRECONDITION,
        "the plan's mesh " +
            (mesh.empty() ? std::string("(none: one rank)") : mesh.str()) +
            " has " + std::to_string(world) + " ranks but the " + c->name() +
            " world has " + std::to_string(c->worldSize()));
  // A pipelined plan: the rank's stage.
  PlanRef plan;
  CLEAVE_RT_RETURN_IF_ERROR(planForRank(program, c ? c->rank() : 0, &plan));
  std::unique_ptr<Backend> impl;
  CLEAVE_RT_RETURN_IF_ERROR(createBackend(backend ? backend : "", plan, c,
                                          &impl, program->file.get()));
  auto *exec = new cleave_rt_executor_t();
  exec->plan = plan;
  exec->backend = std::move(impl);
  exec->inputSet.assign(exec->plan->inputs.size(), false);
  *out_executor = exec;
  return nullptr;
}

void cleave_rt_executor_destroy(cleave_rt_executor executor) {
  delete executor;
}

cleave_rt_status cleave_rt_executor_set_input(cleave_rt_executor executor,
                                              size_t index, const void *data,
                                              size_t bytes) {
  if (!executor)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "executor is NULL");
  const auto &inputs = executor->plan->inputs;
  if (index >= inputs.size())
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "input index " + std::to_string(index) +
                          " is out of range (the plan has " +
                          std::to_string(inputs.size()) + " inputs)");
  const plan::TensorInfo &t = inputs[index];
  if (bytes != t.byteSize())
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "input " + std::to_string(index) + " '" + t.name +
                          "' expects " + std::to_string(t.byteSize()) +
                          " bytes (" + shapeString(t) + "), got " +
                          std::to_string(bytes));
  if (!data && bytes)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "input " + std::to_string(index) + " '" + t.name +
                          "': data is NULL");
  CLEAVE_RT_RETURN_IF_ERROR(executor->backend->writeTensor(t, data));
  executor->inputSet[index] = true;
  return nullptr;
}

cleave_rt_status cleave_rt_executor_run(cleave_rt_executor executor) {
  if (!executor)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "executor is NULL");
  for (size_t i = 0; i < executor->inputSet.size(); ++i)
    if (!executor->inputSet[i])
      return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                        "input " + std::to_string(i) + " '" +
                            executor->plan->inputs[i].name +
                            "' was not set before run");
  if (!executor->measureMemory)
    return executor->backend->run();
  uint8_t *arena = executor->backend->hostArena();
  poisonArena(arena, executor->poisoned);
  CLEAVE_RT_RETURN_IF_ERROR(executor->backend->run());
  measureArena(arena, *executor->plan, executor->poisoned, &executor->usage);
  executor->measured = true;
  return nullptr;
}

cleave_rt_status cleave_rt_executor_output(cleave_rt_executor executor,
                                           size_t index, const void **out_data,
                                           size_t *out_bytes) {
  if (!executor || !out_data || !out_bytes)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  const auto &outputs = executor->plan->outputs;
  if (index >= outputs.size())
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "output index " + std::to_string(index) +
                          " is out of range (the plan has " +
                          std::to_string(outputs.size()) + " outputs)");
  const void *data = nullptr;
  CLEAVE_RT_RETURN_IF_ERROR(
      executor->backend->readTensor(outputs[index], &data));
  *out_data = data;
  *out_bytes = outputs[index].byteSize();
  return nullptr;
}

uint64_t cleave_rt_executor_initial_bytes_read(cleave_rt_executor executor) {
  return executor ? executor->backend->initialBytesRead() : 0;
}

cleave_rt_status cleave_rt_executor_set_tracing(cleave_rt_executor executor,
                                                int enabled) {
  if (!executor)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "executor is NULL");
  if (enabled && !executor->backend->supportsTracing())
    return makeStatus(CLEAVE_RT_UNIMPLEMENTED,
                      std::string("the ") + executor->backend->name() +
                          " backend does not trace step markers");
  executor->backend->setTracing(enabled != 0);
  return nullptr;
}

cleave_rt_status
cleave_rt_executor_markers(cleave_rt_executor executor,
                           const cleave_rt_marker_record_t **out_records,
                           size_t *out_count, int64_t *out_run_start_ns) {
  if (!executor || !out_records || !out_count || !out_run_start_ns)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  const auto &markers = executor->backend->markers();
  *out_records = markers.data();
  *out_count = markers.size();
  *out_run_start_ns = executor->backend->runStartNs();
  return nullptr;
}

cleave_rt_status cleave_rt_executor_set_profiling(cleave_rt_executor executor,
                                                  int enabled) {
  if (!executor)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "executor is NULL");
  if (enabled && !executor->backend->supportsProfiling())
    return makeStatus(CLEAVE_RT_UNIMPLEMENTED,
                      std::string("the ") + executor->backend->name() +
                          " backend does not profile commands");
  executor->backend->setProfiling(enabled != 0);
  return nullptr;
}

cleave_rt_status
cleave_rt_executor_profile(cleave_rt_executor executor,
                           const cleave_rt_command_profile_t **out_records,
                           size_t *out_count, int64_t *out_runs) {
  if (!executor || !out_records || !out_count || !out_runs)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  const auto &records = executor->backend->profile();
  *out_records = records.data();
  *out_count = records.size();
  *out_runs = executor->backend->profiledRuns();
  return nullptr;
}

cleave_rt_status cleave_rt_executor_measure_memory(cleave_rt_executor executor,
                                                   int enabled) {
  if (!executor)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "executor is NULL");
  if (enabled && !executor->backend->hostArena())
    return makeStatus(CLEAVE_RT_UNIMPLEMENTED,
                      std::string("the ") + executor->backend->name() +
                          " backend's arena is in device memory; memory is "
                          "measured on the cpu backend");
  executor->measureMemory = enabled != 0;
  executor->poisoned.clear();
  if (enabled)
    executor->poisoned = poisonRanges(*executor->plan);
  return nullptr;
}

cleave_rt_status
cleave_rt_executor_memory_usage(cleave_rt_executor executor,
                                cleave_rt_memory_usage_t *out_usage) {
  if (!executor || !out_usage)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  if (!executor->measured)
    return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                      "no run of this executor was measured (call "
                      "cleave_rt_executor_measure_memory before a run)");
  *out_usage = executor->usage;
  return nullptr;
}

const char *cleave_rt_executor_device_info(cleave_rt_executor executor) {
  if (!executor)
    return "";
  if (executor->deviceInfo.empty())
    executor->deviceInfo = executor->backend->deviceInfo();
  return executor->deviceInfo.c_str();
}

/// Checks a state access; sets *out to the state's tensor.
static cleave_rt_status stateAccess(cleave_rt_executor executor, size_t index,
                                    const void *data, size_t bytes,
                                    const plan::TensorInfo **out) {
  if (!executor)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "executor is NULL");
  const auto &states = executor->plan->states;
  if (index >= states.size())
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "state index " + std::to_string(index) +
                          " is out of range (the plan has " +
                          std::to_string(states.size()) + " states)");
  const plan::TensorInfo &t = states[index].info;
  if (bytes != t.byteSize())
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "state " + std::to_string(index) + " '" +
                          states[index].globalName() + "' holds " +
                          std::to_string(t.byteSize()) + " bytes (" +
                          shapeString(t) + "), got " + std::to_string(bytes));
  if (!data && bytes)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "state " + std::to_string(index) + ": buffer is NULL");
  *out = &t;
  return nullptr;
}

cleave_rt_status cleave_rt_executor_read_state(cleave_rt_executor executor,
                                               size_t index, void *dst,
                                               size_t bytes) {
  const plan::TensorInfo *t = nullptr;
  CLEAVE_RT_RETURN_IF_ERROR(stateAccess(executor, index, dst, bytes, &t));
  return executor->backend->readTensorInto(*t, dst);
}

cleave_rt_status cleave_rt_executor_host_alloc(cleave_rt_executor executor,
                                               size_t bytes, void **out_data) {
  if (!executor || !out_data)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "executor and out_data must not be NULL");
  return executor->backend->allocHost(bytes, out_data);
}

void cleave_rt_executor_host_free(cleave_rt_executor executor, void *data) {
  if (executor && data)
    executor->backend->freeHost(data);
}

cleave_rt_status cleave_rt_executor_write_state(cleave_rt_executor executor,
                                                size_t index, const void *src,
                                                size_t bytes) {
  const plan::TensorInfo *t = nullptr;
  CLEAVE_RT_RETURN_IF_ERROR(stateAccess(executor, index, src, bytes, &t));
  return executor->backend->writeTensor(*t, src);
}

} // extern "C"
