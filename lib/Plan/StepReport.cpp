//===- StepReport.cpp - What one rank holds and sends in a step -----------===//

#include "cleave/Plan/StepReport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

namespace cleave {

llvm::StringRef getMemoryClassName(MemoryClass cls) {
  switch (cls) {
  case MemoryClass::Parameters:
    return "parameters";
  case MemoryClass::MasterParameters:
    return "master parameters";
  case MemoryClass::OptimizerStates:
    return "optimizer states";
  case MemoryClass::StateBuffers:
    return "state buffers";
  case MemoryClass::Gradients:
    return "gradients";
  case MemoryClass::Activations:
    return "activations";
  case MemoryClass::Temporaries:
    return "temporaries";
  case MemoryClass::Inputs:
    return "inputs";
  case MemoryClass::Constants:
    return "constants";
  }
  return "?";
}

void summarizeBuffers(llvm::ArrayRef<ReportBuffer> buffers,
                      StepReport &report) {
  int64_t last = 0;
  for (const ReportBuffer &b : buffers)
    last = std::max(last, b.lastUse);
  // Per class, the change of live bytes at each node: + at the first use,
  // - after the last.
  std::vector<std::array<int64_t, kNumMemoryClasses>> change(last + 2);
  for (auto &c : change)
    c.fill(0);
  for (const ReportBuffer &b : buffers) {
    unsigned cls = static_cast<unsigned>(b.cls);
    if (b.cls != MemoryClass::Gradients || b.finalGradient)
      report.held[cls] += b.bytes;
    if (b.cls == MemoryClass::Gradients && b.finalGradient &&
        b.elementBytes == 4)
      report.wideGradientBytes += b.bytes;
    int64_t first = std::max<int64_t>(b.firstUse, 0);
    change[first][cls] += b.bytes;
    change[std::max(b.lastUse, first) + 1][cls] -= b.bytes;
  }
  std::array<int64_t, kNumMemoryClasses> live{};
  for (int64_t t = 0; t <= last; ++t) {
    uint64_t total = 0;
    for (unsigned c = 0; c < kNumMemoryClasses; ++c) {
      live[c] += change[t][c];
      report.peakLive[c] = std::max<uint64_t>(report.peakLive[c],
                                              static_cast<uint64_t>(live[c]));
      total += live[c];
    }
    if (total > report.peakBytes) {
      report.peakBytes = total;
      report.peakNode = t;
      for (unsigned c = 0; c < kNumMemoryClasses; ++c)
        report.atPeak[c] = live[c];
    }
  }
}

/// "123456789 (117.7 MiB)" for anything from 1 MiB up.
static std::string bytesText(uint64_t bytes) {
  std::string text = std::to_string(bytes);
  if (bytes >= (1u << 20))
    text += llvm::formatv(" ({0:F1} MiB)", bytes / double(1 << 20)).str();
  return text;
}

/// Expert parallelism: what each rank holds of the experts, and the
/// collectives over ep alone by how they move the routed rows.
template <typename Rows>
static void printExperts(const StepReport &r, const Rows &rows,
                         llvm::raw_ostream &os) {
  if (r.expertTensors == 0)
    return;
  os << llvm::formatv("experts (ep={0}): {1} parameters split over ep, "
                      "{2} of their {3} elements on each rank\n",
                      r.epRanks, r.expertTensors, r.expertLocalElements,
                      r.expertElements);
  auto over = [&](llvm::StringRef kind) {
    auto it = rows.find({"ep", kind.str()});
    return it == rows.end()
               ? std::make_pair(int64_t(0), uint64_t(0))
               : std::make_pair(it->second.count, it->second.bytes);
  };
  auto [a2a, a2aBytes] = over("all_to_all");
  auto [gathers, gatherBytes] = over("all_gather");
  auto [scatters, scatterBytes] = over("reduce_scatter");
  if (a2a)
    os << llvm::formatv("  tokens exchanged with the experts' ranks (slots "
                        "of a capacity): {0} all_to_all over ep, {1} bytes "
                        "per rank per step\n",
                        a2a, bytesText(a2aBytes));
  if (gathers || scatters)
    os << llvm::formatv(
        "  rows gathered over ep and results summed back (dropless grouped "
        "GEMMs; also any other gather over ep): {0} all_gather and {1} "
        "reduce_scatter, {2} bytes per rank per step (the all_reduce over ep "
        "sums the gradients of the parameters ep does not split)\n",
        gathers, scatters, bytesText(gatherBytes + scatterBytes));
}

void printStepReport(const StepReport &r, llvm::raw_ostream &os) {
  os << "memory per rank"
     << (r.mesh.empty() ? std::string(" (one rank)") : " (mesh " + r.mesh + ")")
     << ", bytes:\n";
  os << llvm::formatv("  {0,-18} {1,28} {2,28}\n", "", "held",
                      "live at the peak");
  auto row = [&](MemoryClass cls, llvm::StringRef held, llvm::StringRef note) {
    unsigned c = static_cast<unsigned>(cls);
    os << llvm::formatv("  {0,-18} {1,28} {2,28}", getMemoryClassName(cls),
                        held, bytesText(r.atPeak[c]));
    if (!note.empty())
      os << "  " << note;
    os << "\n";
  };
  auto held = [&](MemoryClass cls) {
    return bytesText(r.held[static_cast<unsigned>(cls)]);
  };
  auto perPsi = [&](MemoryClass cls) -> std::string {
    if (r.parameterElements <= 0)
      return "";
    return llvm::formatv("{0:F3} bytes per element of Ψ",
                         r.held[static_cast<unsigned>(cls)] /
                             double(r.parameterElements))
        .str();
  };
  auto largestLive = [&](MemoryClass cls) {
    return "largest live " + bytesText(r.peakLive[static_cast<unsigned>(cls)]);
  };
  row(MemoryClass::Parameters, held(MemoryClass::Parameters),
      r.parameterElements > 0
          ? llvm::formatv("{0} tensors, Ψ = {1} elements: {2}",
                          r.parameterTensors, r.parameterElements,
                          perPsi(MemoryClass::Parameters))
                .str()
          : "");
  if (r.held[static_cast<unsigned>(MemoryClass::MasterParameters)])
    row(MemoryClass::MasterParameters, held(MemoryClass::MasterParameters),
        perPsi(MemoryClass::MasterParameters) +
            "; f32 masters of the low-precision parameters");
  row(MemoryClass::OptimizerStates, held(MemoryClass::OptimizerStates),
      perPsi(MemoryClass::OptimizerStates));
  if (r.held[static_cast<unsigned>(MemoryClass::StateBuffers)])
    row(MemoryClass::StateBuffers, held(MemoryClass::StateBuffers), "");
  // Gradients: what the optimizer reads, then how many of the parameters
  // have one stored at all.
  llvm::SmallVector<std::string> gradientNotes = {
      "as the optimizer reads them"};
  if (std::string psi = perPsi(MemoryClass::Gradients); !psi.empty())
    gradientNotes.push_back(psi);
  gradientNotes.push_back(largestLive(MemoryClass::Gradients) +
                          " with unreduced ones");
  if (r.parameterTensors > 0 && r.gradientsHeld != r.parameterTensors) {
    std::string stored = llvm::formatv("{0} of {1} parameters' gradients are "
                                       "stored",
                                       r.gradientsHeld, r.parameterTensors)
                             .str();
    if (r.gradientsTraced > r.gradientsHeld)
      stored += llvm::formatv(", {0} never leave the kernels that compute "
                              "and apply them",
                              r.gradientsTraced - r.gradientsHeld)
                    .str();
    if (r.parameterTensors > r.gradientsTraced)
      stored += llvm::formatv(", {0} were not traced (counted as "
                              "temporaries)",
                              r.parameterTensors - r.gradientsTraced)
                    .str();
    gradientNotes.push_back(std::move(stored));
  }
  row(MemoryClass::Gradients, held(MemoryClass::Gradients),
      llvm::join(gradientNotes, "; "));
  row(MemoryClass::Activations, held(MemoryClass::Activations),
      "kept from forward for backward");
  row(MemoryClass::Temporaries, "-", largestLive(MemoryClass::Temporaries));
  row(MemoryClass::Inputs, held(MemoryClass::Inputs), "");
  row(MemoryClass::Constants, held(MemoryClass::Constants), "");
  os << "  peak: " << bytesText(r.peakBytes) << " live";
  if (r.peakNode >= 0)
    os << " at command " << r.peakNode << " (" << r.peakWhere << ")";
  os << "; arena " << bytesText(r.arenaBytes);
  if (r.peakBytes > 0)
    os << llvm::formatv(" ({0:F1}% above the peak: alignment and "
                        "fragmentation)",
                        100.0 * (double(r.arenaBytes) - double(r.peakBytes)) /
                            double(r.peakBytes));
  os << "\n";

  if (r.collectives.empty()) {
    os << "collectives per step: none\n";
    return;
  }
  // By axis, then kind.
  struct Totals {
    int64_t count = 0, async = 0;
    uint64_t bytes = 0, inFlightBytes = 0;
    int64_t flopsInFlight = 0;
  };
  std::map<std::pair<std::string, std::string>, Totals> rows;
  Totals all;
  for (const ReportCollective &c : r.collectives) {
    for (Totals *t : {&rows[{c.axes, c.kind}], &all}) {
      ++t->count;
      t->async += c.async;
      t->bytes += c.bytesSent;
      if (c.computeCommandsInFlight > 0)
        t->inFlightBytes += c.bytesSent;
      t->flopsInFlight += c.flopsInFlight;
    }
  }
  os << "collectives per step, per rank (bytes sent by the ring algorithm; "
        "\"overlapped\": bytes of asynchronous collectives with compute "
        "between their start and their wait):\n";
  os << llvm::formatv("  {0,-8} {1,-20} {2,6} {3,24} {4,6} {5,24} {6,14}\n",
                      "axes", "collective", "count", "bytes", "async",
                      "overlapped", "GFLOP between");
  auto line = [&](llvm::StringRef axes, llvm::StringRef kind, const Totals &t) {
    os << llvm::formatv("  {0,-8} {1,-20} {2,6} {3,24} {4,6} {5,24} {6,14}\n",
                        axes, kind, t.count, bytesText(t.bytes), t.async,
                        bytesText(t.inFlightBytes),
                        llvm::formatv("{0:F3}", t.flopsInFlight / 1e9).str());
  };
  for (const auto &[key, t] : rows)
    line(key.first, key.second, t);
  line("all", "all", all);
  os << llvm::formatv("  overlapped: {0:F1}% of the bytes sent\n",
                      all.bytes ? 100.0 * all.inFlightBytes / all.bytes : 0.0);
  printExperts(r, rows, os);
}

void printZeroFormula(const StepReport &r, int stage, int64_t dpRanks,
                      int64_t expertRanks, llvm::StringRef axes,
                      unsigned optimizerBytes, llvm::raw_ostream &os) {
  auto at = [&](MemoryClass cls) { return r.held[static_cast<unsigned>(cls)]; };
  // Mixed precision (some parameters have f32 masters): the paper's
  // variant, 2-byte parameters and gradients, the master with the
  // optimizer's states; otherwise the fp32 one.
  const bool mixed = r.replicaLowPrecisionElements > 0;
  const unsigned paramBytes = mixed ? 2 : 4, gradBytes = mixed ? 2 : 4,
                 stateBytes = optimizerBytes + (mixed ? 4 : 0);
  // Ψ over N, the experts' Ψ_e over their own N (without ep).
  const double psi = r.replicaParameterElements, psiE = r.replicaExpertElements,
               split = (psi - psiE) / double(dpRanks) +
                       psiE / double(std::max<int64_t>(1, expertRanks));
  const double p = paramBytes * (stage >= 3 ? split : psi),
               g = gradBytes * (stage >= 2 ? split : psi),
               o = stateBytes * (stage >= 1 ? split : psi);
  uint64_t states =
      at(MemoryClass::OptimizerStates) + at(MemoryClass::MasterParameters);
  uint64_t measured =
      at(MemoryClass::Parameters) + at(MemoryClass::Gradients) + states;
  os << llvm::formatv(
      "model states per rank, ZeRO-{0} with N = {1} over {7} and Ψ = {2} "
      "({3} variant: {4}-byte parameters and gradients, {5} bytes of {6}"
      "optimizer state per parameter):\n",
      stage, dpRanks, r.replicaParameterElements,
      mixed ? "mixed-precision" : "fp32", paramBytes, stateBytes,
      mixed ? "f32 master and " : "", axes);
  if (r.replicaExpertElements > 0 && expertRanks != dpRanks)
    os << llvm::formatv("  (of Ψ, the experts' {0} take N = {1}: ep splits "
                        "them already)\n",
                        r.replicaExpertElements, expertRanks);
  auto line = [&](llvm::StringRef what, llvm::StringRef formula,
                  double expected, uint64_t got) {
    os << llvm::formatv("  {0,-18} {1,-10} {2,16:F0} expected {3,16} "
                        "measured{4}\n",
                        what, formula, expected, got,
                        uint64_t(expected + 0.5) == got ? "" : "  (differs)");
  };
  auto term = [](unsigned bytes, bool split) {
    return std::to_string(bytes) + "Ψ" + (split ? "/N" : "");
  };
  line("parameters", term(paramBytes, stage >= 3), p,
       at(MemoryClass::Parameters));
  line("gradients", term(gradBytes, stage >= 2), g, at(MemoryClass::Gradients));
  line(mixed ? "master + optimizer" : "optimizer states",
       term(stateBytes, stage >= 1), o, states);
  line("total", "", p + g + o, measured);
  if (mixed) {
    int64_t f32Only =
        r.replicaParameterElements - r.replicaLowPrecisionElements;
    llvm::SmallVector<std::string> notes;
    if (!r.lowPrecisionGradients)
      notes.push_back("gradients stay f32, 4 bytes where the formula has 2 "
                      "(--low-precision-gradients rounds them)");
    else if (r.wideGradientBytes > 0 && f32Only == 0)
      notes.push_back(std::to_string(r.wideGradientBytes) +
                      " bytes of gradients are held in f32: reduced before "
                      "their rounding, where the partitioner completes their "
                      "sum for an op that cannot take it partial (a scatter, "
                      "a gather)");
    if (f32Only == 0 && at(MemoryClass::Parameters) < uint64_t(p + 0.5))
      notes.push_back(
          std::to_string(uint64_t(p + 0.5) - at(MemoryClass::Parameters)) +
          " bytes of parameters fewer: low-precision copies converted inside "
          "the kernels that read them are never stored");
    if (stage == 1 && r.lowPrecisionGradients &&
        at(MemoryClass::Gradients) < uint64_t(g + 0.5))
      notes.push_back("each gradient is sliced right after its all-reduce, "
                      "so a rank holds only the part its optimizer reads");
    if (f32Only > 0)
      notes.push_back(
          std::to_string(f32Only) +
          " of the Ψ elements belong to parameters the step reads in f32 "
          "(norms, biases, embeddings it gathers), which have no master: 4 "
          "bytes of parameter" +
          (r.lowPrecisionGradients ? " and of gradient" : "") +
          ", none of master");
    if (!notes.empty())
      os << "  (where Cleave departs from the formula: "
         << llvm::join(notes, "; ") << ")\n";
  } else if (stage == 1 && at(MemoryClass::Gradients) < uint64_t(g + 0.5)) {
    os << "  (where Cleave departs from the formula: each gradient is "
          "sliced right after its all-reduce, so a rank holds only the part "
          "its optimizer reads)\n";
  }
  uint64_t gradientsLive =
      r.peakLive[static_cast<unsigned>(MemoryClass::Gradients)];
  if (gradientsLive < at(MemoryClass::Gradients))
    os << "  (the gradients are never all live at once: at most "
       << gradientsLive << " bytes are, with the unreduced ones)\n";
}

} // namespace cleave
