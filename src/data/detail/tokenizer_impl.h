// Internal state of st::Tokenizer, shared by the tokenizer.json and GGUF constructors.
//
// Two model kinds share the BPE merge engine (bpe.cc):
// - kByteLevel: GPT-2 style. Pieces are mapped to bytes; every byte has a token; vocab strings
//   are in the bytes_to_unicode alphabet. Decoding runs the file's decoder chain (ByteLevel in
//   practice; implied for a GGUF vocab).
// - kChars: SentencePiece style (Llama-2, Mistral, TinyLlama; HF's `byte_fallback` BPE). The
//   initial symbols are the UTF-8 characters of a piece, looked up as vocab strings; a character
//   missing from the vocab becomes its <0xXX> byte tokens (byte_fallback) or <unk>, exactly as
//   HF's BPE::merge_word (Note [unk order]). Decoding runs the configured decoder chain (decode.cc).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
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

// One normalizer, applied in order to the text between added tokens (and to the content of
// `normalized` added tokens, as HF does).
struct NormStep {
  enum class Kind { kNfc, kPrepend, kReplace, kNfd, kNfkd, kNfkc, kLowercase, kStrip, kStripAccents };
  Kind kind = Kind::kNfc;
  std::string text;     // kPrepend: what is prepended (only to non-empty text); kReplace: the pattern
  std::string content;  // kReplace: the replacement of every non-overlapping occurrence, left to right
  std::shared_ptr<const SplitPattern> regex;  // kReplace with a Regex pattern (else `text` is literal)
  bool left = true, right = true;             // kStrip: which ends lose their whitespace
};
inline NormStep norm_step(NormStep::Kind kind, std::string text = "", std::string content = "") {
  NormStep n;
  n.kind = kind;
  n.text = std::move(text);
  n.content = std::move(content);
  return n;
}

enum class PrependScheme { kAlways, kFirst, kNever };

struct PreStep {
  enum class Kind { kSplitRegex, kSplitLiteral, kDigits, kByteLevel, kMetaspace };
  Kind kind = Kind::kByteLevel;
  SplitRegex regex = SplitRegex::kGpt2;
  std::shared_ptr<const SplitPattern> pattern;  // kSplitRegex with regex == kGeneral
  SplitBehavior behavior = SplitBehavior::kIsolated;  // kSplitRegex / kSplitLiteral
  bool invert = false;                                // kSplitRegex / kSplitLiteral
  std::string literal;          // kSplitLiteral; kMetaspace: the replacement char (UTF-8)
  bool individual_digits = false;
  bool add_prefix_space = false;
  bool use_regex = false;
  PrependScheme prepend = PrependScheme::kAlways;  // kMetaspace
  bool split = true;                               // kMetaspace: split before every replacement char
};

// One decoder (HF decoders/*: each maps a list of token strings to another). Both model kinds run
// the configured chain; a byte-level model without one (GGUF) decodes with ByteLevel.
struct DecStep {
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kByteLevel };
  Kind kind = Kind::kFuse;
  std::string text;     // kReplace: the pattern; kStrip / kMetaspace: the char (UTF-8)
  std::string content;  // kReplace: the replacement
  size_t start = 0, stop = 0;  // kStrip: at most this many chars removed at each end of each token
  bool drop_first = false;     // kMetaspace: replacement chars of token 0 vanish (prepend_scheme != never)
};

enum class ModelKind { kByteLevel, kChars };

struct TokenizerImpl {
  ModelKind model = ModelKind::kByteLevel;
  // Vocabulary. Token strings are in the file's alphabet; bytes are what they decode to.
  std::vector<std::string> id_to_str;
  std::vector<std::string> id_to_bytes;
  std::vector<uint8_t> id_special;
  std::vector<uint8_t> id_added;  // may be shorter than id_to_str
  std::unordered_map<std::string, int32_t> str_to_id;
  // The model vocab (no added tokens): key = the bytes a token stands for (kByteLevel, only
  // fully byte-mappable tokens) or its string (kChars).
  std::unordered_map<std::string, int32_t> bytes_to_id;
  std::array<int32_t, 256> byte_id{};                    // kByteLevel: single-byte token ids, -1 if absent
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  bool ignore_merges = false;
  bool byte_level_unk = false;  // kByteLevel with a model.unk_token (only checked: see tokenizer_json.cc)
  bool track_lead = false;      // a Metaspace step with prepend_scheme "first" (set by finish())
  std::vector<NormStep> norm;
  std::vector<PreStep> steps;
  std::vector<AddedToken> added;
  std::array<uint8_t, 256> added_first{};  // 1 if some added token starts with this byte
  std::vector<int32_t> prefix, suffix;  // post-processor template around a single sequence

  std::vector<DecStep> decoders;
  bool decoder_null = false;   // tokenizer.json "decoder": null: tokens joined with " " (HF's default)

  // kChars only.
  bool byte_fallback = false;  // unknown chars -> <0xXX> tokens when all their bytes have one
  bool fuse_unk = false;       // consecutive unknown chars -> one unk
  int32_t unk_id = -1;         // model.unk_token (-1: unknown chars are dropped, as HF does)
  std::array<int32_t, 256> fallback_id{};  // id of "<0xXX>" (uppercase hex), -1 if absent

  // Note [piece cache]: the BPE result of each short piece (<= 128 bytes), in two levels. The
  // dataset loader encodes records on every core at once (data/datasets.cc Note [parallel
  // tokenization]): a shared map behind one lock was a queue, and behind 64 shard locks still one
  // for the few pieces every text is full of (" the", ","), whose shards every thread wants. So
  // each thread first looks in its own direct-mapped table (no lock), tied to this tokenizer by
  // `uid`, and only its misses go to the shared map, in shards by the hash's high bits. A
  // tokenizer never changes after it is built, so a cached piece is never stale.
  const uint64_t uid = next_uid();
  static uint64_t next_uid();
  static constexpr size_t kCacheShards = 64;
  struct CacheShard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };
  mutable std::array<CacheShard, kCacheShards> cache;

  // Registers a BPE vocab entry (file alphabet `s`). Corruption on a duplicate id. A string seen
  // before encodes to its first id, or with `last_wins` to this one (Note [duplicate GGUF tokens]).
  Status add_vocab(const std::string& s, int32_t id, const std::string& what, bool last_wins = false);
  // Registers an added token (may already be in the vocab with the same id).
  Status add_added(const AddedToken& t, const std::string& what);
  // Adds merge `rank` of (a, b); Corruption naming the merge if a token is not in the vocab.
  Status add_merge(const std::string& a, const std::string& b, int32_t rank, const std::string& what);
  // Call once everything is registered: byte tables, added-token order.
  Status finish(const std::string& what);

  // The normalizer chain. `lead` (optional): how many leading bytes of the result come from the
  // first char of `s` (encode.cc Note [lead]; Metaspace "first" needs it).
  std::string normalize(std::string_view s, size_t* lead = nullptr) const;
  std::string apply_norm(const NormStep& n, const std::string& r) const;
  void encode(std::string_view text, std::vector<int32_t>* out) const;
  // The pre-tokenizer steps on one normalized segment (between added tokens), as HF's
  // pre_tokenize_str: the pieces BPE sees. `lead`: how many leading bytes of `text` come from
  // input offset 0 (encode.cc Note [lead]; Metaspace "first" prepends to such pieces only).
  void pre_tokenize(std::string_view text, size_t lead, std::vector<std::string>* pieces) const;
  void bpe(std::string_view piece, std::vector<int32_t>* out) const;
  // bpe() through the piece cache (Note [piece cache]).
  void bpe_cached(const std::string& piece, std::vector<int32_t>* out) const;
  // ids -> text through the decoder chain, as HF's Tokenizer::decode.
  std::string decode_chars(std::span<const int32_t> ids, bool skip_special) const;

 private:
  void bpe_bytes(std::string_view piece, std::vector<int32_t>* out) const;
  void bpe_chars(std::string_view piece, std::vector<int32_t>* out) const;
};

}  // namespace st::tok
