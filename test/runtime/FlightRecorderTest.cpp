//===- FlightRecorderTest.cpp - The flight recorder's ring and dumps ------===//

#include "FlightRecorder.h"
#include "Communicator.h"
#include "TestUtil.h"

#include "cleave/Json.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

CollectiveInfo allReduce(uint32_t id, const std::string &source) {
  CollectiveInfo c;
  c.op = CollectiveOp::AllReduce;
  c.dtype = DType::F32;
  c.count = 4;
  c.axes = {0};
  c.id = id;
  c.source = source;
  return c;
}

json::Value readDump(const std::string &path) {
  json::Value v;
  std::string err;
  EXPECT_TRUE(json::parse(slurp(path), &v, &err)) << path << ": " << err;
  return v;
}

TEST(FlightRecorder, RingKeepsTheLastRecords) {
  TempDir dir;
  rt::FlightRecorder r(dir.path, 1, 2, 4);
  Group g;
  g.ranks = {0, 1};
  g.index = 1;
  for (uint32_t i = 0; i < 10; ++i) {
    uint64_t seq = r.begin(allReduce(i, "node n" + std::to_string(i)), g, 16);
    if (i < 9)
      r.end(seq, /*ok=*/i != 8);
  }
  std::string err;
  ASSERT_TRUE(r.dump("test", &err)) << err;
  json::Value d = readDump(dir.file("rank-1.json"));
  EXPECT_EQ(d["format"], "cleave-flight-recorder");
  EXPECT_EQ(d["rank"], 1);
  EXPECT_EQ(d["world_size"], 2);
  EXPECT_EQ(d["recorded"], 10);
  ASSERT_EQ(d["entries"].size(), 4u);
  EXPECT_EQ(d["entries"][0]["seq"], 7);
  EXPECT_EQ(d["entries"][0]["state"], "completed");
  EXPECT_EQ(d["entries"][2]["state"], "failed");
  const json::Value &last = d["entries"][3];
  EXPECT_EQ(last["seq"], 10);
  EXPECT_EQ(last["group_seq"], 10);
  EXPECT_EQ(last["id"], 9);
  EXPECT_EQ(last["kind"], "all_reduce");
  EXPECT_EQ(last["source"], "node n9");
  EXPECT_EQ(last["group"], json::Value::array({0, 1}));
  EXPECT_EQ(last["bytes"], 16);
  EXPECT_EQ(last["state"], "started");
  EXPECT_TRUE(last["end_ns"].is_null());
}

// The crash signals' writer (no allocation, no lock) writes the document
// the ordinary dump does.
TEST(FlightRecorder, SignalWriterMatchesTheDump) {
  TempDir dir;
  rt::FlightRecorder r(dir.path, 0, 3, 8);
  Group g;
  g.ranks = {0, 2};
  for (uint32_t i = 0; i < 3; ++i) {
    uint64_t seq =
        r.begin(allReduce(i, "quote \" backslash \\ tab \t end"), g, 8, 5);
    if (i != 2)
      r.end(seq, true);
  }
  std::string err;
  ASSERT_TRUE(r.dump("same", &err)) << err;
  json::Value a = readDump(dir.file("rank-0.json"));
  r.writeFromSignal("same");
  json::Value b = readDump(dir.file("rank-0.json"));
  a.erase("dumped_ns");
  b.erase("dumped_ns");
  EXPECT_EQ(a, b) << json::dump(a) << "\n" << json::dump(b);
  EXPECT_EQ(b["entries"][0]["enqueue_ns"], 5);
}

// Communicator::run records every collective; a failure dumps.
TEST(FlightRecorder, CommunicatorRecordsAndDumpsOnFailure) {
  TempDir dir;
  auto world = rt::createLocalWorld(2, 0.5);
  auto c0 = rt::localCommunicator(world, 0);
  auto c1 = rt::localCommunicator(world, 1);
  c0->setFlightRecorder(
      std::make_unique<rt::FlightRecorder>(dir.path, 0, 2, 16));
  Group g;
  g.ranks = {0, 1};
  CollectiveInfo c = allReduce(3, "node /h.0/MatMul, backward");
  float in0[4] = {1, 2, 3, 4}, in1[4] = {1, 1, 1, 1}, out0[4], out1[4];
  std::thread peer([&] {
    Group g1 = g;
    g1.index = 1;
    EXPECT_EQ(c1->run(c, g1, in1, out1), nullptr);
  });
  g.index = 0;
  ASSERT_EQ(c0->run(c, g, in0, out0), nullptr);
  peer.join();
  EXPECT_FALSE(fileExists(dir.file("rank-0.json")));
  // Rank 1 never comes: the timeout fails the collective and dumps.
  cleave_rt_status s = c0->run(c, g, in0, out0);
  ASSERT_NE(s, nullptr);
  cleave_rt_status_free(s);
  json::Value d = readDump(dir.file("rank-0.json"));
  ASSERT_EQ(d["entries"].size(), 2u);
  EXPECT_EQ(d["entries"][0]["state"], "completed");
  EXPECT_EQ(d["entries"][1]["state"], "failed");
  EXPECT_EQ(d["entries"][1]["source"], "node /h.0/MatMul, backward");
  EXPECT_NE(d["reason"].get<std::string>().find("rank 1"), std::string::npos)
      << d["reason"];
}

} // namespace
