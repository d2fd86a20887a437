// Internals of the general split regex (split_regex.h): the character classes and the program the
// parser (split_regex_parse.cc) emits and the matcher (split_regex_match.cc) runs.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "data/detail/unicode.h"

namespace st::tok::rx {

// One member of a character class: a code-point range, a set of general categories, or one of
// Oniguruma's Unicode shorthand sets; `neg` complements the member (\S, \P{L}, \p{^L} inside [...]).
struct ClassItem {
  enum class Kind : uint8_t { kRange, kGc, kSpace, kWord, kWordBare, kHex, kAscii, kAny };
  Kind kind = Kind::kRange;
  bool neg = false;
  uint32_t lo = 0, hi = 0;  // kRange
  uint32_t gc_mask = 0;     // kGc: bit (1 << Gc)
};

// A class matches a code point when any member does, the result complemented by `neg`; with `icase`
// the code point's case orbit is tried (Oniguruma: (?i)[k] matches K and U+212A KELVIN SIGN).
struct CharClass {
  std::vector<ClassItem> items;
  bool neg = false;
  bool icase = false;
};

// The text as the matcher sees it: code points with their general category, whitespace flag and
// simple case fold computed once.
struct Subject {
  std::span<const uint32_t> cp;  // the caller's code points (not copied)
  std::vector<Gc> gc;
  std::vector<uint8_t> space;
  size_t n() const { return cp.size(); }
};

enum class Op : uint8_t {
  kChar,      // a == code point
  kCharFold,  // simple_fold(code point) == a
  kClass,     // classes[a]
  kAny,       // any code point but '\n' (Oniguruma's '.')
  kAnyNl,     // any code point ((?m) '.')
  kSplit,     // try a, then b
  kJmp,       // go to a
  kMatch,     // success (of the main program or of a sub-program)
  kBol, kEol,            // ^ $ (line anchors, as Ruby and Oniguruma always are)
  kBos, kEos, kEosNl,    // \A \z \Z
  kWordB, kNotWordB,     // \b \B
  kLook,      // sub-program at a must (neg: must not) match at pos - behind; zero width
  kAtomic,    // sub-program at a: its first match, no backtracking into it ((?>...), possessive)
};

struct Inst {
  Op op = Op::kMatch;
  bool neg = false;      // kLook
  uint32_t a = 0, b = 0;
  uint32_t behind = 0;   // kLook: fixed length of a lookbehind (0: lookahead)
};

struct Program {
  std::vector<Inst> code;  // the main program starts at 0; sub-programs follow it
  std::vector<CharClass> classes;
  int depth = 0;           // deepest nesting of sub-programs (lookaround / atomic)
};

bool class_matches(const CharClass& c, const Subject& s, size_t i);
// Whether a member of `c` takes `cp` (no case orbit, `c.neg` not applied).
bool class_has(const CharClass& c, uint32_t cp);
// Oniguruma's Unicode \w has two definitions (checked code point by code point against HF):
// inside brackets ([\w], [\p{Word}]) the Unicode Word property -- Alphabetic, marks, Nd, Pc, which
// beside the letters and Nl takes the circled / squared Latin letters (So); outside brackets (\w,
// \W, \p{Word}, \b) that plus the Latin-1 No characters U+00B2 U+00B3 U+00B9 U+00BC-U+00BE.
bool is_word(uint32_t cp, Gc g, bool bare);

}  // namespace st::tok::rx
