// Operators, attribute / item access, the Python methods templates call on str / list / dict,
// and the globals (range, namespace, dict, raise_exception, strftime_now).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <set>

#include "core/status.h"
#include "data/detail/jinja_eval.h"
#include "data/detail/jinja_text.h"

namespace st::jinja {

namespace {

[[noreturn]] void fail_undefined(const Value& v) { fail(*v.s); }

// Argument k, positional or by keyword; null when not given.
const Value* arg(const CallArgs& a, size_t k, const char* kw) {
  if (k < a.pos.size()) return &a.pos[k];
  for (const auto& [key, v] : a.kw)
    if (key == kw) return &v;
  return nullptr;
}

const std::string& str_arg(const Value* v, const std::string& fn) {
  if (!v || !v->is_string()) fail(fn + "() expects a string argument");
  return v->text();
}

int64_t int_arg(const Value* v, int64_t dflt, const std::string& fn) {
  if (!v || v->is_none()) return dflt;
  if (v->kind != Value::Kind::kInt && v->kind != Value::Kind::kBool) fail(fn + "() expects an integer argument");
  return v->kind == Value::Kind::kBool ? v->b : v->i;
}

Value str_list(const std::vector<std::string>& parts) {
  List l;
  for (const std::string& p : parts) l.push_back(Value::str(p));
  return Value::make_list(std::move(l));
}

// startswith / endswith: a string or a tuple of strings.
bool affix(const std::string& s, const Value& x, bool prefix) {
  if (x.is_list()) {
    for (const Value& p : *x.list)
      if (affix(s, p, prefix)) return true;
    return false;
  }
  const std::string& p = str_arg(&x, prefix ? "startswith" : "endswith");
  if (p.size() > s.size()) return false;
  return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// A decimal index ("12"); SIZE_MAX when the text is not one or is too large for any list.
size_t index_of(const std::string& digits) {
  size_t k = SIZE_MAX;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
  return ec == std::errc() && end == digits.data() + digits.size() ? k : SIZE_MAX;
}

// str.format with automatic ({}), numbered ({0}) or named ({name}) fields, no format specs.
std::string py_format(const std::string& f, const CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t k = 0; k < f.size(); ++k) {
    if ((f[k] == '{' || f[k] == '}') && k + 1 < f.size() && f[k + 1] == f[k]) {
      out += f[k++];
      continue;
    }
    if (f[k] == '}') fail("format(): single '}'");
    if (f[k] != '{') {
      out += f[k];
      continue;
    }
    const size_t e = f.find('}', k);
    if (e == std::string::npos) fail("format(): unterminated '{'");
    const std::string field = f.substr(k + 1, e - k - 1);
    if (field.find_first_of(":!.[") != std::string::npos) fail("format(): format specs are not supported");
    const Value* v = nullptr;
    if (field.empty()) v = auto_idx < a.pos.size() ? &a.pos[auto_idx++] : nullptr;
    else if (std::isdigit(static_cast<unsigned char>(field[0]))) v = arg(a, index_of(field), "");
    else v = arg(a, SIZE_MAX, field.c_str());
    if (!v) fail("format(): no argument for field {" + field + "}");
    const std::string text = to_str(*v);
    check_size(out.size() + text.size());  // before appending: 1000 fields of a 60 MB argument
    out += text;
    k = e;
  }
  return out;
}

int64_t py_find(const std::string& s, const std::string& sub, bool last) {
  const size_t f = last ? s.rfind(sub) : s.find(sub);
  if (f == std::string::npos) return -1;
  return static_cast<int64_t>(utf8_count(s, f));
}

Value str_method(const std::string& s, const std::string& m, const CallArgs& a) {
  charge_work(s.size());  // (most methods walk the string: s.isspace() in a loop is a scan each time)
  const bool takes_chars = m == "strip" || m == "lstrip" || m == "rstrip" || m == "split" || m == "rsplit";
  const Value* a0 = arg(a, 0, m == "split" || m == "rsplit" ? "sep" : m == "join" ? "iterable" : "chars");
  const std::string* chars = takes_chars && a0 && !a0->is_none() ? &str_arg(a0, m) : nullptr;
  if (m == "strip" || m == "lstrip" || m == "rstrip") return Value::str(py_strip(s, chars, m != "rstrip", m != "lstrip"));
  if (m == "split" || m == "rsplit") {
    const int64_t maxsplit = int_arg(arg(a, 1, "maxsplit"), -1, m);
    if (m == "rsplit" && maxsplit >= 0) fail("rsplit() with maxsplit is not supported");
    return str_list(py_split(s, chars, maxsplit));
  }
  if (m == "startswith" || m == "endswith") {
    if (!a0) fail(m + "() takes at least 1 argument");
    return Value::boolean(affix(s, *a0, m == "startswith"));
  }
  if (m == "upper" || m == "lower") return Value::str(py_case(s, m == "upper"));
  if (m == "title") return Value::str(py_title(s));
  if (m == "capitalize") return Value::str(py_capitalize(s));
  if (m == "replace")
    return Value::str(py_replace(s, str_arg(arg(a, 0, "old"), m), str_arg(arg(a, 1, "new"), m), int_arg(arg(a, 2, "count"), -1, m)));
  if (m == "find" || m == "rfind") return Value::integer(py_find(s, str_arg(a0, m), m == "rfind"));
  if (m == "count") {
    const std::string& sub = str_arg(a0, m);
    if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_count(s)) + 1);
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value::integer(n);
  }
  if (m == "join") {
    if (!a0) fail("join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(*a0)) {
      if (!v.is_string()) fail("join(): sequence item is " + v.type_name() + ", not str");
      check_size(out.size() + (first ? 0 : s.size()) + v.text().size());
      out += (first ? "" : s) + v.text();
      first = false;
    }
    return Value::str(std::move(out));
  }
  if (m == "splitlines") return str_list(py_splitlines(s));
  if (m == "format") return Value::str(py_format(s, a));
  if (m == "removeprefix" || m == "removesuffix") {
    const std::string& x = str_arg(a0, m);
    if (m == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value::str(s.substr(x.size()));
    if (m == "removesuffix" && !x.empty() && affix(s, Value::str(x), false)) return Value::str(s.substr(0, s.size() - x.size()));
    return Value::str(s);
  }
  if (m == "islower" || m == "isupper") return Value::boolean(py_is_case(s, m == "isupper"));
  auto all = [&](auto pred) { return !s.empty() && std::all_of(s.begin(), s.end(), pred); };
  if (m == "isspace") return Value::boolean(all([](char c) { return py_space(c); }));
  if (m == "isdigit" || m == "isalpha" || m == "isalnum") {
    if (std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
      fail(m + "() of non-ASCII text is not supported");
    if (m == "isdigit") return Value::boolean(all([](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }));
    if (m == "isalpha") return Value::boolean(all([](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }));
    return Value::boolean(all([](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }));
  }
  fail("str." + m + "() is not supported");
}

Value dict_method(const Value& d, const std::string& m, const CallArgs& a) {
  if (m == "get") {
    const Value* k = arg(a, 0, "key");
    if (!k) fail("get() takes at least 1 argument");
    const Value* v = k->is_string() ? d.dict->find(k->text()) : nullptr;
    if (v) return *v;
    const Value* dflt = arg(a, 1, "default");
    return dflt ? *dflt : Value::none();
  }
  List out;
  for (const auto& [k, v] : d.dict->items) {
    if (m == "keys") out.push_back(Value::str(k));
    else if (m == "values") out.push_back(v);
    else out.push_back(Value::make_list({Value::str(k), v}, true));
  }
  Value view = Value::make_list(std::move(out));
  view.view = m == "keys" ? Value::View::kDictKeys : m == "values" ? Value::View::kDictValues : Value::View::kDictItems;
  return view;
}

Value list_method(const Value& l, const std::string& m, const CallArgs& a) {
  const Value* x = arg(a, 0, "value");
  if (!x) fail(m + "() takes exactly one argument");
  int64_t k = 0, n = 0, found = -1;
  for (const Value& v : *l.list) {
    if (equal(v, *x)) {
      ++n;
      if (found < 0) found = k;
    }
    ++k;
  }
  if (m == "count") return Value::integer(n);
  if (found < 0) fail(repr(*x) + " is not in list");
  return Value::integer(found);
}

const std::set<std::string> kStrMethods = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                                           "upper", "lower", "title", "capitalize", "replace", "find", "rfind",
                                           "count", "join", "splitlines", "format", "removeprefix", "removesuffix",
                                           "islower", "isupper", "isspace", "isdigit", "isalpha", "isalnum"};
// What ImmutableSandboxedEnvironment refuses (jinja2.sandbox's _mutable_spec).
const std::set<std::string> kMutators = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear",
                                         "update", "setdefault", "popitem", "add", "discard", "difference_update",
                                         "intersection_update", "symmetric_difference_update", "__setitem__", "__delitem__"};

// (The method holds obj: `[l.count]` holds l, so it counts as one level deeper.)
Value bind_method(const Value& obj, const std::string& m, Value (*fn)(const Value&, const std::string&, const CallArgs&)) {
  Value method = Value::callable(m, [obj, m, fn](Renderer&, CallArgs& a) { return fn(obj, m, a); });
  method.depth = outer_depth(obj.depth);
  return method;
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  using K = Value::Kind;
  switch (obj.kind) {
    case K::kUndefined: fail_undefined(obj);
    case K::kString:
      if (kStrMethods.count(name))
        return bind_method(obj, name, [](const Value& o, const std::string& m, const CallArgs& a) { return str_method(o.text(), m, a); });
      break;
    case K::kList:
      if (kMutators.count(name)) fail("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
      if (name == "index" || name == "count") return bind_method(obj, name, list_method);
      break;
    case K::kDict:
      if (kMutators.count(name) || name == "copy" || name == "fromkeys")
        fail("access to attribute '" + name + "' of 'dict' object is unsafe (not supported).");
      if (name == "get" || name == "items" || name == "keys" || name == "values") return bind_method(obj, name, dict_method);
      if (const Value* v = obj.dict->find(name)) return *v;
      break;
    case K::kNamespace:
      if (const Value* v = obj.ns->attrs.find(name)) return *v;
      break;
    default: break;
  }
  // (appends, not operator+: GCC 12's -Wrestrict misfires on "'" + std::string)
  return Value::undefined(std::string("'").append(obj.type_name()).append(" object' has no attribute '").append(name).append("'"));
}

Value get_item(const Value& obj, const Value& key) {
  using K = Value::Kind;
  if (obj.is_undefined()) fail_undefined(obj);
  const bool int_key = key.kind == K::kInt || key.kind == K::kBool;
  if (obj.is_list() && obj.view != Value::View::kNone) fail("'" + obj.type_name() + "' object is not subscriptable (not supported)");
  if ((obj.is_list() || obj.is_string()) && int_key) {
    const int64_t k = key.kind == K::kInt ? key.i : key.b;
    if (obj.is_list()) {
      const auto n = static_cast<int64_t>(obj.list->size());
      const int64_t i = k < 0 ? k + n : k;
      if (i >= 0 && i < n) return (*obj.list)[static_cast<size_t>(i)];
    } else {  // walks to character i (splitting a 60 MB string into characters takes ~2 GB)
      const std::string& s = obj.text();
      const int64_t i = k < 0 ? k + static_cast<int64_t>(utf8_count(s)) : k;
      const size_t at = i > 0 ? utf8_skip(s, 0, static_cast<size_t>(i)) : 0;
      if (i >= 0 && at < s.size()) return Value::str(s.substr(at, utf8_next(s, at) - at));
    }
  }
  if (obj.is_dict() && key.is_string())
    if (const Value* v = obj.dict->find(key.text())) return *v;
  if (key.is_string()) return get_attr(obj, key.text());
  return Value::undefined(std::string("'").append(obj.type_name()).append(" object' has no item ").append(repr(key)));
}

// Python's slice semantics (slice.indices), for lists, tuples and strings.
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_list() && obj.view != Value::View::kNone) fail("'" + obj.type_name() + "' object is not subscriptable");
  if (obj.is_dict()) fail("unhashable type: 'slice'");
  // jinja2 turns the TypeError of slicing anything else into an undefined.
  if (!obj.is_list() && !obj.is_string()) return Value::undefined(Str() << "'" << obj.type_name() << "' object is not subscriptable");
  const int64_t st = int_arg(&step, 1, "slice");
  if (st == 0) fail("slice step cannot be zero");
  const std::string* text = obj.is_string() ? &obj.text() : nullptr;
  const auto n = static_cast<int64_t>(text ? utf8_count(*text) : obj.list->size());
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t k = int_arg(&v, 0, "slice");
    if (k < 0) k = std::max<int64_t>(k + n, st < 0 ? -1 : 0);
    else if (k >= n) k = st < 0 ? n - 1 : n;
    return k;
  };
  const int64_t b = clamp(start, st < 0 ? n - 1 : 0), e = clamp(stop, st < 0 ? -1 : n);
  // The items b, b + st, ... short of e: counted first, as a huge step must not overflow (b and
  // e lie in [-1, n]; the step's magnitude is taken unsigned, since -INT64_MIN overflows).
  const uint64_t ust = st > 0 ? static_cast<uint64_t>(st) : uint64_t{0} - static_cast<uint64_t>(st);
  const int64_t span = st > 0 ? e - b : b - e;
  const uint64_t count = span > 0 ? (static_cast<uint64_t>(span) - 1) / ust + 1 : 0;
  if (count == 0) return text ? Value::str("") : Value::make_list({}, obj.tuple);
  if (!text || static_cast<size_t>(n) == text->size()) {  // a list, or a string of one-byte characters
    if (text) {
      std::string out;
      for (uint64_t k = 0; k < count; ++k) out += (*text)[static_cast<size_t>(b + static_cast<int64_t>(k) * st)];
      return Value::str(std::move(out));
    }
    List items;
    for (uint64_t k = 0; k < count; ++k) items.push_back((*obj.list)[static_cast<size_t>(b + static_cast<int64_t>(k) * st)]);
    return Value::make_list(std::move(items), obj.tuple);
  }
  // A string: one walk over its characters (not a split: a 60 MB string is 60M strings), keeping
  // the selected ones, which lie `ust` apart from the first. With a negative step they are
  // reversed afterwards: `lens` keeps their lengths.
  std::string kept;
  std::vector<uint8_t> lens;
  int64_t want = st > 0 ? b : b - static_cast<int64_t>((count - 1) * ust);  // (count > 1: ust <= n)
  size_t at = 0;
  for (uint64_t i = 0, taken = 0; taken < count; ++i) {
    const size_t next = utf8_next(*text, at);
    if (static_cast<int64_t>(i) == want) {
      kept.append(*text, at, next - at);
      if (st < 0) lens.push_back(static_cast<uint8_t>(next - at));
      if (++taken < count) want += static_cast<int64_t>(ust);
    }
    at = next;
  }
  charge_work(at + 8 * count);
  if (st > 0) return Value::str(std::move(kept));
  std::string out;
  size_t end = kept.size();
  for (size_t k = lens.size(); k-- > 0;) {
    end -= lens[k];
    out.append(kept, end, lens[k]);
  }
  return Value::str(std::move(out));
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + item.type_name());
    charge_work(container.text().size());
    return container.text().find(item.text()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : *container.list)
      if (equal(v, item)) return true;
    return false;
  }
  if (container.is_dict()) {
    if (item.is_list() && !item.tuple) fail("unhashable type: 'list'");
    if (item.is_dict() || item.kind == Value::Kind::kNamespace) fail("unhashable type: '" + item.type_name() + "'");
    return item.is_string() && container.dict->find(item.text()) != nullptr;
  }
  if (container.is_undefined()) return false;
  fail("argument of type '" + container.type_name() + "' is not iterable");
}

}  // namespace st::jinja
