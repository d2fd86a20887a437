// The parsed form of a Jinja template: expression and statement trees (jinja_parser.cc builds
// them, jinja_eval.cc walks them). Plain structs with one shape per kind of node.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/detail/jinja_value.h"

namespace st::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kConst,     // value
    kName,      // name
    kList,      // args
    kTuple,     // args
    kDict,      // args: key, value, key, value, ...
    kGetAttr,   // args[0].name
    kGetItem,   // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (null = omitted)
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs)
    kTest,      // args[0] is [not] name(args[1..]); negated
    kNot,       // not args[0]
    kNeg,       // -args[0]
    kPos,       // +args[0]
    kBinary,    // args[0] op args[1]: + - * / // % ** ~
    kAnd,
    kOr,
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ...
    kCondExpr,  // args[0] if args[1] else args[2] (args[2] null: undefined)
  };
  Kind kind = Kind::kConst;
  int line = 0, col = 0;
  Value value;
  std::string name;  // name, attribute, filter or test, binary operator
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
  int depth = 1;  // of the tree below (the parser bounds it)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,       // text
    kOutput,     // {{ expr }}
    kIf,         // if expr: body else else_body (elif: an if inside else_body)
    kFor,        // for target in expr [if cond]: body else else_body
    kSet,        // set target = expr
    kSetBlock,   // set target %}body{% endset (filtered by filters[0..] if any)
    kMacro,      // macro name(params = defaults): body
    kCallBlock,  // call [(params)] expr: body (the body is `caller`)
    kFilterBlock,  // filter expr-chain: body
    kBreak,
    kContinue,
    kGeneration,  // generation: body (transformers' assistant-span marker; renders its body)
  };
  Kind kind = Kind::kText;
  int line = 0, col = 0;
  std::string text;
  ExprPtr expr;    // output, condition, iterable, value, call
  ExprPtr target;  // for / set: a name, a tuple of names, or ns.attr
  ExprPtr cond;    // for ... if cond
  std::vector<ExprPtr> filters;  // set-block / filter-block: kFilter nodes whose args[0] is null
  Body body, else_body;
  std::string name;                          // macro
  std::vector<std::string> params;           // macro / call-block parameters
  std::vector<ExprPtr> defaults;             // per parameter; null = required
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

struct Program {
  std::string what;
  Body body;
};

// Parses a template (jinja_parser.cc). Throws jinja::Error with line and column.
Program parse_program(const std::string& source, const std::string& what);

}  // namespace st::jinja
