//===- CleaveModule.cpp - The cleave._cleave extension module -------------===//
//
// A thin binding over the functions the tools run: cleave::compile (with
// its option table, set from keyword arguments), the MLIR pass manager with
// every registered pass (cleave-opt), the runtime's C API (cleave-run) and
// the training loop's Trainer. The Python package `cleave` (cleave/*.py)
// builds its public API on these.
//
// Errors: every failure raises cleave._cleave.Error (re-exported as
// cleave.Error and its subclasses) carrying the message the tools print.
//
//===----------------------------------------------------------------------===//

#include "cleave/Compiler/Compile.h"
#include "cleave/InitAll.h"
#include "cleave/PlanFormat.h"
#include "cleave/TrainingLoop.h"
#include "cleave_rt.h"

#include "Bindings.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace nb = nanobind;
using namespace nb::literals;
using cleave_py::CleaveError;
using cleave_py::raise;
namespace train = cleave::training;

namespace {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// cleave._cleave.Error and its subclasses, by kind (the module's
/// attributes keep them alive).
std::map<std::string, PyObject *> gErrorTypes;

/// Raises a runtime status as a RunError; frees it.
void check(cleave_rt_status status) {
  if (!status)
    return;
  std::string message = cleave_rt_status_message(status);
  cleave_rt_status_free(status);
  raise("run", message);
}

//===----------------------------------------------------------------------===//
// Tensors: numpy / DLPack in, numpy out
//===----------------------------------------------------------------------===//

using InArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

/// The DLPack dtype of an ONNX element type; false for one numpy lacks
/// (bfloat16 goes out as float32, as cleave-run writes it).
bool dlpackType(uint32_t dtype, nb::dlpack::dtype *out) {
  using nb::dlpack::dtype_code;
  auto make = [&](dtype_code code, uint8_t bits) {
    *out = nb::dlpack::dtype{static_cast<uint8_t>(code), bits, 1};
    return true;
  };
  switch (static_cast<cleave::plan::DType>(dtype)) {
  case cleave::plan::DType::F32:
    return make(dtype_code::Float, 32);
  case cleave::plan::DType::F64:
    return make(dtype_code::Float, 64);
  case cleave::plan::DType::F16:
    return make(dtype_code::Float, 16);
  case cleave::plan::DType::U8:
    return make(dtype_code::UInt, 8);
  case cleave::plan::DType::U16:
    return make(dtype_code::UInt, 16);
  case cleave::plan::DType::U32:
    return make(dtype_code::UInt, 32);
  case cleave::plan::DType::U64:
    return make(dtype_code::UInt, 64);
  case cleave::plan::DType::I8:
    return make(dtype_code::Int, 8);
  case cleave::plan::DType::I16:
    return make(dtype_code::Int, 16);
  case cleave::plan::DType::I32:
    return make(dtype_code::Int, 32);
  case cleave::plan::DType::I64:
    return make(dtype_code::Int, 64);
  case cleave::plan::DType::Bool:
    return make(dtype_code::Bool, 8);
  default:
    return false;
  }
}

/// The plan element type of a DLPack dtype (the inverse of dlpackType).
bool planType(nb::dlpack::dtype t, cleave::plan::DType *out) {
  for (uint32_t code = 1; code <= 16; ++code) {
    nb::dlpack::dtype d;
    if (dlpackType(code, &d) && d == t) {
      *out = static_cast<cleave::plan::DType>(code);
      return true;
    }
  }
  return false;
}

std::string shapeText(const int64_t *dims, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string arrayTypeText(const InArray &a) {
  std::vector<int64_t> dims(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i)
    dims[i] = a.shape(i);
  nb::dlpack::dtype t = a.dtype();
  const char *kind = t.code == uint8_t(nb::dlpack::dtype_code::Float)  ? "float"
                     : t.code == uint8_t(nb::dlpack::dtype_code::Int)  ? "int"
                     : t.code == uint8_t(nb::dlpack::dtype_code::UInt) ? "uint"
                     : t.code == uint8_t(nb::dlpack::dtype_code::Bool) ? "bool"
                     : t.code == uint8_t(nb::dlpack::dtype_code::Bfloat)
                         ? "bfloat"
                         : "?";
  std::string name =
      std::string(kind) + (t.code == uint8_t(nb::dlpack::dtype_code::Bool)
                               ? ""
                               : std::to_string(int(t.bits)));
  return "shape " + shapeText(dims.data(), dims.size()) + " " + name;
}

/// float32 → bfloat16 bits, rounding to nearest even (NaN stays NaN).
uint16_t toBFloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

/// Checks `a` against a tensor of `dtype` and `dims` (`what` names it in
/// errors) and returns its bytes; bfloat16 takes float32 (rounded) or
/// uint16 bit patterns, kept in *scratch.
std::pair<const void *, size_t> tensorBytes(const InArray &a, uint32_t dtype,
                                            const int64_t *dims, size_t rank,
                                            const std::string &what,
                                            std::vector<uint8_t> *scratch) {
  bool shapeOk = a.ndim() == rank;
  for (size_t i = 0; shapeOk && i < rank; ++i)
    shapeOk = static_cast<int64_t>(a.shape(i)) == dims[i];
  std::string want =
      "shape " + shapeText(dims, rank) + " " + cleave_rt_dtype_name(dtype);
  nb::dlpack::dtype got = a.dtype();
  if (static_cast<cleave::plan::DType>(dtype) == cleave::plan::DType::BF16) {
    bool f32 = got == nb::dtype<float>(), u16 = got == nb::dtype<uint16_t>();
    if (!shapeOk || (!f32 && !u16))
      raise("input", what + ": expected " + want +
                         " (as float32, or uint16 bit patterns), got " +
                         arrayTypeText(a));
    if (u16)
      return {a.data(), a.nbytes()};
    scratch->resize(a.size() * 2);
    const float *src = static_cast<const float *>(a.data());
    uint16_t *dst = reinterpret_cast<uint16_t *>(scratch->data());
    for (size_t i = 0; i < a.size(); ++i)
      dst[i] = toBFloat16(src[i]);
    return {scratch->data(), scratch->size()};
  }
  nb::dlpack::dtype t;
  if (!dlpackType(dtype, &t))
    raise("input", what + ": element type " + cleave_rt_dtype_name(dtype) +
                       " is not supported from Python");
  if (!shapeOk || got != t)
    raise("input", what + ": expected " + want + ", got " + arrayTypeText(a));
  return {a.data(), a.nbytes()};
}

/// A numpy array holding a copy of `bytes` of a tensor (bfloat16 widened
/// to float32).
nb::object toNumpy(const void *data, size_t bytes, uint32_t dtype,
                   const std::vector<int64_t> &shape) {
  nb::dlpack::dtype t;
  size_t count = 1;
  for (int64_t d : shape)
    count *= static_cast<size_t>(d);
  bool bf16 =
      static_cast<cleave::plan::DType>(dtype) == cleave::plan::DType::BF16;
  if (bf16)
    t = nb::dtype<float>();
  else if (!dlpackType(dtype, &t))
    raise("run", std::string("element type ") + cleave_rt_dtype_name(dtype) +
                     " has no numpy type");
  size_t outBytes = bf16 ? count * 4 : bytes;
  auto *copy = new uint8_t[outBytes > 0 ? outBytes : 1];
  if (bf16) {
    const uint16_t *src = static_cast<const uint16_t *>(data);
    float *dst = reinterpret_cast<float *>(copy);
    for (size_t i = 0; i < count; ++i) {
      uint32_t bits = uint32_t(src[i]) << 16;
      std::memcpy(&dst[i], &bits, 4);
    }
  } else {
    std::memcpy(copy, data, bytes);
  }
  nb::capsule owner(
      copy, [](void *p) noexcept { delete[] static_cast<uint8_t *>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  return nb::cast(nb::ndarray<nb::numpy>(copy, dims.size(), dims.data(), owner,
                                         nullptr, t));
}

//===----------------------------------------------------------------------===//
// Program: a loaded plan, and its executor for plain runs
//===----------------------------------------------------------------------===//

struct TensorDesc {
  std::string name, dtype;
  std::vector<int64_t> shape;
};

TensorDesc describe(const cleave_rt_tensor_desc_t &d) {
  return {d.name, cleave_rt_dtype_name(d.dtype),
          std::vector<int64_t>(d.dims, d.dims + d.rank)};
}

class Program {
public:
  explicit Program(nb::bytes data) {
    bytes.assign(static_cast<const uint8_t *>(data.data()),
                 static_cast<const uint8_t *>(data.data()) + data.size());
    check(cleave_rt_program_load_memory(bytes.data(), bytes.size(), &handle));
  }
  ~Program() {
    cleave_rt_executor_destroy(executor);
    cleave_rt_program_destroy(handle);
  }
  Program(const Program &) = delete;

  std::vector<TensorDesc> inputs() const {
    return tensors(cleave_rt_program_input_count(handle),
                   cleave_rt_program_input_desc);
  }
  std::vector<TensorDesc> outputs() const {
    return tensors(cleave_rt_program_output_count(handle),
                   cleave_rt_program_output_desc);
  }
  std::optional<std::string> metadata(const std::string &key) const {
    const char *v = cleave_rt_program_metadata(handle, key.c_str());
    if (!v)
      return std::nullopt;
    return std::string(v);
  }

  nb::dict stats() const {
    cleave::plan::Plan plan;
    std::string error;
    if (!cleave::plan::deserialize(bytes.data(), bytes.size(), &plan, &error))
      raise("run", error);
    auto one = [](const cleave::plan::Plan &p) {
      cleave::plan::PlanStats s = cleave::plan::statistics(p);
      nb::dict d;
      d["commands"] = s.commands;
      d["kernels"] = s.kernels;
      d["gemms"] = s.gemms;
      d["collectives"] = s.collectives;
      d["arena_bytes"] = s.arenaBytes;
      d["constant_bytes"] = s.constantBytes;
      d["referenced_bytes"] = s.referencedBytes;
      d["kernel_object_bytes"] = s.kernelObjectBytes;
      d["parameter_bytes"] = s.parameterBytes;
      d["optimizer_state_bytes"] = s.optimizerStateBytes;
      d["buffer_bytes"] = s.bufferBytes;
      d["flops"] = s.flops;
      return d;
    };
    if (!plan.isPipelined()) {
      nb::dict d = one(plan);
      d["target"] = plan.target;
      d["mesh"] = plan.mesh.str();
      return d;
    }
    nb::dict d;
    d["target"] = plan.stages[0].target;
    d["mesh"] = plan.mesh.str();
    nb::list stages;
    for (const cleave::plan::Plan &stage : plan.stages)
      stages.append(one(stage));
    d["stages"] = stages;
    return d;
  }

  size_t worldSize() const { return cleave_rt_program_world_size(handle); }
  bool isTraining() const {
    cleave_rt_training_info_t info;
    check(cleave_rt_program_training_info(handle, &info));
    return info.enabled;
  }

  /// Runs the plan once on `inputs` (one per input, in order).
  std::vector<nb::object> run(const std::vector<InArray> &inputs,
                              const std::string &backend) {
    if (worldSize() > 1)
      raise("run", "the plan runs on " + std::to_string(worldSize()) +
                       " ranks (mesh " + cleave_rt_program_mesh(handle) +
                       "): Plan.run runs one-rank plans; train it with "
                       "cleave.Trainer(plan, ranks=" +
                       std::to_string(worldSize()) +
                       ") or run it with cleave-run --ranks");
    size_t count = cleave_rt_program_input_count(handle);
    if (inputs.size() != count)
      raise("input", "the plan takes " + std::to_string(count) +
                         " inputs, got " + std::to_string(inputs.size()));
    if (!executor || backend != executorBackend) {
      cleave_rt_executor_destroy(executor);
      executor = nullptr;
      check(cleave_rt_executor_create(handle, backend.c_str(), &executor));
      executorBackend = backend;
    }
    std::vector<uint8_t> scratch;
    for (size_t i = 0; i < count; ++i) {
      cleave_rt_tensor_desc_t d;
      check(cleave_rt_program_input_desc(handle, i, &d));
      auto [data, size] =
          tensorBytes(inputs[i], d.dtype, d.dims, d.rank,
                      "input '" + std::string(d.name) + "'", &scratch);
      check(cleave_rt_executor_set_input(executor, i, data, size));
    }
    cleave_rt_status status;
    {
      nb::gil_scoped_release release;
      status = cleave_rt_executor_run(executor);
    }
    check(status);
    std::vector<nb::object> outs;
    for (size_t i = 0; i < cleave_rt_program_output_count(handle); ++i) {
      cleave_rt_tensor_desc_t d;
      check(cleave_rt_program_output_desc(handle, i, &d));
      const void *data;
      size_t size;
      check(cleave_rt_executor_output(executor, i, &data, &size));
      outs.push_back(toNumpy(data, size, d.dtype,
                             std::vector<int64_t>(d.dims, d.dims + d.rank)));
    }
    return outs;
  }

  nb::bytes serialized() const {
    return nb::bytes(reinterpret_cast<const char *>(bytes.data()),
                     bytes.size());
  }

  cleave_rt_program handle = nullptr;

private:
  std::vector<TensorDesc>
  tensors(size_t count,
          cleave_rt_status (*desc)(cleave_rt_program, size_t,
                                   cleave_rt_tensor_desc_t *)) const {
    std::vector<TensorDesc> all;
    for (size_t i = 0; i < count; ++i) {
      cleave_rt_tensor_desc_t d;
      check(desc(handle, i, &d));
      all.push_back(describe(d));
    }
    return all;
  }

  std::vector<uint8_t> bytes;
  cleave_rt_executor executor = nullptr;
  std::string executorBackend;
};

//===----------------------------------------------------------------------===//
// Trainer: the training loop's Trainer on every rank
//===----------------------------------------------------------------------===//

/// N ranks as threads that live as long as the trainer (the local
/// communicator), or the calling thread for one rank. Every call runs a
/// job on every rank and waits for all.
class RankThreads {
public:
  explicit RankThreads(size_t ranks) : ranks(ranks) {
    if (ranks <= 1)
      return;
    for (size_t r = 0; r < ranks; ++r)
      threads.emplace_back([this, r] { loop(r); });
  }
  ~RankThreads() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    cv.notify_all();
    for (std::thread &t : threads)
      t.join();
  }
  /// Runs fn(rank) on every rank; returns each rank's result.
  std::vector<int> runAll(const std::function<int(size_t)> &fn) {
    if (threads.empty())
      return {fn(0)};
    std::unique_lock<std::mutex> lock(mu);
    job = &fn;
    results.assign(ranks, -1);
    pending = ranks;
    ++generation;
    cv.notify_all();
    done.wait(lock, [&] { return pending == 0; });
    job = nullptr;
    return results;
  }

private:
  void loop(size_t rank) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<int(size_t)> *fn;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping)
          return;
        seen = generation;
        fn = job;
      }
      int rc = (*fn)(rank);
      std::lock_guard<std::mutex> lock(mu);
      results[rank] = rc;
      if (--pending == 0)
        done.notify_all();
    }
  }
  size_t ranks;
  std::vector<std::thread> threads;
  std::mutex mu;
  std::condition_variable cv, done;
  const std::function<int(size_t)> *job = nullptr;
  std::vector<int> results;
  size_t pending = 0;
  uint64_t generation = 0;
  bool stopping = false;
};

class Trainer {
public:
  Trainer(std::shared_ptr<Program> program, size_t ranks,
          const std::vector<std::pair<std::string, std::optional<std::string>>>
              &options,
          const std::vector<std::pair<std::string, InArray>> &arrays,
          bool batchesGiven, const std::string &backend, double commTimeout,
          const std::string &communicator)
      : program(std::move(program)), backend(backend) {
    size_t world = this->program->worldSize();
    bool mpi = communicator == "mpi";
    if (!mpi && communicator != "local")
      raise("option", "unknown communicator '" + communicator +
                          "' (expected local or mpi)");
    if (mpi && ranks != 0)
      raise("option", "with communicator='mpi' each process of the mpirun "
                      "or srun job is one rank: give no ranks");
    if (ranks == 0)
      ranks = world;
    if (ranks != world)
      raise("option", "the plan runs on " + std::to_string(world) +
                          (world == 1 ? " rank" : " ranks") + ", not " +
                          std::to_string(ranks));
    if (!this->program->isTraining())
      raise("option", "the plan is not a training plan (compile with "
                      "train=True)");
    for (const auto &[name, value] : options) {
      std::string error;
      if (!train::applyTrainOption(name, value ? value->c_str() : nullptr, o,
                                   &error))
        raise("option", error);
    }
    for (const auto &[name, array] : arrays) {
      cleave::tensorfile::HostTensor t;
      if (!planType(array.dtype(), &t.dtype))
        raise("input", "data '" + name + "': " + arrayTypeText(array) +
                           " has no plan element type");
      for (size_t i = 0; i < array.ndim(); ++i)
        t.shape.push_back(array.shape(i));
      const uint8_t *p = static_cast<const uint8_t *>(array.data());
      t.data.assign(p, p + array.nbytes());
      o.dataArrays.emplace_back(name, std::move(t));
    }
    o.batchesGiven = batchesGiven;
    o.progressBar = false;
    train::setProgramName("cleave");
    worldSize = ranks;
    // This process's ranks: all of them as threads (local), or the one
    // the MPI job gives it.
    size_t mine = mpi ? 1 : ranks;
    comms.assign(mine, nullptr);
    if (mpi) {
      check(cleave_rt_communicator_create_mpi(commTimeout, &comms[0]));
      firstRank = cleave_rt_communicator_rank(comms[0]);
      if (cleave_rt_communicator_size(comms[0]) != world) {
        std::string message =
            "the MPI job has " +
            std::to_string(cleave_rt_communicator_size(comms[0])) +
            " processes but the plan runs on " + std::to_string(world) +
            " ranks";
        close();
        raise("option", message);
      }
    } else if (ranks > 1) {
      check(cleave_rt_local_world_create(ranks, commTimeout, &world_));
      for (size_t r = 0; r < ranks; ++r)
        check(cleave_rt_communicator_create_local(world_, r, &comms[r]));
    }
    threads = std::make_unique<RankThreads>(mine);
    trainers.resize(mine);
    for (auto &t : trainers)
      t = std::make_unique<train::Trainer>();
    runOnRanks("open", [&](size_t r) {
      train::RankContext ctx;
      ctx.comm = comms[r];
      ctx.rank = static_cast<int64_t>(firstRank + r);
      ctx.worldSize = static_cast<int64_t>(worldSize);
      return trainers[r]->open(o, this->program->handle, this->backend, ctx);
    });
  }

  ~Trainer() { close(); }

  void close() {
    threads.reset();
    trainers.clear();
    for (cleave_rt_communicator c : comms)
      cleave_rt_communicator_destroy(c);
    comms.clear();
    if (world_)
      cleave_rt_local_world_destroy(world_);
    world_ = nullptr;
  }

  std::vector<TensorDesc> dataInputs() const {
    requireOpen();
    std::vector<TensorDesc> all;
    for (const cleave::data::InputSpec &s : trainers[0]->dataInputs())
      all.push_back({s.name, cleave::plan::dtypeName(s.dtype), s.shape});
    return all;
  }

  /// This process's first rank (0 but under MPI).
  size_t rank() const { return firstRank; }

  int64_t stepsDone() const {
    requireOpen();
    return trainers[0]->stepsDone();
  }

  void setTotalSteps(long steps) {
    requireOpen();
    for (auto &t : trainers)
      t->setTotalSteps(steps);
  }

  /// One step; `batch` (one array per data input) or None for the dataset.
  nb::dict step(std::optional<std::vector<InArray>> batch) {
    requireOpen();
    std::vector<const void *> pointers;
    std::vector<std::vector<uint8_t>> scratch;
    const auto &specs = trainers[0]->dataInputs();
    if (batch) {
      if (batch->size() != specs.size())
        raise("input", "a batch needs " + std::to_string(specs.size()) +
                           " data inputs, got " +
                           std::to_string(batch->size()));
      scratch.resize(specs.size());
      for (size_t i = 0; i < specs.size(); ++i) {
        pointers.push_back(
            tensorBytes((*batch)[i], static_cast<uint32_t>(specs[i].dtype),
                        specs[i].shape.data(), specs[i].shape.size(),
                        "data input '" + specs[i].name + "'", &scratch[i])
                .first);
      }
    }
    std::vector<train::StepMetrics> metrics(trainers.size());
    runOnRanks("step", [&](size_t r) {
      return trainers[r]->step(batch ? &pointers : nullptr, &metrics[r]);
    });
    const train::StepMetrics &m = metrics[0];
    nb::dict d;
    d["step"] = m.step;
    d["loss"] = m.loss;
    d["lr"] = m.lr;
    if (m.hasGradNorm)
      d["grad_norm"] = m.gradNorm;
    if (m.hasLossScale) {
      d["loss_scale"] = m.lossScale;
      d["skipped"] = m.skipped;
    }
    // The plan's metrics (moe.expert_load, moe.dropped_rows): scalars as
    // floats, tensors as flat lists with their shapes beside.
    for (const train::StepMetrics::Metric &metric : m.metrics) {
      if (metric.shape.empty()) {
        d[metric.name.c_str()] = metric.values.front();
        continue;
      }
      nb::list values;
      for (double v : metric.values)
        values.append(v);
      d[metric.name.c_str()] = values;
      nb::list shape;
      for (int64_t n : metric.shape)
        shape.append(n);
      d[(metric.name + ".shape").c_str()] = shape;
    }
    d[m.tokenModel ? "tokens_per_s" : "samples_per_s"] = m.rate;
    d["step_ms"] = m.stepMs;
    d["peak_bytes"] = m.peakBytes;
    return d;
  }

  void finish() {
    requireOpen();
    runOnRanks("finish", [&](size_t r) { return trainers[r]->finish(); });
  }

  std::string saveCheckpoint(const std::string &dir) {
    requireOpen();
    std::string path;
    runOnRanks("save", [&](size_t r) {
      std::string mine;
      int rc = trainers[r]->saveCheckpoint(dir, &mine);
      if (firstRank + r == 0)
        path = mine;
      return rc;
    });
    return path;
  }

  void exportParameters(const std::string &safetensors, const std::string &onnx,
                        const std::string &sourceModel) {
    requireOpen();
    runOnRanks("export", [&](size_t r) {
      return trainers[r]->exportParameters(safetensors, onnx, sourceModel);
    });
  }

  /// Every parameter, buffer and optimizer state as a global tensor:
  /// name -> (kind, array).
  nb::dict stateDict() {
    requireOpen();
    std::vector<cleave::checkpoint::StateRecord> records;
    runOnRanks("state_dict", [&](size_t r) {
      std::vector<cleave::checkpoint::StateRecord> mine;
      int rc = trainers[r]->snapshot(&mine);
      if (firstRank + r == 0) // The other ranks get records without data.
        records = std::move(mine);
      return rc;
    });
    nb::dict d;
    for (const cleave::checkpoint::StateRecord &rec : records) {
      const char *kind =
          rec.kind == cleave::plan::StateKind::Parameter        ? "parameter"
          : rec.kind == cleave::plan::StateKind::OptimizerState ? "optimizer"
                                                                : "buffer";
      d[nb::str(rec.name.c_str())] = nb::make_tuple(
          kind, toNumpy(rec.data.data(), rec.data.size(),
                        static_cast<uint32_t>(rec.dtype), rec.shape));
    }
    return d;
  }

private:
  void requireOpen() const {
    if (trainers.empty())
      raise("closed", "the trainer is closed" +
                          (failure.empty() ? std::string()
                                           : " after an error: " + failure));
  }

  /// Runs fn on every rank with the GIL released; on any rank's failure
  /// the peers are released from their collectives, the trainer closes
  /// and the first failing rank's message is raised.
  void runOnRanks(const char *what, const std::function<int(size_t)> &fn) {
    size_t world = worldSize;
    bool local = world_ != nullptr;
    // The rank that failed first is the cause; its peers fail after it
    // releases them, with messages about it.
    std::mutex mu;
    std::optional<size_t> first;
    std::string cause;
    {
      nb::gil_scoped_release release;
      std::function<int(size_t)> job = [&](size_t r) {
        train::setRank(static_cast<int64_t>(firstRank + r),
                       static_cast<int64_t>(world));
        train::setQuietErrors(true);
        int rc = fn(r);
        train::setQuietErrors(false);
        if (rc > 0) {
          std::string error = train::takeLastError();
          {
            std::lock_guard<std::mutex> lock(mu);
            if (!first) {
              first = r;
              cause = error.empty() ? std::string(what) + " failed on rank " +
                                          std::to_string(firstRank + r)
                                    : error;
            }
          }
          // Release the other threads' ranks from their collectives (an
          // MPI job's other processes learn of it when this one closes
          // its communicator).
          if (local && comms[r])
            cleave_rt_communicator_abort(comms[r], error.c_str());
        }
        return rc;
      };
      threads->runAll(job);
    }
    if (!first)
      return;
    failure = cause;
    close();
    raise("run", cause);
  }

  std::shared_ptr<Program> program;
  std::string backend;
  train::TrainOptions o;
  std::unique_ptr<RankThreads> threads;
  cleave_rt_local_world world_ = nullptr;
  std::vector<cleave_rt_communicator> comms;
  std::vector<std::unique_ptr<train::Trainer>> trainers;
  size_t firstRank = 0; ///< The rank of trainers[0].
  size_t worldSize = 1;
  std::string failure;
};

} // namespace

NB_MODULE(_cleave, m) {
  m.doc() = "Cleave's compiler and runtime (the cleave package wraps this "
            "module; use `import cleave`).";

  // Error (a RuntimeError) and a subclass per kind; bad options and bad
  // inputs are ValueErrors too.
  auto makeError = [&](const char *name, const char *doc, nb::handle bases) {
    nb::object type = nb::steal(PyErr_NewExceptionWithDoc(
        (std::string("cleave._cleave.") + name).c_str(), doc, bases.ptr(),
        nullptr));
    m.attr(name) = type;
    return type;
  };
  nb::object base = makeError(
      "Error", "A Cleave error, carrying the message the tools print.",
      PyExc_RuntimeError);
  gErrorTypes["error"] = base.ptr();
  gErrorTypes["compile"] =
      makeError("CompileError", "The model or program did not compile.", base)
          .ptr();
  gErrorTypes["option"] =
      makeError("OptionError", "An option or its value is not valid.",
                nb::make_tuple(base, nb::handle(PyExc_ValueError)))
          .ptr();
  gErrorTypes["input"] =
      makeError("InputError", "An input tensor does not match the plan.",
                nb::make_tuple(base, nb::handle(PyExc_ValueError)))
          .ptr();
  gErrorTypes["run"] =
      makeError("RunError", "Loading, running or training a plan failed.", base)
          .ptr();
  gErrorTypes["closed"] =
      makeError("ClosedError",
                "The object was closed (after an error, or by close()).", base)
          .ptr();
  nb::register_exception_translator([](const std::exception_ptr &p, void *) {
    try {
      std::rethrow_exception(p);
    } catch (const CleaveError &e) {
      auto it = gErrorTypes.find(e.kind);
      PyErr_SetString(it == gErrorTypes.end() ? gErrorTypes["error"]
                                              : it->second,
                      e.what());
    }
  });

  m.def("compile", &cleave_py::compile, "path"_a, "options"_a,
        "Compiles the model at `path` with `options` ({option name: value}, "
        "names as in option_table). Returns (plan bytes or None, printed "
        "MLIR, messages, report).");
  m.def("option_table", &cleave_py::optionTable,
        "cleave-compile's options: (name, kind, value name, help) with kind "
        "'flag', 'value' or 'list'.");
  m.def("train_option_names", &train::trainOptionNames,
        "cleave-run's training options, by name.");
  m.def("run_passes", &cleave_py::runPasses, "source"_a, "pipeline"_a,
        "Parses MLIR `source`, runs the textual pass `pipeline` and prints "
        "the result as cleave-opt does.");

  nb::class_<TensorDesc>(m, "TensorDesc",
                         "A plan input or output: name, dtype, shape.")
      .def_ro("name", &TensorDesc::name)
      .def_ro("dtype", &TensorDesc::dtype)
      .def_ro("shape", &TensorDesc::shape)
      .def("__repr__", [](const TensorDesc &d) {
        return "TensorDesc(name='" + d.name + "', dtype='" + d.dtype +
               "', shape=" + shapeText(d.shape.data(), d.shape.size()) + ")";
      });

  nb::class_<Program>(m, "Program", "A loaded plan (the runtime's program).")
      .def(nb::init<nb::bytes>(), "data"_a)
      .def_prop_ro("inputs", &Program::inputs)
      .def_prop_ro("outputs", &Program::outputs)
      .def_prop_ro("world_size", &Program::worldSize)
      .def_prop_ro("is_training", &Program::isTraining)
      .def("metadata", &Program::metadata, "key"_a)
      .def("stats", &Program::stats)
      .def("run", &Program::run, "inputs"_a, "backend"_a = "cpu")
      .def("serialized", &Program::serialized);

  nb::class_<Trainer>(m, "Trainer", "The training loop on every rank.")
      .def(nb::init<std::shared_ptr<Program>, size_t,
                    const std::vector<
                        std::pair<std::string, std::optional<std::string>>> &,
                    const std::vector<std::pair<std::string, InArray>> &, bool,
                    const std::string &, double, const std::string &>(),
           "program"_a, "ranks"_a, "options"_a, "arrays"_a, "batches_given"_a,
           "backend"_a, "comm_timeout"_a, "communicator"_a = "local")
      .def_prop_ro("rank", [](const Trainer &t) { return t.rank(); })
      .def_prop_ro("data_inputs", &Trainer::dataInputs)
      .def_prop_ro("steps_done", &Trainer::stepsDone)
      .def("set_total_steps", &Trainer::setTotalSteps, "steps"_a)
      .def("step", &Trainer::step, "batch"_a = nb::none())
      .def("finish", &Trainer::finish)
      .def("save_checkpoint", &Trainer::saveCheckpoint, "dir"_a)
      .def("state_dict", &Trainer::stateDict)
      .def("export", &Trainer::exportParameters, "safetensors"_a, "onnx"_a,
           "source_model"_a)
      .def("close", &Trainer::close);
}
