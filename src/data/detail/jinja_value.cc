#include "data/detail/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace st::jinja {

void fail(std::string msg) { throw Error{std::move(msg)}; }

void check_size(size_t n) {
  if (n > kMaxOutputBytes) fail("a string larger than " + std::to_string(kMaxOutputBytes >> 20) + " MiB");
}

void check_items(size_t n) {
  if (n > kMaxListItems) fail("a sequence of more than " + std::to_string(kMaxListItems) + " items (a limit for hostile templates)");
}

namespace {
thread_local uint64_t* t_work = nullptr;  // the budget of the render on this thread
}  // namespace

WorkBudget::WorkBudget() : saved_(t_work) { t_work = &used_; }
WorkBudget::~WorkBudget() { t_work = saved_; }

void charge_work(uint64_t units) {
  if (!t_work) return;
  *t_work += units;
  if (*t_work > kMaxWork)
    fail("the template does too much work (it copies or scans more than " + std::to_string(kMaxWork >> 30) +
         " GiB, e.g. by growing a string or list in a loop; a limit for hostile templates)");
}

uint16_t outer_depth(uint16_t inner) {
  if (inner >= kMaxDepth) fail("lists and dicts nested more than " + std::to_string(kMaxDepth) + " deep (a limit for hostile templates)");
  return static_cast<uint16_t>(inner + 1);
}

namespace {

void check_depth(int depth) {
  if (depth > kMaxDepth) fail("a value nested more than " + std::to_string(kMaxDepth) + " deep (a namespace that holds itself?)");
}

}  // namespace

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
  charge_work(x.size());
  v.s = std::make_shared<const std::string>(std::move(x));
  return v;
}
Value Value::make_list(List x, bool is_tuple) {
  Value v;
  v.kind = Kind::kList;
  v.tuple = is_tuple;
  check_items(x.size());
  charge_work(x.size() * kValueWork);
  uint16_t inner = 0;
  for (const Value& item : x) inner = std::max(inner, item.depth);
  v.depth = outer_depth(inner);
  v.list = std::make_shared<const List>(std::move(x));
  return v;
}
Value Value::make_dict(Dict x) {
  Value v;
  v.kind = Kind::kDict;
  charge_work(x.items.size() * kValueWork);
  uint16_t inner = 0;
  for (const auto& kv : x.items) inner = std::max(inner, kv.second.depth);
  v.depth = outer_depth(inner);
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

// (Both scan the items: building a dict of n keys is quadratic, so the scans count as work.)
const Value* Dict::find(const std::string& key) const {
  charge_work(items.size() + 1);
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  charge_work(items.size() + 1);
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

namespace {

// equal() and less() a level down: depth counts the containers walked (check_depth).
bool equal_at(const Value& a, const Value& b, int depth) {
  using K = Value::Kind;
  check_depth(depth);
  charge_work(kValueWork);
  if (a.is_number() && b.is_number()) {
    if (a.kind != K::kFloat && b.kind != K::kFloat) return (a.kind == K::kInt ? a.i : a.b) == (b.kind == K::kInt ? b.i : b.b);
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString:
      if (a.s->size() == b.s->size()) charge_work(a.s->size());
      return *a.s == *b.s;
    case K::kList:
      if (a.view == Value::View::kGenerator || b.view == Value::View::kGenerator) return a.list == b.list;
      if (a.tuple != b.tuple || a.view != b.view || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equal_at((*a.list)[k], (*b.list)[k], depth + 1)) return false;
      return true;
    case K::kDict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equal_at(v, *o, depth + 1)) return false;
      }
      return true;
    case K::kNamespace: return a.ns == b.ns;
    case K::kCallable: return a.call == b.call;
    default: return false;
  }
}

bool less_at(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  charge_work(kValueWork);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::kInt && b.kind == Value::Kind::kInt) return a.i < b.i;
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) {  // byte order = code point order in UTF-8
    charge_work(std::min(a.s->size(), b.s->size()));
    return *a.s < *b.s;
  }
  if (a.is_list() && b.is_list() && a.tuple == b.tuple && a.view == Value::View::kNone && b.view == Value::View::kNone) {
    const List &x = *a.list, &y = *b.list;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!equal_at(x[k], y[k], depth + 1)) return less_at(x[k], y[k], depth + 1);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace

bool equal(const Value& a, const Value& b) { return equal_at(a, b, 0); }
bool less(const Value& a, const Value& b) { return less_at(a, b, 0); }

// Python's repr(float) (core/json.h).
std::string py_float(double d) { return python_float_repr(d); }

namespace {

// Python's repr(str): single quotes unless the text has ' and no ", escapes for \ and controls.
// (Python also escapes non-printable non-ASCII code points; those are kept here as they are.)
std::string repr_str(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (size_t k = 0; k < s.size(); ++k) {
    const auto c = static_cast<unsigned char>(s[k]);
    const auto plain = static_cast<size_t>(std::find_if(s.begin() + static_cast<ptrdiff_t>(k), s.end(), [q](char x) {
      return x == '\\' || x == q || static_cast<unsigned char>(x) < 0x20 || x == 0x7f;
    }) - s.begin());
    if (plain > k) {  // a run that needs no escapes, appended at once
      out.append(s, k, plain - k);
      k = plain - 1;
    } else if (c == '\\' || c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {  // the other controls
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  return out + q;
}

std::string str_at(const Value& v, int depth);

std::string repr_at(const Value& v, int depth) {
  if (v.is_string()) return repr_str(*v.s);
  if (v.is_undefined()) return "Undefined";
  return str_at(v, depth);
}

// A list's or dict's items, each checked against the string cap as it is added.
std::string repr_seq(const Value& v, int depth) {
  if (v.view == Value::View::kGenerator)
    fail("printing a generator (jinja2 prints '<generator object ...>'); add |list to print its items");
  std::string out = v.view != Value::View::kNone ? v.type_name() + "([" : v.tuple ? "(" : "[";
  for (size_t k = 0; k < v.list->size(); ++k) {
    out += (k ? ", " : "") + repr_at((*v.list)[k], depth + 1);
    check_size(out.size());
  }
  if (v.tuple && v.list->size() == 1) out += ",";
  return out + (v.view != Value::View::kNone ? "])" : v.tuple ? ")" : "]");
}

std::string repr_dict(const Dict& d, int depth) {
  std::string out = "{";
  for (size_t k = 0; k < d.items.size(); ++k) {
    out += (k ? ", " : "") + repr_str(d.items[k].first) + ": " + repr_at(d.items[k].second, depth + 1);
    check_size(out.size());
  }
  return out + "}";
}

std::string str_at(const Value& v, int depth) {
  using K = Value::Kind;
  check_depth(depth);
  switch (v.kind) {
    case K::kUndefined: return "";
    case K::kNone: return "None";
    case K::kBool: return v.b ? "True" : "False";
    case K::kInt: return std::to_string(v.i);
    case K::kFloat: return py_float(v.f);
    case K::kString: return *v.s;
    case K::kList: return repr_seq(v, depth);
    case K::kDict: return repr_dict(*v.dict, depth);
    case K::kNamespace: return "<Namespace " + repr_dict(v.ns->attrs, depth) + ">";
    case K::kCallable: return "<function " + v.call->name + ">";
  }
  return "";
}

}  // namespace

std::string to_str(const Value& v) {
  std::string s = str_at(v, 0);
  charge_work(s.size());
  return s;
}

std::string repr(const Value& v) {
  std::string s = repr_at(v, 0);
  charge_work(s.size());
  return s;
}

size_t utf8_skip(const std::string& s, size_t at, size_t chars, size_t bytes, size_t* skipped) {
  bytes = std::min(bytes, s.size());
  const size_t from = at;
  size_t n = 0, slow = 0;
  while (n < chars && at < bytes) {
    uint64_t word;  // eight ASCII bytes at a time (a long prompt is mostly ASCII)
    if (chars - n >= 8 && bytes - at >= 8 && (std::memcpy(&word, s.data() + at, 8), (word & 0x8080808080808080ull) == 0)) {
      n += 8, at += 8;
    } else {
      at = utf8_next(s, at), ++n, ++slow;
    }
  }
  charge_work(at - from + 4 * slow);  // (a character at a time is several times slower)
  if (skipped) *skipped = n;
  return at;
}

size_t utf8_count(const std::string& s, size_t bytes) {
  size_t n = 0;
  utf8_skip(s, 0, SIZE_MAX, bytes, &n);
  return n;
}

// (Counts first: a 60 MB string is 60M Values, ~10 GB.)
List iterate(const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::kUndefined: return {};  // jinja2's Undefined iterates as empty
    case K::kList:
      if (v.s) fail(*v.s);  // a generator over something not iterable fails when consumed
      charge_work(v.list->size() * kValueWork);
      return *v.list;
    case K::kDict: {
      List keys;
      for (const auto& kv : v.dict->items) keys.push_back(Value::str(kv.first));
      return keys;
    }
    case K::kString: {
      check_items(utf8_count(*v.s));
      List chars;
      for (size_t k = 0; k < v.s->size();) {
        const size_t e = utf8_next(*v.s, k);
        chars.push_back(Value::str(v.s->substr(k, e - k)));
        k = e;
      }
      return chars;
    }
    default: fail("'" + v.type_name() + "' object is not iterable");
  }
}

int64_t length(const Value& v) {
  using K = Value::Kind;
  switch (v.kind) {
    case K::kUndefined: return 0;
    case K::kString: return static_cast<int64_t>(utf8_count(*v.s));
    case K::kList:
      if (v.view == Value::View::kGenerator) fail("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.list->size());
    case K::kDict: return static_cast<int64_t>(v.dict->items.size());
    default: fail("object of type '" + v.type_name() + "' has no len()");
  }
}

namespace {

Value from_json_at(const OrderedJson& j, int depth) {
  using T = OrderedJson::value_t;
  if (depth > kMaxDepth) fail("the render context is nested more than " + std::to_string(kMaxDepth) + " deep");
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
      for (const OrderedJson& e : j) l.push_back(from_json_at(e, depth + 1));
      return Value::make_list(std::move(l));
    }
    case T::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), from_json_at(it.value(), depth + 1));
      return Value::make_dict(std::move(d));
    }
    default: return Value::none();  // binary / discarded: not produced by the JSON parser
  }
}

}  // namespace

Value from_json(const OrderedJson& j) { return from_json_at(j, 0); }

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
  if (depth > kMaxDepth) fail("tojson: value nested too deeply");
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
  check_size(out->size());
}

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  dump(v, style, 0, 0, &out);
  charge_work(out.size());
  return out;
}

}  // namespace st::jinja
