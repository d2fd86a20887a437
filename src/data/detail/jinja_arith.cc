// Arithmetic with Python's rules (int / float, floor division and modulo rounding toward
// -infinity, `/` always a float, bools as ints; integers beyond 64 bits fail instead of growing),
// string and list operators, printf-style `%` formatting, and the template globals.
#include <cmath>
#include <ctime>

#include "data/detail/jinja_eval.h"

namespace st::jinja {
namespace {

bool is_int(const Value& v) { return v.kind == Value::Kind::kInt || v.kind == Value::Kind::kBool; }
int64_t int_of(const Value& v) { return v.kind == Value::Kind::kInt ? v.i : v.b; }

[[noreturn]] void overflow() { fail("integer overflow (Python's integers grow past 64 bits; not supported)"); }

Value int_op(const std::string& op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op == "+") { if (__builtin_add_overflow(a, b, &r)) overflow(); return Value::integer(r); }
  if (op == "-") { if (__builtin_sub_overflow(a, b, &r)) overflow(); return Value::integer(r); }
  if (op == "*") { if (__builtin_mul_overflow(a, b, &r)) overflow(); return Value::integer(r); }
  if (op == "/") {
    if (b == 0) fail("division by zero");
    return Value::number(static_cast<double>(a) / static_cast<double>(b));
  }
  if (op == "//" || op == "%") {
    if (b == 0) fail("integer division or modulo by zero");
    if (a == INT64_MIN && b == -1) overflow();
    int64_t q = a / b, m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) --q, m += b;
    return Value::integer(op == "//" ? q : m);
  }
  // **
  if (b < 0) {
    if (a == 0) fail("0 cannot be raised to a negative power");
    return Value::number(std::pow(static_cast<double>(a), static_cast<double>(b)));
  }
  int64_t base = a;
  r = 1;
  for (int64_t e = b; e > 0; e >>= 1) {
    if ((e & 1) && __builtin_mul_overflow(r, base, &r)) overflow();
    if (e > 1 && __builtin_mul_overflow(base, base, &base)) overflow();
  }
  return Value::integer(r);
}

Value float_op(const std::string& op, double a, double b) {
  if (op == "+") return Value::number(a + b);
  if (op == "-") return Value::number(a - b);
  if (op == "*") return Value::number(a * b);
  if ((op == "/" || op == "//" || op == "%") && b == 0) fail("float division by zero");
  if (op == "/") return Value::number(a / b);
  if (op == "//") return Value::number(std::floor(a / b));
  if (op == "%") {
    double m = std::fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return Value::number(m == 0 ? std::copysign(0.0, b) : m);
  }
  if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
  if (a < 0 && b != std::floor(b)) fail("a negative number to a fractional power is complex (not supported)");
  return Value::number(std::pow(a, b));
}

// "%s" % x and "%s %d" % (a, b): the conversions s, r, d, i and %% (no flags or widths).
std::string percent_format(const std::string& f, const Value& args) {
  const List items = args.is_list() && args.tuple ? *args.list : List{args};
  std::string out;
  size_t used = 0;
  for (size_t k = 0; k < f.size(); ++k) {
    if (f[k] != '%') {
      out += f[k];
      continue;
    }
    const char c = k + 1 < f.size() ? f[++k] : 0;
    if (c == '%') {
      out += '%';
      continue;
    }
    if (c != 's' && c != 'r' && c != 'd' && c != 'i') fail(std::string("'%") + c + "' formatting is not supported (only %s, %r, %d, %i)");
    if (used >= items.size()) fail("not enough arguments for format string");
    const Value& v = items[used++];
    std::string text;
    if (c == 's') text = to_str(v);
    else if (c == 'r') text = repr(v);
    else if (is_int(v)) text = std::to_string(int_of(v));
    else if (v.kind == Value::Kind::kFloat) text = std::to_string(static_cast<int64_t>(std::trunc(v.f)));
    else fail("%d format: a number is required, not " + v.type_name());
    check_size(out.size() + text.size());  // before appending: 1000 '%s' of a 60 MB argument
    out += text;
  }
  // (Python ignores an unused list or dict argument: it takes them for a mapping of names.)
  const bool mapping_like = (args.is_list() && !args.tuple) || args.is_dict() || args.is_undefined();
  if (used < items.size() && !(mapping_like && used == 0)) fail("not all arguments converted during string formatting");
  return out;
}

// s * n, l * n. The size is checked before anything is built; an empty sequence returns at once
// ('' * 10**12 would otherwise loop 10**12 times).
Value repeat(const Value& seq, int64_t n) {
  const size_t unit = seq.is_string() ? seq.text().size() : seq.list->size();
  if (n <= 0 || unit == 0) return seq.is_string() ? Value::str("") : Value::make_list({}, seq.tuple);
  if (static_cast<uint64_t>(n) > (seq.is_string() ? kMaxOutputBytes : kMaxListItems) / unit) {
    if (seq.is_string()) check_size(kMaxOutputBytes + 1);
    check_items(kMaxListItems + 1);
  }
  if (seq.is_string()) {  // (by doubling: 'x' * 60000000 is 26 copies, not 60M appends)
    const size_t total = unit * static_cast<size_t>(n);
    std::string out = seq.text();
    out.reserve(total);
    while (out.size() < total) out.append(out, 0, std::min(out.size(), total - out.size()));
    return Value::str(std::move(out));
  }
  List out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::make_list(std::move(out), seq.tuple);
}

[[noreturn]] void type_error(const std::string& op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  // (Concatenations copy both operands: Value::str counts the copy as work, so a string grown in a
  // loop (`ns.s = ns.s ~ x`) fails once it has copied kMaxWork bytes.)
  if (op == "~") {
    std::string ta, tb;  // (a string operand is not copied first)
    const std::string& l = a.is_string() ? a.text() : (ta = to_str(a));
    const std::string& r = b.is_string() ? b.text() : (tb = to_str(b));
    check_size(l.size() + r.size());
    return Value::str(l + r);
  }
  if (a.is_undefined()) fail(*a.s);
  // "text" % undefined: Python takes jinja2's Undefined for a mapping (it has __getitem__), so a
  // format without conversions gives the text back, and %s prints it as "".
  if (b.is_undefined() && !(op == "%" && a.is_string())) fail(*b.s);
  if (a.is_number() && b.is_number()) {
    if (is_int(a) && is_int(b)) return int_op(op, int_of(a), int_of(b));
    return float_op(op, a.as_double(), b.as_double());
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    check_size(a.text().size() + b.text().size());
    return Value::str(a.text() + b.text());
  }
  const bool plain = (!a.is_list() || a.view == Value::View::kNone) && (!b.is_list() || b.view == Value::View::kNone);
  if (!plain) type_error(op, a, b);
  if (op == "+" && a.is_list() && b.is_list() && a.tuple == b.tuple) {
    check_items(a.list->size() + b.list->size());
    List l = *a.list;
    l.insert(l.end(), b.list->begin(), b.list->end());
    return Value::make_list(std::move(l), a.tuple);
  }
  if (op == "*" && (a.is_string() || a.is_list()) && is_int(b)) return repeat(a, int_of(b));
  if (op == "*" && (b.is_string() || b.is_list()) && is_int(a)) return repeat(b, int_of(a));
  if (op == "%" && a.is_string()) {
    std::string s = percent_format(a.text(), b);
    check_size(s.size());
    return Value::str(std::move(s));
  }
  type_error(op, a, b);
}

namespace {

Value range_fn(Renderer&, CallArgs& a) {
  if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3) fail("range() takes 1 to 3 positional arguments");
  for (const Value& v : a.pos)
    if (!is_int(v)) fail("range() expects integers, got " + v.type_name());
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = int_of(a.pos[0]);
  } else {
    start = int_of(a.pos[0]);
    stop = int_of(a.pos[1]);
    if (a.pos.size() == 3) step = int_of(a.pos[2]);
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  // The item count, as Python's range computes it; in unsigned arithmetic, as stop - start and
  // start + k * step can overflow int64 (range(2**63 - 8, 2**63 - 1, 5)).
  const auto ustart = static_cast<uint64_t>(start), ustop = static_cast<uint64_t>(stop), ustep = static_cast<uint64_t>(step);
  uint64_t count = 0;
  if (step > 0 && start < stop) count = (ustop - ustart - 1) / ustep + 1;
  if (step < 0 && start > stop) count = (ustart - ustop - 1) / (uint64_t{0} - ustep) + 1;
  if (count > static_cast<uint64_t>(kMaxRange))
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" + std::to_string(kMaxRange) + ").");
  List out;
  for (uint64_t k = 0; k < count; ++k) out.push_back(Value::integer(static_cast<int64_t>(ustart + k * ustep)));
  return Value::make_list(std::move(out));
}

Value namespace_fn(Renderer& r, CallArgs& a) {
  auto ns = std::make_shared<Namespace>();
  for (const Value& v : a.pos) {
    if (!v.is_dict()) fail("namespace() takes a dict or keyword arguments");
    for (const auto& [k, x] : v.dict->items) ns->attrs.set(k, x);
  }
  for (const auto& [k, x] : a.kw) ns->attrs.set(k, x);
  r.keep(ns);  // Note [jinja cycles]
  Value v;
  v.kind = Value::Kind::kNamespace;
  v.ns = std::move(ns);
  return v;
}

Value dict_fn(Renderer&, CallArgs& a) {
  Dict d;
  for (const Value& v : a.pos) {
    if (!v.is_dict()) fail("dict() takes a dict or keyword arguments");
    for (const auto& [k, x] : v.dict->items) d.set(k, x);
  }
  for (const auto& [k, x] : a.kw) d.set(k, x);
  return Value::make_dict(std::move(d));
}

Value raise_fn(Renderer&, CallArgs& a) {
  Error e{a.pos.empty() ? "" : to_str(a.pos[0])};
  e.raised = true;
  throw e;
}

Value strftime_fn(Renderer&, CallArgs& a) {
  if (a.pos.size() != 1 || !a.pos[0].is_string()) fail("strftime_now() takes one format string");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof buf, a.pos[0].text().c_str(), &tm);
  if (n == 0 && !a.pos[0].text().empty()) fail("strftime_now(): the formatted date is empty or too long");
  return Value::str(std::string(buf, n));
}

}  // namespace

void add_globals(Scope* root) {
  root->set("range", Value::callable("range", range_fn));
  root->set("namespace", Value::callable("namespace", namespace_fn));
  root->set("dict", Value::callable("dict", dict_fn));
  root->set("raise_exception", Value::callable("raise_exception", raise_fn));
  root->set("strftime_now", Value::callable("strftime_now", strftime_fn));
}

}  // namespace st::jinja
