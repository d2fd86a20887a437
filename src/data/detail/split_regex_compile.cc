// Compiler of the general split regex (split_regex.h Note [split regex]): the syntax tree
// (split_regex_ast.h) -> a program for the backtracking matcher (split_regex_match.cc):
// alternation as ordered splits, repeats unrolled up to their bound, lookaround and atomic bodies
// as sub-programs after the main one.
#include <algorithm>
#include <optional>

#include "data/detail/split_regex.h"
#include "data/detail/split_regex_ast.h"

namespace st::tok {
namespace rx {
namespace {

// The fixed length of what `n` matches, or nullopt (lookbehind needs one).
std::optional<uint32_t> fixed_width(const Node& n) {
  switch (n.k) {
    case Node::K::kEmpty: case Node::K::kAssert: case Node::K::kLook: return 0;
    case Node::K::kChar: case Node::K::kClass: case Node::K::kAny: return 1;
    case Node::K::kAtomic: return fixed_width(n.kids[0]);
    case Node::K::kRepeat: {
      if (n.min != n.max) return std::nullopt;
      auto w = fixed_width(n.kids[0]);
      if (!w) return std::nullopt;
      return *w * static_cast<uint32_t>(n.min);
    }
    case Node::K::kCat: {
      uint32_t s = 0;
      for (const Node& k : n.kids) {
        auto w = fixed_width(k);
        if (!w) return std::nullopt;
        s += *w;
      }
      return s;
    }
    case Node::K::kAlt: {
      std::optional<uint32_t> w;
      for (const Node& k : n.kids) {
        auto x = fixed_width(k);
        if (!x || (w && *w != *x)) return std::nullopt;
        w = x;
      }
      return w;
    }
  }
  return std::nullopt;
}

class Compiler {
 public:
  explicit Compiler(Program* prog) : prog_(prog) {}

  void compile(const Node& root) {
    emit(root, 0);
    add({Op::kMatch});
    // Sub-programs (lookaround, atomic bodies) after the main program, each ending in kMatch.
    for (size_t q = 0; q < subs_.size(); ++q) {
      const auto [inst, node, depth] = subs_[q];
      prog_->code[inst].a = static_cast<uint32_t>(prog_->code.size());
      emit(*node, depth);
      add({Op::kMatch});
    }
  }

 private:
  Program* prog_;
  struct Sub {
    size_t inst;
    const Node* node;
    int depth;
  };
  std::vector<Sub> subs_;

  size_t add(Inst in) {
    if (prog_->code.size() >= kMaxInsts) throw Fail{true, "a pattern this large after expanding its repeats"};
    prog_->code.push_back(in);
    return prog_->code.size() - 1;
  }
  uint32_t here() const { return static_cast<uint32_t>(prog_->code.size()); }

  void sub(Op op, const Node& body, int depth, bool neg, uint32_t behind) {
    if (depth + 1 > kMaxDepth) throw Fail{true, "lookaround / atomic groups nested this deep"};
    prog_->depth = std::max(prog_->depth, depth + 1);
    Inst in{op};
    in.neg = neg;
    in.behind = behind;
    subs_.push_back({add(in), &body, depth + 1});
  }

  void emit(const Node& n, int depth) {
    switch (n.k) {
      case Node::K::kEmpty: return;
      case Node::K::kChar: {
        Inst in{n.icase ? Op::kCharFold : Op::kChar};
        in.a = n.icase ? simple_fold(n.cp) : n.cp;
        add(in);
        return;
      }
      case Node::K::kClass: {
        Inst in{Op::kClass};
        in.a = static_cast<uint32_t>(n.cls);
        add(in);
        return;
      }
      case Node::K::kAny: add({n.nl ? Op::kAnyNl : Op::kAny}); return;
      case Node::K::kAssert: add({n.assert_op}); return;
      case Node::K::kCat:
        for (const Node& k : n.kids) emit(k, depth);
        return;
      case Node::K::kAlt: {
        std::vector<size_t> jumps;
        for (size_t k = 0; k < n.kids.size(); ++k) {
          if (k + 1 < n.kids.size()) {
            size_t split = add({Op::kSplit});
            prog_->code[split].a = here();
            emit(n.kids[k], depth);
            jumps.push_back(add({Op::kJmp}));
            prog_->code[split].b = here();
          } else {
            emit(n.kids[k], depth);
          }
        }
        for (size_t j : jumps) prog_->code[j].a = here();
        return;
      }
      case Node::K::kRepeat: return repeat(n, depth);
      case Node::K::kAtomic: sub(Op::kAtomic, n.kids[0], depth, false, 0); return;
      case Node::K::kLook: return look(n, depth);
    }
  }

  // Split with the preferred branch first: greedy prefers `body`, lazy prefers `skip`.
  void set_split(size_t split, uint32_t body, uint32_t skip, bool greedy) {
    prog_->code[split].a = greedy ? body : skip;
    prog_->code[split].b = greedy ? skip : body;
  }

  void repeat(const Node& n, int depth) {
    const Node& body = n.kids[0];
    for (int k = 0; k < n.min; ++k) emit(body, depth);
    if (n.max < 0) {  // L: split(body, exit); body; jmp L
      uint32_t top = here();
      size_t split = add({Op::kSplit});
      emit(body, depth);
      Inst j{Op::kJmp};
      j.a = top;
      add(j);
      set_split(split, top + 1, here(), n.greedy);
      return;
    }
    std::vector<size_t> splits;  // each optional copy may be skipped, ending the repeat
    for (int k = n.min; k < n.max; ++k) {
      splits.push_back(add({Op::kSplit}));
      emit(body, depth);
    }
    for (size_t s : splits) set_split(s, static_cast<uint32_t>(s + 1), here(), n.greedy);
  }

  void look(const Node& n, int depth) {
    if (!n.behind) return sub(Op::kLook, n.kids[0], depth, n.neg, 0);
    // Lookbehind: each top-level alternative may have its own fixed length, as in Oniguruma:
    // (?<=a|bc) is (?:(?<=a)|(?<=bc)); (?<!a|bc) is (?<!a)(?<!bc).
    const Node& body = n.kids[0];
    std::vector<const Node*> alts;
    if (body.k == Node::K::kAlt) {
      for (const Node& k : body.kids) alts.push_back(&k);
    } else {
      alts.push_back(&body);
    }
    std::vector<uint32_t> widths;
    for (const Node* a : alts) {
      auto w = fixed_width(*a);
      if (!w) throw Fail{true, "a lookbehind of variable length"};
      widths.push_back(*w);
    }
    if (n.neg || alts.size() == 1) {
      for (size_t k = 0; k < alts.size(); ++k) sub(Op::kLook, *alts[k], depth, n.neg, widths[k]);
      return;
    }
    std::vector<size_t> jumps;
    for (size_t k = 0; k < alts.size(); ++k) {
      size_t split = k + 1 < alts.size() ? add({Op::kSplit}) : SIZE_MAX;
      if (split != SIZE_MAX) prog_->code[split].a = here();
      sub(Op::kLook, *alts[k], depth, false, widths[k]);
      if (split != SIZE_MAX) {
        jumps.push_back(add({Op::kJmp}));
        prog_->code[split].b = here();
      }
    }
    for (size_t j : jumps) prog_->code[j].a = here();
  }
};

}  // namespace

void compile_program(const Node& root, Program* prog) { Compiler(prog).compile(root); }

}  // namespace rx

StatusOr<std::shared_ptr<const SplitPattern>> SplitPattern::compile(std::string_view pattern) {
  std::shared_ptr<SplitPattern> r(new SplitPattern());
  r->pattern_ = std::string(pattern);
  r->prog_ = std::make_unique<rx::Program>();
  if (!utf8_valid(pattern)) return InvalidArgument("split regex is not valid UTF-8");
  try {
    const rx::Node root = rx::parse_pattern(pattern, r->prog_.get());
    rx::compile_program(root, r->prog_.get());
  } catch (const rx::Fail& f) {
    const std::string msg = "split regex '" + r->pattern_ + "': " + f.msg;
    if (f.unimplemented) return Unimplemented(msg + " is not supported");
    return InvalidArgument(msg);
  }
  return std::shared_ptr<const SplitPattern>(std::move(r));
}

SplitPattern::~SplitPattern() = default;

size_t SplitPattern::program_size() const { return prog_->code.size(); }

}  // namespace st::tok
