//===- PassOptionTypes.h - Types of Cleave's pass options -------*- C++ -*-===//
//
// MLIR prints a `double` pass option with six significant digits (`%e`),
// so a printed pipeline (cleave-compile --print-pipeline, a crash
// reproducer) would read `beta2=0.99999999` back as 1 and build another
// program. Cleave's real-valued options are ExactDouble instead: it
// converts to and from double and prints the shortest text that reads back
// as the same double.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_PASSOPTIONTYPES_H
#define CLEAVE_TRANSFORMS_PASSOPTIONTYPES_H

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>

namespace cleave {

/// A double that prints exactly (see the file comment).
struct ExactDouble {
  double value = 0;
  ExactDouble() = default;
  ExactDouble(double value) : value(value) {}
  operator double() const { return value; }
  friend bool operator==(ExactDouble a, ExactDouble b) {
    return a.value == b.value;
  }
  friend bool operator!=(ExactDouble a, ExactDouble b) {
    return a.value != b.value;
  }
};

/// The shortest of %.1g ... %.17g that reads back as `d` (17 significant
/// digits always do).
inline llvm::raw_ostream &operator<<(llvm::raw_ostream &os, ExactDouble d) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, d.value);
    if (digits == 17 || std::strtod(text, nullptr) == d.value)
      break;
  }
  return os << text;
}

} // namespace cleave

namespace llvm::cl {
/// Parses an ExactDouble as llvm::cl parses a double.
template <>
class parser<cleave::ExactDouble> : public basic_parser<cleave::ExactDouble> {
public:
  parser(Option &option) : basic_parser(option) {}
  /// True on error.
  bool parse(Option &option, StringRef, StringRef arg,
             cleave::ExactDouble &value) {
    double parsed;
    if (arg.getAsDouble(parsed))
      return option.error("'" + arg + "' value invalid for real argument");
    value = parsed;
    return false;
  }
  StringRef getValueName() const override { return "number"; }
  void printOptionDiff(const Option &option, cleave::ExactDouble value,
                       const OptVal &defaultValue, size_t globalWidth) const {
    printOptionName(option, globalWidth);
    std::string text;
    raw_string_ostream os(text);
    os << value;
    outs() << "= " << text;
    if (defaultValue.hasValue()) {
      std::string def;
      raw_string_ostream dos(def);
      dos << defaultValue.getValue();
      outs() << " (default: " << def << ")";
    }
    outs() << "\n";
  }
};
} // namespace llvm::cl

#endif // CLEAVE_TRANSFORMS_PASSOPTIONTYPES_H
