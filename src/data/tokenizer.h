// Byte-level BPE tokenizer compatible with HF `tokenizers` (tokenizer.json) for the Llama-3,
// Qwen2/2.5/3, SmolLM/SmolLM2, GPT-2 and Mistral tekken families, and constructible from the
// pieces a GGUF file stores (see from_gguf_parts).
//
// Supported tokenizer.json components (anything else gives Unimplemented naming the component):
//   model:          BPE (byte-level: no continuing_subword_prefix / end_of_word_suffix / byte_fallback);
//                   merges as "a b" strings or ["a","b"] pairs; ignore_merges.
//   normalizer:     null, NFC, or a Sequence of those.
//   pre_tokenizer:  Sequence of Split (the regexes of tokenize/detail/pretokenize.h or a literal
//                   String; behavior Isolated, invert false), Digits, ByteLevel (add_prefix_space,
//                   use_regex = GPT-2 regex).
//   post_processor: null, ByteLevel, TemplateProcessing ("single" template), or a Sequence of those.
//   decoder:        ByteLevel (or null / Sequence, decoding is always byte-level).
//   added_tokens:   matched before normalization (normalized:false) or after it (normalized:true),
//                   leftmost-longest; lstrip / rstrip / single_word honoured.
//
// Thread safety: encode/decode are const and may be called from several threads (the internal
// piece cache is guarded by a mutex). Copies share the vocabulary and cache; the setters change
// only the copy they are called on.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace st {

namespace tok {
struct TokenizerImpl;
}

enum class AddSpecial { kNo, kYes };     // add the post-processor's template tokens (e.g. BOS)
enum class SkipSpecial { kNo, kYes };    // drop `special` added tokens when decoding

// What a GGUF file carries for a "gpt2"-model (byte-level BPE) vocabulary.
struct GgufTokenizerParts {
  std::vector<std::string> tokens;      // tokenizer.ggml.tokens; index = id; byte-level alphabet
  std::vector<std::string> merges;      // tokenizer.ggml.merges, "a b" form, index = rank
  std::vector<int32_t> token_types;     // tokenizer.ggml.token_type (1 normal, 2 unknown, 3 control,
                                        // 4 user-defined, 5 unused, 6 byte); empty = all normal.
                                        // 3 -> special added token (matched on raw text),
                                        // 4 -> non-special added token (matched after the normalizer).
  std::string pre;                      // tokenizer.ggml.pre: "llama-bpe"/"llama3", "qwen2",
                                        // "smollm", "gpt2", "tekken"; other values -> Unimplemented
  int32_t bos_id = -1;                  // tokenizer.ggml.bos_token_id (-1 = none)
  int32_t eos_id = -1;                  // tokenizer.ggml.eos_token_id
  int32_t pad_id = -1;                  // tokenizer.ggml.padding_token_id
  bool add_bos = false;                 // tokenizer.ggml.add_bos_token: encode(kYes) prepends bos
  std::string chat_template;            // tokenizer.chat_template ("" if absent)
};

class Tokenizer {
 public:
  Tokenizer();
  ~Tokenizer();
  Tokenizer(const Tokenizer&);
  Tokenizer& operator=(const Tokenizer&);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Parses tokenizer.json text. `what` names the source in errors.
  static StatusOr<Tokenizer> from_json(std::string_view json_text, const std::string& what);
  static StatusOr<Tokenizer> from_file(const std::string& tokenizer_json_path);
  // A HF model directory: tokenizer.json plus, when present, tokenizer_config.json (bos/eos/pad
  // token strings, chat_template) and generation_config.json (eos_token_id, first entry of a list).
  static StatusOr<Tokenizer> from_dir(const std::string& dir);
  // Builds the tokenizer from GGUF metadata (see GgufTokenizerParts). Merges and tokens are
  // validated like tokenizer.json's (Corruption naming the merge index on a bad entry).
  static StatusOr<Tokenizer> from_gguf_parts(const GgufTokenizerParts& parts);

  // Text -> ids, as HF `tokenizer.encode(text, add_special_tokens=...)`. Never fails: invalid
  // UTF-8 bytes are tokenized as raw bytes.
  std::vector<int32_t> encode(std::string_view text, AddSpecial add = AddSpecial::kNo) const;
  // Ids -> text (ByteLevel decoder, lossy UTF-8: invalid sequences become U+FFFD). Unknown ids
  // (>= vocab_size or negative) are skipped.
  std::string decode(std::span<const int32_t> ids, SkipSpecial skip = SkipSpecial::kNo) const;

  // max id + 1 over the model vocab and the added tokens.
  int64_t vocab_size() const;
  // Token string as written in the vocab / added_tokens (byte-level alphabet for BPE tokens).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // "" for an id that has no token.
  const std::string& id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;

  int32_t bos_id() const;   // -1 when unknown
  int32_t eos_id() const;
  int32_t pad_id() const;   // -1 when unknown
  const std::string& chat_template() const;  // "" when unknown
  void set_special_ids(int32_t bos, int32_t eos, int32_t pad);
  void set_chat_template(std::string tmpl);

 private:
  std::shared_ptr<tok::TokenizerImpl> impl_;
  int32_t bos_ = -1, eos_ = -1, pad_ = -1;
  std::string chat_template_;
};

}  // namespace st
