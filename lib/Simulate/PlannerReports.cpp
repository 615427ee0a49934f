//===- PlannerReports.cpp - How the layout planner describes its search ---===//
//
// The planner's words for its candidates (their layout, schedule and the
// cleave-compile options that compile them) and its two reports: the
// --explain table of the fastest candidates with why the runners-up lost
// and why the rest were pruned, and the CSV of every candidate.
//
//===----------------------------------------------------------------------===//

#include "PlannerInternal.h"

#include "cleave/Simulate/CostModel.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace cleave::sim {

using detail::ms;

std::string detail::ms(double s) {
  char text[32];
  std::snprintf(text, sizeof text, s < 10 ? "%.1f ms" : "%.0f ms", s * 1e3);
  return text;
}

std::string formatMemory(double bytes) {
  char text[32];
  if (bytes < 1024.0 * 1024 * 1024)
    std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1024.0 * 1024));
  else
    std::snprintf(text, sizeof text, "%.2f GiB",
                  bytes / (1024.0 * 1024 * 1024));
  return text;
}

std::string ProfileKey::str() const {
  std::string s = "tp=" + std::to_string(tp);
  if (sequenceParallel)
    s += " +sp";
  if (cp > 1)
    s += ", cp=" + std::to_string(cp) + " " + contextParallel;
  if (ep > 1)
    s += ", ep=" + std::to_string(ep);
  s += ", microbatch " + std::to_string(microbatchSize) + ", recompute " +
       recompute + ", zero " + std::to_string(zero);
  return s;
}

std::string Candidate::schedule() const {
  return chunks > 1 ? "interleaved:" + std::to_string(chunks) : "1f1b";
}

std::vector<std::pair<std::string, int64_t>>
layoutMesh(int64_t dp, int64_t ep, int64_t pp, int64_t tp, int64_t cp) {
  std::vector<std::pair<std::string, int64_t>> mesh;
  for (auto [name, size] : {std::pair<const char *, int64_t>{"cp", cp},
                            {"dp", dp},
                            {"pp", pp},
                            {"ep", ep},
                            {"tp", tp}})
    if (size > 1)
      mesh.push_back({name, size});
  return mesh;
}

std::string Candidate::options() const {
  std::string mesh;
  for (const auto &[name, size] : layoutMesh(dp, ep, pp, tp, cp))
    mesh += (mesh.empty() ? "" : ",") + name + "=" + std::to_string(size);
  std::string s;
  if (!mesh.empty())
    s += "--mesh " + mesh + " ";
  s += "--microbatches=" + std::to_string(microbatches);
  if (pp > 1)
    s += " --schedule=" + schedule();
  if (recompute != "none")
    s += " --recompute=" + recompute;
  if (sequenceParallel)
    s += " --sequence-parallel";
  if (cp > 1)
    s += " --context-parallel=" + contextParallel;
  if (zero)
    s += " --zero=" + std::to_string(zero);
  if (overlap) {
    char text[64];
    std::snprintf(text, sizeof text, " --overlap-collectives --bucket-mb=%g",
                  bucketMB);
    s += text;
  }
  return s;
}

std::string Candidate::layout() const {
  std::string context, experts;
  if (cp > 1)
    context = " cp=" + std::to_string(cp) + ":" + contextParallel;
  if (ep > 1)
    experts = " ep=" + std::to_string(ep);
  char text[192];
  int n = std::snprintf(
      text, sizeof text,
      "dp=%lld%s tp=%lld%s%s pp=%lld v=%lld b=%lld m=%lld zero=%d %s",
      (long long)dp, experts.c_str(), (long long)tp,
      sequenceParallel ? "+sp" : "", context.c_str(), (long long)pp,
      (long long)chunks, (long long)microbatchSize, (long long)microbatches,
      zero, recompute.c_str());
  if (overlap && n > 0 && size_t(n) < sizeof text)
    std::snprintf(text + n, sizeof text - n, " overlap:%gM", bucketMB);
  return text;
}

namespace {

/// The energy and cost of one step of `c` on `devices` of `cluster`.
StepCost costOfStep(const Candidate &c, const Cluster &cluster,
                    int64_t devices) {
  SimResult r;
  r.stepSeconds = c.stepSeconds;
  r.placement.world = devices;
  return stepCost(r, cluster);
}

/// Why runner-up `c` lost to `best`: the largest of its parts beyond the
/// winner's, and what it gains back, when something.
std::string whyLost(const Candidate &c, const Candidate &best) {
  struct Part {
    const char *what;
    double delta;
  } parts[] = {{"more compute", c.stepCompute - best.stepCompute},
               {"more communication in the steps", c.stepComm - best.stepComm},
               {"more gradient reduction and optimizer time",
                c.otherSeconds - best.otherSeconds},
               {"a larger bubble",
                (c.stepSeconds - c.stepCompute - c.stepComm - c.otherSeconds) -
                    (best.stepSeconds - best.stepCompute - best.stepComm -
                     best.otherSeconds)}};
  const Part *worst = &parts[0], *gain = &parts[0];
  for (const Part &p : parts) {
    if (p.delta > worst->delta)
      worst = &p;
    if (p.delta < gain->delta)
      gain = &p;
  }
  char line[512];
  std::snprintf(line, sizeof line, "       %+.1f%% step time: %s (+%s)",
                100 * (c.stepSeconds / best.stepSeconds - 1), worst->what,
                ms(worst->delta).c_str());
  std::string s = line;
  if (gain->delta < -1e-4 * best.stepSeconds) {
    std::string what = gain->what;
    what = what.rfind("more ", 0) == 0 ? "less " + what.substr(5)
           : what == "a larger bubble" ? std::string("a smaller bubble")
                                       : what;
    std::snprintf(line, sizeof line, ", against %s (-%s)", what.c_str(),
                  ms(-gain->delta).c_str());
    s += line;
  }
  return s + "\n";
}

/// The `top` fastest feasible candidates, one line each with its parts,
/// memory, energy and cost, the runners-up with why they lost, and the
/// options of the chosen one.
std::string fastestTable(const PlanSearch &search, const Cluster &cluster,
                         const PlannerOptions &options, size_t top) {
  std::string s =
      "  #  layout" + std::string(68, ' ') +
      "step       compute    comm      other     bubble  memory     "
      "kWh/step  cost/step\n";
  const Candidate &best = search.feasible.front();
  char line[512];
  for (size_t i = 0; i < std::min(top, search.feasible.size()); ++i) {
    const Candidate &c = search.feasible[i];
    StepCost cost = costOfStep(c, cluster, options.devices);
    std::snprintf(line, sizeof line,
                  "  %-2zu %-73s %-10s %-10s %-9s %-9s %5.1f%%  %-10s %-9.3g "
                  "%.3g\n",
                  i + 1, c.layout().c_str(), ms(c.stepSeconds).c_str(),
                  ms(c.stepCompute).c_str(), ms(c.stepComm).c_str(),
                  ms(c.otherSeconds).c_str(), c.bubble * 100,
                  formatMemory(c.memoryBytes).c_str(), cost.kWh, cost.total());
    s += line;
    if (i > 0)
      s += whyLost(c, best);
  }
  return s + "chosen: " + best.options() + "\n";
}

/// The pruned candidates grouped by the kind of their reason (its words
/// before any detail, numbers elided), each group with its count and a
/// first example.
std::string rejectedGroups(const PlanSearch &search) {
  std::map<std::string, std::pair<size_t, const Candidate *>> reasons;
  for (const Candidate &c : search.rejected) {
    std::string why;
    for (char ch : c.rejected.substr(0, c.rejected.find(':')))
      if (!std::isdigit(static_cast<unsigned char>(ch)))
        why += ch;
      else if (why.empty() || why.back() != 'N')
        why += 'N';
    auto &entry = reasons[why];
    if (!entry.second)
      entry.second = &c;
    ++entry.first;
  }
  std::string s;
  char line[512];
  for (const auto &[why, entry] : reasons) {
    std::snprintf(line, sizeof line, "rejected %zu: %s; e.g. %s: %s\n",
                  entry.first, why.c_str(), entry.second->layout().c_str(),
                  entry.second->rejected.c_str());
    s += line;
  }
  return s;
}

/// `items` joined by `separator`, each written by `str`.
template <typename T, typename F>
std::string joined(const std::vector<T> &items, const char *separator, F str) {
  std::string s;
  for (const T &item : items)
    s += (s.empty() ? "" : separator) + str(item);
  return s;
}

/// The axes and choices the search covered, in cleave-compile's words.
std::string searchedAxes(const PlanSearch &search,
                         const PlannerOptions &options) {
  auto number = [](auto n) { return std::to_string(n); };
  auto text = [](const std::string &t) { return t; };
  auto mb = [](double b) {
    char t[32];
    std::snprintf(t, sizeof t, "%g", b);
    return std::string(t);
  };
  std::string s = "planner: searched dp, pp (1f1b, interleaved up to " +
                  number(options.maxChunks) + " chunks), tp " +
                  joined(search.tensorParallel, ",", number) +
                  (options.sequenceParallel ? " (with and without sp)" : "") +
                  ", cp " + joined(search.contextParallel, ",", number);
  if (std::count_if(search.contextParallel.begin(),
                    search.contextParallel.end(),
                    [](int64_t cp) { return cp > 1; }))
    s += " (" + joined(options.contextParallelModes, ", ", text) + ")";
  // ep only where the model has experts to split.
  if (std::count_if(search.expertParallel.begin(), search.expertParallel.end(),
                    [](int64_t ep) { return ep > 1; }))
    s += ", ep " + joined(search.expertParallel, ",", number);
  std::vector<int64_t> sizes;
  for (int64_t b : options.microbatchSizes)
    if (b > 0 && options.globalBatch % b == 0)
      sizes.push_back(b);
  s += ", microbatch " + joined(sizes, ",", number) + ", zero " +
       joined(options.zero, ",", number) + ", recompute " +
       joined(options.recompute, ",", text);
  if (!options.bucketMB.empty())
    s += ", overlap buckets " + joined(options.bucketMB, ",", mb) + " MiB";
  return s + "\n";
}

/// `text` as a CSV field: in double quotes, its own doubled.
std::string quoted(const std::string &text) {
  std::string q = "\"";
  for (char c : text)
    q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

} // namespace

std::string explainSearch(const PlanSearch &search, const Cluster &cluster,
                          const PlannerOptions &options, size_t top) {
  char line[512];
  std::snprintf(line, sizeof line,
                "planner: %lld devices (%s), global batch %lld, %lld layers, "
                "memory limit %s\n"
                "planner: %zu candidates (%zu feasible) from %lld profiles "
                "compiled in %.2f s; search %.2f s\n",
                (long long)options.devices, cluster.name.c_str(),
                (long long)options.globalBatch, (long long)options.layers,
                formatMemory(options.memoryLimit).c_str(),
                search.feasible.size() + search.rejected.size(),
                search.feasible.size(), (long long)search.profilesCompiled,
                search.profileSeconds, search.searchSeconds);
  std::string s = line + searchedAxes(search, options);
  if (search.feasible.empty())
    s += "planner: no candidate fits\n";
  else
    s += fastestTable(search, cluster, options, top);
  return s + rejectedGroups(search);
}

std::string candidatesCsv(const PlanSearch &search, const Cluster &cluster,
                          const PlannerOptions &options, double tokensPerStep) {
  std::string s =
      "devices,dp,tp,sp,cp,context_parallel,ep,pp,chunks,microbatch_size,"
      "microbatches,zero,recompute,options,step_s,memory_bytes,kwh_per_step,"
      "cost_per_step,tokens_per_step,rejected\n";
  for (const std::vector<Candidate> *list :
       {&search.feasible, &search.rejected})
    for (const Candidate &c : *list) {
      StepCost cost = costOfStep(c, cluster, options.devices);
      char line[256];
      std::snprintf(line, sizeof line,
                    "%lld,%lld,%lld,%d,%lld,%s,%lld,%lld,%lld,%lld,%lld,%d,%s,",
                    (long long)options.devices, (long long)c.dp,
                    (long long)c.tp, c.sequenceParallel ? 1 : 0,
                    (long long)c.cp, c.contextParallel.c_str(), (long long)c.ep,
                    (long long)c.pp, (long long)c.chunks,
                    (long long)c.microbatchSize, (long long)c.microbatches,
                    c.zero, c.recompute.c_str());
      s += line + quoted(c.options());
      std::snprintf(line, sizeof line, ",%.6g,%.0f,%.6g,%.6g,%.6g,",
                    c.stepSeconds, c.memoryBytes, cost.kWh, cost.total(),
                    tokensPerStep);
      s += line + quoted(c.rejected) + "\n";
    }
  return s;
}

} // namespace cleave::sim
