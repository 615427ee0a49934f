//===- TrainerImpl.h - The state of a Trainer -------------------*- C++ -*-===//
//
// Internal to cleave_train: Trainer::Impl, shared by the files of the
// training loop: TrainingOpen.cpp (opening a trainer: its stage, data,
// executor, log, and resuming from a checkpoint) and TrainingLoop.cpp (the
// steps, their logs, checkpoints and the exports at the end).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINERIMPL_H
#define CLEAVE_RUNTIME_TRAINERIMPL_H

#include "AsyncCheckpoint.h"
#include "FaultInjection.h"
#include "TrainingSupport.h"

#include "cleave/Data.h"
#include "cleave/TrainingLoop.h"
#include "cleave/cleave_rt.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cleave::training {

/// A parameter cleave-compile --untie made: the initializer it was copied
/// from and the ONNX node that reads it.
struct UntiedParameter {
  std::string from, node;
};
using UntiedParameters = std::map<std::string, UntiedParameter>;

/// A parameter made again from a PyTorch export's transposed copy: the
/// initializer that holds the copy, and whether the file holds the
/// parameter itself too.
struct FoldedParameter {
  std::string copy;
  bool inSource = false;
};
using FoldedParameters = std::map<std::string, FoldedParameter>;

/// Reads the plan's `untied` metadata (a JSON array of {"name", "from",
/// "node"} objects).
bool readUntiedParameters(cleave_rt_program program, UntiedParameters *out,
                          std::string *error);

/// Parameters that --untie made go back into the ONNX model as new
/// initializers read by their node; one whose node is unknown cannot.
/// Returns an exit code on failure, -1 on success.
int checkOnnxExportable(const UntiedParameters &untied);

/// Reads the plan's `folded` metadata (a JSON array of {"name", "copy",
/// "in_source"} objects).
bool readFoldedParameters(cleave_rt_program program, FoldedParameters *out,
                          std::string *error);

struct Trainer::Impl {
  TrainOptions o;
  cleave_rt_program file = nullptr;
  std::string backend;
  RankContext ctx;

  // This rank's program: its stage of a pipelined plan. The file's other
  // stages matter only to checkpoints.
  cleave_rt::Program stage;
  cleave_rt_program program = nullptr;
  cleave_rt_training_info_t info;

  /// A data input: the global tensor the dataset makes, and the shard this
  /// rank feeds when it is sharded (over dp).
  struct Shard {
    bool sharded = false;
    std::vector<int64_t> local, offsets;
    size_t bytes = 0;
  };
  std::vector<data::InputSpec> specs;
  std::vector<Shard> shards;

  CheckpointLayout states;
  UntiedParameters untied;
  FoldedParameters folded;
  cleave_rt::Executor exec;
  // Local SGD / DiLoCo: the plan's sync entry runs after every
  // info.sync_every-th step on the states it borrows from the step.
  cleave_rt::Program syncProgram;
  cleave_rt::Executor syncExec;
  std::vector<std::pair<size_t, size_t>> syncStates; // (step's, entry's)
  std::vector<uint8_t> syncBytes;
  /// --async-checkpoint's writer (after the executors, so that it is
  /// joined and its host buffers freed before they are destroyed).
  std::unique_ptr<AsyncCheckpointer> asyncSave;

  uint64_t seed = 0;
  int64_t firstStep = 0, stepsDone = 0;
  std::unique_ptr<data::Dataset> dataset;
  std::unique_ptr<FILE, int (*)(FILE *)> jsonLog{
      nullptr, [](FILE *f) { return f ? std::fclose(f) : 0; }};
  int64_t batch = 1, perStep = 1;
  bool tokenModel = false, progress = false;
  uint64_t peak = 0;
  size_t foundInfOutput = SIZE_MAX, lossScaleOutput = SIZE_MAX;
  /// The outputs the plan names as metrics (meta::kMetricOutputs): name,
  /// index and shape.
  struct MetricOutput {
    std::string name;
    size_t index;
    std::vector<int64_t> shape;
  };
  std::vector<MetricOutput> metricOutputs;
  /// The experts' figures over the run, for its summary: the steps that
  /// had them, the routed rows (the loads' sum) and the rows dropped past
  /// capacity, and the worst step's worst expert against the mean.
  struct ExpertTotals {
    int64_t steps = 0, worstStep = 0;
    double routed = 0, dropped = 0, worst = 0;
    bool capacity = false;
  } expertTotals;
  /// Adds a step's metrics to expertTotals.
  void addExpertTotals(const StepMetrics &m);
  std::vector<std::vector<uint8_t>> batchData;
  std::vector<uint8_t> shardData;
  /// Checks each data input of `batch` against its range (specs[k].range).
  int checkRanges(const std::vector<const void *> &batch);
  long nonFinite = 0;

  int open();
  int openData();
  int resume();
  int runSync();
  int copySyncStates(bool toSync);
  void straggle(std::chrono::steady_clock::time_point start);
  int setBatch(const std::vector<const void *> *given);
  void log(const StepMetrics &m);
  int step(const std::vector<const void *> *given, StepMetrics *m);
  int corruptNewestCheckpoint(const InjectedFault &f);
  int finish();
  int exportParameters(const std::string &safetensorsPath,
                       const std::string &onnxPath,
                       const std::string &sourceModel);
};

} // namespace cleave::training

#endif // CLEAVE_RUNTIME_TRAINERIMPL_H
