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

/// The values an integer data input may hold, from the plan's
/// `valid_range.<input>` metadata: [lo, hi), or `extra` (a loss's ignore
/// index). For a token embedding's ids, hi is the model's vocabulary (lo is
/// -hi: Gather counts negative ids from the end); for cross-entropy labels,
/// [0, classes).
struct ValueRange {
  bool known = false; ///< False: the plan says nothing, any value goes.
  bool hasExtra = false;
  int64_t lo = 0, hi = 0, extra = 0;

  bool contains(int64_t v) const {
    return !known || (v >= lo && v < hi) || (hasExtra && v == extra);
  }
  /// "[lo, hi)", or "[lo, hi) (or extra)".
  std::string describe() const;
};

/// A plan data input: its name, dtype and shape (batch dimension first).
struct InputSpec {
  std::string name;
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;
  /// What it may hold; openNpy, openArrays, openTokens and openSynthetic
  /// refuse data outside it.
  ValueRange range = {};
};

/// Element `i` of `data`, an array of integer dtype `t`, as an int64 (a
/// uint64 above INT64_MAX reads as INT64_MAX); 0 for other dtypes.
int64_t integerAt(plan::DType t, const void *data, size_t i);

/// The index of the first of the `count` elements of `data` (integer dtype
/// `t`) that `range` does not contain; -1 when it contains them all.
int64_t findOutsideRange(const ValueRange &range, plan::DType t,
                         const void *data, size_t count);

/// "holds V at WHERE, outside [lo, hi), the values the model takes there
/// (...)": the end of the message that refuses value `v` at `where`.
std::string describeOutside(const ValueRange &range, int64_t v,
                            const std::string &where);

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
/// An element outside its input's range is refused, naming the value, its
/// element index in the file and its sample.
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
/// inputs' dtypes. A token that an input reads (the first input reads every
/// token but the last, the second every token but the first) outside the
/// input's range is refused, naming the first such token, its position in
/// the file (token and byte) and the input.
bool openTokens(const std::vector<InputSpec> &inputs, const std::string &file,
                plan::DType tokenDType, uint64_t seed,
                std::unique_ptr<Dataset> *out, std::string *error);

/// Random data by (seed, step): integers in [0, vocab), floats in [-1, 1).
/// A `vocab` above what an input's range holds (its hi, where its lo is at
/// most 0) is refused, naming both.
bool openSynthetic(const std::vector<InputSpec> &inputs, uint64_t seed,
                   int64_t vocab, std::unique_ptr<Dataset> *out,
                   std::string *error);

} // namespace cleave::data

#endif // CLEAVE_DATA_H
