// Pre-tokenizer building blocks: hand-written matchers for the exact split regexes used by
// the supported model families (Oniguruma semantics: ordered alternation, greedy quantifiers
// with backtracking), the Digits splitter and GPT-2's byte <-> unicode map.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace st::tok {

enum class SplitRegex {
  kGpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  // (?i:'s|...|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,   // as kLlama3 with \p{N} (one digit per piece)
  kTekken,  // Mistral tekken / o200k-style: case-aware letter runs, \p{N}, [\r\n/]* after punctuation
};

extern const char* const kGpt2Pattern;
extern const char* const kLlama3Pattern;
extern const char* const kQwen2Pattern;
extern const char* const kTekkenPattern;

// Maps a Split regex string from tokenizer.json to a matcher; Unimplemented names the pattern.
StatusOr<SplitRegex> split_regex_from_pattern(const std::string& pattern);

// Split with behavior Isolated: every match and every gap between matches becomes a piece.
// Appends pieces (views into `text`) to `out`.
void regex_split(SplitRegex re, std::string_view text, std::vector<std::string_view>* out);
// Literal-string Split (Isolated).
void literal_split(std::string_view lit, std::string_view text, std::vector<std::string_view>* out);
// Digits pre-tokenizer: numeric chars isolated one by one (individual) or as runs.
void digits_split(bool individual, std::string_view text, std::vector<std::string_view>* out);

// GPT-2 bytes_to_unicode: byte -> code point, and the inverse (-1 for unmapped code points < 0x144).
const std::array<uint32_t, 256>& byte_to_unicode();
int unicode_to_byte(uint32_t cp);

}  // namespace st::tok
