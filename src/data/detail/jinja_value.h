// Values of the Jinja interpreter (data/jinja.h): a small variant with Python's semantics.
// Containers are shared and immutable once built (the sandbox forbids mutation, so a value is
// copied by reference count); a namespace() is the one mutable object, as in jinja2.
#pragma once

#include <algorithm>
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

// ---- limits for hostile templates -------------------------------------------------------------
// (with the loop, call-depth and range limits of jinja_eval.h and the parser's nesting caps).
// Each is a jinja::Error, never a crash, a hang or a std::bad_alloc.

// The output and any one string: far above any chat prompt, far below the memory a render may take.
constexpr size_t kMaxOutputBytes = size_t{64} << 20;
// Items in one list (or sequence iterated): 1M Values are ~100 MB, and a render may not loop more.
constexpr size_t kMaxListItems = 1'000'000;
// How deep containers nest (the depth dump() allows too). Printing, comparing and freeing a value
// recurse once per level; a list wrapped in itself 100000 times (built in a loop) would overflow
// the C++ stack. Python's own repr and == fail near 1000 levels.
constexpr int kMaxDepth = 200;
// Work one render may do, in bytes copied or scanned (a Value copied or compared counts 32):
// ~a second or two. Loops are capped at 1M iterations, but an iteration can copy a 60 MB string
// (`s ~ x`, `l + [x]`, `s[-1]` each walk their whole operand), which would take hours.
constexpr uint64_t kMaxWork = uint64_t{1} << 31;
constexpr uint64_t kValueWork = 32;

// The depth of a value holding one of depth `inner`; fails past kMaxDepth.
uint16_t outer_depth(uint16_t inner);
// Fails when a string of n bytes would pass kMaxOutputBytes / a list of n items kMaxListItems.
void check_size(size_t n);
void check_items(size_t n);
// Note [jinja work budget]: charges work to the budget of the render running on this thread (a
// thread_local, so that the many small functions that copy and scan need no Renderer argument);
// a no-op outside a render. WorkBudget installs a budget for its lifetime.
void charge_work(uint64_t units);
class WorkBudget {
 public:
  WorkBudget();
  ~WorkBudget();
  WorkBudget(const WorkBudget&) = delete;
  WorkBudget& operator=(const WorkBudget&) = delete;

 private:
  uint64_t used_ = 0;
  uint64_t* saved_;
};

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
  // Containers nested in this value (0 for a scalar; a list of lists: 2); at most kMaxDepth. A
  // method bound to a list counts the list. A namespace counts 0: it is the one mutable container,
  // kept by the Renderer (Note [jinja cycles]); walks through it check their own depth.
  uint16_t depth = 0;
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
  // (make_list and make_dict fail past kMaxListItems items or kMaxDepth levels.)
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

// Python's characters are UTF-8 code points here. A lead byte gives the length of its sequence,
// whatever follows; a stray continuation byte is a character of its own. The functions below walk
// them without splitting a string (a 60 MB string would be 60M strings, ~2 GB).
// The byte after the character at byte k (k < s.size()).
inline size_t utf8_next(const std::string& s, size_t k) {
  const auto c = static_cast<unsigned char>(s[k]);
  const size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
  return k + std::min(n, s.size() - k);
}
// The byte `chars` characters after byte `at`, stopping at byte `bytes` (what it skipped: *skipped).
size_t utf8_skip(const std::string& s, size_t at, size_t chars, size_t bytes = std::string::npos, size_t* skipped = nullptr);
// The number of characters in the first `bytes` bytes of s, without splitting it.
size_t utf8_count(const std::string& s, size_t bytes = std::string::npos);

}  // namespace st::jinja
