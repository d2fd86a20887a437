#include "data/jinja.h"

#include <exception>

#include "data/detail/jinja_ast.h"
#include "data/detail/jinja_eval.h"

namespace st {
namespace {

using jinja::Error;
using jinja::Expr;
using jinja::Stmt;

Status to_status(const Error& e, const std::string& what) {
  if (e.raised) return InvalidArgument(Str() << what << ":" << e.line << ":" << e.col << ": the template raised an exception: " << e.msg);
  return InvalidArgument(Str() << what << ":" << e.line << ":" << e.col << ": " << e.msg);
}

// jinja2 refuses a template naming an unknown filter or test when it compiles it, even where the
// filter would never run; so does this check.
void check_names(const Expr* e) {
  if (!e) return;
  const bool filter = e->kind == Expr::Kind::kFilter, test = e->kind == Expr::Kind::kTest;
  if ((filter && !jinja::known_filter(e->name)) || (test && !jinja::known_test(e->name)))
    throw Error{Str() << "no " << (filter ? "filter" : "test") << " named '" << e->name << "' (not supported)", e->line, e->col};
  for (const jinja::ExprPtr& a : e->args) check_names(a.get());
  for (const auto& kv : e->kwargs) check_names(kv.second.get());
}

void check_names(const jinja::Body& body) {
  for (const jinja::StmtPtr& s : body) {
    for (const Expr* e : {s->expr.get(), s->target.get(), s->cond.get()}) check_names(e);
    for (const jinja::ExprPtr& f : s->filters) check_names(f.get());
    for (const jinja::ExprPtr& d : s->defaults) check_names(d.get());
    check_names(s->body);
    check_names(s->else_body);
  }
}

}  // namespace

StatusOr<JinjaTemplate> JinjaTemplate::parse(const std::string& source, const std::string& what) {
  auto prog = std::make_shared<jinja::Program>();
  try {
    *prog = jinja::parse_program(source, what);
    check_names(prog->body);
  } catch (const Error& e) {
    return to_status(e, what);
  } catch (const std::exception& e) {  // a backstop, as in render()
    return InvalidArgument(Str() << what << ": parsing failed: " << e.what());
  }
  JinjaTemplate t;
  t.prog_ = std::move(prog);
  return t;
}

StatusOr<std::string> JinjaTemplate::render(const OrderedJson& context) const {
  if (!context.is_object()) return InvalidArgument(what() + ": the render context must be a JSON object");
  try {
    jinja::Renderer r(*prog_);
    return r.render(jinja::from_json(context));
  } catch (const Error& e) {
    return to_status(e, what());
  } catch (const std::exception& e) {
    // A backstop: the interpreter's limits should leave nothing else to catch (std::bad_alloc
    // included), but a template must never take the process down.
    return InvalidArgument(Str() << what() << ": rendering failed: " << e.what());
  }
}

const std::string& JinjaTemplate::what() const { return prog_->what; }

}  // namespace st
