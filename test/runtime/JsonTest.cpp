//===- JsonTest.cpp - JSON of the runtime: helpers and the trace ---------===//
//
// The runtime's nlohmann-json helpers (cleave/Json.h), which report where
// nlohmann would abort in a build without exceptions, and the JSON the
// training loop writes: the Chrome trace of a pipelined run.
//
//===----------------------------------------------------------------------===//

#include "cleave/Json.h"
#include "cleave/PipelineTrace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace cleave;

TEST(Json, ParseNamesTheErrorAndBoundsTheNesting) {
  json::Value v;
  std::string err;
  EXPECT_FALSE(json::parse("{\"a\": tru}", &v, &err));
  EXPECT_NE(err.find("parse error"), std::string::npos) << err;
  EXPECT_NE(err.find("(byte "), std::string::npos) << err;
  EXPECT_FALSE(json::parse("[1] x", &v, &err));
  EXPECT_FALSE(json::parse("", &v, &err));
  std::string deep64 = std::string(64, '[') + std::string(64, ']');
  std::string deep65 = std::string(65, '[') + std::string(65, ']');
  EXPECT_TRUE(json::parse(deep64, &v, &err)) << err;
  EXPECT_FALSE(json::parse(deep65, &v, &err));
  EXPECT_EQ(err, "nesting deeper than 64 levels");
  // Members keep their file order.
  ASSERT_TRUE(json::parse("{\"b\": 1, \"a\": 2}", &v, &err)) << err;
  EXPECT_EQ(v.begin().key(), "b");
}

TEST(Json, TypedAccess) {
  json::Value v;
  std::string err;
  ASSERT_TRUE(json::parse("{\"i\": -3, \"u\": 9223372036854775808, "
                          "\"f\": 1.5, \"e\": 1e3, \"s\": \"x\"}",
                          &v, &err))
      << err;
  int64_t n = 0;
  EXPECT_TRUE(json::asInt64(*json::get(v, "i"), &n));
  EXPECT_EQ(n, -3);
  EXPECT_FALSE(json::asInt64(*json::get(v, "u"), &n)); // past int64
  EXPECT_FALSE(json::asInt64(*json::get(v, "f"), &n));
  EXPECT_FALSE(json::asInt64(*json::get(v, "e"), &n));
  EXPECT_EQ(json::get(v, "missing"), nullptr);
  EXPECT_EQ(json::get(*json::get(v, "i"), "i"), nullptr); // not an object
  EXPECT_EQ(json::asString(json::get(v, "i")), nullptr);
  ASSERT_NE(json::asString(json::get(v, "s")), nullptr);
  EXPECT_EQ(*json::asString(json::get(v, "s")), "x");
}

TEST(Json, NumbersAndDumps) {
  EXPECT_EQ(json::dump(json::number(2.0 / 3.0, "%.3f")), "0.667");
  EXPECT_EQ(json::dump(json::number(0.1f, "%.9g")), "0.100000001");
  EXPECT_TRUE(json::number(std::nan(""), "%.9g").is_null());
  json::Value v = {{"name", std::string("a\xff")}, {"n", 1}};
  // Invalid UTF-8 is replaced, not an abort.
  EXPECT_EQ(json::dump(v), "{\"name\":\"a\xef\xbf\xbd\",\"n\":1}");
  EXPECT_EQ(json::dump({{"a", 1}}, 2), "{\n  \"a\": 1\n}");
}

TEST(PipelineTrace, BubbleAndJson) {
  // Two ranks over 10 ms: rank 0 busy 6 ms, rank 1 busy 4 ms.
  std::vector<training::StepSpan> spans = {{0, "F0", 0, 3000},
                                           {0, "B0", 7000, 10000},
                                           {1, "F0", 3000, 5000},
                                           {1, "B\"0", 5000, 7000}};
  training::MeasuredBubble m = training::measureBubble(spans, 2);
  EXPECT_DOUBLE_EQ(m.makespanMs, 10.0);
  EXPECT_DOUBLE_EQ(m.busyMsPerRank, 5.0);
  EXPECT_DOUBLE_EQ(m.bubble, 0.5);
  EXPECT_EQ(training::bubbleLine(m), "pipeline: measured bubble 50.0% over 2 "
                                     "ranks (busy 5.0 ms of 10.0 ms per rank)");
  json::Value doc;
  std::string err;
  ASSERT_TRUE(json::parse(training::chromeTraceJson(spans), &doc, &err)) << err;
  const json::Value *events = json::get(doc, "traceEvents");
  ASSERT_NE(events, nullptr);
  ASSERT_TRUE(events->is_array());
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ((*events)[3].value("name", ""), "B\"0");
  EXPECT_EQ((*events)[3].value("cat", ""), "backward");
  EXPECT_EQ((*events)[0].value("ph", ""), "X");
  EXPECT_EQ((*events)[1].value("ts", -1.0), 7000);
  EXPECT_EQ((*events)[1].value("dur", -1.0), 3000);
}
