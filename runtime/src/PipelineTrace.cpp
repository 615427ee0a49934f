//===- PipelineTrace.cpp - The measured timeline of a pipelined step ------===//
//
// Each rank pairs the begin and end markers its executor recorded into
// spans (step index, begin, end on its steady clock); two gathers over the
// world bring every rank's count, run start and host, then the spans, to
// rank 0 (an all-gather: every rank sends as many spans as the busiest, so
// the gather's sizes agree). Rank 0 names the spans from each rank's stage
// plan, writes the Chrome trace and prints the bubble.
//
//===----------------------------------------------------------------------===//

#include "cleave/PipelineTrace.h"

#include "TrainingSupport.h"

#include "cleave/FileUtil.h"
#include "cleave/Json.h"
#include "cleave/PlanFormat.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <unistd.h>

namespace cleave::training {

MeasuredBubble measureBubble(const std::vector<StepSpan> &spans,
                             int64_t ranks) {
  MeasuredBubble m;
  m.ranks = ranks;
  if (spans.empty() || ranks < 1)
    return m;
  double first = spans[0].startUs, last = spans[0].endUs, busy = 0;
  for (const StepSpan &s : spans) {
    first = std::min(first, s.startUs);
    last = std::max(last, s.endUs);
    busy += s.endUs - s.startUs;
  }
  m.makespanMs = (last - first) / 1000.0;
  m.busyMsPerRank = busy / 1000.0 / static_cast<double>(ranks);
  if (m.makespanMs > 0)
    m.bubble = 1.0 - m.busyMsPerRank / m.makespanMs;
  return m;
}

std::string bubbleLine(const MeasuredBubble &m) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "pipeline: measured bubble %.1f%% over %lld ranks (busy %.1f "
                "ms of %.1f ms per rank)",
                m.bubble * 100.0, static_cast<long long>(m.ranks),
                m.busyMsPerRank, m.makespanMs);
  return buf;
}

std::string chromeTraceJson(const std::vector<StepSpan> &spans) {
  json::Value events = json::Value::array();
  for (const StepSpan &s : spans) {
    char first = s.name.empty() ? '\0' : s.name[0];
    const char *category = first == 'F'                   ? "forward"
                           : first == 'B' || first == 'W' ? "backward"
                                                          : "step";
    events.push_back({{"name", s.name},
                      {"cat", category},
                      {"ph", "X"},
                      {"ts", json::number(s.startUs, "%.3f")},
                      {"dur", json::number(s.endUs - s.startUs, "%.3f")},
                      {"pid", 0},
                      {"tid", s.rank}});
  }
  json::Value trace = {{"displayTimeUnit", "ms"},
                       {"traceEvents", std::move(events)}};
  return json::dump(trace) + "\n";
}

namespace {
/// What each rank tells the others first.
struct Header {
  int64_t spans = 0;      ///< How many spans it sends next.
  int64_t runStartNs = 0; ///< When its traced run started.
  char host[64] = {0};    ///< Its host name (ranks on one host share a clock).
};

/// One step of one rank, as sent (its steady clock).
struct WireSpan {
  int64_t index = 0, beginNs = 0, endNs = 0;
};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
} // namespace

/// The step names of stage `stage` of `program`.
static int stepNames(cleave_rt_program program, size_t stage,
                     std::vector<std::string> *names) {
  cleave_rt_program h = nullptr;
  TRY(cleave_rt_program_stage_at(program, stage, &h));
  const char *steps =
      cleave_rt_program_metadata(h, plan::meta::kPipelineSteps.name);
  *names = plan::splitMetadataList(steps ? steps : "");
  cleave_rt_program_destroy(h);
  return -1;
}

int writePipelineTrace(cleave_rt_program program, cleave_rt_executor e,
                       const std::string &path, const RankContext &ctx) {
  const cleave_rt_marker_record_t *records = nullptr;
  size_t count = 0;
  int64_t runStart = 0;
  TRY(cleave_rt_executor_markers(e, &records, &count, &runStart));
  // Begins and ends alternate per step (the validator checks it).
  std::vector<WireSpan> mine;
  std::map<int64_t, int64_t> open;
  for (size_t i = 0; i < count; ++i) {
    const cleave_rt_marker_record_t &r = records[i];
    if (r.phase == 0) {
      open[r.index] = r.time_ns;
    } else if (auto it = open.find(r.index); it != open.end()) {
      mine.push_back({r.index, it->second, r.time_ns});
      open.erase(it);
    }
  }

  const int64_t world = std::max<int64_t>(ctx.worldSize, 1);
  Header h;
  h.spans = static_cast<int64_t>(mine.size());
  h.runStartNs = runStart;
  if (::gethostname(h.host, sizeof h.host - 1) != 0)
    std::strcpy(h.host, "?");
  std::vector<Header> headers(world, h);
  if (world > 1)
    TRY(cleave_rt_communicator_gather(ctx.comm, &h, sizeof h, headers.data()));
  int64_t left = nowNs(); // when this rank left the gather
  // Steady clocks of different hosts are unrelated: align those ranks by
  // the moment they left the gather (all ranks of one host share a clock).
  std::vector<int64_t> offset(world, 0);
  bool oneHost = true;
  for (const Header &other : headers)
    oneHost = oneHost &&
              std::strncmp(other.host, headers[0].host, sizeof other.host) == 0;
  if (!oneHost) {
    std::vector<int64_t> leaves(world);
    TRY(cleave_rt_communicator_gather(ctx.comm, &left, sizeof left,
                                      leaves.data()));
    for (int64_t k = 0; k < world; ++k)
      if (std::strncmp(headers[k].host, headers[0].host, sizeof h.host) != 0)
        offset[k] = leaves[k] - leaves[0];
  }
  int64_t most = 0;
  for (const Header &other : headers)
    most = std::max(most, other.spans);
  std::vector<WireSpan> all(static_cast<size_t>(most * world));
  if (most > 0) {
    std::vector<WireSpan> padded(static_cast<size_t>(most));
    std::copy(mine.begin(), mine.end(), padded.begin());
    if (world > 1)
      TRY(cleave_rt_communicator_gather(ctx.comm, padded.data(),
                                        padded.size() * sizeof(WireSpan),
                                        all.data()));
    else
      all = padded;
  }
  if (ctx.rank != 0)
    return -1;

  // Rank 0: name, align and write.
  int64_t t0 = headers[0].runStartNs - offset[0];
  for (int64_t k = 0; k < world; ++k)
    t0 = std::min(t0, headers[k].runStartNs - offset[k]);
  std::map<size_t, std::vector<std::string>> namesOfStage;
  std::vector<StepSpan> spans;
  for (int64_t k = 0; k < world; ++k) {
    size_t stage = 0;
    TRY(cleave_rt_program_stage_of_rank(program, static_cast<size_t>(k),
                                        &stage));
    if (!namesOfStage.count(stage)) {
      int rc = stepNames(program, stage, &namesOfStage[stage]);
      if (rc >= 0)
        return rc;
    }
    const std::vector<std::string> &names = namesOfStage[stage];
    for (int64_t i = 0; i < headers[k].spans; ++i) {
      const WireSpan &w = all[static_cast<size_t>(k * most + i)];
      StepSpan s;
      s.rank = k;
      s.name = w.index >= 0 && static_cast<size_t>(w.index) < names.size()
                   ? names[w.index]
                   : "step " + std::to_string(w.index);
      s.startUs = static_cast<double>(w.beginNs - offset[k] - t0) / 1000.0;
      s.endUs = static_cast<double>(w.endNs - offset[k] - t0) / 1000.0;
      spans.push_back(std::move(s));
    }
  }
  std::string text = chromeTraceJson(spans), err;
  if (!writeFileAtomically(path, text.data(), text.size(), &err))
    return fail("--trace: cannot write '" + path + "': " + err);
  if (spans.empty()) {
    warn("--trace: no rank ran a step marker; the trace '" + path +
         "' has no events");
  } else {
    // The compiler's expectation, when the plan carries it.
    const char *expected =
        cleave_rt_program_metadata(program, plan::meta::kPipelineExpected.name);
    std::printf("%s%s%s\n", bubbleLine(measureBubble(spans, world)).c_str(),
                expected ? "; schedule " : "", expected ? expected : "");
  }
  std::fflush(stdout);
  return -1;
}

} // namespace cleave::training
