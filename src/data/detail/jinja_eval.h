// The Jinja evaluator (jinja_eval.cc) and the builtins it calls (jinja_ops.cc: operators, attributes,
// Python methods, globals; jinja_filters.cc: filters and tests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/detail/jinja_ast.h"
#include "data/detail/jinja_value.h"

namespace st::jinja {

// Limits for hostile templates (more in jinja_value.h): loop iterations in one render, and macro
// call depth. jinja2's sandbox caps range() at 100000 items; so does range() here.
constexpr int64_t kMaxIterations = 1'000'000;
constexpr int kMaxCallDepth = 48;
constexpr int64_t kMaxRange = 100'000;
// Scopes captured by macros alive at once (Note [jinja cycles]; checked when they are swept, so
// up to twice as many): a macro defined in a loop body keeps each iteration's scope (~2 KB) until
// the render ends.
constexpr size_t kMaxMacroScopes = 100'000;

struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value v);
};

class Renderer {
 public:
  explicit Renderer(const Program& prog);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;
  // Renders the program with `context` (a dict) as its variables; throws jinja::Error.
  std::string render(const Value& context);

  Value eval(const Expr& e);
  Value invoke(const Value& callee, CallArgs& args);
  // Counts loop iterations (and items a filter walks) against kMaxIterations.
  void tick(int64_t n = 1);
  // Note [jinja cycles]: a namespace and a scope a macro captured are the only objects that change
  // after they are made, so the only ones that can form reference cycles (ns.x = ns; a macro in
  // the scope it captured) or chains of any length (ns.x = namespace(x=ns.x) in a loop). The
  // renderer keeps each one and empties it when the render ends (or when nothing else refers to
  // it): nothing leaks, and no chain is freed by a recursion as deep as the chain.
  void keep(std::shared_ptr<Namespace> ns);
  void keep(std::shared_ptr<Scope> scope);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body);
  Flow exec_stmt(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  void exec_macro(const Stmt& s);
  void exec_call_block(const Stmt& s);
  std::string capture(const Body& body);
  std::string apply_filter_chain(const std::vector<ExprPtr>& filters, std::string text);
  void assign(const Expr& target, const Value& v);
  void write(const std::string& s);

  Value eval_inner(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_filter(const Expr& e, const Value* input);
  Value eval_compare(const Expr& e);
  Value lookup(const std::string& name) const;
  CallArgs eval_args(const Expr& e, size_t first);
  Value make_macro(const Stmt& s, std::shared_ptr<Scope> scope, Value caller);
  Value call_macro(const Stmt& s, const std::shared_ptr<Scope>& def_scope, const Value& caller, CallArgs& args);
  Value loop_object(const List& items, size_t k);

  const Program& prog_;
  std::shared_ptr<Scope> scope_;
  std::string* out_ = nullptr;
  size_t produced_ = 0;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
  std::vector<std::shared_ptr<Scope>> scopes_;
  size_t sweep_namespaces_at_ = 1024, sweep_scopes_at_ = 1024;
};

// ---- filters and tests (jinja_filters.cc) ------------------------------------------------------

bool known_filter(const std::string& name);
bool known_test(const std::string& name);
Value apply_filter(Renderer& r, const std::string& name, const Value& v, CallArgs& args);
bool apply_test(Renderer& r, const std::string& name, const Value& v, CallArgs& args);

// ---- operators, attributes, methods, globals (jinja_ops.cc) -----------------------------------

// jinja2's getattr (Python attribute -- a bound method here -- first, then item) and getitem
// (item first, then attribute); undefined where neither exists.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
Value binary_op(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// The globals every template sees: range, namespace, dict, raise_exception, strftime_now.
void add_globals(Scope* root);

}  // namespace st::jinja
