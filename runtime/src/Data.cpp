//===- Data.cpp - Training data: .npy arrays, token streams, synthetic ----===//

#include "cleave/Data.h"
#include "cleave/TensorFile.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cleave::data {

using namespace plan;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static uint64_t mix3(uint64_t a, uint64_t b, uint64_t c) {
  return mix(mix(mix(a) ^ b) ^ c);
}

/// Fisher-Yates permutation of [0, n) seeded by (seed, epoch).
static std::vector<int64_t> permutation(uint64_t seed, int64_t epoch,
                                        int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    p[i] = i;
  uint64_t state =
      mix3(seed, 0x7065726d /*perm*/, static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    state = mix(state);
    int64_t j = static_cast<int64_t>(state % static_cast<uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

int64_t sampleIndex(uint64_t seed, int64_t step, int64_t row, int64_t batch,
                    int64_t numSamples) {
  int64_t pos = step * batch + row;
  return permutation(seed, pos / numSamples, numSamples)[pos % numSamples];
}

uint64_t tokenWindowOffset(uint64_t seed, int64_t step, int64_t row,
                           uint64_t numTokens, uint64_t windowLen) {
  uint64_t span = numTokens - windowLen + 1;
  return mix3(seed, static_cast<uint64_t>(step), static_cast<uint64_t>(row)) %
         span;
}

static std::string describe(const InputSpec &in) {
  return "'" + in.name + "' (" + tensorfile::shapeToString(in.shape) + " " +
         dtypeName(in.dtype) + ")";
}

static bool isInteger(DType t) {
  switch (t) {
  case DType::U8:
  case DType::I8:
  case DType::U16:
  case DType::I16:
  case DType::I32:
  case DType::I64:
  case DType::U32:
  case DType::U64:
    return true;
  default:
    return false;
  }
}

/// Stores integer `v` as dtype `t` (truncating like a C cast).
static void storeInt(DType t, uint64_t v, uint8_t *p) {
  size_t n = dtypeSize(t);
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}

//===----------------------------------------------------------------------===//
// Value ranges
//===----------------------------------------------------------------------===//

std::string ValueRange::describe() const {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")" +
         (hasExtra ? " (or " + std::to_string(extra) + ")" : std::string());
}

int64_t integerAt(DType t, const void *data, size_t i) {
  switch (t) {
  case DType::I8:
    return static_cast<const int8_t *>(data)[i];
  case DType::U8:
    return static_cast<const uint8_t *>(data)[i];
  case DType::I16:
    return static_cast<const int16_t *>(data)[i];
  case DType::U16:
    return static_cast<const uint16_t *>(data)[i];
  case DType::I32:
    return static_cast<const int32_t *>(data)[i];
  case DType::U32:
    return static_cast<const uint32_t *>(data)[i];
  case DType::I64:
    return static_cast<const int64_t *>(data)[i];
  case DType::U64: {
    uint64_t v = static_cast<const uint64_t *>(data)[i];
    return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                : static_cast<int64_t>(v);
  }
  default:
    return 0;
  }
}

int64_t findOutsideRange(const ValueRange &range, DType t, const void *data,
                         size_t count) {
  if (!range.known || !isInteger(t))
    return -1;
  for (size_t i = 0; i < count; ++i)
    if (!range.contains(integerAt(t, data, i)))
      return static_cast<int64_t>(i);
  return -1;
}

std::string describeOutside(const ValueRange &range, int64_t v,
                            const std::string &where) {
  return "holds " + std::to_string(v) + " at " + where + ", outside " +
         range.describe() +
         ", the values the model takes there (a token id beyond the "
         "vocabulary, a label beyond the classes?)";
}

//===----------------------------------------------------------------------===//
// .npy arrays
//===----------------------------------------------------------------------===//

namespace {
class NpyDataset final : public Dataset {
public:
  NpyDataset(std::vector<InputSpec> inputs,
             std::vector<tensorfile::HostTensor> arrays, uint64_t seed)
      : inputs(std::move(inputs)), arrays(std::move(arrays)), seed(seed) {
    numSamples = this->arrays[0].shape[0];
  }
  void fill(int64_t step, std::vector<std::vector<uint8_t>> *out) override {
    int64_t batch = inputs[0].shape[0];
    out->resize(inputs.size());
    for (int64_t b = 0; b < batch; ++b) {
      int64_t pos = step * batch + b;
      const std::vector<int64_t> &perm = epochPermutation(pos / numSamples);
      int64_t sample = perm[pos % numSamples];
      for (size_t i = 0; i < inputs.size(); ++i) {
        TensorInfo t;
        t.dtype = inputs[i].dtype;
        t.shape = inputs[i].shape;
        size_t rowBytes = t.byteSize() / static_cast<size_t>(batch);
        (*out)[i].resize(t.byteSize());
        std::memcpy((*out)[i].data() + b * rowBytes,
                    arrays[i].data.data() + sample * rowBytes, rowBytes);
      }
    }
  }
  std::string describe() const override {
    return "npy: " + std::to_string(numSamples) + " samples";
  }

private:
  const std::vector<int64_t> &epochPermutation(int64_t epoch) {
    auto it = cache.find(epoch);
    if (it != cache.end())
      return it->second;
    if (cache.size() > 2)
      cache.clear();
    return cache[epoch] = permutation(seed, epoch, numSamples);
  }
  std::vector<InputSpec> inputs;
  std::vector<tensorfile::HostTensor> arrays;
  uint64_t seed;
  int64_t numSamples = 0;
  std::map<int64_t, std::vector<int64_t>> cache;
};
} // namespace

/// Checks arrays against the data inputs; `from[i]` says where array i
/// came from (" from 'FILE'", or empty).
static bool checkArrays(const std::vector<InputSpec> &inputs,
                        std::vector<tensorfile::HostTensor> &arrays,
                        const std::vector<std::string> &from,
                        std::string *error) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec &in = inputs[i];
    tensorfile::HostTensor &a = arrays[i];
    if (in.dtype == DType::BF16 && a.dtype == DType::U16)
      a.dtype = DType::BF16;
    std::vector<int64_t> row(in.shape.begin() + 1, in.shape.end());
    if (a.dtype != in.dtype || a.shape.size() != in.shape.size() ||
        std::vector<int64_t>(a.shape.begin() + 1, a.shape.end()) != row ||
        a.shape[0] < 1) {
      std::string want = "[N";
      for (int64_t d : row)
        want += "," + std::to_string(d);
      *error = "data input '" + in.name + "'" + from[i] +
               ": expected samples of shape " + want + "] " +
               dtypeName(in.dtype) + " (N >= 1), got shape " +
               tensorfile::shapeToString(a.shape) + " " + dtypeName(a.dtype);
      return false;
    }
    if (a.shape[0] != arrays[0].shape[0]) {
      *error = "data input '" + in.name + "'" + from[i] + " has " +
               std::to_string(a.shape[0]) + " samples but '" + inputs[0].name +
               "' has " + std::to_string(arrays[0].shape[0]);
      return false;
    }
    if (in.shape[0] != inputs[0].shape[0]) {
      *error = "data inputs '" + inputs[0].name + "' and '" + in.name +
               "' have different batch sizes";
      return false;
    }
    size_t count = a.data.size() / dtypeSize(a.dtype);
    int64_t bad = findOutsideRange(in.range, a.dtype, a.data.data(), count);
    if (bad >= 0) {
      size_t perSample = count / static_cast<size_t>(a.shape[0]);
      *error = "data input '" + in.name + "'" + from[i] + " " +
               describeOutside(in.range, integerAt(a.dtype, a.data.data(), bad),
                               "element " + std::to_string(bad) + " (sample " +
                                   std::to_string(bad / perSample) + ")");
      return false;
    }
  }
  return true;
}

static bool checkBatchDimensions(const std::vector<InputSpec> &inputs,
                                 size_t given, const char *what,
                                 std::string *error) {
  if (inputs.empty() || given != inputs.size()) {
    *error = std::string(what) + " needs one " +
             (std::strcmp(what, "--data") == 0 ? "file" : "array") +
             " per data input (" + std::to_string(inputs.size()) + " inputs, " +
             std::to_string(given) + " given)";
    return false;
  }
  for (const InputSpec &in : inputs)
    if (in.shape.empty() || in.shape[0] < 1) {
      *error = "data input " + describe(in) + " has no batch dimension";
      return false;
    }
  return true;
}

bool openNpy(const std::vector<InputSpec> &inputs,
             const std::vector<std::string> &files, uint64_t seed,
             std::unique_ptr<Dataset> *out, std::string *error) {
  if (!checkBatchDimensions(inputs, files.size(), "--data", error))
    return false;
  std::vector<tensorfile::HostTensor> arrays(inputs.size());
  std::vector<std::string> from(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string err;
    if (!tensorfile::readTensorFile(files[i], &arrays[i], &err)) {
      *error = "data input '" + inputs[i].name + "': " + err;
      return false;
    }
    from[i] = " from '" + files[i] + "'";
  }
  if (!checkArrays(inputs, arrays, from, error))
    return false;
  *out = std::make_unique<NpyDataset>(inputs, std::move(arrays), seed);
  return true;
}

bool openArrays(const std::vector<InputSpec> &inputs,
                std::vector<tensorfile::HostTensor> arrays, uint64_t seed,
                std::unique_ptr<Dataset> *out, std::string *error) {
  if (!checkBatchDimensions(inputs, arrays.size(), "data", error) ||
      !checkArrays(inputs, arrays, std::vector<std::string>(inputs.size()),
                   error))
    return false;
  *out = std::make_unique<NpyDataset>(inputs, std::move(arrays), seed);
  return true;
}

//===----------------------------------------------------------------------===//
// Token streams
//===----------------------------------------------------------------------===//

namespace {
class TokenDataset final : public Dataset {
public:
  TokenDataset(std::vector<InputSpec> inputs, const uint8_t *tokens,
               size_t mapped, uint64_t numTokens, DType tokenDType,
               uint64_t seed)
      : inputs(std::move(inputs)), tokens(tokens), mapped(mapped),
        numTokens(numTokens), tokenDType(tokenDType), seed(seed) {}
  ~TokenDataset() override {
    if (mapped)
      ::munmap(const_cast<uint8_t *>(tokens), mapped);
  }
  uint64_t token(uint64_t i) const {
    if (tokenDType == DType::U16)
      return uint64_t(tokens[2 * i]) | uint64_t(tokens[2 * i + 1]) << 8;
    return uint64_t(tokens[4 * i]) | uint64_t(tokens[4 * i + 1]) << 8 |
           uint64_t(tokens[4 * i + 2]) << 16 |
           uint64_t(tokens[4 * i + 3]) << 24;
  }
  void fill(int64_t step, std::vector<std::vector<uint8_t>> *out) override {
    int64_t B = inputs[0].shape[0], T = inputs[0].shape[1];
    out->resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      (*out)[i].resize(B * T * dtypeSize(inputs[i].dtype));
    for (int64_t b = 0; b < B; ++b) {
      uint64_t off = tokenWindowOffset(seed, step, b, numTokens, T + 1);
      for (size_t i = 0; i < inputs.size(); ++i) {
        size_t elem = dtypeSize(inputs[i].dtype);
        uint8_t *row = (*out)[i].data() + b * T * elem;
        for (int64_t t = 0; t < T; ++t)
          storeInt(inputs[i].dtype, token(off + t + i), row + t * elem);
      }
    }
  }
  std::string describe() const override {
    return "tokens: " + std::to_string(numTokens) + " " +
           dtypeName(tokenDType) + " tokens";
  }
  /// Checks every token an input reads against the input's range: input i
  /// reads tokens [i, numTokens - 2 + i] (the first T or the last T of a
  /// window of T + 1). Returns false with `*error` naming the first token
  /// outside.
  bool checkRanges(const std::string &file, std::string *error) const {
    bool any = false;
    for (const InputSpec &in : inputs)
      any |= in.range.known;
    for (uint64_t p = 0; any && p < numTokens; ++p) {
      uint64_t v = token(p);
      for (uint64_t i = 0; i < inputs.size(); ++i) {
        const ValueRange &r = inputs[i].range;
        if (p < i || p > numTokens - 2 + i ||
            r.contains(static_cast<int64_t>(v)))
          continue;
        *error = "token file '" + file + "' (data input '" + inputs[i].name +
                 "') " +
                 describeOutside(r, static_cast<int64_t>(v),
                                 "token " + std::to_string(p) + " (byte " +
                                     std::to_string(p * dtypeSize(tokenDType)) +
                                     ")");
        return false;
      }
    }
    return true;
  }

private:
  std::vector<InputSpec> inputs;
  const uint8_t *tokens;
  size_t mapped;
  uint64_t numTokens;
  DType tokenDType;
  uint64_t seed;
};
} // namespace

bool openTokens(const std::vector<InputSpec> &inputs, const std::string &file,
                DType tokenDType, uint64_t seed, std::unique_ptr<Dataset> *out,
                std::string *error) {
  if (tokenDType != DType::U16 && tokenDType != DType::U32) {
    *error = "--token-dtype must be uint16 or uint32";
    return false;
  }
  if (inputs.empty() || inputs.size() > 2) {
    *error = "--tokens feeds one or two data inputs (input ids, labels); the "
             "plan has " +
             std::to_string(inputs.size());
    return false;
  }
  for (const InputSpec &in : inputs) {
    if (in.shape.size() != 2 || in.shape[0] < 1 || in.shape[1] < 1 ||
        in.shape != inputs[0].shape) {
      *error = "--tokens needs [batch, sequence] data inputs of one shape; "
               "input " +
               describe(in) + " is not";
      return false;
    }
    if (!isInteger(in.dtype)) {
      *error = "dtype mismatch: data input " + describe(in) +
               " is not an integer tensor, so it cannot take tokens";
      return false;
    }
  }
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    *error = "cannot open token file '" + file + "': " + std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  size_t size = static_cast<size_t>(st.st_size);
  size_t elem = dtypeSize(tokenDType);
  uint64_t T = static_cast<uint64_t>(inputs[0].shape[1]);
  if (size % elem != 0) {
    ::close(fd);
    *error = "token file '" + file + "' has " + std::to_string(size) +
             " bytes, not a multiple of " + std::to_string(elem) + " (" +
             dtypeName(tokenDType) + " tokens); is --token-dtype right?";
    return false;
  }
  uint64_t numTokens = size / elem;
  if (numTokens < T + 1) {
    ::close(fd);
    *error = "token file '" + file + "' is too short: it holds " +
             std::to_string(numTokens) + " tokens, a window needs " +
             std::to_string(T + 1) + " (sequence length " + std::to_string(T) +
             " + 1)";
    return false;
  }
  void *p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    *error = "cannot map token file '" + file + "': " + std::strerror(errno);
    return false;
  }
  auto tokens = std::make_unique<TokenDataset>(
      inputs, static_cast<uint8_t *>(p), size, numTokens, tokenDType, seed);
  if (!tokens->checkRanges(file, error))
    return false;
  *out = std::move(tokens);
  return true;
}

//===----------------------------------------------------------------------===//
// Synthetic data
//===----------------------------------------------------------------------===//

namespace {
class SyntheticDataset final : public Dataset {
public:
  SyntheticDataset(std::vector<InputSpec> inputs, uint64_t seed, int64_t vocab)
      : inputs(std::move(inputs)), seed(seed), vocab(vocab) {}
  void fill(int64_t step, std::vector<std::vector<uint8_t>> *out) override {
    out->resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      TensorInfo t;
      t.dtype = inputs[i].dtype;
      t.shape = inputs[i].shape;
      int64_t n = t.numElements();
      size_t elem = dtypeSize(t.dtype);
      std::vector<uint8_t> &buf = (*out)[i];
      buf.assign(t.byteSize(), 0);
      uint64_t state = mix3(seed, static_cast<uint64_t>(step), i + 1);
      for (int64_t k = 0; k < n; ++k) {
        state = mix(state);
        uint8_t *p = buf.data() + k * elem;
        double u = static_cast<double>(state >> 11) * 0x1.0p-53 * 2.0 - 1.0;
        switch (t.dtype) {
        case DType::F32: {
          float f = static_cast<float>(u);
          std::memcpy(p, &f, 4);
          break;
        }
        case DType::F64:
          std::memcpy(p, &u, 8);
          break;
        case DType::BF16: {
          float f = static_cast<float>(u);
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          storeInt(DType::U16, bits >> 16, p);
          break;
        }
        case DType::F16: {
          // |u| < 1: exponent in [-24, -1]; flush the tiny ones to zero.
          float f = static_cast<float>(u);
          uint16_t h = f < 0 ? 0x8000 : 0;
          float a = std::fabs(f);
          if (a >= 0x1.0p-14f) {
            int e;
            float m = std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
            h |= static_cast<uint16_t>((e - 1 + 15) << 10) |
                 static_cast<uint16_t>((m * 2.0f - 1.0f) * 1024.0f);
          }
          storeInt(DType::U16, h, p);
          break;
        }
        case DType::Bool:
          p[0] = state & 1;
          break;
        default:
          storeInt(t.dtype, state % static_cast<uint64_t>(vocab), p);
        }
      }
    }
  }
  std::string describe() const override {
    return "synthetic (integers below " + std::to_string(vocab) + ")";
  }

private:
  std::vector<InputSpec> inputs;
  uint64_t seed;
  int64_t vocab;
};
} // namespace

bool openSynthetic(const std::vector<InputSpec> &inputs, uint64_t seed,
                   int64_t vocab, std::unique_ptr<Dataset> *out,
                   std::string *error) {
  if (vocab < 1) {
    *error = "the synthetic vocabulary size must be at least 1";
    return false;
  }
  for (const InputSpec &in : inputs)
    if (in.range.known && in.range.lo <= 0 && vocab > in.range.hi) {
      *error = "the synthetic vocabulary size " + std::to_string(vocab) +
               " is above the model's: data input '" + in.name +
               "' takes values in " + in.range.describe() +
               ", so give at most " + std::to_string(in.range.hi);
      return false;
    }
  *out = std::make_unique<SyntheticDataset>(inputs, seed, vocab);
  return true;
}

} // namespace cleave::data
