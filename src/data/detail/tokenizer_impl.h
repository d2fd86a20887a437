// Internal state of st::Tokenizer, shared by the tokenizer.json and GGUF constructors.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "data/detail/pretokenize.h"

namespace st::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

struct PreStep {
  enum class Kind { kSplitRegex, kSplitLiteral, kDigits, kByteLevel };
  Kind kind = Kind::kByteLevel;
  SplitRegex regex = SplitRegex::kGpt2;
  std::string literal;
  bool individual_digits = false;
  bool add_prefix_space = false;
  bool use_regex = false;
};

struct TokenizerImpl {
  // Vocabulary. Token strings are in the file's alphabet; bytes are what they decode to.
  std::vector<std::string> id_to_str;
  std::vector<std::string> id_to_bytes;
  std::vector<uint8_t> id_special;
  std::vector<uint8_t> id_added;  // may be shorter than id_to_str
  std::unordered_map<std::string, int32_t> str_to_id;
  std::unordered_map<std::string, int32_t> bytes_to_id;  // BPE tokens only (fully byte-mappable)
  std::array<int32_t, 256> byte_id{};                    // single-byte token ids, -1 if absent
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  bool ignore_merges = false;
  bool nfc = false;
  std::vector<PreStep> steps;
  std::vector<AddedToken> added;
  std::array<uint8_t, 256> added_first{};  // 1 if some added token starts with this byte
  std::vector<int32_t> prefix, suffix;  // post-processor template around a single sequence

  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  // Registers a BPE vocab entry (file alphabet `s`). Corruption on a duplicate id.
  Status add_vocab(const std::string& s, int32_t id, const std::string& what);
  // Registers an added token (may already be in the vocab with the same id).
  Status add_added(const AddedToken& t, const std::string& what);
  // Adds merge `rank` of (a, b); Corruption naming the merge if a token is not in the vocab.
  Status add_merge(const std::string& a, const std::string& b, int32_t rank, const std::string& what);
  // Call once everything is registered: byte table, added-token order.
  Status finish(const std::string& what);

  void encode(std::string_view text, std::vector<int32_t>* out) const;
  void bpe(std::string_view piece, std::vector<int32_t>* out) const;
};

}  // namespace st::tok
