//===- DataTest.cpp - Training data against the model's value ranges ------===//
//
// Token ids beyond the model's vocabulary and labels beyond its classes
// (the plan's valid_range metadata) are refused when the data is opened,
// naming the first bad value and where it lies; synthetic data stays below
// the vocabulary.
//
//===----------------------------------------------------------------------===//

#include "cleave/Data.h"
#include "TestUtil.h"
#include "cleave/TensorFile.h"

#include <gtest/gtest.h>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

/// [-vocab, vocab): the ids of an embedding of `vocab` rows.
data::ValueRange ids(int64_t vocab) { return {true, false, -vocab, vocab, 0}; }
/// [0, classes) or the ignore index -100: cross-entropy labels.
data::ValueRange labels(int64_t classes) {
  return {true, true, 0, classes, -100};
}

TEST(DataRanges, FindOutsideRange) {
  std::vector<int64_t> v = {0, 63, -64, -100, 64, 1};
  EXPECT_EQ(data::findOutsideRange(ids(64), DType::I64, v.data(), v.size()), 3);
  EXPECT_EQ(data::findOutsideRange(labels(64), DType::I64, v.data(), v.size()),
            2);
  EXPECT_EQ(data::findOutsideRange(ids(64), DType::I64, v.data(), 3), -1);
  // An unknown range holds everything; floats are not checked.
  EXPECT_EQ(data::findOutsideRange({}, DType::I64, v.data(), v.size()), -1);
  std::vector<float> f = {1e9f};
  EXPECT_EQ(data::findOutsideRange(ids(4), DType::F32, f.data(), 1), -1);
  // Unsigned ids: 65535 is no negative id.
  std::vector<uint16_t> u = {3, 65535};
  EXPECT_EQ(data::findOutsideRange(ids(64), DType::U16, u.data(), 2), 1);
  EXPECT_EQ(data::integerAt(DType::U16, u.data(), 1), 65535);
  EXPECT_EQ(labels(10).describe(), "[0, 10) (or -100)");
}

TEST(DataRanges, TokenFileWithAnIdAtTheVocabularyIsRefused) {
  TempDir dir;
  std::vector<uint16_t> tokens(100);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint16_t>(i % 64);
  ASSERT_TRUE(writeBytes(dir.file("ok.bin"), bytesOf(tokens)));
  std::vector<data::InputSpec> specs = {
      {"input_ids", DType::I64, {2, 8}, ids(64)},
      {"labels", DType::I64, {2, 8}, labels(64)}};
  std::unique_ptr<data::Dataset> d;
  std::string err;
  EXPECT_TRUE(
      data::openTokens(specs, dir.file("ok.bin"), DType::U16, 1, &d, &err))
      << err;

  tokens[37] = 64;
  ASSERT_TRUE(writeBytes(dir.file("bad.bin"), bytesOf(tokens)));
  d.reset();
  EXPECT_FALSE(
      data::openTokens(specs, dir.file("bad.bin"), DType::U16, 1, &d, &err));
  EXPECT_FALSE(d);
  EXPECT_NE(err.find("token file '" + dir.file("bad.bin") +
                     "' (data input 'input_ids') holds 64 at token 37 (byte "
                     "74), outside [-64, 64)"),
            std::string::npos)
      << err;

  // The last token is only ever a label, the first only an input id.
  tokens[37] = 1;
  tokens.back() = 64;
  ASSERT_TRUE(writeBytes(dir.file("last.bin"), bytesOf(tokens)));
  EXPECT_FALSE(
      data::openTokens(specs, dir.file("last.bin"), DType::U16, 1, &d, &err));
  EXPECT_NE(err.find("(data input 'labels') holds 64 at token 99 (byte 198)"),
            std::string::npos)
      << err;
  // Without labels, the last token is read by nothing.
  EXPECT_TRUE(data::openTokens({specs[0]}, dir.file("last.bin"), DType::U16, 1,
                               &d, &err))
      << err;
  // uint32 tokens: the byte offset counts 4 bytes a token.
  std::vector<uint32_t> wide(tokens.begin(), tokens.end());
  wide.back() = 1;
  wide[5] = 70000;
  ASSERT_TRUE(writeBytes(dir.file("wide.bin"), bytesOf(wide)));
  EXPECT_FALSE(
      data::openTokens(specs, dir.file("wide.bin"), DType::U32, 1, &d, &err));
  EXPECT_NE(err.find("holds 70000 at token 5 (byte 20)"), std::string::npos)
      << err;
}

TEST(DataRanges, NpyElementOutsideItsRangeIsRefused) {
  TempDir dir;
  std::string err;
  std::vector<int64_t> v(3 * 4, 1);
  v[6] = -101; // sample 1, element 2 of it
  ASSERT_TRUE(tensorfile::writeNpyFile(dir.file("labels.npy"), DType::I64,
                                       {3, 4}, v.data(), v.size() * 8, &err))
      << err;
  std::unique_ptr<data::Dataset> d;
  EXPECT_FALSE(data::openNpy({{"labels", DType::I64, {2, 4}, labels(10)}},
                             {dir.file("labels.npy")}, 0, &d, &err));
  EXPECT_NE(err.find("data input 'labels' from '" + dir.file("labels.npy") +
                     "' holds -101 at element 6 (sample 1), outside [0, 10) "
                     "(or -100)"),
            std::string::npos)
      << err;
  v[6] = -100;
  ASSERT_TRUE(tensorfile::writeNpyFile(dir.file("labels.npy"), DType::I64,
                                       {3, 4}, v.data(), v.size() * 8, &err));
  EXPECT_TRUE(data::openNpy({{"labels", DType::I64, {2, 4}, labels(10)}},
                            {dir.file("labels.npy")}, 0, &d, &err))
      << err;
}

TEST(DataRanges, SyntheticDataStaysBelowTheVocabulary) {
  std::vector<data::InputSpec> specs = {
      {"input_ids", DType::I32, {4, 16}, ids(50)},
      {"labels", DType::I64, {4, 16}, labels(50)}};
  std::unique_ptr<data::Dataset> d;
  std::string err;
  ASSERT_TRUE(data::openSynthetic(specs, 3, 50, &d, &err)) << err;
  std::vector<std::vector<uint8_t>> batch;
  bool sawTop = false;
  for (int64_t step = 0; step < 20; ++step) {
    d->fill(step, &batch);
    for (size_t k = 0; k < specs.size(); ++k) {
      EXPECT_EQ(data::findOutsideRange(specs[k].range, specs[k].dtype,
                                       batch[k].data(), 64),
                -1);
      for (size_t i = 0; i < 64; ++i)
        sawTop |= data::integerAt(specs[k].dtype, batch[k].data(), i) == 49;
    }
  }
  EXPECT_TRUE(sawTop);
  EXPECT_FALSE(data::openSynthetic(specs, 3, 51, &d, &err));
  EXPECT_NE(err.find("the synthetic vocabulary size 51 is above the model's: "
                     "data input 'input_ids' takes values in [-50, 50), so "
                     "give at most 50"),
            std::string::npos)
      << err;
}

} // namespace
