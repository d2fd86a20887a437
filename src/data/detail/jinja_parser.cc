// Recursive-descent parser for the Jinja subset chat templates use, following jinja2's grammar
// (jinja2/parser.py) and its operator precedence: or < and < not < comparisons < + - < ~ <
// * / // % < ** < unary - + < postfix (. [] ()) and filters / tests.
#include <algorithm>
#include <set>

#include "data/detail/jinja_ast.h"
#include "data/detail/jinja_lexer.h"

namespace st::jinja {
namespace {

using T = Token::Type;
using K = Expr::Kind;

// Nesting bounds for hostile templates: brackets and statements nest at most kMaxNesting deep,
// and no expression tree is deeper than kMaxExprDepth (a chain `1+1+1+...` is as deep as it is
// long), so that neither the parser nor the evaluator can run out of stack.
constexpr int kMaxNesting = 64;
constexpr int kMaxExprDepth = 256;

class Parser {
 public:
  Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_template() {
    Body b = subparse({});
    if (cur().type != T::kEof) error("unexpected '" + cur().text + "'");
    return b;
  }

 private:
  struct Guard {
    Parser* p;
    explicit Guard(Parser* parser) : p(parser) {
      if (++p->nesting_ > kMaxNesting) p->error("template nested too deeply (more than " + std::to_string(kMaxNesting) + " levels)");
    }
    ~Guard() { --p->nesting_; }
  };

  const Token& cur() const { return t_[pos_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(pos_ + n, t_.size() - 1)]; }
  Token next() { return t_[pos_ < t_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(const char* op) const { return cur().type == T::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == T::kName && cur().text == n; }

  [[noreturn]] void error(const std::string& msg) const { throw Error{msg, cur().line, cur().col}; }

  static std::string describe(const Token& k) {
    switch (k.type) {
      case T::kEof: return "end of template";
      case T::kBlockEnd: return "'%}'";
      case T::kVarEnd: return "'}}'";
      case T::kString: return "a string";
      default: return "'" + k.text + "'";
    }
  }

  void expect_op(const char* op) {
    if (!is_op(op)) error(std::string("expected '") + op + "', got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != T::kName) error("expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != T::kBlockEnd) error("expected '%}', got " + describe(cur()));
    next();
  }

  ExprPtr node(K kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  // Checks the depth of a node whose children are complete (see kMaxExprDepth).
  ExprPtr done(ExprPtr e) {
    int d = 0;
    for (const ExprPtr& a : e->args)
      if (a) d = std::max(d, a->depth);
    for (const auto& kv : e->kwargs) d = std::max(d, kv.second->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) error("expression nested too deeply (more than " + std::to_string(kMaxExprDepth) + " levels)");
    return e;
  }

  // ---- statements ---------------------------------------------------------------------------

  // Statements until a block tag named in `end` (left unconsumed: the caller reads its name).
  Body subparse(const std::set<std::string>& end) {
    Body body;
    for (;;) {
      const Token& k = cur();
      if (k.type == T::kEof) {
        if (!end.empty()) {
          std::string closing = *end.begin();
          for (const std::string& e : end)
            if (e.rfind("end", 0) == 0) closing = e;
          error("unexpected end of template: missing {% " + closing + " %}");
        }
        return body;
      }
      if (k.type == T::kText) {
        auto s = stmt(Stmt::Kind::kText, k);
        s->text = next().text;
        body.push_back(std::move(s));
      } else if (k.type == T::kVarBegin) {
        next();
        auto s = stmt(Stmt::Kind::kOutput, cur());
        s->expr = parse_tuple(true);
        if (cur().type != T::kVarEnd) error("expected '}}', got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (k.type == T::kBlockBegin) {
        if (peek().type == T::kName && end.count(peek().text)) {
          next();
          return body;
        }
        next();
        body.push_back(statement(end));
      } else {
        error("unexpected " + describe(k));
      }
    }
  }

  StmtPtr stmt(Stmt::Kind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->col = at.col;
    return s;
  }

  StmtPtr statement(const std::set<std::string>& enclosing) {
    Guard g(this);
    if (cur().type != T::kName) error("expected a tag name after '{%', got " + describe(cur()));
    const Token at = cur();
    const std::string& n = at.text;
    if (n == "if") return parse_if();
    if (n == "for") return parse_for();
    if (n == "set") return parse_set();
    if (n == "macro") return parse_macro();
    if (n == "call") return parse_call_block();
    if (n == "filter") return parse_filter_block();
    if (n == "generation") return parse_wrapped(Stmt::Kind::kGeneration, "endgeneration");
    if (n == "break" || n == "continue") {
      if (loops_ == 0) error("'" + n + "' outside a for loop");
      next();
      expect_block_end();
      return stmt(n == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, at);
    }
    static const std::set<std::string> kUnsupported = {"include", "extends", "import", "from", "block", "with",
                                                       "do", "autoescape", "trans", "pluralize"};
    if (kUnsupported.count(n)) error("the '" + n + "' tag is not supported");
    if (n.rfind("end", 0) == 0 || n == "else" || n == "elif")
      error("unexpected '" + n + "'" + (enclosing.empty() ? "" : " (expected " + join(enclosing) + ")"));
    error("unknown tag '" + n + "'");
  }

  static std::string join(const std::set<std::string>& s) {
    std::string out;
    for (const std::string& x : s) out += (out.empty() ? "" : " or ") + x;
    return out;
  }

  StmtPtr parse_if() {
    auto s = stmt(Stmt::Kind::kIf, next());
    s->expr = parse_tuple(false);
    expect_block_end();
    s->body = subparse({"elif", "else", "endif"});
    const std::string tag = next().text;
    if (tag == "elif") {
      s->else_body.push_back(parse_if_rest());
    } else if (tag == "else") {
      expect_block_end();
      s->else_body = subparse({"endif"});
      next();
      expect_block_end();
    } else {
      expect_block_end();
    }
    return s;
  }

  // After 'elif' (already consumed): the same as an 'if' that shares the closing endif.
  StmtPtr parse_if_rest() {
    --pos_;
    return parse_if();
  }

  StmtPtr parse_for() {
    auto s = stmt(Stmt::Kind::kFor, next());
    s->target = parse_target(false);
    if (!is_name("in")) error("expected 'in', got " + describe(cur()));
    next();
    s->expr = parse_tuple(false, {"recursive"});
    if (is_name("if")) {
      next();
      s->cond = parse_expression(true);
    }
    if (is_name("recursive")) error("recursive for loops are not supported");
    expect_block_end();
    ++loops_;
    s->body = subparse({"endfor", "else"});
    --loops_;
    if (next().text == "else") {
      expect_block_end();
      s->else_body = subparse({"endfor"});
      next();
    }
    expect_block_end();
    return s;
  }

  // A name, a tuple of names (for k, v in ...), or ns.attr (set only).
  ExprPtr parse_target(bool with_namespace) {
    const Token at = cur();
    std::vector<ExprPtr> names;
    do {
      if (!names.empty()) next();
      if (cur().type == T::kName && (cur().text == "in" || cur().text == "recursive")) break;
      auto n = node(K::kName, cur());
      n->name = expect_name();
      if (with_namespace && is_op(".")) {
        next();
        auto a = node(K::kGetAttr, at);
        a->name = expect_name();
        a->args.push_back(std::move(n));
        n = std::move(a);
      }
      names.push_back(std::move(n));
    } while (is_op(","));
    if (names.size() == 1 && names[0]) return std::move(names[0]);
    auto t = node(K::kTuple, at);
    t->args = std::move(names);
    for (const ExprPtr& a : t->args)
      if (a->kind != K::kName) error("only names can be unpacked");
    return t;
  }

  StmtPtr parse_set() {
    auto s = stmt(Stmt::Kind::kSet, next());
    s->target = parse_target(true);
    if (is_op("=")) {
      next();
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    s->kind = Stmt::Kind::kSetBlock;
    if (s->target->kind != K::kName) error("a block set assigns one name");
    parse_filter_chain(&s->filters);
    expect_block_end();
    s->body = subparse({"endset"});
    next();
    expect_block_end();
    return s;
  }

  void parse_filter_chain(std::vector<ExprPtr>* out) {
    while (is_op("|")) out->push_back(parse_filter(nullptr));
  }

  StmtPtr parse_filter_block() {
    auto s = stmt(Stmt::Kind::kFilterBlock, next());
    s->filters.push_back(parse_filter(nullptr, /*bar=*/false));
    parse_filter_chain(&s->filters);
    expect_block_end();
    s->body = subparse({"endfilter"});
    next();
    expect_block_end();
    return s;
  }

  // Macro and call-block parameters: (a, b=default, ...).
  void parse_params(Stmt* s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      s->params.push_back(expect_name());
      if (is_op("=")) {
        next();
        s->defaults.push_back(parse_expression(true));
      } else {
        if (!s->defaults.empty() && s->defaults.back()) error("a parameter without a default follows one with a default");
        s->defaults.push_back(nullptr);
      }
    }
    next();
  }

  StmtPtr parse_macro() {
    auto s = stmt(Stmt::Kind::kMacro, next());
    s->name = expect_name();
    parse_params(s.get());
    expect_block_end();
    const size_t first = pos_;
    const int loops = loops_;
    loops_ = 0;  // a macro body is not inside the loop around its definition
    s->body = subparse({"endmacro"});
    loops_ = loops;
    scan_special_names(first, s.get());
    next();
    expect_block_end();
    return s;
  }

  // jinja2 gives a macro extra positional / keyword arguments only when its body mentions
  // `varargs` / `kwargs`, and a caller only when it mentions `caller`.
  void scan_special_names(size_t first, Stmt* s) const {
    for (size_t k = first; k < pos_; ++k) {
      if (t_[k].type != T::kName) continue;
      s->uses_varargs |= t_[k].text == "varargs";
      s->uses_kwargs |= t_[k].text == "kwargs";
      s->uses_caller |= t_[k].text == "caller";
    }
  }

  StmtPtr parse_call_block() {
    auto s = stmt(Stmt::Kind::kCallBlock, next());
    if (is_op("(")) parse_params(s.get());
    s->expr = parse_expression(true);
    if (s->expr->kind != K::kCall) error("{% call %} expects a macro call");
    expect_block_end();
    s->body = subparse({"endcall"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_wrapped(Stmt::Kind kind, const std::string& end) {
    auto s = stmt(kind, next());
    expect_block_end();
    s->body = subparse({end});
    next();
    expect_block_end();
    return s;
  }

  // ---- expressions --------------------------------------------------------------------------

  bool tuple_end(const std::set<std::string>& extra) const {
    if (cur().type == T::kVarEnd || cur().type == T::kBlockEnd || cur().type == T::kEof || is_op(")")) return true;
    return cur().type == T::kName && extra.count(cur().text);
  }

  // Comma-separated expressions: one without a trailing comma is itself, else a tuple.
  ExprPtr parse_tuple(bool with_condexpr, const std::set<std::string>& extra_end = {}, bool explicit_parens = false) {
    const Token at = cur();
    std::vector<ExprPtr> items;
    bool comma = false;
    for (;;) {
      if (!items.empty()) {
        if (!is_op(",")) break;
        next();
        comma = true;
      }
      if (tuple_end(extra_end)) break;
      items.push_back(with_condexpr ? parse_expression(true) : parse_or());
    }
    if (!comma && items.size() == 1) return std::move(items[0]);
    if (items.empty() && !explicit_parens) error("expected an expression, got " + describe(cur()));
    auto t = node(K::kTuple, at);
    t->args = std::move(items);
    return done(std::move(t));
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Guard g(this);
    ExprPtr e = parse_or();
    if (!with_condexpr) return e;
    while (is_name("if")) {
      const Token at = next();
      auto c = node(K::kCondExpr, at);
      c->args.push_back(std::move(e));
      c->args.push_back(parse_or());
      if (is_name("else")) {
        next();
        c->args.push_back(parse_expression(true));
      } else {
        c->args.push_back(nullptr);
      }
      e = done(std::move(c));
    }
    return e;
  }

  ExprPtr binary(K kind, ExprPtr l, ExprPtr r, const Token& at, const std::string& op = "") {
    auto b = node(kind, at);
    b->name = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return done(std::move(b));
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      const Token at = next();
      l = binary(K::kOr, std::move(l), parse_and(), at);
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      const Token at = next();
      l = binary(K::kAnd, std::move(l), parse_not(), at);
    }
    return l;
  }

  ExprPtr parse_not() {
    if (!is_name("not")) return parse_compare();
    Guard g(this);
    auto n = node(K::kNot, next());
    n->args.push_back(parse_not());
    return done(std::move(n));
  }

  ExprPtr parse_compare() {
    const Token at = cur();
    ExprPtr first = parse_math1();
    auto c = node(K::kCompare, at);
    c->args.push_back(std::move(first));
    for (;;) {
      std::string op;
      if (cur().type == T::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                   cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek().type == T::kName && peek().text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      c->ops.push_back(op);
      c->args.push_back(parse_math1());
    }
    if (c->ops.empty()) return std::move(c->args[0]);
    return done(std::move(c));
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token at = next();
      l = binary(K::kBinary, std::move(l), parse_concat(), at, at.text);
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      const Token at = next();
      l = binary(K::kBinary, std::move(l), parse_math2(), at, "~");
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token at = next();
      l = binary(K::kBinary, std::move(l), parse_pow(), at, at.text);
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      const Token at = next();
      l = binary(K::kBinary, std::move(l), parse_unary(true), at, "**");
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    Guard g(this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token at = next();
      e = node(at.text == "-" ? K::kNeg : K::kPos, at);
      e->args.push_back(parse_unary(false));
      e = done(std::move(e));
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
  }

  ExprPtr constant(const Token& at, Value v) {
    auto c = node(K::kConst, at);
    c->value = std::move(v);
    return done(std::move(c));
  }

  ExprPtr parse_primary() {
    const Token at = cur();
    switch (at.type) {
      case T::kName: {
        next();
        if (at.text == "true" || at.text == "True") return constant(at, Value::boolean(true));
        if (at.text == "false" || at.text == "False") return constant(at, Value::boolean(false));
        if (at.text == "none" || at.text == "None") return constant(at, Value::none());
        auto n = node(K::kName, at);
        n->name = at.text;
        return done(std::move(n));
      }
      case T::kString: {
        std::string s;
        while (cur().type == T::kString) s += next().text;  // adjacent literals concatenate
        return constant(at, Value::str(std::move(s)));
      }
      case T::kInt: next(); return constant(at, Value::integer(at.i));
      case T::kFloat: next(); return constant(at, Value::number(at.f));
      default: break;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) return parse_list();
    if (is_op("{")) return parse_dict();
    error("unexpected " + describe(at));
  }

  ExprPtr parse_list() {
    auto l = node(K::kList, next());
    while (!is_op("]")) {
      if (!l->args.empty()) expect_op(",");
      if (is_op("]")) break;
      l->args.push_back(parse_expression(true));
    }
    next();
    return done(std::move(l));
  }

  ExprPtr parse_dict() {
    auto d = node(K::kDict, next());
    while (!is_op("}")) {
      if (!d->args.empty()) expect_op(",");
      if (is_op("}")) break;
      d->args.push_back(parse_expression(true));
      expect_op(":");
      d->args.push_back(parse_expression(true));
    }
    next();
    return done(std::move(d));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        const Token at = next();
        if (cur().type == T::kInt) {
          auto g = node(K::kGetItem, at);
          g->args.push_back(std::move(e));
          g->args.push_back(constant(cur(), Value::integer(cur().i)));
          next();
          e = done(std::move(g));
          continue;
        }
        auto g = node(K::kGetAttr, at);
        g->name = expect_name();
        g->args.push_back(std::move(e));
        e = done(std::move(g));
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // x[i], x[a:b:c] (any part may be omitted), x[a, b] (a tuple key).
  ExprPtr parse_subscript(ExprPtr obj) {
    const Token at = next();
    std::vector<ExprPtr> parts(1);
    bool slice = false;
    while (!is_op("]")) {
      if (is_op(":")) {
        next();
        slice = true;
        if (parts.size() == 3) error("a slice has at most three parts");
        parts.emplace_back();
        continue;
      }
      if (parts.back()) error("expected ']' or ':', got " + describe(cur()));
      parts.back() = parse_tuple(true);
      if (!slice && !is_op("]") && !is_op(":")) error("expected ']', got " + describe(cur()));
    }
    next();
    auto g = node(slice ? K::kSlice : K::kGetItem, at);
    g->args.push_back(std::move(obj));
    if (!slice && !parts[0]) error("empty subscript");
    for (ExprPtr& p : parts) g->args.push_back(std::move(p));
    while (slice && g->args.size() < 4) g->args.emplace_back();
    return done(std::move(g));
  }

  // (a, b, name=c): positional arguments then keywords. *args / **kwargs are not supported.
  void parse_args(Expr* e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error("*args and **kwargs in calls are not supported");
      if (cur().type == T::kName && peek().type == T::kOp && peek().text == "=") {
        std::string key = next().text;
        next();
        e->kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e->kwargs.empty()) error("a positional argument follows keyword arguments");
        e->args.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = node(K::kCall, cur());
    c->args.push_back(std::move(callee));
    parse_args(c.get());
    return done(std::move(c));
  }

  // `| name` or `| name(args)`; obj null in filter blocks and block sets (bar: a leading '|').
  ExprPtr parse_filter(ExprPtr obj, bool bar = true) {
    if (bar) next();
    auto f = node(K::kFilter, cur());
    f->name = expect_name();
    f->args.push_back(std::move(obj));
    if (is_op("(")) parse_args(f.get());
    return done(std::move(f));
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_test(ExprPtr obj) {
    auto t = node(K::kTest, next());
    if (is_name("not")) {
      next();
      t->negated = true;
    }
    t->name = expect_name();
    t->args.push_back(std::move(obj));
    const T ty = cur().type;
    if (is_op("(")) {
      parse_args(t.get());
    } else if ((ty == T::kName || ty == T::kString || ty == T::kInt || ty == T::kFloat || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("tests cannot be chained with 'is'");
      t->args.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
    }
    return done(std::move(t));
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  int nesting_ = 0;
  int loops_ = 0;
};

}  // namespace

Program parse_program(const std::string& source, const std::string& what) {
  Program p;
  p.what = what;
  p.body = Parser(lex(source)).parse_template();
  return p;
}

}  // namespace st::jinja
