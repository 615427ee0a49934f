//===- SimulationTrace.cpp - The trace of a simulated step ----------------===//
//
// A simulated step's spans in Chrome's trace-event format. It is in
// CleaveSimulate, with the cluster reader, because it writes its strings
// with llvm::json; the engine itself stays plain C++ (cleave_simulate).
//
//===----------------------------------------------------------------------===//

#include "cleave/Simulate/Simulator.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace cleave::sim {

/// `s` as a JSON string, escaped by llvm::json. Control characters are
/// left out, as the trace has always done, and invalid UTF-8 is replaced.
static std::string quoted(llvm::StringRef s) {
  std::string kept;
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x20)
      kept += c;
  if (!llvm::json::isUTF8(kept))
    kept = llvm::json::fixUTF8(kept);
  std::string out;
  llvm::raw_string_ostream os(out);
  llvm::json::OStream(os).value(kept);
  return out;
}

/// The trace in Chrome's trace-event format. The layout is the one
/// cleave-run --trace writes and tools/trace_svg.py and the tests read: one
/// event per line, its keys in this order, times in microseconds to three
/// decimals (llvm::json's writer would print 17 significant digits and
/// either one line or one key per line), so only the strings go through
/// llvm::json.
std::string simulationTrace(const SimResult &result) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  llvm::raw_string_ostream os(out);
  bool first = true;
  for (const Span &s : result.spans) {
    int pid = s.stream == 2 ? 0 : 1;
    long long tid = s.stream == 2 ? s.rank : 2 * s.rank + s.stream;
    os << llvm::formatv("{0}\n  {{\"name\": {1}, \"cat\": {2}, \"ph\": \"X\", "
                        "\"ts\": {3:F3}, \"dur\": {4:F3}, \"pid\": {5}, "
                        "\"tid\": {6}}",
                        first ? "" : ",", quoted(s.name), quoted(s.category),
                        s.start * 1e6, (s.end - s.start) * 1e6, pid, tid);
    first = false;
  }
  os << "\n]}\n";
  return out;
}

} // namespace cleave::sim
