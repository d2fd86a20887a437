#include "data/detail/pretokenize.h"

#include <algorithm>

#include "data/detail/unicode.h"

namespace st::tok {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

SplitRegex split_regex_from_pattern(const std::string& p) {
  if (p == kGpt2Pattern) return SplitRegex::kGpt2;
  if (p == kLlama3Pattern) return SplitRegex::kLlama3;
  if (p == kQwen2Pattern) return SplitRegex::kQwen2;
  if (p == kTekkenPattern) return SplitRegex::kTekken;
  return SplitRegex::kGeneral;
}

bool split_behavior_from_name(const std::string& name, SplitBehavior* out) {
  static const std::pair<const char*, SplitBehavior> kNames[] = {
      {"Isolated", SplitBehavior::kIsolated},
      {"Removed", SplitBehavior::kRemoved},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous}};
  for (const auto& [n, b] : kNames)
    if (name == n) {
      *out = b;
      return true;
    }
  return false;
}

namespace {

// The text as code points with their categories; matchers return a match length in code points
// (0 = no match at this position).
struct Text {
  std::vector<uint32_t> cp;
  std::vector<Cat> cat;
  std::vector<uint8_t> space;
  size_t n() const { return cp.size(); }
  bool letter(size_t i) const { return i < n() && is_letter(cat[i]); }
  bool number(size_t i) const { return i < n() && cat[i] == Cat::kN; }
  bool ws(size_t i) const { return i < n() && space[i]; }
  bool crlf(size_t i) const { return i < n() && (cp[i] == '\r' || cp[i] == '\n'); }
  // [^\s\p{L}\p{N}]
  bool punct(size_t i) const { return i < n() && !space[i] && !is_letter(cat[i]) && cat[i] != Cat::kN; }
  // [^\r\n\p{L}\p{N}]
  bool not_crlf_ln(size_t i) const { return i < n() && !crlf(i) && !is_letter(cat[i]) && cat[i] != Cat::kN; }
  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}]
  bool upper_ish(size_t i) const {
    return i < n() && (cat[i] == Cat::kLu || cat[i] == Cat::kLt || cat[i] == Cat::kLm || cat[i] == Cat::kLo ||
                       cat[i] == Cat::kM);
  }
  bool lower_ish(size_t i) const {
    return i < n() && (cat[i] == Cat::kLl || cat[i] == Cat::kLm || cat[i] == Cat::kLo || cat[i] == Cat::kM);
  }
};

template <typename Pred>
size_t run(const Text& /*t*/, size_t i, Pred p) {
  size_t j = i;
  while (p(j)) ++j;
  return j - i;
}

size_t lower_ascii(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d, optionally ASCII case-insensitive.
size_t contraction(const Text& t, size_t i, bool icase) {
  if (t.cp[i] != '\'' || i + 1 >= t.n()) return 0;
  auto c = [&](size_t k) -> uint32_t {
    if (k >= t.n()) return 0;
    if (!icase) return t.cp[k];
    // (?i): Oniguruma matches the case orbit; of the letters here only s has a non-ASCII member,
    // U+017F LONG S (U+212A KELVIN SIGN folds to k, which no contraction uses).
    return t.cp[k] == 0x17F ? 's' : static_cast<uint32_t>(lower_ascii(t.cp[k]));
  };
  uint32_t a = c(i + 1), b = c(i + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S) then \s+
size_t trailing_space(const Text& t, size_t i) {
  size_t r = run(t, i, [&](size_t k) { return t.ws(k); });
  if (r == 0) return 0;
  if (i + r == t.n() || r == 1) return r;  // at end: (?!\S) holds; r==1: falls to \s+
  return r - 1;                            // leave the last space to prefix the next word
}

// \s*[\r\n]+ : up to and including the last CR/LF of the whitespace run.
size_t space_newlines(const Text& t, size_t i) {
  size_t r = run(t, i, [&](size_t k) { return t.ws(k); });
  for (size_t k = r; k > 0; --k)
    if (t.crlf(i + k - 1)) return k;
  return 0;
}

size_t match_gpt2(const Text& t, size_t i) {
  if (size_t m = contraction(t, i, false)) return m;
  size_t sp = t.cp[i] == ' ' ? 1 : 0;
  if (size_t r = run(t, i + sp, [&](size_t k) { return t.letter(k); })) return sp + r;
  if (size_t r = run(t, i + sp, [&](size_t k) { return t.number(k); })) return sp + r;
  if (size_t r = run(t, i + sp, [&](size_t k) { return t.punct(k); })) return sp + r;
  return trailing_space(t, i);
}

// Shared tail of the Llama-3 / Qwen2 / tekken patterns, after the letter and digit branches.
size_t match_tail(const Text& t, size_t i, bool slash) {
  size_t sp = t.cp[i] == ' ' ? 1 : 0;
  if (size_t r = run(t, i + sp, [&](size_t k) { return t.punct(k); })) {
    size_t e = i + sp + r;
    while (t.crlf(e) || (slash && e < t.n() && t.cp[e] == '/')) ++e;
    return e - i;
  }
  if (size_t m = space_newlines(t, i)) return m;
  return trailing_space(t, i);
}

size_t match_llama3(const Text& t, size_t i, size_t max_digits) {
  if (size_t m = contraction(t, i, true)) return m;
  if (t.not_crlf_ln(i) && t.letter(i + 1)) return 1 + run(t, i + 1, [&](size_t k) { return t.letter(k); });
  if (size_t r = run(t, i, [&](size_t k) { return t.letter(k); })) return r;
  if (t.number(i)) {
    size_t r = run(t, i, [&](size_t k) { return t.number(k); });
    return r < max_digits ? r : max_digits;
  }
  return match_tail(t, i, false);
}

// [^\r\n\p{L}\p{N}]?[UP]*[LO]+ starting at s (after an optional prefix); 0 if no match.
size_t tekken_word1(const Text& t, size_t s) {
  size_t u = s + run(t, s, [&](size_t k) { return t.upper_ish(k); });
  for (size_t k = u + 1; k-- > s;) {  // backtrack [UP]* from longest
    if (t.lower_ish(k)) return k + run(t, k, [&](size_t q) { return t.lower_ish(q); });
  }
  return 0;
}

size_t match_tekken(const Text& t, size_t i) {
  bool pre = t.not_crlf_ln(i);
  for (size_t s : {i + (pre ? 1 : 0), i}) {
    if (size_t e = tekken_word1(t, s)) return e - i;
    if (!pre) break;
  }
  for (size_t s : {i + (pre ? 1 : 0), i}) {
    size_t u = run(t, s, [&](size_t k) { return t.upper_ish(k); });
    if (u) return s + u + run(t, s + u, [&](size_t k) { return t.lower_ish(k); }) - i;
    if (!pre) break;
  }
  if (t.number(i)) return 1;
  return match_tail(t, i, true);
}

size_t match_at(SplitRegex re, const Text& t, size_t i) {
  switch (re) {
    case SplitRegex::kGpt2: return match_gpt2(t, i);
    case SplitRegex::kLlama3: return match_llama3(t, i, 3);
    case SplitRegex::kQwen2: return match_llama3(t, i, 1);
    case SplitRegex::kTekken: return match_tekken(t, i);
    case SplitRegex::kGeneral: break;
  }
  return 0;
}

using Spans = std::vector<std::pair<size_t, size_t>>;  // byte offsets

// HF's NormalizedString::split over `matches` (sorted, non-overlapping byte spans).
void split_by(std::string_view text, const Spans& matches, SplitBehavior behavior, bool invert,
              std::vector<std::string_view>* out) {
  struct Piece {
    size_t s, e;
    bool m;
  };
  std::vector<Piece> all;  // matches and the gaps between them, as find_matches lists them
  size_t prev = 0;
  for (auto [s, e] : matches) {
    if (prev != s) all.push_back({prev, s, false});
    all.push_back({s, e, true});
    prev = e;
  }
  if (prev != text.size()) all.push_back({prev, text.size(), false});
  if (invert)
    for (Piece& p : all) p.m = !p.m;
  std::vector<Piece> acc;  // m now means "remove"
  bool prev_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Piece& p : all) acc.push_back({p.s, p.e, false});
      break;
    case SplitBehavior::kRemoved:
      for (const Piece& p : all) acc.push_back(p);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Piece& p : all) {
        if (p.m && !prev_match && !acc.empty()) acc.back().e = p.e;
        else acc.push_back({p.s, p.e, false});
        prev_match = p.m;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t k = all.size(); k-- > 0;) {
        const Piece& p = all[k];
        if (p.m && !prev_match && !acc.empty()) acc.back().s = p.s;
        else acc.push_back({p.s, p.e, false});
        prev_match = p.m;
      }
      std::reverse(acc.begin(), acc.end());
      break;
    case SplitBehavior::kContiguous:
      for (const Piece& p : all) {
        if (p.m == prev_match && !acc.empty()) acc.back().e = p.e;
        else acc.push_back({p.s, p.e, false});
        prev_match = p.m;
      }
      break;
  }
  for (const Piece& p : acc)
    if (!p.m && p.e > p.s) out->push_back(text.substr(p.s, p.e - p.s));
}

}  // namespace

void regex_split(SplitRegex re, const SplitPattern* general, std::string_view text, SplitBehavior behavior,
                 bool invert, std::vector<std::string_view>* out) {
  std::vector<size_t> offs;
  std::vector<uint32_t> cps = utf8_decode(text, &offs);
  offs.push_back(text.size());
  Spans matches;
  if (re == SplitRegex::kGeneral) {
    for (auto [s, e] : general->find_all(cps)) matches.emplace_back(offs[s], offs[e]);
  } else {
    Text t;
    t.cp = std::move(cps);
    t.cat.resize(t.n());
    t.space.resize(t.n());
    for (size_t i = 0; i < t.n(); ++i) {
      t.cat[i] = category(t.cp[i]);
      t.space[i] = is_space(t.cp[i]);
    }
    for (size_t i = 0; i < t.n();) {
      size_t m = match_at(re, t, i);
      if (m == 0) {
        ++i;
        continue;
      }
      matches.emplace_back(offs[i], offs[i + m]);
      i += m;
    }
  }
  split_by(text, matches, behavior, invert, out);
}

void literal_split(std::string_view lit, std::string_view text, SplitBehavior behavior, bool invert,
                   std::vector<std::string_view>* out) {
  Spans matches;
  if (lit.empty()) {
    std::vector<size_t> offs;
    utf8_decode(text, &offs);
    offs.push_back(text.size());
    for (size_t o : offs) matches.emplace_back(o, o);
  } else {
    for (size_t p = text.find(lit); p != std::string_view::npos; p = text.find(lit, p + lit.size()))
      matches.emplace_back(p, p + lit.size());
  }
  split_by(text, matches, behavior, invert, out);
}

void digits_split(bool individual, std::string_view text, std::vector<std::string_view>* out) {
  std::vector<size_t> offs;
  std::vector<uint32_t> cps = utf8_decode(text, &offs);
  size_t start = 0;
  bool in_digits = false;
  for (size_t i = 0; i < cps.size(); ++i) {
    bool d = is_number(cps[i]);
    bool boundary = i > start && (d != in_digits || (d && individual));
    if (boundary) {
      out->push_back(text.substr(offs[start], offs[i] - offs[start]));
      start = i;
    }
    in_digits = d;
  }
  if (start < cps.size()) out->push_back(text.substr(offs[start]));
}

const std::array<uint32_t, 256>& byte_to_unicode() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = keep ? static_cast<uint32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

int unicode_to_byte(uint32_t cp) {
  static const std::array<int, 0x144> inv = [] {
    std::array<int, 0x144> t{};
    t.fill(-1);
    const auto& fwd = byte_to_unicode();
    for (int b = 0; b < 256; ++b) t[fwd[b]] = b;
    return t;
  }();
  return cp < inv.size() ? inv[cp] : -1;
}

}  // namespace st::tok
