// Values of the Jinja interpreter (data/jinja.h): a small variant with Python's semantics.
// Containers are shared and immutable once built (the sandbox forbids mutation, so a value is
// copied by reference count); a namespace() is the one mutable object, as in jinja2.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace st::jinja {

// Note [jinja errors]: evaluation errors are thrown as jinja::Error and caught in
// JinjaTemplate::parse/render, which turn them into a Status; they never leave the interpreter.
// An error travels through many levels of expression evaluation, and threading a StatusOr through
// every one would double the evaluator's size. The innermost AST node the error passes through
// stamps its line and column.
struct Error {
  std::string msg;
  int line = 0, col = 0;
  bool raised = false;  // raise_exception(): the template's own message, passed on as it is
};
[[noreturn]] void fail(std::string msg);

struct Value;
using List = std::vector<Value>;
struct Dict;
struct Namespace;
class Renderer;

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

struct Callable {
  std::string name;
  std::function<Value(Renderer&, CallArgs&)> fn;
};

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };
  Kind kind = Kind::kUndefined;
  bool b = false;
  bool tuple = false;  // a list that prints as a tuple: (1, 2)
  // Note [jinja views]: jinja2's map / select / items / unique ... filters return generators and
  // dict.items() / keys() / values() views. They iterate like lists, but a generator is always
  // true, has no len() and prints as "<generator object ...>"; a view prints as
  // "dict_items([...])". Both are lists here, flagged, so those operations fail or print as Python does.
  enum class View { kNone, kGenerator, kDictItems, kDictKeys, kDictValues };
  View view = View::kNone;
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<const std::string> s;  // string; for undefined, what was looked up (for errors)
  std::shared_ptr<const List> list;
  std::shared_ptr<const Dict> dict;
  std::shared_ptr<Namespace> ns;
  std::shared_ptr<const Callable> call;

  static Value undefined(std::string what = "");
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value str(std::string v);
  static Value make_list(List v, bool is_tuple = false);
  static Value make_dict(Dict v);
  static Value callable(std::string name, std::function<Value(Renderer&, CallArgs&)> fn);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  const std::string& text() const { return *s; }  // kString only
  double as_double() const;
  std::string type_name() const;  // Python's: "str", "int", "list", "dict", ...
};

// An ordered dict with string keys (JSON objects and template dict literals).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

struct Namespace {
  Dict attrs;
};

bool truthy(const Value& v);
// Python's ==.
bool equal(const Value& a, const Value& b);
// Python's <, for numbers and strings (and lists of them); a TypeError otherwise.
bool less(const Value& a, const Value& b);
// Python's str(): what {{ v }} prints.
std::string to_str(const Value& v);
// Python's repr(): how a value prints inside a list or dict.
std::string repr(const Value& v);
std::string py_float(double d);  // Python's repr of a float ("1.0", "1e-05", "inf")
// The items iteration yields: list elements, dict keys, string characters (UTF-8 code points).
List iterate(const Value& v);
int64_t length(const Value& v);

Value from_json(const OrderedJson& j);
// transformers' tojson: json.dumps(v, ensure_ascii=False, indent=indent, separators, sort_keys).
struct JsonStyle {
  int indent = -1;  // -1: None (one line)
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonStyle& style);

// UTF-8 code points of a string (Python's characters).
std::vector<std::string> utf8_chars(const std::string& s);

}  // namespace st::jinja
