//===- Json.h - A small JSON reader and string escaping --------*- C++ -*-===//
//
// Enough JSON for safetensors headers, checkpoint indexes and manifests:
// a bounds-checked parser with a nesting limit (hostile files give errors,
// never crashes) and an escaper for writers.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_JSON_H
#define CLEAVE_JSON_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cleave::json {

struct Value {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string text; ///< String value, or a number's literal text.
  std::vector<Value> items;
  std::vector<std::pair<std::string, Value>> members; ///< In file order.

  /// The member named `key`, or nullptr (also when this is not an object).
  const Value *get(const std::string &key) const;
  /// A number that is an exact integer in int64 range (from its literal).
  bool asInt64(int64_t *out) const;
};

/// Parses a whole JSON document; false with *error naming the offset.
bool parse(const std::string &text, Value *out, std::string *error);

/// `s` quoted and escaped as a JSON string.
std::string quote(const std::string &s);

} // namespace cleave::json

#endif // CLEAVE_JSON_H
