// Pre-tokenizer building blocks: hand-written matchers for the exact split regexes used by
// the supported model families (Oniguruma semantics: ordered alternation, greedy quantifiers
// with backtracking), any other pattern through the general matcher (split_regex.h), HF's Split
// behaviors, the Digits splitter and GPT-2's byte <-> unicode map.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "data/detail/split_regex.h"

namespace st::tok {

enum class SplitRegex {
  kGpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  // (?i:'s|...|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,   // as kLlama3 with \p{N} (one digit per piece)
  kTekken,  // Mistral tekken / o200k-style: case-aware letter runs, \p{N}, [\r\n/]* after punctuation
  kGeneral, // any other pattern: SplitPattern (split_regex.h)
};

// HF's SplitDelimiterBehavior: what becomes of a match and the text between matches.
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
// The name tokenizer.json uses ("Isolated", ...); nullopt-like false for an unknown name.
bool split_behavior_from_name(const std::string& name, SplitBehavior* out);

extern const char* const kGpt2Pattern;
extern const char* const kLlama3Pattern;
extern const char* const kQwen2Pattern;
extern const char* const kTekkenPattern;

// The hand-written matcher for a Split regex string from tokenizer.json, or kGeneral.
SplitRegex split_regex_from_pattern(const std::string& pattern);

// Split as HF's NormalizedString::split does: the matches (of `re`, or of `general` when re is
// kGeneral) and the gaps between them, flipped by `invert`, combined by `behavior`; empty pieces
// dropped. Appends pieces (views into `text`) to `out`.
void regex_split(SplitRegex re, const SplitPattern* general, std::string_view text, SplitBehavior behavior,
                 bool invert, std::vector<std::string_view>* out);
inline void regex_split(SplitRegex re, std::string_view text, std::vector<std::string_view>* out) {
  regex_split(re, nullptr, text, SplitBehavior::kIsolated, false, out);
}
// Split on a literal string (HF's String pattern: non-overlapping, left to right; the empty string
// matches empty at every character, as its escaped regex does).
void literal_split(std::string_view lit, std::string_view text, SplitBehavior behavior, bool invert,
                   std::vector<std::string_view>* out);
// Digits pre-tokenizer: numeric chars isolated one by one (individual) or as runs.
void digits_split(bool individual, std::string_view text, std::vector<std::string_view>* out);

// GPT-2 bytes_to_unicode: byte -> code point, and the inverse (-1 for unmapped code points < 0x144).
const std::array<uint32_t, 256>& byte_to_unicode();
int unicode_to_byte(uint32_t cp);

}  // namespace st::tok
