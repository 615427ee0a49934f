//===- Json.h - nlohmann-json without exceptions ---------------*- C++ -*-===//
//
// The runtime reads and writes JSON (safetensors headers, checkpoint indexes
// and manifests, step logs, traces, profiles) with nlohmann-json. It is
// built with -fno-exceptions, where nlohmann aborts on a parse error, on a
// type mismatch and on invalid UTF-8 in dump(); these helpers are the calls
// that report instead: a parse that names the error and bounds the nesting
// (hostile files give errors, never crashes), a member lookup that checks
// the type, an exact int64 read, and a dump that never aborts.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_JSON_H
#define CLEAVE_JSON_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace cleave::json {

/// Objects keep their members in insertion (file) order.
using Value = nlohmann::ordered_json;

/// Parses a whole JSON document (nested at most 64 deep). False with
/// *error naming the problem and where it is.
bool parse(const std::string &text, Value *out, std::string *error);

/// The member named `key` of `object`, or nullptr (also when `object` is not
/// an object).
const Value *get(const Value &object, const char *key);

/// The string `v` holds, or nullptr when it is not a string.
const std::string *asString(const Value *v);

/// An integer in int64 range (written without a fraction or exponent).
bool asInt64(const Value &v, int64_t *out);

/// `v` as printf's `format` prints it (e.g. "%.9g"), as a JSON number; null
/// when `v` is not finite (JSON has no NaN or infinity).
Value number(double v, const char *format);

/// `v` as text: compact when `indent` is negative, else `indent` spaces per
/// level. Invalid UTF-8 in strings is replaced by U+FFFD.
std::string dump(const Value &v, int indent = -1);

} // namespace cleave::json

#endif // CLEAVE_JSON_H
