//===- TrainingLoop.cpp - The training loop, a step at a time -------------===//
//
// Each step: fill the data inputs from the dataset, the learning rate and the
// step number, run the plan (which updates the parameters and optimizer state
// in place), read the loss and the gradient norm, log, and every K steps save
// a checkpoint. Batches depend only on (seed, step), so a resumed run
// reproduces an uninterrupted one bit for bit. At the end: the exports
// (safetensors, ONNX). Opening and resuming are in TrainingOpen.cpp.
//
//===----------------------------------------------------------------------===//

#include "TrainerImpl.h"
#include "TrainingSupport.h"

#include "cleave/CommandProfile.h"
#include "cleave/ExitCodes.h"
#include "cleave/TrainingLoop.h"

#include <csignal>
#include <thread>

#include "cleave/Checkpoint.h"
#include "cleave/Data.h"
#include "cleave/FileUtil.h"
#include "cleave/Json.h"
#include "cleave/MemoryReport.h"
#include "cleave/OnnxExport.h"
#include "cleave/PipelineTrace.h"
#include "cleave/TensorFile.h"
#include "cleave/cleave_rt.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <unistd.h>
#include <utility>

namespace cleave::training {

using namespace cleave::plan;

/// Writes the source ONNX model with the trained parameters; returns an exit
/// code on failure, -1 on success.
static int exportOnnx(const std::string &path, const std::string &sourceModel,
                      cleave_rt_program program, const UntiedParameters &untied,
                      const FoldedParameters &folded,
                      const std::vector<checkpoint::StateRecord> &records) {
  std::string source = sourceModel;
  if (source.empty()) {
    const char *recorded =
        cleave_rt_program_metadata(program, plan::meta::kSourceModel.name);
    if (!recorded || !*recorded)
      return fail("--export-onnx: the plan does not record its source model; "
                  "name it with --onnx-model FILE");
    source = recorded;
  }
  std::vector<uint8_t> model, exported;
  std::string err;
  if (!readWholeFile(source, &model, &err))
    return fail("--export-onnx: cannot read the source model '" + source +
                "': " + err);
  std::vector<onnxexport::Weight> weights;
  // The transposed copies of parameters made again from them (their
  // bytes live until the export is written).
  std::vector<std::vector<uint8_t>> transposed;
  transposed.reserve(folded.size());
  for (const checkpoint::StateRecord &r : records) {
    if (r.kind != StateKind::Parameter && r.kind != StateKind::Buffer)
      continue;
    if (auto it = folded.find(r.name); it != folded.end()) {
      size_t elem = r.shape.size() == 2 && r.shape[0] * r.shape[1] > 0
                        ? r.data.size() / (r.shape[0] * r.shape[1])
                        : 0;
      if (!elem)
        return fail("--export-onnx: parameter '" + r.name +
                    "' is recorded as a transposed copy, but it is not a "
                    "matrix");
      int64_t rows = r.shape[0], cols = r.shape[1];
      std::vector<uint8_t> &t = transposed.emplace_back(r.data.size());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          std::memcpy(t.data() + (j * rows + i) * elem,
                      r.data.data() + (i * cols + j) * elem, elem);
      onnxexport::Weight copy;
      copy.name = it->second.copy;
      copy.dtype = static_cast<uint32_t>(r.dtype);
      copy.shape = {cols, rows};
      copy.data = t.data();
      copy.size = t.size();
      weights.push_back(std::move(copy));
      if (!it->second.inSource)
        continue;
    }
    onnxexport::Weight w;
    w.name = r.name;
    w.dtype = static_cast<uint32_t>(r.dtype);
    w.shape = r.shape;
    w.data = r.data.data();
    w.size = r.data.size();
    if (auto it = untied.find(r.name); it != untied.end()) {
      w.copyOf = it->second.from;
      w.node = it->second.node;
    }
    weights.push_back(std::move(w));
  }
  if (!onnxexport::replaceInitializers(model, weights, &exported, &err))
    return fail("--export-onnx: cannot update '" + source + "': " + err);
  if (!writeFileAtomically(path, exported.data(), exported.size(), &err))
    return fail("--export-onnx: cannot write '" + path + "': " + err);
  std::fprintf(stderr, "%s: wrote the trained model '%s'\n",
               programName().c_str(), path.c_str());
  return -1;
}

//===----------------------------------------------------------------------===//
// Trainer: the training loop, a step at a time
//===----------------------------------------------------------------------===//

Trainer::Trainer() : impl(std::make_unique<Impl>()) {}
Trainer::~Trainer() = default;

int Trainer::open(const TrainOptions &o, cleave_rt_program file,
                  const std::string &backend, const RankContext &ctx) {
  impl->o = o;
  std::string err;
  if (!resolveAutoResume(&impl->o, &err))
    return fail(err);
  impl->file = file;
  impl->backend = backend;
  impl->ctx = ctx;
  return impl->open();
}

const std::vector<data::InputSpec> &Trainer::dataInputs() const {
  return impl->specs;
}
int64_t Trainer::stepsDone() const { return impl->stepsDone; }
uint64_t Trainer::seed() const { return impl->seed; }
void Trainer::setTotalSteps(long steps) { impl->o.steps = steps; }
cleave_rt_executor Trainer::executor() const { return impl->exec; }
cleave_rt_program Trainer::program() const { return impl->program; }

int Trainer::step(const std::vector<const void *> *batch, StepMetrics *m) {
  return impl->step(batch, m);
}
int Trainer::finish() { return impl->finish(); }

int Trainer::saveCheckpoint(const std::string &dir, std::string *path) {
  Impl &t = *impl;
  // Not beside an --async-checkpoint save, which may be of the same step.
  if (t.asyncSave)
    if (int rc = t.asyncSave->wait(); rc >= 0)
      return rc;
  checkpoint::Checkpoint c;
  c.step = t.stepsDone;
  c.seed = t.seed;
  c.optimizer = t.info.optimizer;
  c.samplesConsumed = t.stepsDone * t.batch;
  return saveSharded(t.exec, t.states, t.ctx, dir, c, path);
}

int Trainer::snapshot(std::vector<checkpoint::StateRecord> *records) {
  return training::snapshot(impl->exec, impl->states, impl->ctx, records);
}

// --slow-rank R:F: rank R sleeps F - 1 times the time since `start` (the
// run it just finished took), so its runs take F times as long.
void Trainer::Impl::straggle(std::chrono::steady_clock::time_point start) {
  if (ctx.rank != o.slowRank || !(o.slowFactor > 1.0))
    return;
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::this_thread::sleep_for(took * (o.slowFactor - 1.0));
}

// Copies each borrowed state between the step's executor and the sync
// entry's, into the entry (toSync) or back.
int Trainer::Impl::copySyncStates(bool toSync) {
  for (auto [mine, theirs] : syncStates) {
    cleave_rt_state_desc_t d;
    TRY(cleave_rt_program_state_desc(syncProgram, theirs, &d));
    syncBytes.resize(d.tensor.byte_size);
    if (toSync) {
      TRY(cleave_rt_executor_read_state(exec, mine, syncBytes.data(),
                                        syncBytes.size()));
      TRY(cleave_rt_executor_write_state(syncExec, theirs, syncBytes.data(),
                                         syncBytes.size()));
    } else {
      TRY(cleave_rt_executor_read_state(syncExec, theirs, syncBytes.data(),
                                        syncBytes.size()));
      TRY(cleave_rt_executor_write_state(exec, mine, syncBytes.data(),
                                         syncBytes.size()));
    }
  }
  return -1;
}

int Trainer::Impl::runSync() {
  auto start = std::chrono::steady_clock::now();
  if (int rc = copySyncStates(true); rc >= 0)
    return rc;
  TRY(cleave_rt_executor_run(syncExec));
  if (int rc = copySyncStates(false); rc >= 0)
    return rc;
  straggle(start);
  return -1;
}

int Trainer::Impl::checkRanges(const std::vector<const void *> &batch) {
  for (size_t k = 0; k < specs.size(); ++k) {
    const data::InputSpec &s = specs[k];
    size_t n = 1;
    for (int64_t d : s.shape)
      n *= static_cast<size_t>(d);
    int64_t i = data::findOutsideRange(s.range, s.dtype, batch[k], n);
    if (i >= 0)
      return fail("step " + std::to_string(stepsDone + 1) + ": data input '" +
                  s.name + "' " +
                  data::describeOutside(
                      s.range, data::integerAt(s.dtype, batch[k], i),
                      "element " + std::to_string(i) + " of its batch"));
  }
  return -1;
}

/// Sets the data inputs: from the dataset, or from `given` (global
/// tensors, one per data input); a sharded input gets this rank's shard.
int Trainer::Impl::setBatch(const std::vector<const void *> *given) {
  if (given) {
    if (given->size() != specs.size())
      return fail("a batch needs " + std::to_string(specs.size()) +
                  " data inputs, got " + std::to_string(given->size()));
  } else if (dataset) {
    dataset->fill(stepsDone, &batchData);
  } else {
    if (specs.empty())
      return -1;
    return fail("no data for step " + std::to_string(stepsDone + 1) +
                ": the trainer has no dataset, so every step needs a batch");
  }
  std::vector<const void *> whole(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    whole[i] = given ? (*given)[i] : batchData[i].data();
  if (int rc = checkRanges(whole); rc >= 0)
    return rc;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Shard &sh = shards[i];
    const void *global = whole[i];
    size_t globalBytes = dtypeSize(specs[i].dtype);
    for (int64_t d : specs[i].shape)
      globalBytes *= static_cast<size_t>(d);
    if (!sh.sharded) {
      TRY(cleave_rt_executor_set_input(exec, info.data_inputs[i], global,
                                       globalBytes));
      continue;
    }
    shardData.resize(sh.bytes);
    plan::copyShard(specs[i].shape, sh.local, sh.offsets,
                    dtypeSize(specs[i].dtype),
                    // Read only (toGlobal false).
                    const_cast<uint8_t *>(static_cast<const uint8_t *>(global)),
                    shardData.data(),
                    /*toGlobal=*/false);
    TRY(cleave_rt_executor_set_input(exec, info.data_inputs[i],
                                     shardData.data(), shardData.size()));
  }
  return -1;
}

namespace {
/// A step's moe.expert_load (routers x experts): the rows routed, and the
/// worst expert's load against its router's mean (1 is even).
struct ExpertLoad {
  double routed = 0, worst = 0;
};
ExpertLoad expertLoadOf(const StepMetrics::Metric &metric) {
  ExpertLoad load;
  int64_t experts = metric.shape[1];
  for (size_t r = 0; r + experts <= metric.values.size(); r += experts) {
    double sum = 0, max = 0;
    for (int64_t e = 0; e < experts; ++e) {
      sum += metric.values[r + e];
      max = std::max(max, metric.values[r + e]);
    }
    load.routed += sum;
    if (sum > 0)
      load.worst = std::max(load.worst, max / (sum / double(experts)));
  }
  return load;
}
bool isExpertLoad(const StepMetrics::Metric &metric) {
  return metric.name == "moe.expert_load" && metric.shape.size() == 2 &&
         metric.shape[1] > 0;
}
} // namespace

/// The metrics' part of the log line: the experts' worst load against
/// their mean over the routers (1 is even), and the rows dropped at
/// capacity with their share of the routed rows; other scalars by name.
static void printMetrics(const std::vector<StepMetrics::Metric> &metrics) {
  double routed = 0;
  for (const StepMetrics::Metric &metric : metrics) {
    if (isExpertLoad(metric)) {
      ExpertLoad load = expertLoadOf(metric);
      routed += load.routed;
      std::printf(" | expert load max/mean %.2f", load.worst);
    } else if (metric.name == "moe.dropped_rows" && metric.shape.empty()) {
      std::printf(" | dropped %.0f", metric.values.front());
      if (routed > 0)
        std::printf(" (%.1f%%)", 100.0 * metric.values.front() / routed);
    } else if (metric.shape.empty()) {
      std::printf(" | %s %.4g", metric.name.c_str(), metric.values.front());
    }
  }
}

void Trainer::Impl::addExpertTotals(const StepMetrics &m) {
  ExpertTotals &t = expertTotals;
  bool counted = false;
  for (const StepMetrics::Metric &metric : m.metrics) {
    if (isExpertLoad(metric)) {
      ExpertLoad load = expertLoadOf(metric);
      t.routed += load.routed;
      if (load.worst > t.worst) {
        t.worst = load.worst;
        t.worstStep = m.step;
      }
      counted = true;
    } else if (metric.name == "moe.dropped_rows" && metric.shape.empty()) {
      t.dropped += metric.values.front();
      t.capacity = true;
    }
  }
  t.steps += counted;
}

/// The step's log line (stdout) and JSON record, on rank 0.
void Trainer::Impl::log(const StepMetrics &m) {
  int stepWidth = std::max<int>(6, std::to_string(o.steps).size());
  std::string total = o.steps >= 0 ? "/" + std::to_string(o.steps) : "";
  if (progress)
    std::fprintf(stderr, "\r\033[K");
  std::printf(" step %*" PRId64 "%s | loss %.4f | lr %.3e", stepWidth, m.step,
              total.c_str(), m.loss, m.lr);
  if (m.hasGradNorm)
    std::printf(" | grad norm %.3f", m.gradNorm);
  printMetrics(m.metrics);
  std::printf(" | %.0f %s/s | %.1f ms/step | peak mem %.1f MiB\n", m.rate,
              tokenModel ? "tokens" : "samples", m.stepMs,
              static_cast<double>(peak) / (1024.0 * 1024.0));
  std::fflush(stdout);
  if (!jsonLog)
    return;
  json::Value record = {{"step", m.step},
                        {"loss", json::number(m.loss, "%.9g")}};
  if (!std::isfinite(m.loss))
    record["loss_nonfinite"] = std::isnan(m.loss) ? "nan" : "inf";
  record["lr"] = json::number(m.lr, "%.17g");
  if (m.hasGradNorm)
    record["grad_norm"] = json::number(m.gradNorm, "%.9g");
  if (m.hasLossScale) {
    record["loss_scale"] = json::number(m.lossScale, "%.9g");
    record["skipped"] = m.skipped;
  }
  for (const StepMetrics::Metric &metric : m.metrics) {
    // Scalars as numbers, [rows, columns] as nested arrays.
    auto number = [](double v) { return json::number(v, "%.9g"); };
    if (metric.shape.empty()) {
      record[metric.name] = number(metric.values.front());
      continue;
    }
    int64_t columns = metric.shape.back();
    auto rowOf = [&](size_t first) {
      json::Value row = json::Value::array();
      for (int64_t c = 0; c < columns; ++c)
        row.push_back(number(metric.values[first + c]));
      return row;
    };
    json::Value rows = json::Value::array();
    if (metric.shape.size() == 1)
      rows = rowOf(0);
    else
      for (size_t r = 0; r + columns <= metric.values.size(); r += columns)
        rows.push_back(rowOf(r));
    record[metric.name] = std::move(rows);
  }
  record[tokenModel ? "tokens_per_s" : "samples_per_s"] =
      json::number(m.rate, "%.1f");
  record["step_ms"] = json::number(m.stepMs, "%.3f");
  record["peak_bytes"] = peak;
  std::string line = json::dump(record) + "\n";
  std::fputs(line.c_str(), jsonLog.get());
  std::fflush(jsonLog.get());
}

int Trainer::Impl::step(const std::vector<const void *> *given,
                        StepMetrics *out) {
  int64_t step = stepsDone;
  // --inject-fault: the faults of the start of this step on this rank.
  for (const InjectedFault &f : o.faults) {
    bool atStart = f.kind == InjectedFault::Kind::Crash ||
                   f.kind == InjectedFault::Kind::Hang ||
                   f.kind == InjectedFault::Kind::Stop ||
                   f.kind == InjectedFault::Kind::Slow;
    if (!atStart || f.rank != ctx.rank || f.step != step + 1 ||
        !claimInjectedFault(f))
      continue;
    // A straggler stays well within the communication timeout.
    double timeout = ctx.comm ? cleave_rt_communicator_timeout(ctx.comm) : 2;
    if (int rc = fireStepFault(f, ctx, std::min(1.0, timeout / 2)); rc >= 0)
      return rc;
  }
  // A background checkpoint write that failed ends the run.
  if (asyncSave)
    if (int rc = asyncSave->poll(); rc >= 0)
      return rc;
  auto t0 = std::chrono::steady_clock::now();
  if (int rc = setBatch(given); rc >= 0)
    return rc;
  double lr = cleave_rt_learning_rate(&info, step, batch);
  float lrF = static_cast<float>(lr), stepF = static_cast<float>(step);
  TRY(cleave_rt_executor_set_input(exec, info.lr_input, &lrF, 4));
  if (info.step_input >= 0)
    TRY(cleave_rt_executor_set_input(exec, info.step_input, &stepF, 4));
  bool last = step + 1 == o.steps;
  // --trace: the markers of the last step.
  if (!o.tracePath.empty() && last)
    TRY(cleave_rt_executor_set_tracing(exec, 1));
  // --measure-memory: what the last step writes of the arena.
  if (o.measureMemory && last)
    TRY(cleave_rt_executor_measure_memory(exec, 1));
  // --profile: every step after the first (which warms the caches), or the
  // only one.
  if (o.profile && (step == firstStep + 1 || (step == firstStep && last)))
    TRY(cleave_rt_executor_set_profiling(exec, 1));
  auto runStart = std::chrono::steady_clock::now();
  TRY(cleave_rt_executor_run(exec));
  straggle(runStart);
  if (info.sync_every > 0 && (step + 1) % info.sync_every == 0)
    if (int rc = runSync(); rc >= 0)
      return rc;
  stepsDone = step + 1;

  StepMetrics m;
  m.step = stepsDone;
  m.lr = lr;
  m.tokenModel = tokenModel;
  m.peakBytes = peak;
  const void *p;
  size_t n;
  float loss = 0, gradNorm = 0;
  TRY(cleave_rt_executor_output(exec, info.loss_output, &p, &n));
  std::memcpy(&loss, p, 4);
  m.loss = loss;
  if (info.grad_norm_output >= 0) {
    TRY(cleave_rt_executor_output(exec, info.grad_norm_output, &p, &n));
    std::memcpy(&gradNorm, p, 4);
    m.gradNorm = gradNorm;
    m.hasGradNorm = true;
  }
  for (const MetricOutput &metric : metricOutputs) {
    TRY(cleave_rt_executor_output(exec, metric.index, &p, &n));
    StepMetrics::Metric &out = m.metrics.emplace_back();
    out.name = metric.name;
    out.shape = metric.shape;
    std::vector<float> values(n / 4);
    std::memcpy(values.data(), p, values.size() * 4);
    out.values.assign(values.begin(), values.end());
  }
  if (foundInfOutput != SIZE_MAX && lossScaleOutput != SIZE_MAX) {
    float foundInf = 0, lossScale = 0;
    TRY(cleave_rt_executor_output(exec, foundInfOutput, &p, &n));
    std::memcpy(&foundInf, p, 4);
    TRY(cleave_rt_executor_output(exec, lossScaleOutput, &p, &n));
    std::memcpy(&lossScale, p, 4);
    m.hasLossScale = true;
    m.lossScale = lossScale;
    m.skipped = foundInf != 0;
    if (m.skipped && isLeader()) {
      int stepWidth = std::max<int>(6, std::to_string(o.steps).size());
      if (progress)
        std::fprintf(stderr, "\r\033[K");
      std::printf(" step %*" PRId64 "/%ld | skipped step (overflow), loss "
                  "scale %g\n",
                  stepWidth, m.step, o.steps, lossScale);
    }
  }
  m.stepMs = std::chrono::duration<double, std::milli>(
                 std::chrono::steady_clock::now() - t0)
                 .count();
  m.rate = m.stepMs > 0 ? perStep / (m.stepMs / 1000.0) : 0;
  if (!std::isfinite(m.loss) && !m.skipped) {
    ++nonFinite;
    warn("step " + std::to_string(m.step) + ": loss is " +
         (std::isnan(m.loss) ? "NaN" : "infinite"));
  }
  addExpertTotals(m);
  if (isLeader() && o.logEvery > 0 &&
      (m.step % o.logEvery == 0 || m.step == o.steps))
    log(m);
  if (progress && o.steps > 0) {
    int width = 30;
    int filled = static_cast<int>(width * m.step / std::max<long>(1, o.steps));
    std::fprintf(stderr, "\r[%.*s%*s] %" PRId64 "/%ld", filled,
                 "==============================", width - filled, "", m.step,
                 o.steps);
    std::fflush(stderr);
  }
  // Every rank writes the shards it owns into one file that rank 0 laid
  // out and completes (one rank: all of it).
  if (o.saveEvery > 0 && m.step % o.saveEvery == 0) {
    checkpoint::Checkpoint c;
    c.step = m.step;
    c.seed = seed;
    c.optimizer = info.optimizer;
    c.samplesConsumed = m.step * batch;
    // --async-checkpoint: rank 0's writer says when the checkpoint is saved.
    if (asyncSave) {
      if (int rc = asyncSave->save(exec, states, ctx, o.checkpointDir, c);
          rc >= 0)
        return rc;
    } else {
      std::string path;
      if (int rc = saveSharded(exec, states, ctx, o.checkpointDir, c, &path);
          rc >= 0)
        return rc;
      if (isLeader()) {
        if (progress)
          std::fprintf(stderr, "\r\033[K");
        std::fprintf(stderr, "%s: saved checkpoint '%s'\n",
                     programName().c_str(), path.c_str());
      }
    }
  }
  for (const InjectedFault &f : o.faults)
    if (f.kind == InjectedFault::Kind::CorruptCheckpoint &&
        f.rank == ctx.rank && f.step == m.step && claimInjectedFault(f))
      if (int rc = corruptNewestCheckpoint(f); rc >= 0)
        return rc;
  if (out)
    *out = m;
  return -1;
}

/// --inject-fault ...,kind=corrupt-checkpoint: damages the newest
/// checkpoint at or before the fault's step (after the save in flight).
int Trainer::Impl::corruptNewestCheckpoint(const InjectedFault &f) {
  if (asyncSave)
    if (int rc = asyncSave->wait(); rc >= 0)
      return rc;
  std::string damaged, err;
  if (!corruptCheckpoint(o.checkpointDir, f.step, &damaged, &err))
    return fail("--inject-fault ...,kind=corrupt-checkpoint: " + err);
  std::fprintf(stderr,
               "%s: %sinjected fault at step %lld: "
               "corrupt-checkpoint (damaged '%s')\n",
               programName().c_str(), rankPrefix().c_str(),
               static_cast<long long>(f.step), damaged.c_str());
  return -1;
}

int Trainer::Impl::finish() {
  if (progress)
    std::fprintf(stderr, "\r\033[K");
  // The checkpoint in flight is complete (or its failure reported) first.
  if (asyncSave)
    if (int rc = asyncSave->wait(); rc >= 0)
      return rc;
  bool ran = stepsDone > firstStep;
  if (!ran && o.steps >= 0)
    warn("nothing to do: already at step " + std::to_string(firstStep) +
         " of --steps " + std::to_string(o.steps));
  if (nonFinite)
    warn(std::to_string(nonFinite) + " step(s) had a non-finite loss");
  // The run's expert figures: what the compile's --report cannot know.
  if (const ExpertTotals &t = expertTotals; t.steps > 0 && isLeader()) {
    std::fprintf(stderr, "%s: experts over %" PRId64 " steps: %.0f routed rows",
                 programName().c_str(), t.steps, t.routed);
    if (t.capacity)
      std::fprintf(stderr, ", %.0f dropped past capacity (%.2f%%)", t.dropped,
                   t.routed > 0 ? 100.0 * t.dropped / t.routed : 0.0);
    std::fprintf(stderr,
                 "; worst expert load %.2f of the mean (step %" PRId64 ")\n",
                 t.worst, t.worstStep);
  }

  if (!o.outputDir.empty() && ran) {
    int rc = writeOutputs(program, exec, o.outputDir, ctx);
    if (rc >= 0)
      return rc;
  }
  if (!o.tracePath.empty()) {
    if (!ran) {
      warn("--trace: no step ran, so no trace is written");
    } else {
      int rc = writePipelineTrace(file, exec, o.tracePath, ctx);
      if (rc >= 0)
        return rc;
    }
  }
  if (o.profile && ran && ctx.rank == 0) {
    int rc = printProfile(exec, "step");
    if (rc >= 0)
      return rc;
  }
  if (!o.profileJson.empty() && ran) {
    int rc = writeProfileJson(exec, "step",
                              profileJsonPath(o.profileJson, ctx.rank));
    if (rc >= 0)
      return rc;
  }
  if (o.measureMemory) {
    if (!ran) {
      warn("--measure-memory: no step ran, so nothing was measured");
    } else {
      int rc = reportMemory(file, exec, "step", ctx);
      if (rc >= 0)
        return rc;
    }
  }
  return exportParameters(o.exportPath, o.exportOnnx, o.onnxModel);
}

int Trainer::exportParameters(const std::string &safetensorsPath,
                              const std::string &onnxPath,
                              const std::string &sourceModel) {
  return impl->exportParameters(safetensorsPath, onnxPath, sourceModel);
}

int Trainer::Impl::exportParameters(const std::string &safetensorsPath,
                                    const std::string &onnxPath,
                                    const std::string &sourceModel) {
  if (safetensorsPath.empty() && onnxPath.empty())
    return -1;
  if (!onnxPath.empty())
    if (int rc = checkOnnxExportable(untied); rc >= 0)
      return rc;
  std::vector<checkpoint::StateRecord> records;
  int rc = training::snapshot(exec, states, ctx, &records);
  if (rc >= 0)
    return rc;
  if (!isLeader())
    return -1;
  if (!safetensorsPath.empty()) {
    std::vector<safetensors::HostTensorRef> refs;
    for (const checkpoint::StateRecord &r : records)
      if (r.kind == StateKind::Parameter || r.kind == StateKind::Buffer)
        refs.push_back(
            {r.name, r.dtype, r.shape, r.data.data(), r.data.size()});
    std::string err;
    if (!checkpoint::writeSafetensorsFile(
            safetensorsPath, refs,
            {{"format", "pt"}, {"step", std::to_string(stepsDone)}}, &err))
      return fail("cannot export the parameters: " + err);
  }
  if (!onnxPath.empty())
    if (int rc =
            exportOnnx(onnxPath, sourceModel, program, untied, folded, records);
        rc >= 0)
      return rc;
  return -1;
}

static thread_local int64_t gLastStepsDone = 0;
int64_t lastStepsDone() { return gLastStepsDone; }

bool resolveAutoResume(TrainOptions *o, std::string *error) {
  if (o->resume != "auto")
    return true;
  if (o->checkpointDir.empty()) {
    *error = "--resume=auto resumes from --checkpoint-dir DIR: give it";
    return false;
  }
  o->resumeAuto = true;
  o->resume = checkpoint::hasCompleteCheckpoint(o->checkpointDir)
                  ? o->checkpointDir
                  : "";
  return true;
}

int runTraining(const TrainOptions &o, cleave_rt_program file,
                const std::string &backend, const RankContext &ctx) {
  if (o.steps < 0) {
    // Say what the plan is before asking for --steps.
    cleave_rt::Program stage;
    cleave_rt_training_info_t info;
    TRY(cleave_rt_program_stage(file, static_cast<size_t>(ctx.rank),
                                stage.out()));
    TRY(cleave_rt_program_training_info(stage, &info));
    if (info.enabled)
      return fail("this is a training plan: give --steps N");
  }
  Trainer trainer;
  takeLastStatusCode();
  gLastStepsDone = 0;
  if (int rc = trainer.open(o, file, backend, ctx); rc >= 0)
    return rc;
  // Once the ranks run, a communicator that reports a peer unavailable
  // (failed, exited, hung past the timeout, aborted) is a retryable end.
  auto retryable = [](int rc) {
    return rc == kExitError && takeLastStatusCode() == CLEAVE_RT_UNAVAILABLE
               ? kExitPeerFailure
               : rc;
  };
  while ((gLastStepsDone = trainer.stepsDone()) < o.steps)
    if (int rc = trainer.step(nullptr, nullptr); rc >= 0)
      return retryable(rc);
  int rc = trainer.finish();
  return rc >= 0 ? retryable(rc) : kExitOk;
}

} // namespace cleave::training
