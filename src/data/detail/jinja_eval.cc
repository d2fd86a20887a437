// Tree-walking evaluator with jinja2's semantics for chat templates.
//
// Scoping (as jinja2 compiles it): each for-loop iteration and each macro call gets a fresh scope,
// so `set` inside a loop does not survive the iteration (templates use namespace() for that);
// `if` opens no scope. A macro sees the scope it was defined in. Missing macro arguments are
// undefined, as in jinja2.
//
// Not supported (each fails with a message naming the construct and its line:column): include /
// extends / import / block / with / do / autoescape tags, recursive loops, *args / **kwargs in
// calls, loop.changed, filters and tests outside jinja_filters.cc's tables, tojson(ensure_ascii=true),
// integers beyond 64 bits, \N{...} escapes, case mapping of letters outside ASCII / Latin-1 /
// Greek / Cyrillic, dict keys other than strings.
// Generators (map / select / items / unique results) are lists flagged as such (Note [jinja views]):
// printing one fails where jinja2 prints its address, and one is not exhausted by a first loop.
// Known differences: repr() of a string keeps non-printable non-ASCII characters unescaped,
// strip() / split() without arguments treat only ASCII whitespace as whitespace.
#include "data/detail/jinja_eval.h"

#include <algorithm>

namespace st::jinja {

// (Both scan the variables, as Dict does: a template setting thousands of names in a loop is
// quadratic, so the scans count as work.)
const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    charge_work(s->vars.size() + 1);
    for (const auto& [k, v] : s->vars)
      if (k == name) return &v;
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  charge_work(vars.size() + 1);
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

Renderer::Renderer(const Program& prog) : prog_(prog) {}

namespace {

// Empties a kept namespace or scope (Note [jinja cycles]). What it held is freed here; a kept
// object among that is only released, as the renderer still holds it.
void empty(Namespace& ns) { std::vector<std::pair<std::string, Value>>().swap(ns.attrs.items); }
void empty(Scope& scope) {
  std::vector<std::pair<std::string, Value>>().swap(scope.vars);
  scope.parent.reset();
}

// Empties and drops the kept objects nothing else refers to; the rest stay. Runs (returning true)
// when the number kept doubles, so that a loop making a namespace per iteration keeps only the
// live ones.
template <class T>
bool sweep(std::vector<std::shared_ptr<T>>* kept, size_t* next_sweep) {
  if (kept->size() < *next_sweep) return false;
  std::vector<std::shared_ptr<T>> live;
  for (std::shared_ptr<T>& p : *kept) {
    if (p.use_count() == 1) empty(*p);
    else live.push_back(std::move(p));
  }
  *kept = std::move(live);
  *next_sweep = std::max<size_t>(1024, 2 * kept->size());
  return true;
}

}  // namespace

Renderer::~Renderer() {
  for (const auto& ns : namespaces_) empty(*ns);
  for (const auto& scope : scopes_) empty(*scope);
}

void Renderer::keep(std::shared_ptr<Namespace> ns) {
  namespaces_.push_back(std::move(ns));
  sweep(&namespaces_, &sweep_namespaces_at_);
}

void Renderer::keep(std::shared_ptr<Scope> scope) {
  if (!scopes_.empty() && scopes_.back() == scope) return;  // several macros of one scope
  scopes_.push_back(std::move(scope));
  if (sweep(&scopes_, &sweep_scopes_at_) && scopes_.size() > kMaxMacroScopes)
    fail("more than " + std::to_string(kMaxMacroScopes) + " macro scopes alive at once (a macro defined in a long loop?)");
}

std::string Renderer::render(const Value& context) {
  WorkBudget budget;  // Note [jinja work budget]
  auto root = std::make_shared<Scope>();
  add_globals(root.get());
  if (context.is_dict())
    for (const auto& [k, v] : context.dict->items) root->set(k, v);
  scope_ = std::make_shared<Scope>();
  scope_->parent = root;
  std::string out;
  out_ = &out;
  exec(prog_.body);
  return out;
}

void Renderer::tick(int64_t n) {
  iterations_ += n;
  if (iterations_ > kMaxIterations)
    fail("more than " + std::to_string(kMaxIterations) + " loop iterations in one render (a limit for hostile templates)");
}

void Renderer::write(const std::string& s) {
  produced_ += s.size();
  if (produced_ > kMaxOutputBytes) fail("output larger than " + std::to_string(kMaxOutputBytes >> 20) + " MiB");
  *out_ += s;
}

Renderer::Flow Renderer::exec(const Body& body) {
  for (const StmtPtr& s : body) {
    try {
      const Flow f = exec_stmt(*s);
      if (f != Flow::kNormal) return f;
    } catch (Error& e) {
      if (e.line == 0) e.line = s->line, e.col = s->col;
      throw;
    }
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec_stmt(const Stmt& s) {
  using SK = Stmt::Kind;
  switch (s.kind) {
    case SK::kText: write(s.text); break;
    case SK::kOutput: write(to_str(eval(*s.expr))); break;
    case SK::kIf: return exec(truthy(eval(*s.expr)) ? s.body : s.else_body);
    case SK::kFor: return exec_for(s);
    case SK::kSet: exec_set(s); break;
    case SK::kSetBlock: assign(*s.target, Value::str(apply_filter_chain(s.filters, capture(s.body)))); break;
    case SK::kMacro: exec_macro(s); break;
    case SK::kCallBlock: exec_call_block(s); break;
    case SK::kFilterBlock: write(apply_filter_chain(s.filters, capture(s.body))); break;
    case SK::kBreak: return Flow::kBreak;
    case SK::kContinue: return Flow::kContinue;
    case SK::kGeneration: return exec(s.body);
  }
  return Flow::kNormal;
}

// Renders a body into a string of its own (block set, filter block, macro, caller).
std::string Renderer::capture(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

std::string Renderer::apply_filter_chain(const std::vector<ExprPtr>& filters, std::string text) {
  Value v = Value::str(std::move(text));
  for (const ExprPtr& f : filters) v = eval_filter(*f, &v);
  return to_str(v);
}

// The loop variable of iteration k over items.
Value Renderer::loop_object(const List& items, size_t k) {
  const auto n = static_cast<int64_t>(items.size()), i = static_cast<int64_t>(k);
  Dict d;
  d.set("index", Value::integer(i + 1));
  d.set("index0", Value::integer(i));
  d.set("revindex", Value::integer(n - i));
  d.set("revindex0", Value::integer(n - i - 1));
  d.set("first", Value::boolean(i == 0));
  d.set("last", Value::boolean(i + 1 == n));
  d.set("length", Value::integer(n));
  d.set("depth", Value::integer(1));
  d.set("depth0", Value::integer(0));
  if (k > 0) d.set("previtem", items[k - 1]);
  if (k + 1 < items.size()) d.set("nextitem", items[k + 1]);
  d.set("cycle", Value::callable("loop.cycle", [k](Renderer&, CallArgs& a) -> Value {
    if (a.pos.empty()) fail("loop.cycle() needs at least one argument");
    return a.pos[k % a.pos.size()];
  }));
  return Value::make_dict(std::move(d));
}

// for target in iterable [if cond]: the filter runs first (loop.length counts what passes); the
// else body runs when nothing was iterated.
Renderer::Flow Renderer::exec_for(const Stmt& s) {
  const Value seq = eval(*s.expr);
  if (!seq.is_undefined() && !seq.is_list() && !seq.is_dict() && !seq.is_string())
    fail("'" + seq.type_name() + "' object is not iterable");
  List items = iterate(seq);
  const std::shared_ptr<Scope> outer = scope_;
  if (s.cond) {
    List kept;
    for (const Value& v : items) {
      tick();
      scope_ = std::make_shared<Scope>();
      scope_->parent = outer;
      assign(*s.target, v);
      const bool keep = truthy(eval(*s.cond));
      scope_ = outer;
      if (keep) kept.push_back(v);
    }
    items = std::move(kept);
  }
  for (size_t k = 0; k < items.size(); ++k) {
    tick();
    scope_ = std::make_shared<Scope>();
    scope_->parent = outer;
    scope_->set("loop", loop_object(items, k));
    Flow f;
    try {
      assign(*s.target, items[k]);
      f = exec(s.body);
    } catch (...) {
      scope_ = outer;
      throw;
    }
    scope_ = outer;
    if (f == Flow::kBreak) break;
  }
  if (items.empty()) return exec(s.else_body);
  return Flow::kNormal;
}

void Renderer::assign(const Expr& target, const Value& v) {
  if (target.kind == Expr::Kind::kName) {
    scope_->set(target.name, v);
    return;
  }
  if (target.kind == Expr::Kind::kGetAttr) {
    const Value obj = eval(*target.args[0]);
    if (obj.kind != Value::Kind::kNamespace) fail("cannot assign attribute '" + target.name + "' on a non-namespace object");
    obj.ns->attrs.set(target.name, v);
    return;
  }
  // A tuple of names: unpack a sequence of the same length.
  if (!v.is_list() && !v.is_string() && !v.is_dict()) fail("cannot unpack a non-sequence " + v.type_name());
  const List items = iterate(v);
  if (items.size() != target.args.size())
    fail("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(target.args.size()) + " names");
  for (size_t k = 0; k < items.size(); ++k) assign(*target.args[k], items[k]);
}

void Renderer::exec_set(const Stmt& s) { assign(*s.target, eval(*s.expr)); }

void Renderer::exec_macro(const Stmt& s) { scope_->set(s.name, make_macro(s, scope_, Value::undefined("caller"))); }

Value Renderer::make_macro(const Stmt& s, std::shared_ptr<Scope> scope, Value caller) {
  keep(scope);  // Note [jinja cycles]: the scope may come to hold the macro
  const Stmt* def = &s;
  const std::string name = s.kind == Stmt::Kind::kMacro ? s.name : "caller";
  return Value::callable(name, [def, scope, caller](Renderer& r, CallArgs& a) { return r.call_macro(*def, scope, caller, a); });
}

// {% call m(args) %}body{% endcall %}: m is called with `caller` bound to the body (a macro).
void Renderer::exec_call_block(const Stmt& s) {
  const Expr& call = *s.expr;
  const Value callee = eval(*call.args[0]);
  CallArgs args = eval_args(call, 1);
  args.kw.emplace_back("caller", make_macro(s, scope_, Value::undefined("caller")));
  write(to_str(invoke(callee, args)));
}

Value Renderer::call_macro(const Stmt& s, const std::shared_ptr<Scope>& def_scope, const Value& caller, CallArgs& a) {
  if (call_depth_ >= kMaxCallDepth) fail("macro calls nested more than " + std::to_string(kMaxCallDepth) + " deep");
  auto scope = std::make_shared<Scope>();
  scope->parent = def_scope;
  const std::string& name = s.kind == Stmt::Kind::kMacro ? s.name : "caller";
  if (a.pos.size() > s.params.size() && !s.uses_varargs)
    fail("macro '" + name + "' takes not more than " + std::to_string(s.params.size()) + " argument(s)");
  Value caller_v = caller;
  Dict extra_kw;
  for (auto& [k, v] : a.kw) {
    const bool is_param = std::find(s.params.begin(), s.params.end(), k) != s.params.end();
    if (k == "caller" && !is_param) {
      if (!s.uses_caller) fail("macro '" + name + "' was invoked with a caller but does not use one");
      caller_v = v;
    } else if (!is_param) {
      if (!s.uses_kwargs) fail("macro '" + name + "' takes no keyword argument '" + k + "'");
      extra_kw.set(k, v);
    }
  }
  std::shared_ptr<Scope> saved = scope_;
  scope_ = scope;
  ++call_depth_;
  struct Restore {
    Renderer* r;
    std::shared_ptr<Scope> s;
    ~Restore() { r->scope_ = s; --r->call_depth_; }
  } restore{this, saved};
  for (size_t k = 0; k < s.params.size(); ++k) {
    const Value* kw = nullptr;
    for (const auto& [key, v] : a.kw)
      if (key == s.params[k]) kw = &v;
    if (k < a.pos.size() && kw) fail("macro '" + name + "' got multiple values for argument '" + s.params[k] + "'");
    if (k < a.pos.size()) scope->set(s.params[k], a.pos[k]);
    else if (kw) scope->set(s.params[k], *kw);
    else if (s.defaults[k]) scope->set(s.params[k], eval(*s.defaults[k]));
    else scope->set(s.params[k], Value::undefined(s.params[k]));
  }
  List varargs(a.pos.size() > s.params.size() ? a.pos.begin() + static_cast<ptrdiff_t>(s.params.size()) : a.pos.end(), a.pos.end());
  scope->set("varargs", Value::make_list(std::move(varargs), true));
  scope->set("kwargs", Value::make_dict(std::move(extra_kw)));
  scope->set("caller", caller_v);
  return Value::str(capture(s.body));
}

Value Renderer::invoke(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail("'" + *callee.s + "' is undefined (called as a function)");
  if (callee.kind != Value::Kind::kCallable) fail("'" + callee.type_name() + "' object is not callable");
  return callee.call->fn(*this, args);
}

// ---- expressions ----------------------------------------------------------------------------

Value Renderer::eval(const Expr& e) {
  try {
    return eval_inner(e);
  } catch (Error& err) {
    if (err.line == 0) err.line = e.line, err.col = e.col;
    throw;
  }
}

Value Renderer::lookup(const std::string& name) const {
  const Value* v = scope_->find(name);
  return v ? *v : Value::undefined(name);
}

CallArgs Renderer::eval_args(const Expr& e, size_t first) {
  CallArgs a;
  for (size_t k = first; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k]));
  for (const auto& [key, x] : e.kwargs) a.kw.emplace_back(key, eval(*x));
  return a;
}

Value Renderer::eval_filter(const Expr& e, const Value* input) {
  const Value v = input ? *input : eval(*e.args[0]);
  CallArgs a = eval_args(e, 1);
  return apply_filter(*this, e.name, v, a);
}

Value Renderer::eval_call(const Expr& e) {
  const Value callee = eval(*e.args[0]);
  CallArgs a = eval_args(e, 1);
  return invoke(callee, a);
}

Value Renderer::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (size_t k = 0; k < e.ops.size(); ++k) {
    Value right = eval(*e.args[k + 1]);
    const std::string& op = e.ops[k];
    bool r;
    if (op == "==") r = equal(left, right);
    else if (op == "!=") r = !equal(left, right);
    else if (op == "<") r = less(left, right);
    else if (op == ">") r = less(right, left);
    else if (op == "<=") r = !less(right, left);
    else if (op == ">=") r = !less(left, right);
    else if (op == "in") r = contains(right, left);
    else r = !contains(right, left);
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Renderer::eval_inner(const Expr& e) {
  using EK = Expr::Kind;
  switch (e.kind) {
    case EK::kConst: return e.value;
    case EK::kName: return lookup(e.name);
    case EK::kList:
    case EK::kTuple: {
      List l;
      for (const ExprPtr& a : e.args) l.push_back(eval(*a));
      return Value::make_list(std::move(l), e.kind == EK::kTuple);
    }
    case EK::kDict: {
      Dict d;
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        const Value key = eval(*e.args[k]);
        if (!key.is_string()) fail("dict keys other than strings are not supported");
        d.set(key.text(), eval(*e.args[k + 1]));
      }
      return Value::make_dict(std::move(d));
    }
    case EK::kGetAttr: return get_attr(eval(*e.args[0]), e.name);
    case EK::kGetItem: return get_item(eval(*e.args[0]), eval(*e.args[1]));
    case EK::kSlice: {
      auto part = [&](size_t k) { return e.args[k] ? eval(*e.args[k]) : Value::none(); };
      return slice(eval(*e.args[0]), part(1), part(2), part(3));
    }
    case EK::kCall: return eval_call(e);
    case EK::kFilter: return eval_filter(e, nullptr);
    case EK::kTest: {
      const Value v = eval(*e.args[0]);
      CallArgs a = eval_args(e, 1);
      return Value::boolean(apply_test(*this, e.name, v, a) != e.negated);
    }
    case EK::kNot: return Value::boolean(!truthy(eval(*e.args[0])));
    case EK::kNeg: {
      const Value v = eval(*e.args[0]);
      return v.kind == Value::Kind::kFloat ? Value::number(-v.f) : binary_op("-", Value::integer(0), v);
    }
    case EK::kPos: return binary_op("+", Value::integer(0), eval(*e.args[0]));
    case EK::kBinary: return binary_op(e.name, eval(*e.args[0]), eval(*e.args[1]));
    case EK::kAnd: {
      Value l = eval(*e.args[0]);
      return truthy(l) ? eval(*e.args[1]) : l;
    }
    case EK::kOr: {
      Value l = eval(*e.args[0]);
      return truthy(l) ? l : eval(*e.args[1]);
    }
    case EK::kCompare: return eval_compare(e);
    case EK::kCondExpr:
      if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined("the else branch of a conditional expression");
  }
  fail("unknown expression");
}

}  // namespace st::jinja
