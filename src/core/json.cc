#include "core/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/file.h"

namespace st {

namespace {

// Deeper than any real file nests (tokenizer.json ~6, tool schemas in datasets ~20): every later
// walk of a parsed value recurses (dump(), python_dumps, the readers), so a document nested
// 200,000 deep overflowed the stack (session 23 audit). Found by a scan that skips strings.
constexpr int kMaxJsonDepth = 256;

Status check_depth(std::string_view text, const std::string& what) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0')  // the parser reads NUL as the end of input, dropping what follows silently
      return Corruption(Str() << what << ": a NUL byte at byte " << i << " (JSON text never holds one)");
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return Corruption(Str() << what << ": JSON nested deeper than " << kMaxJsonDepth << " levels at byte " << i);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::OK();
}

// Parse errors as a Corruption naming the source and the byte, for either key order.
template <class J>
StatusOr<J> parse_as(std::string_view text, const std::string& what) {
  RETURN_IF_ERROR(check_depth(text, what));
  try {
    return J::parse(text.begin(), text.end());
  } catch (const typename J::parse_error& e) {
    return Corruption(Str() << what << ": invalid JSON at byte " << e.byte << ": " << e.what());
  } catch (const std::exception& e) {
    return Corruption(Str() << what << ": invalid JSON: " << e.what());
  }
}

}  // namespace

StatusOr<Json> parse_json(std::string_view text, const std::string& what) { return parse_as<Json>(text, what); }

StatusOr<OrderedJson> parse_ordered_json(std::string_view text, const std::string& what) {
  return parse_as<OrderedJson>(text, what);
}

// Python's repr(float): the shortest digits that round-trip, in exponent form when the decimal
// exponent is < -4 or >= 16, with ".0" on integral values; nan, inf, -inf.
std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, r.ptr);  // [-]D[.DDD]e[+-]XX
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t e = s.find('e');
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::atoi(s.c_str() + e + 1);
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int a = std::abs(exp);
    out += exp < 0 ? "e-" : "e+";
    if (a < 10) out += '0';
    out += std::to_string(a);
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (static_cast<int>(digits.size()) <= exp + 1) {
    out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
  }
  return neg ? "-" + out : out;
}

namespace {

// Python's json.dumps of a float: repr's digits, NaN / Infinity as JSON-ish literals.
std::string python_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return python_float_repr(d);
}

void python_string(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          *out += b;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

void python_dumps(const OrderedJson& v, std::string* out) {
  switch (v.type()) {
    case OrderedJson::value_t::object: {
      *out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) *out += ", ";
        first = false;
        python_string(it.key(), out);
        *out += ": ";
        python_dumps(it.value(), out);
      }
      *out += '}';
      break;
    }
    case OrderedJson::value_t::array: {
      *out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) *out += ", ";
        python_dumps(v[i], out);
      }
      *out += ']';
      break;
    }
    case OrderedJson::value_t::string: python_string(v.get_ref<const std::string&>(), out); break;
    case OrderedJson::value_t::boolean: *out += v.get<bool>() ? "true" : "false"; break;
    case OrderedJson::value_t::number_integer: *out += std::to_string(v.get<int64_t>()); break;
    case OrderedJson::value_t::number_unsigned: *out += std::to_string(v.get<uint64_t>()); break;
    case OrderedJson::value_t::number_float: *out += python_float(v.get<double>()); break;
    default: *out += "null"; break;
  }
}

}  // namespace

std::string python_json_dumps(const OrderedJson& v) {
  std::string out;
  python_dumps(v, &out);
  return out;
}

StatusOr<Json> read_json_file(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, read_file_to_string(path));
  return parse_json(text, path);
}

StatusOr<int64_t> json_int(const Json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) return NotFound(Str() << what << ": missing key '" << key << "'");
  if (!it->is_number_integer()) return Corruption(Str() << what << ": key '" << key << "' is not an integer");
  // get<int64_t>() of an unsigned value past INT64_MAX wraps negative (r = 2^63 read as "r must be > 0").
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return Corruption(Str() << what << ": key '" << key << "' = " << it->dump() << " is out of range");
  return it->get<int64_t>();
}

StatusOr<double> json_number(const Json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) return NotFound(Str() << what << ": missing key '" << key << "'");
  if (!it->is_number()) return Corruption(Str() << what << ": key '" << key << "' is not a number");
  return it->get<double>();
}

StatusOr<std::string> json_string(const Json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) return NotFound(Str() << what << ": missing key '" << key << "'");
  if (!it->is_string()) return Corruption(Str() << what << ": key '" << key << "' is not a string");
  return it->get<std::string>();
}

}  // namespace st
