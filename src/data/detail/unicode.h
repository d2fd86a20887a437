// Unicode helpers for the tokenizer: UTF-8 <-> code points, the categories the pre-tokenizer
// regexes use (\p{L} and its subcategories, \p{M}, \p{N}, \s) and NFC normalization.
// Tables come from tools/tok/gen_unicode_tables.py (Python's unicodedata).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace st::tok {

enum class Cat : uint8_t { kOther = 0, kLu, kLl, kLt, kLm, kLo, kM, kN };

Cat category(uint32_t cp);
inline bool is_letter(Cat c) { return c >= Cat::kLu && c <= Cat::kLo; }
inline bool is_letter(uint32_t cp) { return is_letter(category(cp)); }
inline bool is_number(uint32_t cp) { return category(cp) == Cat::kN; }
// Oniguruma's Unicode \s: U+0009..U+000D, U+0085 and general categories Zs, Zl, Zp.
bool is_space(uint32_t cp);

// The full Unicode general category (values as tools/tok/gen_unicode_tables.py numbers them; kCn is
// unassigned). Used by the general split regexes' \p{...} (split_regex.h).
enum class Gc : uint8_t {
  kCn = 0, kLu, kLl, kLt, kLm, kLo, kMn, kMc, kMe, kNd, kNl, kNo, kPc, kPd, kPs, kPe, kPi, kPf, kPo,
  kSm, kSc, kSk, kSo, kZs, kZl, kZp, kCc, kCf, kCs, kCo,
};
constexpr int kGcCount = 30;
Gc general_category(uint32_t cp);
// Simple case folding (one code point to one); unchanged where Unicode has none.
uint32_t simple_fold(uint32_t cp);
// Every code point whose simple fold equals simple_fold(cp), cp included ("case orbit": s, S and
// U+017F LONG S; k, K and U+212A KELVIN SIGN). At most a handful.
std::vector<uint32_t> case_orbit(uint32_t cp);
// Full case folding to several code points (U+00DF -> "ss", U+FB01 -> "fi"): true for such cp.
bool folds_to_several(uint32_t cp);
bool any_folds_to_several(uint32_t lo, uint32_t hi);  // some cp in [lo, hi]
// Every such multi-code-point fold, each as its code points (simple-folded, so "ss" not "SS").
const std::vector<std::vector<uint32_t>>& multi_folds();
// The code points that fold to several (U+00DF, U+FB01, ...).
std::vector<uint32_t> multi_fold_chars();

// Decodes UTF-8. Invalid bytes decode to U+FFFD one byte at a time (never fails);
// `byte_offsets` (optional) receives the start offset of each code point plus a final end offset.
std::vector<uint32_t> utf8_decode(std::string_view s, std::vector<size_t>* byte_offsets = nullptr);
void utf8_append(uint32_t cp, std::string* out);
// True if `s` is well-formed UTF-8.
bool utf8_valid(std::string_view s);

// Unicode Normalization Form C. Pure ASCII input is returned unchanged without table lookups.
std::string nfc(std::string_view s);
// Forms D, KD and KC (HF's NFD / NFKD / NFKC normalizers), and Rust's per-character
// char::to_lowercase (HF's Lowercase normalizer: full mappings, no final-sigma context).
std::string nfd(std::string_view s);
std::string nfkd(std::string_view s);
std::string nfkc(std::string_view s);
std::string lowercase(std::string_view s);

}  // namespace st::tok

namespace st::tok {
// Decodes bytes as UTF-8 the way Rust's String::from_utf8_lossy does: each maximal invalid
// subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view s);
}  // namespace st::tok
