//===- TensorFileTest.cpp - .npy and TensorProto readers/writer -----------===//

#include "cleave/TensorFile.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::tensorfile;
using namespace cleave::test;

namespace {

std::vector<uint8_t> npyImage(int major, const std::string &dict,
                              const std::vector<uint8_t> &data) {
  std::string header = dict;
  size_t pre = major == 1 ? 10 : 12;
  header.append((64 - (pre + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out = {
      0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  size_t n = header.size();
  out.push_back(n & 0xff);
  out.push_back((n >> 8) & 0xff);
  if (major != 1) {
    out.push_back((n >> 16) & 0xff);
    out.push_back((n >> 24) & 0xff);
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string npyError(const std::vector<uint8_t> &bytes) {
  HostTensor t;
  std::string error;
  return parseNpy(bytes.data(), bytes.size(), &t, &error) ? "" : error;
}

/// Minimal protobuf encoder for building TensorProtos in tests.
struct Proto {
  std::vector<uint8_t> b;
  void varint(uint64_t v) {
    while (v >= 0x80) {
      b.push_back(uint8_t(v) | 0x80);
      v >>= 7;
    }
    b.push_back(uint8_t(v));
  }
  void key(int field, int wire) { varint(uint64_t(field) << 3 | wire); }
  void intField(int field, uint64_t v) {
    key(field, 0);
    varint(v);
  }
  void bytesField(int field, const std::vector<uint8_t> &data) {
    key(field, 2);
    varint(data.size());
    b.insert(b.end(), data.begin(), data.end());
  }
  void fixed32(int field, uint32_t v) {
    key(field, 5);
    for (int i = 0; i < 4; ++i)
      b.push_back(uint8_t(v >> (8 * i)));
  }
};

HostTensor parsePb(const Proto &p, std::string *error) {
  HostTensor t;
  error->clear();
  parseTensorProto(p.b.data(), p.b.size(), &t, error);
  return t;
}

} // namespace

TEST(Npy, ReadsVersions1To3) {
  std::vector<uint8_t> data = bytesOf<float>({1, 2, 3, 4, 5, 6});
  for (int major : {1, 2, 3}) {
    HostTensor t;
    std::string error;
    auto img = npyImage(
        major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        data);
    ASSERT_TRUE(parseNpy(img.data(), img.size(), &t, &error)) << error;
    EXPECT_EQ(t.dtype, DType::F32);
    EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(t.data, data);
  }
}

TEST(Npy, DTypesAndScalars) {
  HostTensor t;
  std::string error;
  auto img =
      npyImage(1, "{'descr':'|b1','fortran_order':False,'shape':()}", {1});
  ASSERT_TRUE(parseNpy(img.data(), img.size(), &t, &error)) << error;
  EXPECT_EQ(t.dtype, DType::Bool);
  EXPECT_TRUE(t.shape.empty());
  img = npyImage(1,
                 "{\"descr\": \"<i8\", \"fortran_order\": False, "
                 "\"shape\": (2,)}",
                 bytesOf<int64_t>({-1, 7}));
  ASSERT_TRUE(parseNpy(img.data(), img.size(), &t, &error)) << error;
  EXPECT_EQ(t.dtype, DType::I64);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2}));
  img = npyImage(
      1, "{'descr': '<f2', 'fortran_order': False, 'shape': (0, 3), }", {});
  ASSERT_TRUE(parseNpy(img.data(), img.size(), &t, &error)) << error;
  EXPECT_EQ(t.dtype, DType::F16);
  EXPECT_TRUE(t.data.empty());
}

TEST(Npy, Malformed) {
  std::string good =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  std::vector<uint8_t> data = bytesOf<float>({1, 2});
  EXPECT_NE(npyError({1, 2, 3}).find("bad magic"), std::string::npos);
  auto img = npyImage(1, good, data);
  img.pop_back();
  EXPECT_NE(npyError(img).find("holds 7 bytes"), std::string::npos)
      << npyError(img);
  img = npyImage(1, good, data);
  img[8] = 0xff; // Header length beyond the file.
  EXPECT_NE(npyError(img).find("truncated .npy header"), std::string::npos);
  img = npyImage(4, good, data);
  EXPECT_NE(npyError(img).find("unsupported .npy format version 4"),
            std::string::npos);
  EXPECT_NE(npyError(npyImage(1,
                              "{'descr': '>f4', 'fortran_order': False, "
                              "'shape': (2,), }",
                              data))
                .find("unsupported .npy dtype '>f4'"),
            std::string::npos);
  EXPECT_NE(npyError(npyImage(1,
                              "{'descr': '<c8', 'fortran_order': False, "
                              "'shape': (1,), }",
                              data))
                .find("unsupported .npy dtype"),
            std::string::npos);
  EXPECT_NE(npyError(npyImage(1,
                              "{'descr': '<f4', 'fortran_order': True, "
                              "'shape': (2, 2), }",
                              data))
                .find("Fortran-order"),
            std::string::npos);
  EXPECT_NE(npyError(npyImage(1, "{'descr': '<f4', 'shape': (2,), }", data))
                .find("missing"),
            std::string::npos);
  EXPECT_NE(npyError(npyImage(1,
                              "{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (-2,), }",
                              data))
                .find("malformed .npy header"),
            std::string::npos);
  EXPECT_NE(npyError(npyImage(1,
                              "{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (99999999999999, 99999999999), }",
                              data))
                .find("needs too many"),
            std::string::npos)
      << npyError(npyImage(1,
                           "{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (99999999999999, 99999999999), }",
                           data));
  // Every prefix of a good file fails cleanly.
  img = npyImage(1, good, data);
  for (size_t n = 0; n < img.size(); ++n)
    EXPECT_FALSE(npyError({img.begin(), img.begin() + n}).empty()) << n;
}

TEST(Npy, WriteRoundTrip) {
  TempDir dir;
  std::vector<int16_t> v = {1, -2, 3};
  std::string error;
  ASSERT_TRUE(
      writeNpyFile(dir.file("a.npy"), DType::I16, {3, 1}, v.data(), 6, &error))
      << error;
  HostTensor t;
  ASSERT_TRUE(readTensorFile(dir.file("a.npy"), &t, &error)) << error;
  EXPECT_EQ(t.dtype, DType::I16);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(t.data, bytesOf(v));
  // bfloat16 is widened to float32: 0x3fc0 is 1.5.
  std::vector<uint16_t> bf = {0x3fc0, 0xc000};
  std::vector<uint8_t> img = encodeNpy(DType::BF16, {2}, bf.data(), 4);
  EXPECT_EQ(img.size() % 64, 8u); // 64-byte aligned header + 8 bytes.
  ASSERT_TRUE(parseNpy(img.data(), img.size(), &t, &error)) << error;
  EXPECT_EQ(t.dtype, DType::F32);
  float f[2];
  std::memcpy(f, t.data.data(), 8);
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -2.0f);
  EXPECT_FALSE(readTensorFile(dir.file("a.txt"), &t, &error));
  EXPECT_NE(error.find("unknown tensor file extension"), std::string::npos);
}

TEST(TensorProto, RawData) {
  Proto p;
  p.intField(1, 2);
  p.intField(1, 2);
  p.intField(2, 1);
  p.bytesField(8, {'w'});
  p.bytesField(9, bytesOf<float>({1, 2, 3, 4}));
  std::string error;
  HostTensor t = parsePb(p, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t.data, bytesOf<float>({1, 2, 3, 4}));
}

TEST(TensorProto, TypedFields) {
  std::string error;
  // float_data, not packed, and packed dims.
  Proto f;
  Proto dims;
  dims.varint(3);
  f.bytesField(1, dims.b);
  f.intField(2, 1);
  for (float v : {1.0f, -2.0f, 0.5f}) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    f.fixed32(4, bits);
  }
  HostTensor t = parsePb(f, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(t.data, bytesOf<float>({1, -2, 0.5}));
  // int32_data carries float16 bit patterns, bools and int8 (negative as
  // 10-byte varints), packed.
  Proto h;
  h.intField(1, 2);
  h.intField(2, 10);
  Proto packed;
  packed.varint(0x3c00);
  packed.varint(0xc000);
  h.bytesField(5, packed.b);
  t = parsePb(h, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(t.dtype, DType::F16);
  EXPECT_EQ(t.data, bytesOf<uint16_t>({0x3c00, 0xc000}));
  Proto b;
  b.intField(1, 3);
  b.intField(2, 9);
  b.intField(5, 0);
  b.intField(5, 5);
  b.intField(5, 1);
  t = parsePb(b, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(t.data, (std::vector<uint8_t>{0, 1, 1}));
  Proto i8;
  i8.intField(1, 2);
  i8.intField(2, 3);
  i8.intField(5, uint64_t(int64_t(-5)));
  i8.intField(5, 100);
  t = parsePb(i8, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(t.data, (std::vector<uint8_t>{uint8_t(-5), 100}));
  // int64_data and uint64_data (uint32 lives there too); scalar (no dims).
  Proto i64;
  i64.intField(2, 7);
  i64.intField(7, uint64_t(int64_t(-9)));
  t = parsePb(i64, &error);
  ASSERT_EQ(error, "");
  EXPECT_TRUE(t.shape.empty());
  EXPECT_EQ(t.data, bytesOf<int64_t>({-9}));
  Proto u32;
  u32.intField(1, 1);
  u32.intField(2, 12);
  u32.intField(11, 0xfffffffe);
  t = parsePb(u32, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(t.data, bytesOf<uint32_t>({0xfffffffe}));
}

TEST(TensorProto, NarrowTypes) {
  std::string error;
  // int4 in raw_data: 5 elements in 3 bytes, the first in the low nibble;
  // unpacked to a byte each, the nibble's bits as they are.
  Proto i4;
  i4.intField(1, 5);
  i4.intField(2, 22);
  i4.bytesField(9, {0x87, 0x1f, 0x0c});
  HostTensor t = parsePb(i4, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(t.dtype, DType::I4);
  EXPECT_EQ(t.data, (std::vector<uint8_t>{0x7, 0x8, 0xf, 0x1, 0xc}));
  EXPECT_EQ(narrowValue(DType::I4, 0x8), -8);
  EXPECT_EQ(narrowValue(DType::I4, 0xf), -1);
  EXPECT_EQ(narrowValue(DType::U4, 0xf), 15);
  // uint2 in int32_data, one packed byte per entry: 6 elements in 2.
  Proto u2;
  u2.intField(1, 6);
  u2.intField(2, 25);
  u2.intField(5, 0xe4); // 0, 1, 2, 3
  u2.intField(5, 0x0b); // 3, 2
  t = parsePb(u2, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(t.data, (std::vector<uint8_t>{0, 1, 2, 3, 3, 2}));
  EXPECT_EQ(narrowValue(DType::I2, 0x2), -2);
  // A packed size that does not fit the shape names both.
  i4.b.clear();
  i4.intField(1, 5);
  i4.intField(2, 22);
  i4.bytesField(9, {0x87, 0x1f});
  parsePb(i4, &error);
  EXPECT_NE(error.find("raw_data holds 2 bytes but shape [5] int4 needs 3"),
            std::string::npos)
      << error;
  // float8 takes a byte per element in raw_data and in int32_data.
  Proto f8;
  f8.intField(1, 3);
  f8.intField(2, 17);
  f8.intField(5, 0x38); // 1.0
  f8.intField(5, 0xfe); // -448
  f8.intField(5, 0x7f); // NaN
  t = parsePb(f8, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(t.data, (std::vector<uint8_t>{0x38, 0xfe, 0x7f}));
  EXPECT_EQ(narrowValue(DType::F8E4M3FN, 0x38), 1.0);
  EXPECT_EQ(narrowValue(DType::F8E4M3FN, 0xfe), -448.0);
  EXPECT_TRUE(std::isnan(narrowValue(DType::F8E4M3FN, 0x7f)));
  EXPECT_EQ(narrowValue(DType::F8E4M3FN, 0x01), std::ldexp(1.0, -9));
  EXPECT_TRUE(std::isnan(narrowValue(DType::F8E4M3FNUZ, 0x80)));
  EXPECT_EQ(narrowValue(DType::F8E4M3FNUZ, 0x7f), 240.0);
  EXPECT_EQ(narrowValue(DType::F8E5M2, 0x7c), HUGE_VAL);
  EXPECT_EQ(narrowValue(DType::F8E5M2, 0x7b), 57344.0);
  EXPECT_EQ(narrowValue(DType::F8E5M2FNUZ, 0x7f), 57344.0);
  EXPECT_EQ(narrowValue(DType::F4E2M1, 0xf), -6.0);
  EXPECT_EQ(narrowValue(DType::F8E8M0, 0), std::ldexp(1.0, -127));
  EXPECT_TRUE(std::isnan(narrowValue(DType::F8E8M0, 0xff)));
}

TEST(Npy, WritesNarrowTypesWidened) {
  // float8 as float32, int4 as int8 (sign-extended), uint2 as uint8.
  std::vector<uint8_t> f8 = {0x38, 0xc0};
  HostTensor t;
  std::string error;
  std::vector<uint8_t> image = encodeNpy(DType::F8E4M3FN, {2}, f8.data(), 2);
  ASSERT_TRUE(parseNpy(image.data(), image.size(), &t, &error)) << error;
  EXPECT_EQ(t.dtype, DType::F32);
  EXPECT_EQ(t.data, bytesOf<float>({1.0f, -2.0f}));
  std::vector<uint8_t> i4 = {0x8, 0x7};
  image = encodeNpy(DType::I4, {2}, i4.data(), 2);
  ASSERT_TRUE(parseNpy(image.data(), image.size(), &t, &error)) << error;
  EXPECT_EQ(t.dtype, DType::I8);
  EXPECT_EQ(t.data, (std::vector<uint8_t>{uint8_t(-8), 7}));
  std::vector<uint8_t> u2 = {0x3};
  image = encodeNpy(DType::U2, {1}, u2.data(), 1);
  ASSERT_TRUE(parseNpy(image.data(), image.size(), &t, &error)) << error;
  EXPECT_EQ(t.dtype, DType::U8);
  EXPECT_EQ(t.data, (std::vector<uint8_t>{3}));
}

TEST(TensorProto, Malformed) {
  std::string error;
  Proto count;
  count.intField(1, 3);
  count.intField(2, 1);
  count.fixed32(4, 0);
  parsePb(count, &error);
  EXPECT_NE(
      error.find("float_data holds 1 values but shape [3] float32 needs 3"),
      std::string::npos)
      << error;
  Proto raw;
  raw.intField(1, 2);
  raw.intField(2, 7);
  raw.bytesField(9, {1, 2, 3});
  parsePb(raw, &error);
  EXPECT_NE(error.find("raw_data holds 3 bytes"), std::string::npos) << error;
  Proto str;
  str.intField(2, 8);
  parsePb(str, &error);
  EXPECT_NE(error.find("strings"), std::string::npos);
  Proto unknownType;
  unknownType.intField(2, 14);
  parsePb(unknownType, &error);
  EXPECT_NE(error.find("unsupported data_type 14"), std::string::npos);
  Proto external;
  external.intField(2, 1);
  external.intField(14, 1);
  parsePb(external, &error);
  EXPECT_NE(error.find("externally"), std::string::npos);
  Proto wrongWire;
  wrongWire.fixed32(2, 1);
  parsePb(wrongWire, &error);
  EXPECT_NE(error.find("field 2 (wire type 5)"), std::string::npos) << error;
  // Every prefix of a valid message fails or parses without crashing, and a
  // length running past the end is reported.
  Proto good;
  good.intField(1, 4);
  good.intField(2, 1);
  good.bytesField(8, {'n', 'a', 'm', 'e'});
  good.bytesField(9, bytesOf<float>({1, 2, 3, 4}));
  for (size_t n = 0; n < good.b.size(); ++n) {
    HostTensor t;
    std::string e;
    EXPECT_FALSE(parseTensorProto(good.b.data(), n, &t, &e)) << n;
    EXPECT_FALSE(e.empty());
  }
}
