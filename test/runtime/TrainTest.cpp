//===- TrainTest.cpp - Training plans, data, checkpoints, the loop --------===//

#include "TestUtil.h"
#include "cleave/Checkpoint.h"
#include "cleave/Data.h"
#include "cleave/Json.h"
#include "cleave/Safetensors.h"
#include "cleave/Sha256.h"
#include "cleave/TensorFile.h"
#include "cleave/Training.h"
#include "cleave_rt.h"

#include <cmath>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/wait.h>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

/// Builds the test kernel with clang; empty if there is no clang.
std::vector<uint8_t> buildSgdKernel(const TempDir &dir) {
  std::string clang = CLEAVE_TEST_CLANG;
  if (clang.empty())
    return {};
  // loss = mean((x.w - t)^2); g = dloss/dw; m' = 0.9 m + g; w' = w - lr m'.
  const char *code =
      "void sgd_step(void **a) {\n"
      "  const float *x = a[0], *t = a[1], *lr = a[2], *w = a[4], *m = a[5];\n"
      "  float *wn = a[6], *mn = a[7], *loss = a[8], *gn = a[9];\n"
      "  float g[4] = {0, 0, 0, 0}, L = 0, n = 0;\n"
      "  for (int b = 0; b < 4; ++b) {\n"
      "    float y = 0;\n"
      "    for (int k = 0; k < 4; ++k) y += x[b * 4 + k] * w[k];\n"
      "    float e = y - t[b];\n"
      "    L += e * e;\n"
      "    for (int k = 0; k < 4; ++k) g[k] += 0.5f * e * x[b * 4 + k];\n"
      "  }\n"
      "  *loss = L / 4;\n"
      "  for (int k = 0; k < 4; ++k) n += g[k] * g[k];\n"
      "  *gn = __builtin_sqrtf(n);\n"
      "  for (int k = 0; k < 4; ++k) {\n"
      "    mn[k] = 0.9f * m[k] + g[k];\n"
      "    wn[k] = w[k] - *lr * mn[k];\n"
      "  }\n"
      "}\n";
  std::string src = dir.file("k.c"), so = dir.file("k.so");
  if (!writeBytes(src, std::vector<uint8_t>(code, code + strlen(code))))
    return {};
  std::string cmd = clang + " -shared -fPIC -O1 -ffp-contract=off -o '" + so +
                    "' '" + src + "' 2>'" + dir.file("clang.log") + "'";
  if (std::system(cmd.c_str()) != 0)
    return {};
  std::string bytes = slurp(so);
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

/// A momentum-SGD training plan for y = x.w: data inputs x [4,4], t [4];
/// states w (parameter) and its momentum (zeroed by an init command, over a
/// non-zero constant so the order constants-then-init shows).
Plan trainingPlan(std::vector<uint8_t> kernel) {
  Plan p;
  p.arenaBytes = 640;
  p.inputs = {
      tensor("x", DType::F32, {4, 4}, 0), tensor("t", DType::F32, {4}, 64),
      tensor("lr", DType::F32, {}, 128), tensor("step", DType::F32, {}, 192)};
  p.outputs = {tensor("loss", DType::F32, {}, 512),
               tensor("grad_norm", DType::F32, {}, 576)};
  Constant w, junk;
  w.info = tensor("w", DType::F32, {4}, 256);
  w.data = bytesOf<float>({0.1f, -0.2f, 0.3f, 0.0f});
  junk.info = tensor("junk", DType::F32, {4}, 320);
  junk.data = bytesOf<float>({7, 7, 7, 7});
  p.constants = {w, junk};
  p.kernelNames = {"sgd_step"};
  p.kernelObject = std::move(kernel);
  p.commands = {makeCommand(CommandKind::Kernel, {0},
                            {0, 64, 128, 192, 256, 320, 384, 448, 512, 576}),
                makeCommand(CommandKind::Copy, {16}, {384, 256}),
                makeCommand(CommandKind::Copy, {16}, {448, 320})};
  p.initCommands = {makeCommand(CommandKind::Fill, {16, 0}, {320})};
  StateTensor sw{tensor("w", DType::F32, {4}, 256), StateKind::Parameter, "w",
                 ""};
  StateTensor sm{tensor("w_mom", DType::F32, {4}, 320),
                 StateKind::OptimizerState, "w", "momentum"};
  p.states = {sw, sm};
  TrainingInfo &t = p.training;
  t.enabled = true;
  t.optimizer = "momentum";
  t.lrInput = 2;
  t.stepInput = 3;
  t.lossOutput = 0;
  t.gradNormOutput = 1;
  t.schedule = LRSchedule::Cosine;
  t.baseLR = 0.05;
  t.minLR = 0.005;
  t.warmupSteps = 2;
  t.totalSteps = 20;
  t.batchSize = 4;
  t.dataInputs = {0, 1};
  return p;
}

/// Writes the plan and a 16-sample dataset (t = x.[1,2,-1,0.5]) into dir.
bool writeTrainingFiles(const TempDir &dir, const Plan &p) {
  std::string err;
  std::vector<float> x(16 * 4), t(16);
  for (int i = 0; i < 16; ++i) {
    for (int k = 0; k < 4; ++k)
      x[i * 4 + k] = std::sin(float(i * 4 + k));
    t[i] = x[i * 4] + 2 * x[i * 4 + 1] - x[i * 4 + 2] + 0.5f * x[i * 4 + 3];
  }
  return writeFile(dir.file("m.cleave"), p, &err) &&
         tensorfile::writeNpyFile(dir.file("x.npy"), DType::F32, {16, 4},
                                  x.data(), x.size() * 4, &err) &&
         tensorfile::writeNpyFile(dir.file("t.npy"), DType::F32, {16}, t.data(),
                                  t.size() * 4, &err);
}

/// The "step", "loss", "lr" and "grad_norm" fields of each JSON log line
/// that has a step and a loss (the others, timings, vary between runs).
std::vector<json::Value> lossFields(const std::string &log) {
  std::vector<json::Value> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    json::Value record, fields = json::Value::object();
    std::string err;
    if (!json::parse(line, &record, &err) || !json::get(record, "step") ||
        !json::get(record, "loss"))
      continue;
    for (const char *key : {"step", "loss", "lr", "grad_norm"})
      if (const json::Value *v = json::get(record, key))
        fields[key] = *v;
    out.push_back(std::move(fields));
  }
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Learning rates
//===----------------------------------------------------------------------===//

TEST(Train, LearningRateSchedules) {
  TrainingInfo t;
  t.baseLR = 1.0;
  t.minLR = 0.1;
  t.warmupSteps = 4;
  t.totalSteps = 14;
  struct Row {
    LRSchedule schedule;
    int64_t step;
    double want;
  } rows[] = {
      {LRSchedule::Constant, 0, 1.0},
      {LRSchedule::Constant, 100, 1.0},
      {LRSchedule::LinearWarmup, 0, 0.25},
      {LRSchedule::LinearWarmup, 1, 0.5},
      {LRSchedule::LinearWarmup, 3, 1.0},
      {LRSchedule::LinearWarmup, 50, 1.0},
      {LRSchedule::Cosine, 0, 0.25},
      {LRSchedule::Cosine, 3, 1.0},
      {LRSchedule::Cosine, 4, 1.0}, // progress 0
      {LRSchedule::Cosine, 9, 0.1 + 0.45 * (1 + std::cos(M_PI * 0.5))},
      {LRSchedule::Cosine, 14, 0.1},   // progress 1
      {LRSchedule::Cosine, 1000, 0.1}, // clamped
  };
  for (const Row &r : rows) {
    t.schedule = r.schedule;
    EXPECT_NEAR(rt::learningRate(t, r.step, 0), r.want, 1e-12)
        << lrScheduleName(r.schedule) << " step " << r.step;
  }
  // Linear scaling with the global batch.
  t.schedule = LRSchedule::Constant;
  t.referenceBatch = 256;
  EXPECT_DOUBLE_EQ(rt::learningRate(t, 0, 512), 2.0);
  EXPECT_DOUBLE_EQ(rt::learningRate(t, 0, 64), 0.25);
  // No warmup, total = 0: cosine starts at min (span clamps to 1).
  t.referenceBatch = 0;
  t.schedule = LRSchedule::Cosine;
  t.warmupSteps = 0;
  t.totalSteps = 0;
  EXPECT_NEAR(rt::learningRate(t, 0, 0), 1.0, 1e-12);
  EXPECT_NEAR(rt::learningRate(t, 1, 0), 0.1, 1e-12);
  // The C API agrees.
  cleave_rt_training_info_t c{};
  c.schedule = CLEAVE_RT_LR_LINEAR_WARMUP;
  c.base_lr = 0.1;
  c.warmup_steps = 10;
  c.reference_batch = 8;
  EXPECT_NEAR(cleave_rt_learning_rate(&c, 4, 16), 0.1 * 5 / 10 * 2, 1e-15);
  EXPECT_EQ(cleave_rt_learning_rate(nullptr, 0, 0), 0.0);
}

//===----------------------------------------------------------------------===//
// Format version 2
//===----------------------------------------------------------------------===//

TEST(Train, PlanRoundTrip) {
  Plan p = trainingPlan({});
  p.kernelNames.clear();
  p.commands.erase(p.commands.begin());
  p.training.referenceBatch = 32;
  p.training.sequenceLength = 7;
  std::vector<uint8_t> bytes = serialize(p);
  Plan q;
  std::string err;
  ASSERT_TRUE(deserialize(bytes.data(), bytes.size(), &q, &err)) << err;
  EXPECT_EQ(serialize(q), bytes);
  ASSERT_EQ(q.states.size(), 2u);
  EXPECT_EQ(q.states[1].globalName(), "w.momentum");
  EXPECT_EQ(q.states[1].kind, StateKind::OptimizerState);
  EXPECT_EQ(q.initCommands.size(), 1u);
  EXPECT_TRUE(q.training.enabled);
  EXPECT_EQ(q.training.optimizer, "momentum");
  EXPECT_EQ(q.training.schedule, LRSchedule::Cosine);
  EXPECT_EQ(q.training.baseLR, 0.05);
  EXPECT_EQ(q.training.referenceBatch, 32);
  EXPECT_EQ(q.training.dataInputs, (std::vector<int64_t>{0, 1}));
}

TEST(Train, PlanValidation) {
  auto error = [](const Plan &p) {
    std::string err;
    return validate(p, &err) ? std::string() : err;
  };
  Plan base = trainingPlan({});
  base.kernelNames.clear();
  base.commands.clear();
  ASSERT_EQ(error(base), "");
  Plan p = base;
  p.states[0].info.offset = 632;
  EXPECT_EQ(error(p), "state 0 'w': buffer offset 632 + 16 bytes lies outside "
                      "the arena of 640 bytes");
  p = base;
  p.states[0].kind = static_cast<StateKind>(5);
  EXPECT_NE(error(p).find("unknown state kind 5"), std::string::npos);
  p = base;
  p.states[1].parameter = "nope";
  EXPECT_NE(error(p).find("belongs to parameter 'nope'"), std::string::npos);
  p = base;
  p.states[1].slot = "";
  EXPECT_NE(error(p).find("has no slot name"), std::string::npos);
  p = base;
  p.training.lrInput = 9;
  EXPECT_EQ(error(p), "training: learning-rate input index 9 is out of range "
                      "(the plan has 4 inputs)");
  p = base;
  p.training.lrInput = 0;
  EXPECT_EQ(error(p), "training: learning-rate input 'x' must be a float32 "
                      "scalar, got [4,4] float32");
  p = base;
  p.training.gradNormOutput = 2;
  EXPECT_NE(error(p).find("gradient-norm output index 2"), std::string::npos);
  p = base;
  p.training.dataInputs = {0, 2};
  EXPECT_NE(error(p).find("both a data input and the learning-rate"),
            std::string::npos);
  p = base;
  p.initCommands[0].buffers[0] = 630;
  EXPECT_EQ(error(p), "init command 0 (fill) destination: buffer offset 630 "
                      "+ 16 bytes lies outside the arena of 640 bytes");
  // Disabled training is not checked.
  p = base;
  p.training.enabled = false;
  p.training.lrInput = 99;
  EXPECT_EQ(error(p), "");
}

//===----------------------------------------------------------------------===//
// Executor: init commands, state access
//===----------------------------------------------------------------------===//

TEST(Train, InitCommandsAndStates) {
  Plan p = trainingPlan({});
  p.kernelNames.clear();
  p.commands = {makeCommand(CommandKind::Fill, {4, 0x3f}, {256})};
  std::vector<uint8_t> bytes = serialize(p);
  cleave_rt_program program = nullptr;
  cleave_rt_executor e = nullptr;
  ASSERT_EQ(cleave_rt_program_load_memory(bytes.data(), bytes.size(), &program),
            nullptr);
  ASSERT_EQ(cleave_rt_program_state_count(program), 2u);
  cleave_rt_state_desc_t d;
  ASSERT_EQ(cleave_rt_program_state_desc(program, 1, &d), nullptr);
  EXPECT_STREQ(d.tensor.name, "w_mom");
  EXPECT_EQ(d.kind, CLEAVE_RT_STATE_OPTIMIZER_STATE);
  EXPECT_STREQ(d.parameter, "w");
  EXPECT_STREQ(d.slot, "momentum");
  EXPECT_STREQ(d.global_name, "w.momentum");
  EXPECT_EQ(d.tensor.byte_size, 16u);
  size_t index = 9;
  ASSERT_EQ(cleave_rt_program_find_state(program, "w.momentum", &index),
            nullptr);
  EXPECT_EQ(index, 1u);
  cleave_rt_training_info_t info;
  ASSERT_EQ(cleave_rt_program_training_info(program, &info), nullptr);
  EXPECT_EQ(info.enabled, 1);
  EXPECT_STREQ(info.optimizer, "momentum");
  EXPECT_EQ(info.lr_input, 2);
  EXPECT_EQ(info.data_input_count, 2u);
  EXPECT_EQ(info.data_inputs[1], 1);

  ASSERT_EQ(cleave_rt_executor_create(program, "cpu", &e), nullptr);
  // The init command zeroed the momentum over the constant's 7s.
  std::vector<float> m(4, -1), w(4);
  ASSERT_EQ(cleave_rt_executor_read_state(e, 1, m.data(), 16), nullptr);
  EXPECT_EQ(m, (std::vector<float>{0, 0, 0, 0}));
  ASSERT_EQ(cleave_rt_executor_read_state(e, 0, w.data(), 16), nullptr);
  EXPECT_EQ(w, (std::vector<float>{0.1f, -0.2f, 0.3f, 0.0f}));
  std::vector<float> nw = {1, 2, 3, 4};
  ASSERT_EQ(cleave_rt_executor_write_state(e, 0, nw.data(), 16), nullptr);
  ASSERT_EQ(cleave_rt_executor_read_state(e, 0, w.data(), 16), nullptr);
  EXPECT_EQ(w, nw);
  // States persist across runs, updated in place by the commands.
  std::vector<float> zeros(16, 0);
  float one = 1;
  ASSERT_EQ(cleave_rt_executor_set_input(e, 0, zeros.data(), 64), nullptr);
  ASSERT_EQ(cleave_rt_executor_set_input(e, 1, zeros.data(), 16), nullptr);
  ASSERT_EQ(cleave_rt_executor_set_input(e, 2, &one, 4), nullptr);
  ASSERT_EQ(cleave_rt_executor_set_input(e, 3, &one, 4), nullptr);
  ASSERT_EQ(cleave_rt_executor_run(e), nullptr);
  ASSERT_EQ(cleave_rt_executor_read_state(e, 0, w.data(), 16), nullptr);
  uint32_t bits;
  std::memcpy(&bits, &w[0], 4);
  EXPECT_EQ(bits, 0x3f3f3f3fu);
  EXPECT_EQ(w[1], 2.0f);
  // Errors.
  cleave_rt_status s = cleave_rt_executor_read_state(e, 2, w.data(), 16);
  EXPECT_EQ(cleave_rt_status_code(s), CLEAVE_RT_OUT_OF_RANGE);
  cleave_rt_status_free(s);
  s = cleave_rt_executor_write_state(e, 0, w.data(), 8);
  EXPECT_STREQ(cleave_rt_status_message(s),
               "state 0 'w' holds 16 bytes ([4] float32), got 8");
  cleave_rt_status_free(s);
  s = cleave_rt_program_find_state(program, "v", &index);
  EXPECT_EQ(cleave_rt_status_code(s), CLEAVE_RT_NOT_FOUND);
  cleave_rt_status_free(s);
  cleave_rt_executor_destroy(e);
  cleave_rt_program_destroy(program);
}

//===----------------------------------------------------------------------===//
// SHA-256, safetensors, data
//===----------------------------------------------------------------------===//

TEST(Checkpoint, Sha256TestVectors) {
  EXPECT_EQ(Sha256::hex("", 0),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256::hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(Sha256::hex(two, strlen(two)),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a's, fed in uneven pieces.
  Sha256 h;
  std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left) {
    size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(h.finishHex(),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55, 56 and 64 bytes: the padding edge cases.
  EXPECT_EQ(Sha256::hex(std::string(55, 'a').data(), 55),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(Sha256::hex(std::string(56, 'a').data(), 56),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(Sha256::hex(std::string(64, 'a').data(), 64),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

// A checkpoint whose index.json and manifest.json are laid out as earlier
// releases wrote them (one tensor a line) loads like a new one.
TEST(Checkpoint, ReadsTheEarlierJsonLayout) {
  TempDir dir;
  std::vector<float> w = {1.5f, -2.0f}, m = {0.25f, 0.5f};
  checkpoint::Checkpoint c;
  c.step = 7;
  c.seed = 3;
  c.optimizer = "sgd";
  c.samplesConsumed = 56;
  c.states.push_back({"w",
                      StateKind::Parameter,
                      "w",
                      "",
                      DType::F32,
                      {2},
                      std::vector<uint8_t>(8),
                      0});
  c.states.push_back({"w.momentum",
                      StateKind::OptimizerState,
                      "w",
                      "momentum",
                      DType::F32,
                      {2},
                      std::vector<uint8_t>(8),
                      0});
  std::memcpy(c.states[0].data.data(), w.data(), 8);
  std::memcpy(c.states[1].data.data(), m.data(), 8);
  std::string path, err;
  ASSERT_TRUE(checkpoint::save(dir.file("ck"), c, &path, &err)) << err;

  std::string index =
      "{\n  \"format\": \"cleave-checkpoint\",\n  \"version\": 1,\n"
      "  \"step\": 7,\n  \"training_step\": 7,\n  \"optimizer\": \"sgd\",\n"
      "  \"rng_seed\": 3,\n"
      "  \"data_position\": {\"step\": 7, \"samples_consumed\": 56},\n"
      "  \"files\": [\"model.safetensors\"],\n  \"tensors\": [\n"
      "    {\"name\": \"w\", \"kind\": \"parameter\", \"parameter\": \"w\", "
      "\"slot\": \"\", \"dtype\": \"float32\", \"shape\": [2], \"file\": "
      "\"model.safetensors\"},\n"
      "    {\"name\": \"w.momentum\", \"kind\": \"optimizer_state\", "
      "\"parameter\": \"w\", \"slot\": \"momentum\", \"dtype\": \"float32\", "
      "\"shape\": [2], \"file\": \"model.safetensors\"}\n  ]\n}\n";
  std::string model = slurp(path + "/model.safetensors");
  std::string manifest =
      "{\n  \"format\": \"cleave-checkpoint-manifest\",\n  \"version\": 1,\n"
      "  \"step\": 7,\n  \"files\": [\n    {\"name\": \"model.safetensors\", "
      "\"bytes\": " +
      std::to_string(model.size()) + ", \"sha256\": \"" +
      Sha256::hex(model.data(), model.size()) +
      "\"},\n"
      "    {\"name\": \"index.json\", \"bytes\": " +
      std::to_string(index.size()) + ", \"sha256\": \"" +
      Sha256::hex(index.data(), index.size()) + "\"}\n  ]\n}\n";
  ASSERT_TRUE(writeBytes(path + "/index.json",
                         std::vector<uint8_t>(index.begin(), index.end())));
  ASSERT_TRUE(
      writeBytes(path + "/manifest.json",
                 std::vector<uint8_t>(manifest.begin(), manifest.end())));
  checkpoint::Checkpoint loaded;
  ASSERT_TRUE(checkpoint::load(path, &loaded, &err)) << err;
  EXPECT_EQ(loaded.step, 7);
  EXPECT_EQ(loaded.seed, 3u);
  EXPECT_EQ(loaded.optimizer, "sgd");
  EXPECT_EQ(loaded.samplesConsumed, 56);
  ASSERT_EQ(loaded.states.size(), 2u);
  EXPECT_EQ(loaded.states[1].name, "w.momentum");
  EXPECT_EQ(loaded.states[1].kind, StateKind::OptimizerState);
  EXPECT_EQ(loaded.states[1].slot, "momentum");
  EXPECT_EQ(loaded.states[0].data, c.states[0].data);
  EXPECT_EQ(loaded.states[1].data, c.states[1].data);
}

TEST(Checkpoint, SafetensorsRoundTrip) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<int64_t> b = {-7};
  std::vector<uint16_t> c = {0x3f80, 0x4000, 0x4040};
  std::vector<uint8_t> image;
  std::string err;
  ASSERT_TRUE(safetensors::encode(
      {{"h0.attn.weight", DType::F32, {2, 3}, a.data(), 24},
       {"h0.attn.weight.adam_m", DType::I64, {}, b.data(), 8},
       {"emb \"q\"", DType::BF16, {3}, c.data(), 6}},
      {{"step", "12"}}, &image, &err))
      << err;
  uint64_t n = 0;
  std::memcpy(&n, image.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "data must start 8-byte aligned";
  safetensors::Header h;
  ASSERT_TRUE(safetensors::decodeHeader(image.data(), image.size(),
                                        image.size(), &h, &err))
      << err;
  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.tensors[0].name, "h0.attn.weight");
  EXPECT_EQ(h.tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.tensors[1].dtype, DType::I64);
  EXPECT_TRUE(h.tensors[1].shape.empty());
  EXPECT_EQ(h.tensors[2].name, "emb \"q\"");
  EXPECT_EQ(h.tensors[2].dtype, DType::BF16);
  EXPECT_EQ(h.metadata, (safetensors::Metadata{{"step", "12"}}));
  EXPECT_EQ(std::memcmp(image.data() + h.dataStart + h.tensors[0].begin,
                        a.data(), 24),
            0);
  EXPECT_EQ(image.size(), h.dataStart + 24 + 8 + 6);
  // Truncated data and a hostile header length are errors, not crashes.
  EXPECT_FALSE(safetensors::decodeHeader(image.data(), image.size() - 1,
                                         image.size() - 1, &h, &err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  std::vector<uint8_t> bad = image;
  bad[7] = 0x7f;
  EXPECT_FALSE(
      safetensors::decodeHeader(bad.data(), bad.size(), bad.size(), &h, &err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  bad = image;
  bad[8] = '[';
  EXPECT_FALSE(
      safetensors::decodeHeader(bad.data(), bad.size(), bad.size(), &h, &err));
  EXPECT_NE(err.find("malformed JSON header"), std::string::npos) << err;
}

TEST(Data, TokenWindowsAreDeterministic) {
  TempDir dir;
  std::vector<uint16_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint16_t>(i);
  ASSERT_TRUE(writeBytes(dir.file("t.bin"), bytesOf(tokens)));
  std::vector<data::InputSpec> specs = {{"ids", DType::I64, {3, 8}},
                                        {"labels", DType::I32, {3, 8}}};
  std::unique_ptr<data::Dataset> a, b, other;
  std::string err;
  ASSERT_TRUE(
      data::openTokens(specs, dir.file("t.bin"), DType::U16, 42, &a, &err))
      << err;
  ASSERT_TRUE(
      data::openTokens(specs, dir.file("t.bin"), DType::U16, 42, &b, &err));
  ASSERT_TRUE(
      data::openTokens(specs, dir.file("t.bin"), DType::U16, 43, &other, &err));
  std::vector<std::vector<uint8_t>> x, y, z;
  // Step 5 straight away equals step 5 after steps 0..4: no hidden state.
  for (int s = 0; s < 5; ++s)
    a->fill(s, &x);
  a->fill(5, &x);
  b->fill(5, &y);
  EXPECT_EQ(x, y);
  other->fill(5, &z);
  EXPECT_NE(x, z);
  b->fill(6, &y);
  EXPECT_NE(x, y);
  // Labels are the inputs shifted by one token, cast to their dtype.
  const int64_t *ids = reinterpret_cast<const int64_t *>(x[0].data());
  const int32_t *labels = reinterpret_cast<const int32_t *>(x[1].data());
  for (int r = 0; r < 3; ++r) {
    uint64_t off = data::tokenWindowOffset(42, 5, r, 1000, 9);
    EXPECT_LE(off, 1000u - 9);
    for (int t = 0; t < 8; ++t) {
      EXPECT_EQ(ids[r * 8 + t], int64_t(off + t));
      EXPECT_EQ(labels[r * 8 + t], int32_t(off + t + 1));
    }
  }
  // Too short for one window; wrong dtypes.
  ASSERT_TRUE(
      writeBytes(dir.file("short.bin"), bytesOf(std::vector<uint16_t>(8))));
  EXPECT_FALSE(
      data::openTokens(specs, dir.file("short.bin"), DType::U16, 1, &a, &err));
  EXPECT_NE(err.find("too short: it holds 8 tokens, a window needs 9"),
            std::string::npos)
      << err;
  ASSERT_TRUE(writeBytes(dir.file("odd.bin"), std::vector<uint8_t>(7)));
  EXPECT_FALSE(
      data::openTokens(specs, dir.file("odd.bin"), DType::U32, 1, &a, &err));
  EXPECT_NE(err.find("not a multiple of 4"), std::string::npos) << err;
  specs[0].dtype = DType::F32;
  EXPECT_FALSE(
      data::openTokens(specs, dir.file("t.bin"), DType::U16, 1, &a, &err));
  EXPECT_NE(err.find("dtype mismatch"), std::string::npos) << err;
}

TEST(Data, NpySamplesFollowSeededEpochPermutations) {
  // Each epoch of 10 samples is a permutation; batches of 4 straddle epochs.
  std::vector<int> seen(10, 0);
  for (int64_t s = 0; s < 5; ++s) // 20 positions = 2 epochs
    for (int64_t r = 0; r < 4; ++r)
      ++seen[data::sampleIndex(7, s, r, 4, 10)];
  EXPECT_EQ(seen, std::vector<int>(10, 2));
  EXPECT_EQ(data::sampleIndex(7, 3, 1, 4, 10),
            data::sampleIndex(7, 3, 1, 4, 10));
  bool differs = false;
  for (int64_t r = 0; r < 4; ++r)
    differs |=
        data::sampleIndex(7, 0, r, 4, 10) != data::sampleIndex(8, 0, r, 4, 10);
  EXPECT_TRUE(differs);
  TempDir dir;
  std::string err;
  std::vector<double> v(6);
  ASSERT_TRUE(tensorfile::writeNpyFile(dir.file("a.npy"), DType::F64, {3, 2},
                                       v.data(), 48, &err))
      << err;
  std::unique_ptr<data::Dataset> d;
  EXPECT_FALSE(data::openNpy({{"x", DType::F32, {4, 2}}}, {dir.file("a.npy")},
                             0, &d, &err));
  EXPECT_NE(err.find("expected samples of shape [N,2] float32 (N >= 1), got "
                     "shape [3,2] float64"),
            std::string::npos)
      << err;
}

//===----------------------------------------------------------------------===//
// The loop, checkpoints and resuming, through cleave-run
//===----------------------------------------------------------------------===//

TEST(Checkpoint, ResumeIsBitwiseIdentical) {
  TempDir dir;
  std::vector<uint8_t> kernel = buildSgdKernel(dir);
  if (kernel.empty())
    GTEST_SKIP() << "no clang to build the training kernel";
  ASSERT_TRUE(writeTrainingFiles(dir, trainingPlan(kernel)));
  std::string model = "'" + dir.file("m.cleave") + "' --data x='" +
                      dir.file("x.npy") + "' --data t='" + dir.file("t.npy") +
                      "' --seed 3";
  std::string ck = dir.file("ck");

  Result full = runTool(
      dir, model + " --steps 20 --log-json '" + dir.file("full.jsonl") +
               "' --export-safetensors '" + dir.file("full.safetensors") + "'");
  ASSERT_EQ(full.code, 0) << full.err;
  EXPECT_NE(full.out.find(" step     20/20 | loss "), std::string::npos)
      << full.out;
  EXPECT_NE(full.out.find("samples/s |"), std::string::npos);
  EXPECT_NE(full.out.find("| peak mem 0.0 MiB"), std::string::npos);
  std::vector<json::Value> want = lossFields(slurp(dir.file("full.jsonl")));
  ASSERT_EQ(want.size(), 20u);
  // The loss goes down.
  ASSERT_TRUE(want[0]["loss"].is_number()) << want[0];
  ASSERT_TRUE(want[19]["loss"].is_number()) << want[19];
  double first = want[0]["loss"].get<double>(),
         last = want[19]["loss"].get<double>();
  EXPECT_LT(last, first * 0.5) << want[0] << "\n" << want[19];

  Result part =
      runTool(dir, model +
                       " --steps 10 --save-every 5 "
                       "--checkpoint-dir '" +
                       ck + "' --log-json '" + dir.file("part.jsonl") + "'");
  ASSERT_EQ(part.code, 0) << part.err;
  EXPECT_TRUE(fileExists(ck + "/step-5/manifest.json"));
  EXPECT_TRUE(fileExists(ck + "/step-10/model.safetensors"));
  EXPECT_TRUE(fileExists(ck + "/step-10/index.json"));
  EXPECT_EQ(slurp(ck + "/latest"), "step-10\n");
  std::string indexText = slurp(ck + "/step-10/index.json"), jsonError;
  json::Value index;
  ASSERT_TRUE(json::parse(indexText, &index, &jsonError)) << jsonError;
  EXPECT_EQ(index.value("step", -1), 10) << indexText;
  EXPECT_EQ(index.value("rng_seed", -1), 3) << indexText;
  const json::Value *tensors = json::get(index, "tensors");
  ASSERT_TRUE(tensors && tensors->is_array()) << indexText;
  bool momentum = false;
  for (const json::Value &t : *tensors)
    momentum |= t.value("name", "") == "w.momentum" &&
                t.value("kind", "") == "optimizer_state";
  EXPECT_TRUE(momentum) << indexText;

  // Resume without --seed: the checkpoint's seed is used.
  std::string resumeArgs =
      "'" + dir.file("m.cleave") + "' --data x='" + dir.file("x.npy") +
      "' --data t='" + dir.file("t.npy") + "' --steps 20 --resume '" + ck +
      "' --log-json '" + dir.file("part.jsonl") + "' --export-safetensors '" +
      dir.file("resumed.safetensors") + "'";
  Result resumed = runTool(dir, resumeArgs);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming from '" + ck + "/step-10' at step 10"),
            std::string::npos)
      << resumed.err;
  EXPECT_EQ(lossFields(slurp(dir.file("part.jsonl"))), want);
  EXPECT_EQ(slurp(dir.file("resumed.safetensors")),
            slurp(dir.file("full.safetensors")));

  // A save killed midway: a temporary directory and a step directory without
  // its manifest. Resuming skips them, says so, and still matches.
  ASSERT_EQ(std::system(("mkdir -p '" + ck + "/.tmp-step-15-999' && cp -r '" +
                         ck + "/step-10' '" + ck + "/step-15' && rm '" + ck +
                         "/step-15/manifest.json' && head -c 10 '" + ck +
                         "/step-10/model.safetensors' > '" + ck +
                         "/.tmp-step-15-999/model.safetensors'")
                            .c_str()),
            0);
  ASSERT_TRUE(writeBytes(dir.file("part.jsonl"), {}));
  resumed = runTool(dir, resumeArgs);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("warning: skipping checkpoint '" + ck +
                             "/step-15' is incomplete: '" + ck +
                             "/step-15/manifest.json' is missing"),
            std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.err.find("resuming from '" + ck + "/step-10'"),
            std::string::npos);
  std::vector<json::Value> tail(want.begin() + 10, want.end());
  EXPECT_EQ(lossFields(slurp(dir.file("part.jsonl"))), tail);

  // Naming the incomplete checkpoint itself is refused.
  Result refused = runTool(dir, "'" + dir.file("m.cleave") +
                                    "' --synthetic --steps 20 --resume '" + ck +
                                    "/step-15'");
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("error: checkpoint '" + ck +
                             "/step-15' is incomplete: '" + ck +
                             "/step-15/manifest.json' is missing (the save "
                             "did not finish)"),
            std::string::npos)
      << refused.err;

  // Damaged files are refused, naming the file.
  std::string step5 = ck + "/step-5";
  std::string model5 = slurp(step5 + "/model.safetensors");
  ASSERT_TRUE(
      writeBytes(step5 + "/model.safetensors",
                 std::vector<uint8_t>(model5.begin(), model5.end() - 3)));
  std::string err;
  EXPECT_FALSE(checkpoint::verify(step5, &err));
  EXPECT_NE(err.find("'" + step5 + "/model.safetensors' is truncated: "),
            std::string::npos)
      << err;
  std::vector<uint8_t> flipped(model5.begin(), model5.end());
  flipped[flipped.size() - 2] ^= 1;
  ASSERT_TRUE(writeBytes(step5 + "/model.safetensors", flipped));
  EXPECT_FALSE(checkpoint::verify(step5, &err));
  EXPECT_NE(err.find("'" + step5 +
                     "/model.safetensors' is corrupted: its "
                     "SHA-256 does not match the manifest"),
            std::string::npos)
      << err;
  refused =
      runTool(dir, "'" + dir.file("m.cleave") +
                       "' --synthetic --steps 20 --resume '" + step5 + "'");
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("model.safetensors' is corrupted"),
            std::string::npos)
      << refused.err;
  ASSERT_TRUE(writeBytes(step5 + "/model.safetensors",
                         std::vector<uint8_t>(model5.begin(), model5.end())));
  EXPECT_TRUE(checkpoint::verify(step5, &err)) << err;
  std::string idx = slurp(step5 + "/index.json");
  ASSERT_TRUE(writeBytes(step5 + "/index.json",
                         std::vector<uint8_t>(idx.begin(), idx.end() - 1)));
  EXPECT_FALSE(checkpoint::verify(step5, &err));
  EXPECT_NE(err.find("index.json' is truncated"), std::string::npos) << err;
}

TEST(Train, CliErrors) {
  TempDir dir;
  Plan p = trainingPlan({});
  p.kernelNames.clear();
  p.commands.clear();
  ASSERT_TRUE(writeTrainingFiles(dir, p));
  std::string m = "'" + dir.file("m.cleave") + "'";
  Result r = runTool(dir, m);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("this is a training plan: give --steps N"),
            std::string::npos)
      << r.err;
  r = runTool(dir, m + " --steps 2");
  EXPECT_NE(r.err.find("the plan reads data inputs 'x', 't': give --data"),
            std::string::npos)
      << r.err;
  r = runTool(dir, m + " --steps 2 --data x='" + dir.file("x.npy") + "'");
  EXPECT_NE(r.err.find("data input 't' is not given; add --data t=FILE.npy"),
            std::string::npos)
      << r.err;
  r = runTool(dir, m + " --steps 2 --data y=a.npy");
  EXPECT_NE(r.err.find("no data input named 'y' (its data inputs: 'x', 't')"),
            std::string::npos)
      << r.err;
  r = runTool(dir, m + " --steps 2 --data x='" + dir.file("t.npy") +
                       "' --data t='" + dir.file("t.npy") + "'");
  EXPECT_NE(r.err.find("expected samples of shape [N,4] float32"),
            std::string::npos)
      << r.err;
  r = runTool(dir, m + " --steps 2 --tokens '" + dir.file("x.npy") + "'");
  EXPECT_NE(r.err.find("dtype mismatch: data input 'x' ([4,4] float32) is "
                       "not an integer tensor"),
            std::string::npos)
      << r.err;
  r = runTool(dir, m + " --steps 2 --synthetic --save-every 1");
  EXPECT_NE(r.err.find("--save-every needs --checkpoint-dir"),
            std::string::npos)
      << r.err;
  // The synthetic data runs (the plan only fills buffers) and logs.
  r = runTool(dir, m + " --steps 3 --synthetic --log-every 2");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(
      r.out.find(" step      2/3 | loss 0.0000 | lr 5.000e-02 | grad norm "
                 "0.000 | "),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" step      3/3 |"), std::string::npos);
  EXPECT_EQ(r.out.find(" step      1/3 |"), std::string::npos);
  // Training options on an inference plan.
  Plan inf;
  inf.arenaBytes = 64;
  std::string err;
  ASSERT_TRUE(writeFile(dir.file("inf.cleave"), inf, &err));
  r = runTool(dir, "'" + dir.file("inf.cleave") + "' --steps 3");
  EXPECT_NE(r.err.find("the plan is not a training plan"), std::string::npos)
      << r.err;
}
