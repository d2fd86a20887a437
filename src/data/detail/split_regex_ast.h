// Internal: the syntax tree of the general split regex, between its parser
// (split_regex_parse.cc) and its compiler (split_regex_compile.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/detail/split_regex_impl.h"

namespace st::tok::rx {

constexpr size_t kMaxInsts = 1 << 14;  // after repetitions are expanded (real patterns: < 300)
constexpr int kMaxDepth = 16;          // lookaround / atomic nesting

struct Node {
  enum class K { kEmpty, kChar, kClass, kAny, kAssert, kCat, kAlt, kRepeat, kLook, kAtomic };
  K k = K::kEmpty;
  uint32_t cp = 0;
  bool icase = false;    // kChar: matched by case orbit
  bool fold_ctx = false; // kChar: under (?i) (for the multi-character fold check)
  int cls = -1;        // kClass
  bool nl = false;     // kAny: (?m) '.' also matches '\n'
  Op assert_op = Op::kBol;
  std::vector<Node> kids;  // kCat / kAlt; kRepeat / kLook / kAtomic: kids[0]
  int min = 0, max = -1;   // kRepeat (-1: unbounded)
  bool greedy = true;
  bool behind = false, neg = false;  // kLook
  bool bag = false;  // enclosed by a capturing, named or option group (may take a quantifier)
};

// Thrown inside the parser; compile() turns it into a Status.
struct Fail {
  bool unimplemented;
  std::string msg;
};

// The tree of `pattern`; classes go to prog->classes. Throws Fail.
Node parse_pattern(std::string_view pattern, Program* prog);
// The program of `root` into prog->code (and prog->depth). Throws Fail.
void compile_program(const Node& root, Program* prog);

}  // namespace st::tok::rx
