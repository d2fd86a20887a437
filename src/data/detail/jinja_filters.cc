// jinja2's builtin filters and tests that chat templates use (jinja2/filters.py, tests.py), with
// transformers' own tojson. A filter or test outside these tables fails at parse time, as an
// unknown one does in jinja2 (with "not supported" in the message).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "core/status.h"
#include "data/detail/jinja_eval.h"
#include "data/detail/jinja_text.h"

namespace st::jinja {
namespace {

using FilterFn = Value (*)(Renderer&, const Value&, CallArgs&);
using TestFn = bool (*)(Renderer&, const Value&, CallArgs&);

const Value* arg(const CallArgs& a, size_t k, const char* kw) {
  if (k < a.pos.size()) return &a.pos[k];
  for (const auto& [key, v] : a.kw)
    if (key == kw) return &v;
  return nullptr;
}

bool flag(const CallArgs& a, size_t k, const char* kw, bool dflt) {
  const Value* v = arg(a, k, kw);
  return v ? truthy(*v) : dflt;
}

std::string text_of(const Value& v) { return to_str(v); }

// Sequences a filter walks (undefined: empty, as jinja2's Undefined iterates).
bool iterable(const Value& v) { return v.is_undefined() || v.is_list() || v.is_dict() || v.is_string(); }

// A generator over something not iterable: jinja2 fails only when it is consumed.
Value broken_generator(const Value& v) {
  Value g = Value::make_list({});
  g.view = Value::View::kGenerator;
  g.s = std::make_shared<const std::string>(Str() << "'" << v.type_name() << "' object is not iterable");
  return g;
}

List items_of(Renderer& r, const Value& v) {
  List l = iterate(v);
  r.tick(static_cast<int64_t>(l.size()));
  return l;
}

// attribute="a.b.0": jinja2's make_attrgetter (dotted; integer parts index).
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t dot = std::min(path.find('.', pos), path.size());
    const std::string part = path.substr(pos, dot - pos);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    int64_t index = 0;
    if (digits && std::from_chars(part.data(), part.data() + part.size(), index).ec != std::errc()) {
      // Past int64: no list is that long, and int keys are not dict keys (jinja2: undefined).
      if (cur.is_undefined()) fail(*cur.s);
      cur = Value::undefined("'" + cur.type_name() + " object' has no item " + part);
    } else {
      cur = get_item(cur, digits ? Value::integer(index) : Value::str(part));
    }
    pos = dot + 1;
  }
  return cur;
}

// The key sort / unique / dictsort compare by: lower-cased strings unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::str(py_case(v.text(), false)) : v;
}

Value f_trim(Renderer&, const Value& v, CallArgs& a) {
  const Value* chars = arg(a, 0, "chars");
  const std::string c = chars && !chars->is_none() ? text_of(*chars) : "";
  return Value::str(py_strip(text_of(v), chars && !chars->is_none() ? &c : nullptr, true, true));
}
Value f_length(Renderer&, const Value& v, CallArgs&) { return Value::integer(length(v)); }

// An integer argument (a bool is one); Python raises a TypeError for anything else.
int64_t int_width(const Value& v, const char* what) {
  if (v.kind == Value::Kind::kInt) return v.i;
  if (v.kind == Value::Kind::kBool) return v.b;
  fail(std::string(what) + ": '" + v.type_name() + "' object cannot be interpreted as an integer");
}

// A generator-returning filter's result (Note [jinja views]).
Value generator(List l) {
  Value v = Value::make_list(std::move(l));
  v.view = Value::View::kGenerator;
  return v;
}
Value f_first(Renderer& r, const Value& v, CallArgs&) {
  const List l = items_of(r, v);
  return l.empty() ? Value::undefined("No first item, sequence was empty.") : l.front();
}
Value f_last(Renderer& r, const Value& v, CallArgs&) {
  if (v.view == Value::View::kGenerator) fail("'generator' object is not reversible");
  const List l = items_of(r, v);
  return l.empty() ? Value::undefined("No last item, sequence was empty.") : l.back();
}
Value f_join(Renderer& r, const Value& v, CallArgs& a) {
  const Value* sep = arg(a, 0, "d");
  const Value* attr = arg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& x : items_of(r, v)) {
    if (!first && sep) out += text_of(*sep);
    out += text_of(attr ? attr_path(x, text_of(*attr)) : x);
    first = false;
    check_size(out.size());
  }
  return Value::str(std::move(out));
}
Value f_default(Renderer&, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default_value");
  if (v.is_undefined() || (flag(a, 1, "boolean", false) && !truthy(v))) return d ? *d : Value::str("");
  return v;
}
Value f_upper(Renderer&, const Value& v, CallArgs&) { return Value::str(py_case(text_of(v), true)); }
Value f_lower(Renderer&, const Value& v, CallArgs&) { return Value::str(py_case(text_of(v), false)); }
Value f_capitalize(Renderer&, const Value& v, CallArgs&) { return Value::str(py_capitalize(text_of(v))); }
Value f_title(Renderer&, const Value& v, CallArgs&) { return Value::str(jinja_title(text_of(v))); }
Value f_replace(Renderer&, const Value& v, CallArgs& a) {
  const Value* from = arg(a, 0, "old");
  const Value* to = arg(a, 1, "new");
  const Value* count = arg(a, 2, "count");
  if (!from || !to) fail("replace() needs old and new");
  int64_t n = -1;
  if (count && !count->is_none()) n = int_width(*count, "replace() count");
  return Value::str(py_replace(text_of(v), text_of(*from), text_of(*to), n));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
// sort_keys=sort_keys); Python's default separators are (', ', ': ') without indent and
// (',', ': ') with one.
Value f_tojson(Renderer&, const Value& v, CallArgs& a) {
  JsonStyle st;
  const Value* indent = arg(a, 0, "indent");
  if (indent && !indent->is_none()) {
    if (indent->kind != Value::Kind::kInt || indent->i < 0 || indent->i > 64) fail("tojson: indent must be an integer in [0, 64]");
    st.indent = static_cast<int>(indent->i);
    st.item_sep = ",";
  }
  const Value* sep = arg(a, 1, "separators");
  if (sep && !sep->is_none()) {
    if (!sep->is_list() || sep->list->size() != 2 || !(*sep->list)[0].is_string() || !(*sep->list)[1].is_string())
      fail("tojson: separators must be a pair of strings");
    st.item_sep = (*sep->list)[0].text();
    st.key_sep = (*sep->list)[1].text();
  }
  st.sort_keys = flag(a, 2, "sort_keys", false);
  if (flag(a, SIZE_MAX, "ensure_ascii", false)) fail("tojson(ensure_ascii=true) is not supported");
  std::string s = to_json(v, st);
  check_size(s.size());
  return Value::str(std::move(s));
}

Value f_string(Renderer&, const Value& v, CallArgs&) { return Value::str(text_of(v)); }

// jinja2's int filter: int(x), else int(float(x)), else the default (0).
Value f_int(Renderer&, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  const Value dflt = d ? *d : Value::integer(0);
  if (v.is_undefined()) fail(*v.s);  // int(Undefined) raises
  if (v.kind == Value::Kind::kInt || v.kind == Value::Kind::kBool) return Value::integer(v.kind == Value::Kind::kInt ? v.i : v.b);
  if (v.kind == Value::Kind::kFloat) {
    if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) return dflt;
    return Value::integer(static_cast<int64_t>(std::trunc(v.f)));
  }
  if (!v.is_string()) return dflt;
  const std::string s = py_strip(v.text(), nullptr, true, true);
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && *end == 0 && errno == 0) return Value::integer(i);
  const double f = std::strtod(s.c_str(), &end);
  if (!s.empty() && *end == 0 && std::isfinite(f) && std::fabs(f) < 9.2e18 && s.find_first_of("xXpP") == std::string::npos)
    return Value::integer(static_cast<int64_t>(std::trunc(f)));
  return dflt;
}

Value f_float(Renderer&, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  const Value dflt = d ? *d : Value::number(0);
  if (v.is_undefined()) fail(*v.s);
  if (v.is_number()) return Value::number(v.as_double());
  if (!v.is_string()) return dflt;
  const std::string s = py_strip(v.text(), nullptr, true, true);
  char* end = nullptr;
  const double f = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != 0 || s.find_first_of("xXpP") != std::string::npos) return dflt;
  return Value::number(f);
}

Value f_list(Renderer& r, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::make_list({});
  return Value::make_list(items_of(r, v));
}

Value f_items(Renderer& r, const Value& v, CallArgs&) {
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) {
    Value g = broken_generator(v);
    g.s = std::make_shared<const std::string>(Str() << "items filter: expected a mapping, got " << v.type_name());
    return g;
  }
  List out;
  for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_list({Value::str(k), x}, true));
  r.tick(static_cast<int64_t>(out.size()));
  return generator(std::move(out));
}

Value f_dictsort(Renderer& r, const Value& v, CallArgs& a) {
  if (!v.is_dict() && !v.is_undefined()) fail("dictsort: expected a mapping, got " + v.type_name());
  Value items = f_items(r, v, a);
  items.view = Value::View::kNone;
  const bool cs = flag(a, 0, "case_sensitive", false);
  const Value* by = arg(a, 1, "by");
  const size_t pos = by && text_of(*by) == "value" ? 1 : 0;
  if (by && pos == 0 && text_of(*by) != "key") fail("dictsort: 'by' must be 'key' or 'value'");
  List l = *items.list;
  std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
    return less(sort_key((*x.list)[pos], cs), sort_key((*y.list)[pos], cs));
  });
  if (flag(a, 2, "reverse", false)) std::reverse(l.begin(), l.end());
  return Value::make_list(std::move(l));
}

// select / reject / selectattr / rejectattr: keep the items whose (attribute's) test result is
// `keep`; without a test, its truthiness.
Value select_impl(Renderer& r, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  if (!iterable(v)) return broken_generator(v);
  size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (a.pos.empty()) fail("selectattr / rejectattr need an attribute name");
    attr = text_of(a.pos[k++]);
  }
  std::string test;
  if (k < a.pos.size()) test = text_of(a.pos[k++]);
  CallArgs targs;
  targs.pos.assign(a.pos.begin() + static_cast<ptrdiff_t>(std::min(k, a.pos.size())), a.pos.end());
  if (!test.empty() && !known_test(test)) fail("no test named '" + test + "'");
  List out;
  for (const Value& x : items_of(r, v)) {
    const Value subject = by_attr ? attr_path(x, attr) : x;
    const bool pass = test.empty() ? truthy(subject) : apply_test(r, test, subject, targs);
    if (pass == keep) out.push_back(x);
  }
  return generator(std::move(out));
}
Value f_select(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, false, true); }
Value f_reject(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, false, false); }
Value f_selectattr(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, true, true); }
Value f_rejectattr(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, true, false); }

// map(attribute='x', default=d) or map('filter', args...).
Value f_map(Renderer& r, const Value& v, CallArgs& a) {
  if (!iterable(v)) return broken_generator(v);
  List out;
  if (const Value* attr = arg(a, SIZE_MAX, "attribute")) {
    const Value* dflt = arg(a, SIZE_MAX, "default");
    for (const Value& x : items_of(r, v)) {
      Value y = attr_path(x, text_of(*attr));
      out.push_back(y.is_undefined() && dflt ? *dflt : y);
    }
    return generator(std::move(out));
  }
  if (a.pos.empty()) fail("map() needs a filter name or attribute=");
  const std::string name = text_of(a.pos[0]);
  if (!known_filter(name)) fail("no filter named '" + name + "'");
  CallArgs fargs{List(a.pos.begin() + 1, a.pos.end()), a.kw};
  for (const Value& x : items_of(r, v)) out.push_back(apply_filter(r, name, x, fargs));
  return generator(std::move(out));
}

Value f_unique(Renderer& r, const Value& v, CallArgs& a) {
  if (!iterable(v)) return broken_generator(v);
  const bool cs = flag(a, 0, "case_sensitive", false);
  const Value* attr = arg(a, 1, "attribute");
  List out, seen;
  for (const Value& x : items_of(r, v)) {
    const Value key = sort_key(attr ? attr_path(x, text_of(*attr)) : x, cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
      seen.push_back(key);
      out.push_back(x);
    }
  }
  return generator(std::move(out));
}

Value f_sort(Renderer& r, const Value& v, CallArgs& a) {
  const bool reverse = flag(a, 0, "reverse", false), cs = flag(a, 1, "case_sensitive", false);
  const Value* attr = arg(a, 2, "attribute");
  List l = items_of(r, v);
  auto key = [&](const Value& x) { return sort_key(attr ? attr_path(x, text_of(*attr)) : x, cs); };
  // jinja2 sorts by one-element key lists (make_multi_attrgetter): Python compares [a] < [b] with
  // == first, so equal keys are never ordered with '<' ([None, None]|sort works; None < None
  // would raise).
  auto lt = [](const Value& p, const Value& q) { return !equal(p, q) && less(p, q); };
  std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
    return reverse ? lt(key(y), key(x)) : lt(key(x), key(y));
  });
  return Value::make_list(std::move(l));
}

Value f_reverse(Renderer& r, const Value& v, CallArgs&) {
  if (v.is_string()) return slice(v, Value::none(), Value::none(), Value::integer(-1));
  // A list reverses into an iterator (prints like a generator); anything else into a list.
  const bool iterator = (v.is_list() && v.view == Value::View::kNone) || v.is_dict();
  List l = items_of(r, v);
  std::reverse(l.begin(), l.end());
  return iterator ? generator(std::move(l)) : Value::make_list(std::move(l));
}

Value f_abs(Renderer&, const Value& v, CallArgs&) {
  if (v.kind == Value::Kind::kFloat) return Value::number(std::fabs(v.f));
  if (!v.is_number()) fail("bad operand type for abs(): '" + v.type_name() + "'");
  const int64_t i = v.kind == Value::Kind::kInt ? v.i : v.b;
  if (i == INT64_MIN) fail("integer overflow");
  return Value::integer(i < 0 ? -i : i);
}

// round(value, precision=0, method='common'|'ceil'|'floor'): always a float, as in jinja2.
// 'common' is Python's round (half to even on the decimal value); this uses the nearest
// binary product, which matches it except on ties that are not exact in binary.
Value f_round(Renderer&, const Value& v, CallArgs& a) {
  const Value* p = arg(a, 0, "precision");
  const int64_t prec = p ? (p->kind == Value::Kind::kInt ? p->i : 0) : 0;
  const Value* m = arg(a, 1, "method");
  const std::string method = m ? text_of(*m) : "common";
  if (v.kind != Value::Kind::kFloat && method == "common" && prec >= 0)  // round(int) is the int
    return Value::integer(v.kind == Value::Kind::kInt ? v.i : v.as_double() != 0);
  const double scale = std::pow(10.0, static_cast<double>(prec)), x = v.as_double() * scale;
  double y;
  if (method == "common") y = std::nearbyint(x);
  else if (method == "ceil") y = std::ceil(x);
  else if (method == "floor") y = std::floor(x);
  else fail("round: method must be 'common', 'ceil' or 'floor'");
  return Value::number(y / scale);
}

// jinja2 3.x indent(width=4, first=False, blank=False). The size is checked line by line, before
// each indent is added ('x'|indent(10**12); 1000 lines indented by 10 MB each).
Value f_indent(Renderer&, const Value& v, CallArgs& a) {
  const Value* w = arg(a, 0, "width");
  std::string ind;
  if (!w) ind = "    ";
  else if (w->is_string()) ind = w->text();
  else {
    const int64_t width = std::max<int64_t>(0, int_width(*w, "indent() width"));
    if (static_cast<uint64_t>(width) > kMaxOutputBytes) check_size(kMaxOutputBytes + 1);
    ind.assign(static_cast<size_t>(width), ' ');
  }
  const bool first = flag(a, 1, "first", false), blank = flag(a, 2, "blank", false);
  std::string out;
  bool first_line = true;
  for_each_line(text_of(v) + "\n", [&](const std::string& line) {
    const bool indented = (!first_line || first) && (blank || !line.empty());
    check_size(out.size() + 1 + (indented ? ind.size() : 0) + line.size());
    if (!first_line) out += "\n";
    if (indented) out += ind;
    out += line;
    first_line = false;
  });
  return Value::str(std::move(out));
}

Value f_safe(Renderer&, const Value& v, CallArgs&) { return v; }

// escape / e: HTML-escapes even with autoescape off (it returns Markup).
Value f_escape(Renderer&, const Value& v, CallArgs&) {
  const std::string text = text_of(v);
  size_t n = text.size();  // the size first: an escape is up to 5 bytes
  for (char c : text) n += c == '&' ? 4 : c == '<' || c == '>' ? 3 : c == '"' || c == '\'' ? 4 : 0;
  check_size(n);
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::str(std::move(out));
}

// wordcount: runs of word characters (\w); any non-ASCII character counts as one.
Value f_wordcount(Renderer&, const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in = false;
  const std::string text = text_of(v);
  charge_work(2 * text.size());  // (a byte at a time: slower than a copy)
  for (char c : text) {
    const bool w = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
    if (w && !in) ++n;
    in = w;
  }
  return Value::integer(n);
}

Value f_center(Renderer&, const Value& v, CallArgs& a) {
  const Value* w = arg(a, 0, "width");
  const int64_t width = w ? int_width(*w, "center() width") : 80;
  const std::string s = text_of(v);
  const int64_t len = static_cast<int64_t>(utf8_count(s));
  if (width <= len) return Value::str(s);
  check_size(static_cast<size_t>(width));
  const int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
  return Value::str(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(marg - left), ' '));
}

Value f_sum(Renderer& r, const Value& v, CallArgs& a) {
  const Value* attr = arg(a, 0, "attribute");
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value::integer(0);
  for (const Value& x : items_of(r, v)) total = binary_op("+", total, attr ? attr_path(x, text_of(*attr)) : x);
  return total;
}

Value min_max(Renderer& r, const Value& v, CallArgs& a, bool max) {
  const bool cs = flag(a, 0, "case_sensitive", false);
  const Value* attr = arg(a, 1, "attribute");
  const List l = items_of(r, v);
  if (l.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  size_t best = 0;
  for (size_t k = 1; k < l.size(); ++k) {
    const Value x = sort_key(attr ? attr_path(l[k], text_of(*attr)) : l[k], cs);
    const Value b = sort_key(attr ? attr_path(l[best], text_of(*attr)) : l[best], cs);
    if (max ? less(b, x) : less(x, b)) best = k;
  }
  return l[best];
}
Value f_min(Renderer& r, const Value& v, CallArgs& a) { return min_max(r, v, a, false); }
Value f_max(Renderer& r, const Value& v, CallArgs& a) { return min_max(r, v, a, true); }

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> k = {
      {"trim", f_trim}, {"length", f_length}, {"count", f_length}, {"first", f_first}, {"last", f_last},
      {"join", f_join}, {"default", f_default}, {"d", f_default}, {"upper", f_upper}, {"lower", f_lower},
      {"capitalize", f_capitalize}, {"title", f_title}, {"replace", f_replace}, {"tojson", f_tojson},
      {"string", f_string}, {"int", f_int}, {"float", f_float}, {"list", f_list}, {"items", f_items},
      {"dictsort", f_dictsort}, {"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr}, {"map", f_map}, {"unique", f_unique}, {"sort", f_sort},
      {"reverse", f_reverse}, {"abs", f_abs}, {"round", f_round}, {"indent", f_indent}, {"safe", f_safe},
      {"escape", f_escape}, {"e", f_escape}, {"wordcount", f_wordcount}, {"center", f_center},
      {"sum", f_sum}, {"min", f_min}, {"max", f_max}};
  return k;
}

// ---- tests --------------------------------------------------------------------------------------

using VK = Value::Kind;
const Value& arg0(const CallArgs& a, const char* test) {
  if (a.pos.empty()) fail(std::string("the '") + test + "' test needs an argument");
  return a.pos[0];
}

bool t_defined(Renderer&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Renderer&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Renderer&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_string(Renderer&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_number(Renderer&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_integer(Renderer&, const Value& v, CallArgs&) { return v.kind == VK::kInt; }
bool t_float(Renderer&, const Value& v, CallArgs&) { return v.kind == VK::kFloat; }
bool t_boolean(Renderer&, const Value& v, CallArgs&) { return v.kind == VK::kBool; }
bool t_mapping(Renderer&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_iterable(Renderer&, const Value& v, CallArgs&) { return v.is_undefined() || v.is_list() || v.is_dict() || v.is_string(); }
bool t_sequence(Renderer&, const Value& v, CallArgs&) {
  return v.is_undefined() || (v.is_list() && v.view == Value::View::kNone) || v.is_dict() || v.is_string();
}
bool t_true(Renderer&, const Value& v, CallArgs&) { return v.kind == VK::kBool && v.b; }
bool t_false(Renderer&, const Value& v, CallArgs&) { return v.kind == VK::kBool && !v.b; }
// jinja2: value % 2 == 1, value % 2 == 0, value % num == 0 (Python's %, floats too).
bool t_odd(Renderer&, const Value& v, CallArgs&) { return equal(binary_op("%", v, Value::integer(2)), Value::integer(1)); }
bool t_even(Renderer&, const Value& v, CallArgs&) { return equal(binary_op("%", v, Value::integer(2)), Value::integer(0)); }
bool t_divisibleby(Renderer&, const Value& v, CallArgs& a) {
  return equal(binary_op("%", v, arg0(a, "divisibleby")), Value::integer(0));
}
bool t_eq(Renderer&, const Value& v, CallArgs& a) { return equal(v, arg0(a, "eq")); }
bool t_ne(Renderer&, const Value& v, CallArgs& a) { return !equal(v, arg0(a, "ne")); }
bool t_lt(Renderer&, const Value& v, CallArgs& a) { return less(v, arg0(a, "lt")); }
bool t_gt(Renderer&, const Value& v, CallArgs& a) { return less(arg0(a, "gt"), v); }
bool t_le(Renderer&, const Value& v, CallArgs& a) { return !less(arg0(a, "le"), v); }
bool t_ge(Renderer&, const Value& v, CallArgs& a) { return !less(v, arg0(a, "ge")); }
bool t_callable(Renderer&, const Value& v, CallArgs&) { return v.kind == VK::kCallable; }
bool t_in(Renderer&, const Value& v, CallArgs& a) { return contains(arg0(a, "in"), v); }
bool t_lower(Renderer&, const Value& v, CallArgs&) { return py_is_case(to_str(v), false); }
bool t_upper(Renderer&, const Value& v, CallArgs&) { return py_is_case(to_str(v), true); }
// `sameas`: Python identity; for the singletons (none, true, false) and shared containers.
bool t_sameas(Renderer&, const Value& v, CallArgs& a) {
  const Value& o = arg0(a, "sameas");
  if (v.kind != o.kind) return false;
  if (v.is_none() || v.is_undefined()) return true;
  if (v.kind == VK::kBool) return v.b == o.b;
  if (v.is_list()) return v.list == o.list;
  if (v.is_dict()) return v.dict == o.dict;
  if (v.kind == VK::kNamespace) return v.ns == o.ns;
  fail("the 'sameas' test on " + v.type_name() + " values is not supported");
}

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> k = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"string", t_string},
      {"number", t_number}, {"integer", t_integer}, {"float", t_float}, {"boolean", t_boolean},
      {"mapping", t_mapping}, {"iterable", t_iterable}, {"sequence", t_sequence}, {"true", t_true},
      {"false", t_false}, {"odd", t_odd}, {"even", t_even}, {"divisibleby", t_divisibleby},
      {"equalto", t_eq}, {"eq", t_eq}, {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt}, {"<", t_lt},
      {"gt", t_gt}, {">", t_gt}, {"le", t_le}, {"<=", t_le}, {"ge", t_ge}, {">=", t_ge},
      {"greaterthan", t_gt}, {"lessthan", t_lt}, {"callable", t_callable}, {"in", t_in},
      {"lower", t_lower}, {"upper", t_upper}, {"sameas", t_sameas}};
  return k;
}

}  // namespace

bool known_filter(const std::string& name) { return filters().count(name) > 0; }
bool known_test(const std::string& name) { return tests().count(name) > 0; }

Value apply_filter(Renderer& r, const std::string& name, const Value& v, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) fail("no filter named '" + name + "' (not supported)");
  // jinja2's filters take the value as text where they need one; undefined fails only in those
  // that do arithmetic or need a real value (handled inside each).
  return it->second(r, v, args);
}

bool apply_test(Renderer& r, const std::string& name, const Value& v, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) fail("no test named '" + name + "' (not supported)");
  return it->second(r, v, args);
}

}  // namespace st::jinja
