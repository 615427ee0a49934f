//===- Data.h - Training data: .npy, token streams, synthetic ---*- C++ -*-===//
//
// A dataset fills the data inputs of a training plan for a given step. Every
// batch depends only on (seed, step), never on what ran before, so a resumed
// run sees the same batches as an uninterrupted one.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DATA_H
#define CLEAVE_DATA_H

#include "cleave/PlanFormat.h"
#include "cleave/TensorFile.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cleave::data {

/// A plan data input: its name, dtype and shape (batch dimension first).
struct InputSpec {
  std::string name;
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;
};

class Dataset {
public:
  virtual ~Dataset() = default;
  /// Fills (*out)[i] with the bytes of input i for 0-based `step`; each is
  /// resized to the input's byte size.
  virtual void fill(int64_t step, std::vector<std::vector<uint8_t>> *out) = 0;
  /// One line for logs: "npy: 1000 samples", ...
  virtual std::string describe() const = 0;
};

/// SplitMix64 finalizer: a well-mixed 64-bit hash.
uint64_t mix(uint64_t x);

/// The dataset row used by batch row `row` of `step`: position
/// p = step * batch + row in an endless sequence of epochs, each a
/// permutation of [0, numSamples) seeded by (seed, epoch).
int64_t sampleIndex(uint64_t seed, int64_t step, int64_t row, int64_t batch,
                    int64_t numSamples);

/// Start of the window of `windowLen` tokens for batch row `row` of `step`:
/// pseudo-random by (seed, step, row) in [0, numTokens - windowLen].
uint64_t tokenWindowOffset(uint64_t seed, int64_t step, int64_t row,
                           uint64_t numTokens, uint64_t windowLen);

/// One .npy file per data input, in order; each holds [N, ...] with the
/// input's shape after the batch dimension and its dtype; N equal for all.
bool openNpy(const std::vector<InputSpec> &inputs,
             const std::vector<std::string> &files, uint64_t seed,
             std::unique_ptr<Dataset> *out, std::string *error);

/// Arrays in memory, one per data input, in order (what openNpy reads
/// from its files).
bool openArrays(const std::vector<InputSpec> &inputs,
                std::vector<tensorfile::HostTensor> arrays, uint64_t seed,
                std::unique_ptr<Dataset> *out, std::string *error);

/// A flat token file (`tokenDType` U16 or U32). The first data input
/// ([B, T], an integer dtype) gets window[:T] of a T+1-token window per row,
/// the second (if any, same shape) window[1:]; values are cast to the
/// inputs' dtypes. Vocabulary bounds are not checked.
bool openTokens(const std::vector<InputSpec> &inputs, const std::string &file,
                plan::DType tokenDType, uint64_t seed,
                std::unique_ptr<Dataset> *out, std::string *error);

/// Random data by (seed, step): integers in [0, vocab), floats in [-1, 1).
bool openSynthetic(const std::vector<InputSpec> &inputs, uint64_t seed,
                   int64_t vocab, std::unique_ptr<Dataset> *out,
                   std::string *error);

} // namespace cleave::data

#endif // CLEAVE_DATA_H
