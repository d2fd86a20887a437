// The backtracking matcher of the general split regex (split_regex.h Note [split regex]).
#include <algorithm>
#include <unordered_set>

#include "data/detail/split_regex.h"
#include "data/detail/split_regex_impl.h"

namespace st::tok {
namespace rx {

bool is_word(uint32_t cp, Gc g, bool bare) {
  if ((g >= Gc::kLu && g <= Gc::kNl) || g == Gc::kPc) return true;  // L, M, Nd, Nl, Pc
  if (g == Gc::kSo)  // Other_Alphabetic symbols: circled, squared and negative-circled Latin letters
    return (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
           (cp >= 0x1F170 && cp <= 0x1F189);
  return bare && (cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0xBC && cp <= 0xBE));
}

namespace {

bool member(const CharClass& c, uint32_t cp, Gc g, bool space) {
  for (const ClassItem& it : c.items) {
    bool r = false;
    switch (it.kind) {
      case ClassItem::Kind::kRange: r = cp >= it.lo && cp <= it.hi; break;
      case ClassItem::Kind::kGc: r = (it.gc_mask >> static_cast<int>(g)) & 1; break;
      case ClassItem::Kind::kSpace: r = space; break;
      case ClassItem::Kind::kWord: r = is_word(cp, g, false); break;
      case ClassItem::Kind::kWordBare: r = is_word(cp, g, true); break;
      case ClassItem::Kind::kHex: r = (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'f'); break;
      case ClassItem::Kind::kAscii: r = cp < 0x80; break;
      case ClassItem::Kind::kAny: r = true; break;
    }
    if (r != it.neg) return true;
  }
  return false;
}

}  // namespace

bool class_has(const CharClass& c, uint32_t cp) { return member(c, cp, general_category(cp), is_space(cp)); }

bool class_matches(const CharClass& c, const Subject& s, size_t i) {
  bool r = member(c, s.cp[i], s.gc[i], s.space[i]);
  if (!r && c.icase) {
    for (uint32_t o : case_orbit(s.cp[i]))
      if (o != s.cp[i] && class_has(c, o)) {
        r = true;
        break;
      }
  }
  return r != c.neg;
}

namespace {

// Visited (instruction, position) states of one run, over positions from `base`: a bitmap up to
// kDenseBits, a hash set past it (a long match of a large program: memory then grows with the
// states actually visited, i.e. with the work done, instead of positions x instructions).
class Memo {
 public:
  void reset(size_t base, size_t nprog) {
    std::fill(bits_.begin(), bits_.begin() + std::min(bits_.size(), words(used_cols_)), 0);
    sparse_.clear();
    base_ = base;
    nprog_ = nprog;
    used_cols_ = 0;
  }
  size_t base() const { return base_; }
  // True if (pc, pos) was visited before; marks it.
  bool seen(uint32_t pc, size_t pos) {
    const size_t col = pos - base_;
    const size_t bit = col * nprog_ + pc;
    if (bit >= kDenseBits) return !sparse_.insert(bit).second;
    if (col >= used_cols_) {
      used_cols_ = col + 1;
      if (words(used_cols_) > bits_.size())
        bits_.resize(std::min(std::max(words(used_cols_), 2 * bits_.size()), kDenseBits / 64 + 1), 0);
    }
    uint64_t& w = bits_[bit >> 6];
    const uint64_t m = uint64_t{1} << (bit & 63);
    if (w & m) return true;
    w |= m;
    return false;
  }
  // Forgets the states at `pos` (those on a successful path end there).
  void forget_column(size_t pos) {
    if (pos < base_) return;
    const size_t first = (pos - base_) * nprog_;
    for (size_t b = first; b < first + nprog_; ++b) {
      if (b >= kDenseBits) sparse_.erase(b);
      else if ((b >> 6) < bits_.size()) bits_[b >> 6] &= ~(uint64_t{1} << (b & 63));
    }
  }

 private:
  static constexpr size_t kDenseBits = size_t{1} << 28;  // 32 MiB
  size_t words(size_t cols) const { return std::min((cols * nprog_ + 63) / 64, kDenseBits / 64 + 1); }
  std::vector<uint64_t> bits_;
  std::unordered_set<size_t> sparse_;
  size_t base_ = 0, nprog_ = 0, used_cols_ = 0;
};

bool word_at(const Subject& s, size_t i) { return i < s.n() && is_word(s.cp[i], s.gc[i], true); }

class Matcher {
 public:
  Matcher(const Program& p, const Subject& s) : p_(p), s_(s), memo_(p.depth + 1), stack_(p.depth + 1) {
    memo_[0].reset(0, p.code.size());
  }

  // The leftmost match starting at or after `from`: (start, end), or false.
  bool search(size_t from, size_t* start, size_t* end) {
    for (size_t st = from; st <= s_.n(); ++st) {
      // Failed states stay failed for later starts (they do not depend on where the attempt
      // began); only drop them when the window has moved far, to bound memory.
      if (st - memo_[0].base() > kRebase) memo_[0].reset(st, p_.code.size());
      if (run(0, st, 0, end)) {
        memo_[0].forget_column(*end);
        *start = st;
        return true;
      }
    }
    return false;
  }

 private:
  static constexpr size_t kRebase = 4096;
  const Program& p_;
  const Subject& s_;
  std::vector<Memo> memo_;
  std::vector<std::vector<std::pair<uint32_t, size_t>>> stack_;

  // A sub-program (lookaround / atomic body) from `pos`: its first match's end.
  bool sub(uint32_t pc, size_t pos, int depth, size_t* end) {
    memo_[depth].reset(pos, p_.code.size());
    const size_t mark = stack_[depth].size();
    bool ok = run(pc, pos, depth, end);
    stack_[depth].resize(mark);
    return ok;
  }

  bool step_assert(Op op, size_t pos) const {
    const size_t n = s_.n();
    switch (op) {
      case Op::kBol: return pos == 0 || (s_.cp[pos - 1] == '\n' && pos < n);  // Oniguruma: not at the very end
      case Op::kEol: return pos == n || s_.cp[pos] == '\n';
      case Op::kBos: return pos == 0;
      case Op::kEos: return pos == n;
      case Op::kEosNl: return pos == n || (pos + 1 == n && s_.cp[pos] == '\n');
      case Op::kWordB: return (pos > 0 && word_at(s_, pos - 1)) != word_at(s_, pos);
      case Op::kNotWordB: return (pos > 0 && word_at(s_, pos - 1)) == word_at(s_, pos);
      default: return false;
    }
  }

  bool run(uint32_t pc0, size_t pos0, int depth, size_t* end) {
    Memo& memo = memo_[depth];
    auto& stack = stack_[depth];
    const size_t floor = stack.size();
    stack.emplace_back(pc0, pos0);
    const size_t n = s_.n();
    while (stack.size() > floor) {
      auto [pc, pos] = stack.back();
      stack.pop_back();
      for (;;) {
        if (memo.seen(pc, pos)) break;
        const Inst& in = p_.code[pc];
        bool ok = true;
        switch (in.op) {
          case Op::kChar: ok = pos < n && s_.cp[pos] == in.a; ++pos; break;
          case Op::kCharFold: ok = pos < n && simple_fold(s_.cp[pos]) == in.a; ++pos; break;
          case Op::kClass: ok = pos < n && class_matches(p_.classes[in.a], s_, pos); ++pos; break;
          case Op::kAny: ok = pos < n && s_.cp[pos] != '\n'; ++pos; break;
          case Op::kAnyNl: ok = pos < n; ++pos; break;
          case Op::kSplit:
            stack.emplace_back(in.b, pos);
            pc = in.a;
            continue;
          case Op::kJmp: pc = in.a; continue;
          case Op::kMatch:
            *end = pos;
            stack.resize(floor);
            return true;
          case Op::kLook: {
            size_t e;
            bool m = in.behind <= pos && sub(in.a, pos - in.behind, depth + 1, &e);
            ok = m != in.neg;
            break;
          }
          case Op::kAtomic: {
            size_t e;
            ok = sub(in.a, pos, depth + 1, &e);
            if (ok) pos = e;
            break;
          }
          default: ok = step_assert(in.op, pos); break;
        }
        if (!ok) break;
        ++pc;
      }
    }
    return false;
  }
};

}  // namespace
}  // namespace rx

std::vector<std::pair<size_t, size_t>> SplitPattern::find_all(const std::vector<uint32_t>& cps) const {
  rx::Subject s;
  s.cp = cps;  // a view: cps outlives the search
  s.gc.resize(cps.size());
  s.space.resize(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    s.gc[i] = general_category(cps[i]);
    s.space[i] = is_space(cps[i]);
  }
  rx::Matcher m(*prog_, s);
  std::vector<std::pair<size_t, size_t>> out;
  size_t from = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (from <= s.n()) {
    size_t st, e;
    if (!m.search(from, &st, &e)) break;
    if (st == e && have_last && last_end == e) {  // onig's find_iter: no empty match right after one
      ++from;
      continue;
    }
    out.emplace_back(st, e);
    from = e;
    last_end = e;
    have_last = true;
  }
  return out;
}

}  // namespace st::tok
