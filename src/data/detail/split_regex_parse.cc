// Parser and compiler of the general split regex (split_regex.h Note [split regex]): pattern ->
// syntax tree -> a program for the backtracking matcher (split_regex_match.cc).
#include <algorithm>
#include <optional>

#include "data/detail/split_regex.h"
#include "data/detail/split_regex_impl.h"

namespace st::tok {
namespace rx {
namespace {

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

// Oniguruma's rule for what a quantifier may follow: not an anchor or lookaround, nor an
// alternation with such a branch -- unless a capturing / named / option group encloses it; a
// concatenation always may ((?:^$)* is accepted, (?:^|a)* is not).
// Can `n` match the empty string?
bool nullable(const Node& n) {
  switch (n.k) {
    case Node::K::kEmpty: case Node::K::kAssert: case Node::K::kLook: return true;
    case Node::K::kChar: case Node::K::kClass: case Node::K::kAny: return false;
    case Node::K::kRepeat: return n.min == 0 || nullable(n.kids[0]);
    case Node::K::kAtomic: return nullable(n.kids[0]);
    case Node::K::kCat:
      for (const Node& k : n.kids)
        if (!nullable(k)) return false;
      return true;
    case Node::K::kAlt:
      for (const Node& k : n.kids)
        if (nullable(k)) return true;
      return false;
  }
  return true;
}

bool invalid_repeat_target(const Node& n) {
  if (n.bag) return false;
  if (n.k == Node::K::kAssert || n.k == Node::K::kLook) return true;
  if (n.k == Node::K::kAlt)
    for (const Node& k : n.kids)
      if (invalid_repeat_target(k)) return true;
  return false;
}

struct Flags {
  bool i = false, m = false;
};

// Thrown inside the parser; compile() turns it into a Status.
struct Fail {
  bool unimplemented;
  std::string msg;
};

std::string loose(std::string s) {  // Oniguruma's property-name matching: case, ' ', '_', '-' ignored
  std::string o;
  for (char c : s)
    if (c != ' ' && c != '_' && c != '-') o += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return o;
}

uint32_t gc_bit(Gc g) { return 1u << static_cast<int>(g); }

// \p{name} as class members; nullopt for a name outside the supported set.
std::optional<ClassItem> property(const std::string& name) {
  static const std::pair<const char*, const char*> kGc[] = {
      {"lu", "uppercaseletter"}, {"ll", "lowercaseletter"}, {"lt", "titlecaseletter"},
      {"lm", "modifierletter"},  {"lo", "otherletter"},     {"mn", "nonspacingmark"},
      {"mc", "spacingmark"},     {"me", "enclosingmark"},   {"nd", "decimalnumber"},
      {"nl", "letternumber"},    {"no", "othernumber"},     {"pc", "connectorpunctuation"},
      {"pd", "dashpunctuation"}, {"ps", "openpunctuation"}, {"pe", "closepunctuation"},
      {"pi", "initialpunctuation"}, {"pf", "finalpunctuation"}, {"po", "otherpunctuation"},
      {"sm", "mathsymbol"},      {"sc", "currencysymbol"},  {"sk", "modifiersymbol"},
      {"so", "othersymbol"},     {"zs", "spaceseparator"},  {"zl", "lineseparator"},
      {"zp", "paragraphseparator"}, {"cc", "control"},      {"cf", "format"},
      {"cs", "surrogate"},       {"co", "privateuse"}};
  const std::string n = loose(name);
  ClassItem it;
  it.kind = ClassItem::Kind::kGc;
  for (size_t g = 0; g < std::size(kGc); ++g)
    if (n == kGc[g].first || n == kGc[g].second) {
      it.gc_mask = gc_bit(static_cast<Gc>(g + 1));
      return it;
    }
  auto span = [&](Gc lo, Gc hi) {
    for (int g = static_cast<int>(lo); g <= static_cast<int>(hi); ++g) it.gc_mask |= gc_bit(static_cast<Gc>(g));
    return it;
  };
  if (n == "l" || n == "letter") return span(Gc::kLu, Gc::kLo);
  if (n == "lc" || n == "casedletter") return span(Gc::kLu, Gc::kLt);
  if (n == "m" || n == "mark" || n == "combiningmark") return span(Gc::kMn, Gc::kMe);
  if (n == "n" || n == "number") return span(Gc::kNd, Gc::kNo);
  if (n == "p" || n == "punctuation" || n == "punct") return span(Gc::kPc, Gc::kPo);
  if (n == "s" || n == "symbol") return span(Gc::kSm, Gc::kSo);
  if (n == "z" || n == "separator") return span(Gc::kZs, Gc::kZp);
  if (n == "c" || n == "other") {
    span(Gc::kCc, Gc::kCo);
    it.gc_mask |= gc_bit(Gc::kCn);
    return it;
  }
  if (n == "cn" || n == "unassigned" || n == "digit") {
    it.gc_mask = gc_bit(n == "digit" ? Gc::kNd : Gc::kCn);
    return it;
  }
  ClassItem k;
  if (n == "any") k.kind = ClassItem::Kind::kAny;
  else if (n == "ascii") k.kind = ClassItem::Kind::kAscii;
  else if (n == "space") k.kind = ClassItem::Kind::kSpace;
  else if (n == "word") k.kind = ClassItem::Kind::kWord;
  else if (n == "xdigit") k.kind = ClassItem::Kind::kHex;
  else return std::nullopt;
  return k;
}

class Parser {
 public:
  Parser(std::string_view pattern, Program* prog) : p_(utf8_decode(pattern)), prog_(prog) {}

  Node parse() {
    Flags f;
    Node n = alt(f);
    if (more()) fail(false, "unmatched ')'");
    return n;
  }

 private:
  std::vector<uint32_t> p_;
  size_t i_ = 0;
  Program* prog_;

  bool more() const { return i_ < p_.size(); }
  uint32_t peek(size_t k = 0) const { return i_ + k < p_.size() ? p_[i_ + k] : 0; }
  bool eat(uint32_t c) {
    if (peek() != c || !more()) return false;
    ++i_;
    return true;
  }
  [[noreturn]] void fail(bool unimplemented, const std::string& what) const {
    throw Fail{unimplemented, what + " at code point " + std::to_string(i_)};
  }

  Node alt(Flags& f) {
    Node n;
    n.k = Node::K::kAlt;
    n.kids.push_back(seq(f));
    while (eat('|')) n.kids.push_back(seq(f));
    return n.kids.size() == 1 ? std::move(n.kids[0]) : n;
  }

  Node seq(Flags& f) {
    Node n;
    n.k = Node::K::kCat;
    while (more() && peek() != '|' && peek() != ')') {
      if (inline_flags(f)) {  // Oniguruma: a(?i)b|c is a(?i:b|c) -- the rest of the group
        n.kids.push_back(alt(f));
        break;
      }
      Node a = atom(f);
      n.kids.push_back(quantified(std::move(a)));
    }
    if (n.kids.empty()) return Node{};
    check_multi_fold(n.kids);
    return n.kids.size() == 1 ? std::move(n.kids[0]) : n;
  }

  // Oniguruma matches (?i)ss to U+00DF as well; refuse literal runs under (?i) that spell a
  // multi-character fold rather than match differently.
  void check_multi_fold(const std::vector<Node>& kids) const {
    std::vector<uint32_t> run;
    auto flush = [&] {
      for (const auto& t : multi_folds())
        if (std::search(run.begin(), run.end(), t.begin(), t.end()) != run.end())
          fail(true, "(?i) on a sequence that a single character folds to (multi-character case folding)");
      run.clear();
    };
    for (const Node& k : kids) {
      if (k.k == Node::K::kChar && k.fold_ctx) {
        run.push_back(simple_fold(k.cp));
      } else {
        flush();
      }
    }
    flush();
  }

  // (?imx-imx) with no ':' -- the flags change for the rest of the enclosing group.
  bool inline_flags(Flags& f) {
    if (peek() != '(' || peek(1) != '?') return false;
    size_t k = 2;
    while (peek(k) == 'i' || peek(k) == 'm' || peek(k) == '-' || peek(k) == 'x') ++k;
    if (k == 2 || peek(k) != ')') return false;
    i_ += 2;
    parse_flag_letters(f);
    ++i_;  // ')'
    return true;
  }

  void parse_flag_letters(Flags& f) {
    bool on = true;
    for (; peek() == 'i' || peek() == 'm' || peek() == '-' || peek() == 'x'; ++i_) {
      if (peek() == '-') on = false;
      else if (peek() == 'i') f.i = on;
      else if (peek() == 'm') f.m = on;
      else fail(true, "the extended-syntax flag (?x)");
    }
  }

  static bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }

  // {n} {n,} {,m} {n,m} at i_; false (and i_ unchanged) if the text is not an interval, in which
  // case Oniguruma reads '{' as a literal.
  bool interval(int* lo, int* hi) {
    size_t k = i_ + 1;
    auto num = [&](int* v) {
      size_t s = k;
      long x = 0;
      while (k < p_.size() && is_digit(p_[k])) {
        x = x * 10 + (p_[k++] - '0');
        if (x > 100000) fail(false, "repeat count too large");
      }
      *v = static_cast<int>(x);
      return k > s;
    };
    bool has_lo = num(lo);
    if (k < p_.size() && p_[k] == '}') {
      if (!has_lo) return false;
      *hi = *lo;
    } else if (k < p_.size() && p_[k] == ',') {
      ++k;
      if (!has_lo) *lo = 0;
      bool has_hi = num(hi);
      if (!has_hi) {
        if (!has_lo) return false;
        *hi = -1;
      }
      if (k >= p_.size() || p_[k] != '}') return false;
    } else {
      return false;
    }
    if (*hi >= 0 && *hi < *lo) fail(false, "upper bound smaller than lower bound in a repeat range");
    i_ = k + 1;
    return true;
  }

  Node quantified(Node a) {
    for (;;) {
      int lo = 0, hi = -1;
      bool plain = false;  // * + ? (may take a lazy ? or a possessive +)
      const size_t at = i_;
      if (eat('*')) {
        plain = true;
      } else if (eat('+')) {
        lo = 1, plain = true;
      } else if (eat('?')) {
        hi = 1, plain = true;
      } else if (peek() != '{' || !interval(&lo, &hi)) {
        return a;
      }
      if (invalid_repeat_target(a)) i_ = at, fail(false, "target of a repeat operator is invalid");
      // Oniguruma ends a loop whose iteration matched empty, taking that as success; the matcher
      // here would backtrack into the iteration instead, so such repeats are refused.
      if ((hi < 0 || hi > 1) && nullable(a)) i_ = at, fail(true, "a repeat of something that can match empty");
      Node r;
      r.k = Node::K::kRepeat;
      r.min = lo, r.max = hi;
      bool possessive = false;
      if (eat('?')) {
        if (!plain && lo == hi) fail(true, "'{n}?' (Oniguruma reads it as an optional {n})");
        r.greedy = false;
      } else if (plain && eat('+')) {
        possessive = true;
      }
      r.kids.push_back(std::move(a));
      if (possessive) {
        Node at_node;
        at_node.k = Node::K::kAtomic;
        at_node.kids.push_back(std::move(r));
        a = std::move(at_node);
      } else {
        a = std::move(r);
      }
    }
  }

  Node char_node(uint32_t c, const Flags& f) {
    Node n;
    n.k = Node::K::kChar;
    n.cp = c;
    n.icase = f.i && case_orbit(c).size() > 1;
    n.fold_ctx = f.i;
    if (f.i && folds_to_several(c)) fail(true, "(?i) on a character that folds to several (multi-character case folding)");
    return n;
  }

  Node class_node(CharClass c) {
    Node n;
    n.k = Node::K::kClass;
    n.cls = static_cast<int>(prog_->classes.size());
    prog_->classes.push_back(std::move(c));
    return n;
  }

  Node atom(Flags& f) {
    const uint32_t c = peek();
    ++i_;
    switch (c) {
      case '(': return group(f);
      case '[': return class_node(char_class(f));
      case '.': {
        Node n;
        n.k = Node::K::kAny;
        n.nl = f.m;
        return n;
      }
      case '^': return assertion(Op::kBol);
      case '$': return assertion(Op::kEol);
      case '\\': return escape(f);
      case '*': case '+': case '?':
        --i_, fail(false, "target of a repeat operator is not specified");
      default: return char_node(c, f);
    }
  }

  static Node assertion(Op op) {
    Node n;
    n.k = Node::K::kAssert;
    n.assert_op = op;
    return n;
  }

  Node group(Flags& outer) {
    Flags f = outer;  // flags set inside a group end with it
    Node n;
    if (!eat('?')) {
      n = alt(f);  // capturing group: captures are not used by Split
      n.bag = true;
    } else if (eat(':')) {
      n = alt(f);
    } else if (eat('=') || eat('!')) {
      n = look(f, false, p_[i_ - 1] == '!');
    } else if (peek() == '<' && (peek(1) == '=' || peek(1) == '!')) {
      i_ += 2;
      n = look(f, true, p_[i_ - 1] == '!');
    } else if (eat('>')) {
      n.k = Node::K::kAtomic;
      n.kids.push_back(alt(f));
    } else if (peek() == '<' || peek() == '\'') {  // named group
      const uint32_t close = peek() == '<' ? '>' : '\'';
      for (++i_; more() && peek() != close; ++i_) {}
      if (!eat(close)) fail(false, "unterminated group name");
      n = alt(f);
      n.bag = true;
    } else if (eat('#')) {
      while (more() && peek() != ')') ++i_;
    } else if (peek() == 'i' || peek() == 'm' || peek() == '-' || peek() == 'x') {
      parse_flag_letters(f);
      if (!eat(':')) fail(false, "malformed group options");
      n = alt(f);
      n.bag = true;
    } else {
      fail(true, "the group kind '(?" + std::string(1, static_cast<char>(peek() < 128 ? peek() : '?')) + "'");
    }
    if (!eat(')')) fail(false, "missing ')'");
    return n;
  }

  Node look(Flags& f, bool behind, bool neg) {
    Node n;
    n.k = Node::K::kLook;
    n.behind = behind;
    n.neg = neg;
    n.kids.push_back(alt(f));
    return n;
  }

  uint32_t hex_digits(size_t min, size_t max) {
    uint32_t v = 0;
    size_t k = 0;
    for (; k < max; ++k) {
      uint32_t c = peek();
      int d = is_digit(c) ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
      if (d < 0) break;
      v = v * 16 + d;
      ++i_;
    }
    if (k < min) fail(false, "malformed hexadecimal escape");
    if (v > 0x10FFFF) fail(false, "code point out of range");
    return v;
  }

  // An escape that stands for one code point (also used inside classes); nullopt otherwise.
  std::optional<uint32_t> char_escape(uint32_t c, bool in_class) {
    switch (c) {
      case 't': return '\t';
      case 'n': return '\n';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case 'a': return 0x07;
      case 'e': return 0x1B;
      case 'b':
        if (in_class) return 0x08;
        return std::nullopt;
      case '0': {
        uint32_t v = 0;
        for (int k = 0; k < 2 && peek() >= '0' && peek() <= '7'; ++k) v = v * 8 + (peek() - '0'), ++i_;
        return v;
      }
      case 'x':
        if (eat('{')) {
          uint32_t v = hex_digits(1, 8);
          if (!eat('}')) fail(false, "malformed \\x{...}");
          return v;
        }
        return hex_digits(0, 2);
      case 'u': return hex_digits(4, 4);
      case 'c': {
        if (!more()) fail(false, "malformed \\c");
        const uint32_t v = peek() & 0x1F;
        ++i_;
        return v;
      }
      default: break;
    }
    if (c < 0x80 && ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) return std::nullopt;
    if (is_digit(c)) return std::nullopt;
    return c;  // an escaped punctuation or non-ASCII character stands for itself
  }

  // \d \D \s \S \w \W \h \H \p{..} \P{..} as one class member; nullopt if c is none of them.
  std::optional<ClassItem> set_escape(uint32_t c, bool bare) {
    ClassItem it;
    const uint32_t lower = c | 0x20;
    it.neg = c < 'a';
    switch (lower) {
      case 'd': it.kind = ClassItem::Kind::kGc, it.gc_mask = gc_bit(Gc::kNd); return it;
      case 's': it.kind = ClassItem::Kind::kSpace; return it;
      case 'w': it.kind = bare ? ClassItem::Kind::kWordBare : ClassItem::Kind::kWord; return it;
      case 'h': it.kind = ClassItem::Kind::kHex; return it;
      case 'p': {
        if (!eat('{')) fail(true, "\\p or \\P without braces");
        bool neg = c == 'P';
        if (eat('^')) neg = !neg;
        std::string name;
        while (more() && peek() != '}') {
          if (peek() >= 0x80) fail(false, "invalid character property name");
          name += static_cast<char>(peek());
          ++i_;
        }
        if (!eat('}')) fail(false, "unterminated \\p{...}");
        std::optional<ClassItem> p = property(name);
        if (!p) fail(true, "the character property '" + name + "' (general categories and Any, ASCII, Digit, Space, "
                           "Word, XDigit are supported)");
        p->neg = neg;
        if (bare && p->kind == ClassItem::Kind::kWord) p->kind = ClassItem::Kind::kWordBare;
        return p;
      }
      default: return std::nullopt;
    }
  }

  Node escape(Flags& f) {
    if (!more()) fail(false, "a pattern ending in '\\'");
    const uint32_t c = peek();
    ++i_;
    switch (c) {
      case 'A': return assertion(Op::kBos);
      case 'z': return assertion(Op::kEos);
      case 'Z': return assertion(Op::kEosNl);
      case 'b': return assertion(Op::kWordB);
      case 'B': return assertion(Op::kNotWordB);
      default: break;
    }
    if (std::optional<ClassItem> it = set_escape(c, true)) {
      CharClass cc;  // (?i) does not widen \p{Lu} outside brackets (Oniguruma; inside it does)
      cc.items.push_back(*it);
      return class_node(std::move(cc));
    }
    if (std::optional<uint32_t> v = char_escape(c, false)) return char_node(*v, f);
    --i_;
    if (is_digit(c)) fail(true, "backreferences and octal escapes");
    fail(true, std::string("the escape '\\") + static_cast<char>(c) + "'");
  }

  CharClass char_class(const Flags& f) {
    CharClass cc;
    cc.icase = f.i;
    cc.neg = eat('^');
    bool first = true;
    for (;;) {
      if (!more()) fail(false, "premature end of a character class");
      uint32_t c = peek();
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      if (c == '[') {
        if (peek(1) == ':') fail(true, "POSIX bracket expressions ([:alpha:])");
        ++i_;  // a nested class is a union with the outer one (BLOOM's [^(\s|[.,!?])])
        CharClass inner = char_class(f);
        if (inner.neg) fail(true, "a negated class nested in a class");
        cc.items.insert(cc.items.end(), inner.items.begin(), inner.items.end());
        continue;
      }
      if (c == '&' && peek(1) == '&') fail(true, "character class intersection (&&)");
      ++i_;
      uint32_t lo = c;
      if (c == '\\') {
        if (!more()) fail(false, "premature end of a character class");
        uint32_t e = peek();
        ++i_;
        if (std::optional<ClassItem> it = set_escape(e, false)) {
          cc.items.push_back(*it);
          continue;
        }
        std::optional<uint32_t> v = char_escape(e, true);
        if (!v) --i_, fail(true, std::string("the escape '\\") + static_cast<char>(e) + "' in a class");
        lo = *v;
      }
      ClassItem r;
      r.lo = r.hi = lo;
      if (peek() == '-' && peek(1) != ']' && i_ + 1 < p_.size()) {
        ++i_;
        uint32_t hc = peek();
        ++i_;
        if (hc == '[') fail(true, "nested character classes");
        if (hc == '\\') {
          uint32_t e = peek();
          ++i_;
          std::optional<uint32_t> v = char_escape(e, true);
          if (!v) fail(false, "a range ending in a character set");
          hc = *v;
        }
        if (hc < lo) fail(false, "empty range in a character class");
        r.hi = hc;
      }
      cc.items.push_back(r);
    }
    // Under (?i) Oniguruma lets a class match the several characters one member folds to
    // ((?i)[\w] matches "st" for U+FB06): refused rather than matched one character at a time.
    // Oniguruma does not do this for a negated class.
    if (cc.icase && !cc.neg)
      for (uint32_t m : multi_fold_chars())
        if (class_has(cc, m)) fail(true, "(?i) on a class holding a character that folds to several");
    return cc;
  }
};

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
}  // namespace rx

StatusOr<std::shared_ptr<const SplitPattern>> SplitPattern::compile(std::string_view pattern) {
  std::shared_ptr<SplitPattern> r(new SplitPattern());
  r->pattern_ = std::string(pattern);
  r->prog_ = std::make_unique<rx::Program>();
  if (!utf8_valid(pattern)) return InvalidArgument("split regex is not valid UTF-8");
  try {
    rx::Parser parser(pattern, r->prog_.get());
    rx::Node root = parser.parse();
    rx::Compiler(r->prog_.get()).compile(root);
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
