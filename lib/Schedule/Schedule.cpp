//===- Schedule.cpp - Pipeline schedules and their simulation ------------===//

#include "cleave/Schedule/Schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace cleave::schedule {
namespace {

using Key = std::tuple<StepKind, int64_t, int64_t>; // kind, stage, microbatch

Key keyOf(const Step &s) { return {s.kind, s.stage, s.microbatch}; }

bool isSplit(ScheduleKind kind) { return kind == ScheduleKind::ZeroBubble; }

/// The steps that must finish before `s` starts (at most two).
struct Dependencies {
  Key keys[2];
  int count = 0;
  const Key *begin() const { return keys; }
  const Key *end() const { return keys + count; }
};
Dependencies dependencies(const Step &s, int64_t stages, bool split) {
  StepKind backward = split ? StepKind::BackwardInput : StepKind::Backward;
  Dependencies d;
  switch (s.kind) {
  case StepKind::Forward:
    if (s.stage > 0)
      d.keys[d.count++] = {StepKind::Forward, s.stage - 1, s.microbatch};
    break;
  case StepKind::Backward:
  case StepKind::BackwardInput:
    d.keys[d.count++] = {StepKind::Forward, s.stage, s.microbatch};
    if (s.stage < stages - 1)
      d.keys[d.count++] = {backward, s.stage + 1, s.microbatch};
    break;
  case StepKind::BackwardWeight:
    d.keys[d.count++] = {StepKind::BackwardInput, s.stage, s.microbatch};
    break;
  }
  return d;
}

double costOf(const Step &s, const StepCosts &c, int64_t chunks) {
  if (s.stage >= 0 && s.stage < static_cast<int64_t>(c.forwardOf.size())) {
    auto at = [&](const std::vector<double> &v) {
      return s.stage < static_cast<int64_t>(v.size()) ? v[s.stage] : 0.0;
    };
    switch (s.kind) {
    case StepKind::Forward:
      return at(c.forwardOf);
    case StepKind::Backward:
      return at(c.backwardInputOf) + at(c.backwardWeightOf);
    case StepKind::BackwardInput:
      return at(c.backwardInputOf);
    case StepKind::BackwardWeight:
      return at(c.backwardWeightOf);
    }
  }
  double v = static_cast<double>(chunks);
  if (s.stage < static_cast<int64_t>(c.stageWeight.size()))
    v /= c.stageWeight[s.stage];
  switch (s.kind) {
  case StepKind::Forward:
    return c.forward / v;
  case StepKind::Backward:
    return (c.backwardInput + c.backwardWeight) / v;
  case StepKind::BackwardInput:
    return c.backwardInput / v;
  case StepKind::BackwardWeight:
    return c.backwardWeight / v;
  }
  return 0;
}

/// GPipe: every forward, then every backward.
std::vector<Step> gpipe(int64_t rank, int64_t m) {
  std::vector<Step> order;
  for (int64_t i = 0; i < m; ++i)
    order.push_back({StepKind::Forward, rank, i});
  for (int64_t i = 0; i < m; ++i)
    order.push_back({StepKind::Backward, rank, i});
  return order;
}

/// 1F1B (PipeDream-flush): p - rank - 1 forwards to fill the pipeline,
/// then one forward and one backward in turn, then the last backwards.
std::vector<Step> oneFOneB(int64_t rank, int64_t p, int64_t m) {
  std::vector<Step> order;
  int64_t warmup = std::min(p - rank - 1, m);
  for (int64_t i = 0; i < warmup; ++i)
    order.push_back({StepKind::Forward, rank, i});
  for (int64_t i = 0; i < m - warmup; ++i) {
    order.push_back({StepKind::Forward, rank, warmup + i});
    order.push_back({StepKind::Backward, rank, i});
  }
  for (int64_t i = m - warmup; i < m; ++i)
    order.push_back({StepKind::Backward, rank, i});
  return order;
}

/// Interleaved 1F1B (Narayanan et al. 2021, Megatron's order): the k-th
/// forward runs chunk (k / p) mod v on microbatch (k / pv) p + k mod p;
/// backwards take the chunks in reverse.
std::vector<Step> interleaved(int64_t rank, int64_t p, int64_t m, int64_t v) {
  int64_t total = m * v;
  auto stepAt = [&](int64_t k, bool forward) {
    int64_t inGroup = k % (p * v);
    int64_t chunk = inGroup / p;
    if (!forward)
      chunk = v - 1 - chunk;
    int64_t microbatch = (k / (p * v)) * p + k % p;
    return Step{forward ? StepKind::Forward : StepKind::Backward,
                chunk * p + rank, microbatch};
  };
  int64_t warmup = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
  std::vector<Step> order;
  for (int64_t k = 0; k < warmup; ++k)
    order.push_back(stepAt(k, true));
  for (int64_t k = 0; k < total - warmup; ++k) {
    order.push_back(stepAt(warmup + k, true));
    order.push_back(stepAt(k, false));
  }
  for (int64_t k = total - warmup; k < total; ++k)
    order.push_back(stepAt(k, false));
  return order;
}

/// The zero-bubble order (ZB-H1, Qi et al. 2023), found by running the
/// pipeline: whenever a rank is free it runs the first of these that can
/// run, in this priority: an input gradient (the previous stage waits for
/// it), a forward while fewer than p - rank microbatches await their input
/// gradient (1F1B's bound), a weight gradient (nothing waits for it, so it
/// fills what would be bubbles).
std::vector<std::vector<Step>> zeroBubble(int64_t p, int64_t m,
                                          const StepCosts &costs) {
  std::vector<std::vector<Step>> order(p);
  std::map<Key, double> done;
  std::vector<double> freeAt(p, 0.0);
  std::vector<int64_t> nextForward(p, 0), inFlight(p, 0);
  std::vector<std::set<int64_t>> weightsPending(p);
  std::vector<int64_t> inputsDone(p, 0);
  auto readyAt = [&](const Step &s) {
    double t = 0;
    for (const Key &d : dependencies(s, p, true)) {
      auto it = done.find(d);
      if (it == done.end())
        return std::numeric_limits<double>::infinity();
      t = std::max(t, it->second);
    }
    return t;
  };
  auto candidatesOf = [&](int64_t r) {
    std::vector<Step> c;
    if (inputsDone[r] < m)
      c.push_back({StepKind::BackwardInput, r, inputsDone[r]});
    if (nextForward[r] < m && inFlight[r] < p - r)
      c.push_back({StepKind::Forward, r, nextForward[r]});
    if (!weightsPending[r].empty())
      c.push_back({StepKind::BackwardWeight, r, *weightsPending[r].begin()});
    return c;
  };
  int64_t remaining = 3 * p * m;
  while (remaining > 0) {
    // The ranks by the time they are free (then by index); the first that
    // can run a step at that time runs its best one.
    std::vector<int64_t> ranks;
    for (int64_t r = 0; r < p; ++r)
      if (order[r].size() < static_cast<size_t>(3 * m))
        ranks.push_back(r);
    std::sort(ranks.begin(), ranks.end(), [&](int64_t a, int64_t b) {
      return freeAt[a] < freeAt[b] || (freeAt[a] == freeAt[b] && a < b);
    });
    bool ran = false;
    for (int64_t r : ranks) {
      for (const Step &s : candidatesOf(r)) {
        if (readyAt(s) > freeAt[r])
          continue;
        double end = freeAt[r] + costOf(s, costs, 1);
        done[keyOf(s)] = end;
        freeAt[r] = end;
        order[r].push_back(s);
        --remaining;
        if (s.kind == StepKind::Forward) {
          ++nextForward[r];
          ++inFlight[r];
        } else if (s.kind == StepKind::BackwardInput) {
          ++inputsDone[r];
          --inFlight[r];
          weightsPending[r].insert(s.microbatch);
        } else {
          weightsPending[r].erase(s.microbatch);
        }
        ran = true;
        break;
      }
      if (ran)
        break;
    }
    if (ran)
      continue;
    // Nothing can run where the ranks are free: they wait until the first
    // step becomes ready.
    double next = std::numeric_limits<double>::infinity();
    for (int64_t r : ranks)
      for (const Step &s : candidatesOf(r))
        next = std::min(next, std::max(readyAt(s), freeAt[r]));
    if (next == std::numeric_limits<double>::infinity())
      return {};
    for (int64_t r : ranks)
      freeAt[r] = std::max(freeAt[r], next);
  }
  return order;
}

} // namespace

std::string parseScheduleKind(const std::string &text,
                              ScheduleOptions &options) {
  options.chunks = 1;
  if (text == "gpipe")
    options.kind = ScheduleKind::GPipe;
  else if (text == "1f1b")
    options.kind = ScheduleKind::OneFOneB;
  else if (text == "zero-bubble")
    options.kind = ScheduleKind::ZeroBubble;
  else if (text.rfind("interleaved:", 0) == 0) {
    options.kind = ScheduleKind::Interleaved;
    std::string v = text.substr(12);
    char *end = nullptr;
    long long chunks = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || chunks < 2 || chunks > 64)
      return "bad schedule '" + text +
             "' (expected interleaved:<chunks per rank>, 2 to 64)";
    options.chunks = chunks;
  } else {
    return "unknown schedule '" + text +
           "' (expected gpipe, 1f1b, interleaved:<v> or zero-bubble)";
  }
  return "";
}

std::vector<std::vector<Step>> buildSchedule(const ScheduleOptions &o,
                                             std::string &error) {
  if (o.ranks < 1 || o.microbatches < 1 || o.chunks < 1) {
    error = "pipeline ranks, microbatches and chunks must be at least 1";
    return {};
  }
  // The orders are unrolled: bound them (a million steps per schedule).
  if (o.ranks > 4096 || o.microbatches > 65536 || o.chunks > 64 ||
      o.ranks * o.microbatches * o.chunks > 1000000 / 3) {
    error = "the schedule has too many steps to unroll (" +
            std::to_string(o.ranks) + " ranks, " +
            std::to_string(o.microbatches) + " microbatches, " +
            std::to_string(o.chunks) +
            " chunks per rank; at most about 333,000 forward passes)";
    return {};
  }
  if (o.chunks > 1 && o.kind != ScheduleKind::Interleaved) {
    error = "only the interleaved schedule runs several chunks per rank";
    return {};
  }
  std::vector<std::vector<Step>> order;
  switch (o.kind) {
  case ScheduleKind::GPipe:
    for (int64_t r = 0; r < o.ranks; ++r)
      order.push_back(gpipe(r, o.microbatches));
    break;
  case ScheduleKind::OneFOneB:
    for (int64_t r = 0; r < o.ranks; ++r)
      order.push_back(oneFOneB(r, o.ranks, o.microbatches));
    break;
  case ScheduleKind::Interleaved:
    if (o.chunks < 2) {
      error = "the interleaved schedule needs at least 2 chunks per rank";
      return {};
    }
    if (o.microbatches % o.ranks != 0) {
      error = "the interleaved schedule needs microbatches (" +
              std::to_string(o.microbatches) +
              ") to be a multiple of the pipeline ranks (" +
              std::to_string(o.ranks) + ")";
      return {};
    }
    for (int64_t r = 0; r < o.ranks; ++r)
      order.push_back(interleaved(r, o.ranks, o.microbatches, o.chunks));
    break;
  case ScheduleKind::ZeroBubble:
    order = zeroBubble(o.ranks, o.microbatches, StepCosts{});
    if (order.empty())
      error = "no zero-bubble order found";
    break;
  }
  return order;
}

Simulation simulate(const std::vector<std::vector<Step>> &order,
                    const ScheduleOptions &o, const StepCosts &costs,
                    std::string &error) {
  int64_t p = static_cast<int64_t>(order.size());
  int64_t stages = p * o.chunks;
  bool split = isSplit(o.kind);
  // When each step ended (NaN: not yet), by kind, stage and microbatch.
  int64_t microbatches = 0;
  for (const auto &steps : order)
    for (const Step &s : steps)
      microbatches = std::max(microbatches, s.microbatch + 1);
  std::vector<double> done(4 * stages * microbatches,
                           std::numeric_limits<double>::quiet_NaN());
  auto slot = [&](const Key &k) -> double & {
    return done[(static_cast<int64_t>(std::get<0>(k)) * stages +
                 std::get<1>(k)) *
                    microbatches +
                std::get<2>(k)];
  };
  std::vector<size_t> next(p, 0);
  std::vector<double> freeAt(p, 0.0);
  Simulation sim;
  sim.peakInFlight.assign(p, 0);
  size_t total = 0;
  for (const auto &steps : order)
    total += steps.size();
  // A step's start depends only on its rank's previous step and its
  // dependencies, so any pass order gives the same times.
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < p; ++r) {
      while (next[r] < order[r].size()) {
        const Step &s = order[r][next[r]];
        double start = freeAt[r];
        bool ready = true;
        for (const Key &d : dependencies(s, stages, split)) {
          double ended = slot(d);
          if (std::isnan(ended)) {
            ready = false;
            break;
          }
          // A result made on another rank arrives as a message.
          double arrives =
              std::get<1>(d) % p == r ? ended : ended + costs.transfer;
          start = std::max(start, arrives);
        }
        if (!ready)
          break;
        double end = start + costOf(s, costs, o.chunks);
        slot(keyOf(s)) = end;
        freeAt[r] = end;
        sim.steps.push_back({s, r, start, end});
        ++next[r];
        progress = true;
      }
    }
  }
  if (sim.steps.size() != total) {
    error = "the schedule deadlocks: a rank waits on a step that never runs";
    return {};
  }
  double busy = 0;
  for (const TimedStep &t : sim.steps) {
    sim.makespan = std::max(sim.makespan, t.end);
    busy += t.end - t.start;
  }
  sim.bubble = sim.makespan > 0 ? 1.0 - busy / (p * sim.makespan) : 0.0;
  for (int64_t r = 0; r < p; ++r) {
    int64_t live = 0;
    for (const Step &s : order[r]) {
      if (s.kind == StepKind::Forward)
        ++live;
      else if (s.kind == StepKind::Backward ||
               s.kind == StepKind::BackwardWeight)
        --live;
      sim.peakInFlight[r] = std::max(sim.peakInFlight[r], live);
    }
  }
  return sim;
}

double formulaBubble(const ScheduleOptions &o, const StepCosts &c) {
  double p = static_cast<double>(o.ranks),
         m = static_cast<double>(o.microbatches);
  double v = static_cast<double>(o.chunks);
  switch (o.kind) {
  case ScheduleKind::GPipe:
  case ScheduleKind::OneFOneB:
    return (p - 1) / (m + p - 1);
  case ScheduleKind::Interleaved:
    return (p - 1) / (v * m + p - 1);
  case ScheduleKind::ZeroBubble: {
    double step = c.forward + c.backwardInput + c.backwardWeight;
    double idle = (p - 1) * (c.forward + c.backwardInput - c.backwardWeight);
    return idle / (m * step + idle);
  }
  }
  return 0;
}

std::string chromeTrace(const Simulation &sim, const ScheduleOptions &o) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  for (size_t i = 0; i < sim.steps.size(); ++i) {
    const TimedStep &t = sim.steps[i];
    char buffer[256];
    std::snprintf(buffer, sizeof(buffer),
                  "%s\n  {\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", "
                  "\"ts\": %.3f, \"dur\": %.3f, \"pid\": 0, \"tid\": %lld}",
                  i ? "," : "", stepName(t.step, o).c_str(),
                  t.step.kind == StepKind::Forward ? "forward" : "backward",
                  t.start * 1000.0, (t.end - t.start) * 1000.0,
                  static_cast<long long>(t.rank));
    out += buffer;
  }
  return out + "\n]}\n";
}

std::string stepName(const Step &s, const ScheduleOptions &o) {
  std::string name;
  switch (s.kind) {
  case StepKind::Forward:
    name = "F";
    break;
  case StepKind::Backward:
  case StepKind::BackwardInput:
    name = "B";
    break;
  case StepKind::BackwardWeight:
    name = "W";
    break;
  }
  name += std::to_string(s.microbatch);
  if (o.chunks > 1)
    name += ".c" + std::to_string(s.stage / o.ranks);
  return name;
}

} // namespace cleave::schedule
