// The general split regex: a tokenizer.json `Split` pattern (or a GGUF pre-tokenizer's) compiled
// as HF `tokenizers` compiles it -- Oniguruma's syntax and Unicode semantics -- and run by a
// backtracking matcher over code points (Note [split regex]). Files: split_regex_parse.cc (pattern
// -> syntax tree, split_regex_ast.h), split_regex_compile.cc (tree -> program, split_regex_impl.h),
// split_regex_match.cc (the matcher).
//
// Note [split regex]
// HF tokenizers hands a Split's pattern to Oniguruma and takes its matches from onig's find_iter.
// The four patterns of the supported families have hand-written matchers (pretokenize.cc); any
// other pattern (DeepSeek's, GPT-4o's, a fine-tune's own) runs here. Supported: literals, '.',
// classes with ranges, negation, nesting (a union) and escapes, \d \D \s \S \w \W \h \H, \p{..}
// \P{..} \p{^..} for the general categories (long or short names, Oniguruma's loose matching) and
// Any, ASCII, Digit, Space, Word, XDigit; groups (capturing, (?:), named), alternation, * + ?
// {n} {n,} {,m} {n,m} greedy, lazy (?), possessive (+ after * + ?); (?i) (?m) (?-i) and their
// group forms (simple case folding: a code point matches its whole case orbit); ^ $ \A \z \Z \b
// \B; lookahead, fixed-length lookbehind, atomic groups. Oniguruma's quirks that the oracle showed
// are kept: \w outside brackets also takes U+00B2 U+00B3 U+00B9 U+00BC-BE; (?i) widens \p{Lu} only
// inside brackets; a(?i)b|c is a(?i:b|c); ^ never matches at the very end; which targets a
// quantifier may follow. Refused as Unimplemented, naming the construct, never approximated:
// backreferences, script properties (\p{Han}), POSIX brackets, class intersections, (?x), \K \R
// \X, multi-character case folds ((?i)ss vs U+00DF, or a (?i) class holding such a character),
// and repeats of something that can match empty (Oniguruma ends those loops on an empty
// iteration; this matcher would backtrack into it).
//
// The matcher marks each (instruction, position) it visits, as RE2's BitState does: with no
// backreferences a state that failed once fails again, so a search costs at most
// instructions x positions however the pattern nests (a hostile `(a+)+b` stays polynomial, where
// Oniguruma gives up at its retry limit). Memory: a bitmap of at most 32 MiB, then a hash set of
// the states visited.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace st::tok {

namespace rx {
struct Program;
struct Subject;
}  // namespace rx

class SplitPattern {
 public:
  // Compiles `pattern` (UTF-8). InvalidArgument for a malformed pattern, Unimplemented for a
  // construct outside the subset above; both name the construct and its code-point offset.
  static StatusOr<std::shared_ptr<const SplitPattern>> compile(std::string_view pattern);
  ~SplitPattern();

  // The matches of the pattern in `cps`, as [start, end) code-point offsets, exactly as onig's
  // find_iter yields them to HF's Split: leftmost-first matches left to right, an empty match
  // right where the previous match ended skipped.
  std::vector<std::pair<size_t, size_t>> find_all(const std::vector<uint32_t>& cps) const;

  const std::string& pattern() const { return pattern_; }
  size_t program_size() const;

 private:
  SplitPattern() = default;
  std::string pattern_;
  std::unique_ptr<rx::Program> prog_;
};

}  // namespace st::tok
