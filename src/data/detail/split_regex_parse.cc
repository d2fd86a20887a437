// Parser of the general split regex (split_regex.h Note [split regex]): pattern -> syntax tree
// (split_regex_ast.h), with Oniguruma's syntax rules; split_regex_compile.cc turns the tree into
// the matcher's program.
#include <algorithm>
#include <optional>

#include "data/detail/split_regex_ast.h"

namespace st::tok {
namespace rx {
namespace {

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

// Oniguruma's rule for what a quantifier may follow: not an anchor or lookaround, nor an
// alternation with such a branch -- unless a capturing / named / option group encloses it; a
// concatenation always may ((?:^$)* is accepted, (?:^|a)* is not).
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

  // Every group and inline-flag scope parses through alt(): its depth bounds the recursion here
  // and in every later walk of the tree (nullable, compile, the destructor). A pattern nested
  // 10,000 deep overflowed the stack (session 22 audit); real pre-tokenizers nest 2-3 deep.
  static constexpr int kMaxNesting = 200;
  int nesting_ = 0;

  Node alt(Flags& f) {
    if (++nesting_ > kMaxNesting) fail(false, "groups nested deeper than " + std::to_string(kMaxNesting));
    Node n;
    n.k = Node::K::kAlt;
    n.kids.push_back(seq(f));
    while (eat('|')) n.kids.push_back(seq(f));
    --nesting_;
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
    // Stacked repeats ("a{1}{1}{1}...") nest in the tree like groups do, so they share the bound.
    for (int stacked = 0;; ++stacked) {
      if (nesting_ + stacked > kMaxNesting) fail(false, "repeats nested deeper than " + std::to_string(kMaxNesting));
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

}  // namespace

Node parse_pattern(std::string_view pattern, Program* prog) { return Parser(pattern, prog).parse(); }

}  // namespace rx
}  // namespace st::tok
