//===- Json.cpp - nlohmann-json for a runtime built without exceptions ----===//

#include "cleave/Json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace cleave::json {

namespace {
/// A SAX pass that checks the document before nlohmann builds it: the
/// nesting limit, and the parse error's text (without exceptions, nlohmann's
/// DOM parse only says that the document is invalid).
class Checker : public nlohmann::json_sax<Value> {
public:
  static constexpr int kMaxDepth = 64;
  std::string error;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override { return enter(); }
  bool key(string_t &) override { return true; }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override { return leave(); }
  bool parse_error(std::size_t position, const std::string &,
                   const nlohmann::detail::exception &ex) override {
    // what() is "[json.exception.parse_error.101] parse error at ...".
    std::string what = ex.what();
    size_t bracket = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos)
      what = what.substr(bracket + 2);
    error = what + " (byte " + std::to_string(position) + ")";
    return false;
  }

private:
  int depth = 0;
  bool enter() {
    if (++depth <= kMaxDepth)
      return true;
    error = "nesting deeper than " + std::to_string(kMaxDepth) + " levels";
    return false;
  }
  bool leave() {
    --depth;
    return true;
  }
};
} // namespace

bool parse(const std::string &text, Value *out, std::string *error) {
  Checker checker;
  if (!Value::sax_parse(text, &checker) || !checker.error.empty()) {
    *error = checker.error.empty() ? "invalid JSON" : checker.error;
    return false;
  }
  *out = Value::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    *error = "invalid JSON";
    return false;
  }
  return true;
}

const Value *get(const Value &object, const char *key) {
  if (!object.is_object())
    return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const std::string *asString(const Value *v) {
  return v && v->is_string() ? v->get_ptr<const std::string *>() : nullptr;
}

bool asInt64(const Value &v, int64_t *out) {
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return true;
  }
  return false;
}

Value number(double v, const char *format) {
  if (!std::isfinite(v))
    return nullptr;
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return std::strtod(buf, nullptr);
}

std::string dump(const Value &v, int indent) {
  return v.dump(indent, ' ', /*ensure_ascii=*/false,
                Value::error_handler_t::replace);
}

} // namespace cleave::json
