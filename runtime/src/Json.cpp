//===- Json.cpp - A small JSON reader and string escaping -----------------===//

#include "cleave/Json.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace cleave::json {

const Value *Value::get(const std::string &key) const {
  if (kind != Object)
    return nullptr;
  for (const auto &m : members)
    if (m.first == key)
      return &m.second;
  return nullptr;
}

bool Value::asInt64(int64_t *out) const {
  if (kind != Number || text.empty())
    return false;
  for (size_t i = 0; i < text.size(); ++i)
    if (!(std::isdigit(static_cast<unsigned char>(text[i])) ||
          (i == 0 && text[i] == '-')))
      return false;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || *end)
    return false;
  *out = v;
  return true;
}

namespace {
class Parser {
public:
  Parser(const std::string &s) : s(s) {}
  bool document(Value *out, std::string *error) {
    ws();
    if (!value(out, 0) || (ws(), pos != s.size() && fail("trailing characters")))
    {
      *error = err;
      return false;
    }
    return true;
  }

private:
  bool fail(const std::string &what) {
    if (err.empty())
      err = what + " at offset " + std::to_string(pos);
    return false;
  }
  void ws() {
    while (pos < s.size() &&
           (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r'))
      ++pos;
  }
  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (s.compare(pos, n, word) != 0)
      return fail("invalid literal");
    pos += n;
    return true;
  }
  bool value(Value *v, int depth) {
    if (depth > 64)
      return fail("nesting too deep");
    if (pos >= s.size())
      return fail("unexpected end");
    char c = s[pos];
    if (c == '{')
      return object(v, depth);
    if (c == '[')
      return array(v, depth);
    if (c == '"') {
      v->kind = Value::String;
      return string(&v->text);
    }
    if (c == 't') {
      v->kind = Value::Bool;
      v->boolean = true;
      return literal("true");
    }
    if (c == 'f') {
      v->kind = Value::Bool;
      return literal("false");
    }
    if (c == 'n') {
      v->kind = Value::Null;
      return literal("null");
    }
    return number(v);
  }
  bool number(Value *v) {
    size_t start = pos;
    if (pos < s.size() && s[pos] == '-')
      ++pos;
    bool digits = false;
    while (pos < s.size() &&
           (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.' ||
            s[pos] == 'e' || s[pos] == 'E' || s[pos] == '+' || s[pos] == '-')) {
      digits |= std::isdigit(static_cast<unsigned char>(s[pos])) != 0;
      ++pos;
    }
    if (!digits)
      return fail("invalid value");
    v->kind = Value::Number;
    v->text = s.substr(start, pos - start);
    char *end = nullptr;
    v->number = std::strtod(v->text.c_str(), &end);
    if (*end)
      return fail("invalid number");
    return true;
  }
  bool hex4(unsigned *out) {
    if (pos + 4 > s.size())
      return fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s[pos++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return fail("bad \\u escape");
    }
    *out = v;
    return true;
  }
  bool string(std::string *out) {
    ++pos; // '"'
    out->clear();
    while (true) {
      if (pos >= s.size())
        return fail("unterminated string");
      char c = s[pos++];
      if (c == '"')
        return true;
      if (static_cast<unsigned char>(c) < 0x20)
        return fail("control character in string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos >= s.size())
        return fail("unterminated string");
      char e = s[pos++];
      switch (e) {
      case '"': case '\\': case '/': out->push_back(e); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'u': {
        unsigned cp;
        if (!hex4(&cp))
          return false;
        if (cp >= 0xD800 && cp < 0xDC00 && pos + 1 < s.size() &&
            s[pos] == '\\' && s[pos + 1] == 'u') {
          pos += 2;
          unsigned lo;
          if (!hex4(&lo))
            return false;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp < 0x80) {
          out->push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
          out->push_back(static_cast<char>(0xC0 | cp >> 6));
          out->push_back(static_cast<char>(0x80 | (cp & 63)));
        } else if (cp < 0x10000) {
          out->push_back(static_cast<char>(0xE0 | cp >> 12));
          out->push_back(static_cast<char>(0x80 | (cp >> 6 & 63)));
          out->push_back(static_cast<char>(0x80 | (cp & 63)));
        } else {
          out->push_back(static_cast<char>(0xF0 | cp >> 18));
          out->push_back(static_cast<char>(0x80 | (cp >> 12 & 63)));
          out->push_back(static_cast<char>(0x80 | (cp >> 6 & 63)));
          out->push_back(static_cast<char>(0x80 | (cp & 63)));
        }
        break;
      }
      default:
        return fail("bad escape");
      }
    }
  }
  bool array(Value *v, int depth) {
    v->kind = Value::Array;
    ++pos;
    ws();
    if (pos < s.size() && s[pos] == ']') {
      ++pos;
      return true;
    }
    while (true) {
      v->items.emplace_back();
      ws();
      if (!value(&v->items.back(), depth + 1))
        return false;
      ws();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < s.size() && s[pos] == ']') {
        ++pos;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }
  bool object(Value *v, int depth) {
    v->kind = Value::Object;
    ++pos;
    ws();
    if (pos < s.size() && s[pos] == '}') {
      ++pos;
      return true;
    }
    while (true) {
      ws();
      if (pos >= s.size() || s[pos] != '"')
        return fail("expected a member name");
      v->members.emplace_back();
      if (!string(&v->members.back().first))
        return false;
      ws();
      if (pos >= s.size() || s[pos] != ':')
        return fail("expected ':'");
      ++pos;
      ws();
      if (!value(&v->members.back().second, depth + 1))
        return false;
      ws();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < s.size() && s[pos] == '}') {
        ++pos;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  const std::string &s;
  size_t pos = 0;
  std::string err;
};
} // namespace

bool parse(const std::string &text, Value *out, std::string *error) {
  Value v;
  if (!Parser(text).document(&v, error))
    return false;
  *out = std::move(v);
  return true;
}

std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out.push_back(c);
      }
    }
  }
  return out + "\"";
}

} // namespace cleave::json
