#include "data/detail/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace st::jinja {

void fail(std::string msg) { throw Error{std::move(msg)}; }

Value Value::undefined(std::string what) {
  Value v;
  v.s = std::make_shared<const std::string>(std::move(what));
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::str(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::make_shared<const std::string>(std::move(x));
  return v;
}
Value Value::make_list(List x, bool is_tuple) {
  Value v;
  v.kind = Kind::kList;
  v.tuple = is_tuple;
  v.list = std::make_shared<const List>(std::move(x));
  return v;
}
Value Value::make_dict(Dict x) {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<const Dict>(std::move(x));
  return v;
}
Value Value::callable(std::string name, std::function<Value(Renderer&, CallArgs&)> fn) {
  Value v;
  v.kind = Kind::kCallable;
  v.call = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

double Value::as_double() const {
  if (kind == Kind::kFloat) return f;
  if (kind == Kind::kInt) return static_cast<double>(i);
  if (kind == Kind::kBool) return b ? 1 : 0;
  fail("expected a number, got " + type_name());
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList:
      switch (view) {
        case View::kGenerator: return "generator";
        case View::kDictItems: return "dict_items";
        case View::kDictKeys: return "dict_keys";
        case View::kDictValues: return "dict_values";
        default: return tuple ? "tuple" : "list";
      }
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
  }
  return "?";
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

bool truthy(const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::kUndefined:
    case K::kNone: return false;
    case K::kBool: return v.b;
    case K::kInt: return v.i != 0;
    case K::kFloat: return v.f != 0;
    case K::kString: return !v.s->empty();
    case K::kList: return v.view == Value::View::kGenerator || !v.list->empty();
    case K::kDict: return !v.dict->items.empty();
    default: return true;
  }
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind != K::kFloat && b.kind != K::kFloat) return (a.kind == K::kInt ? a.i : a.b) == (b.kind == K::kInt ? b.i : b.b);
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return *a.s == *b.s;
    case K::kList:
      if (a.view == Value::View::kGenerator || b.view == Value::View::kGenerator) return a.list == b.list;
      if (a.tuple != b.tuple || a.view != b.view || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case K::kDict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    case K::kNamespace: return a.ns == b.ns;
    case K::kCallable: return a.call == b.call;
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::kInt && b.kind == Value::Kind::kInt) return a.i < b.i;
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return *a.s < *b.s;  // byte order = code point order in UTF-8
  if (a.is_list() && b.is_list() && a.tuple == b.tuple && a.view == Value::View::kNone && b.view == Value::View::kNone) {
    const List &x = *a.list, &y = *b.list;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!equal(x[k], y[k])) return less(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

// Python's repr(float) (core/json.h).
std::string py_float(double d) { return python_float_repr(d); }

namespace {

// Python's repr(str): single quotes unless the text has ' and no ", escapes for \ and controls.
// (Python also escapes non-printable non-ASCII code points; those are kept here as they are.)
std::string repr_str(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\' || c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

std::string repr_seq(const Value& v) {
  if (v.view == Value::View::kGenerator)
    fail("printing a generator (jinja2 prints '<generator object ...>'); add |list to print its items");
  std::string out = v.view != Value::View::kNone ? v.type_name() + "([" : v.tuple ? "(" : "[";
  for (size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + repr((*v.list)[k]);
  if (v.tuple && v.list->size() == 1) out += ",";
  return out + (v.view != Value::View::kNone ? "])" : v.tuple ? ")" : "]");
}

std::string repr_dict(const Dict& d) {
  std::string out = "{";
  for (size_t k = 0; k < d.items.size(); ++k) out += (k ? ", " : "") + repr_str(d.items[k].first) + ": " + repr(d.items[k].second);
  return out + "}";
}

}  // namespace

std::string to_str(const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::kUndefined: return "";
    case K::kNone: return "None";
    case K::kBool: return v.b ? "True" : "False";
    case K::kInt: return std::to_string(v.i);
    case K::kFloat: return py_float(v.f);
    case K::kString: return *v.s;
    case K::kList: return repr_seq(v);
    case K::kDict: return repr_dict(*v.dict);
    case K::kNamespace: return "<Namespace " + repr_dict(v.ns->attrs) + ">";
    case K::kCallable: return "<function " + v.call->name + ">";
  }
  return "";
}

std::string repr(const Value& v) {
  if (v.is_string()) return repr_str(*v.s);
  if (v.is_undefined()) return "Undefined";
  return to_str(v);
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[k]);
    size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    n = std::min(n, s.size() - k);
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

List iterate(const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::kUndefined: return {};  // jinja2's Undefined iterates as empty
    case K::kList:
      if (v.s) fail(*v.s);  // a generator over something not iterable fails when consumed
      return *v.list;
    case K::kDict: {
      List keys;
      for (const auto& kv : v.dict->items) keys.push_back(Value::str(kv.first));
      return keys;
    }
    case K::kString: {
      List chars;
      for (std::string& c : utf8_chars(*v.s)) chars.push_back(Value::str(std::move(c)));
      return chars;
    }
    default: fail("'" + v.type_name() + "' object is not iterable");
  }
}

int64_t length(const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::kUndefined: return 0;
    case K::kString: return static_cast<int64_t>(utf8_chars(*v.s).size());
    case K::kList:
      if (v.view == Value::View::kGenerator) fail("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.list->size());
    case K::kDict: return static_cast<int64_t>(v.dict->items.size());
    default: fail("object of type '" + v.type_name() + "' has no len()");
  }
}

Value from_json(const OrderedJson& j) {
  using T = OrderedJson::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case T::number_float: return Value::number(j.get<double>());
    case T::string: return Value::str(j.get<std::string>());
    case T::array: {
      List l;
      for (const OrderedJson& e : j) l.push_back(from_json(e));
      return Value::make_list(std::move(l));
    }
    case T::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), from_json(it.value()));
      return Value::make_dict(std::move(d));
    }
    default: return Value::none();  // binary / discarded: not produced by the JSON parser
  }
}

namespace {

// json.dumps(ensure_ascii=False) of a string: ", \, and control characters escaped.
std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float(d);
}

void dump(const Value& v, const JsonStyle& st, int level, int depth, std::string* out);

// The separator before item k of a container, and the closing one, in json.dumps' layout.
std::string json_break(const JsonStyle& st, int level) {
  if (st.indent < 0) return "";
  std::string s = "\n";  // (append, not "\n" + ...: GCC 12's -Wrestrict misfires on operator+)
  return s.append(static_cast<size_t>(st.indent * level), ' ');
}

void dump_container(const Value& v, const JsonStyle& st, int level, int depth, std::string* out) {
  const bool is_list = v.is_list();
  const size_t n = is_list ? v.list->size() : v.dict->items.size();
  if (n == 0) {
    *out += is_list ? "[]" : "{}";
    return;
  }
  std::vector<size_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = k;
  if (!is_list && st.sort_keys)
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return v.dict->items[a].first < v.dict->items[b].first; });
  *out += is_list ? "[" : "{";
  for (size_t k = 0; k < n; ++k) {
    *out += (k ? st.item_sep : "") + json_break(st, level + 1);
    if (is_list) {
      dump((*v.list)[order[k]], st, level + 1, depth + 1, out);
    } else {
      *out += json_str(v.dict->items[order[k]].first) + st.key_sep;
      dump(v.dict->items[order[k]].second, st, level + 1, depth + 1, out);
    }
  }
  *out += json_break(st, level) + (is_list ? "]" : "}");
}

void dump(const Value& v, const JsonStyle& st, int level, int depth, std::string* out) {
  using K = Value::Kind;
  if (depth > 200) fail("tojson: value nested too deeply");
  switch (v.kind) {
    case K::kNone: *out += "null"; break;
    case K::kBool: *out += v.b ? "true" : "false"; break;
    case K::kInt: *out += std::to_string(v.i); break;
    case K::kFloat: *out += json_float(v.f); break;
    case K::kString: *out += json_str(*v.s); break;
    case K::kList:
      if (v.view != Value::View::kNone) fail("tojson: Object of type " + v.type_name() + " is not JSON serializable");
      dump_container(v, st, level, depth, out);
      break;
    case K::kDict: dump_container(v, st, level, depth, out); break;
    default: fail("tojson: Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  dump(v, style, 0, 0, &out);
  return out;
}

}  // namespace st::jinja
