// BPE tokenizer compatible with HF `tokenizers` (tokenizer.json), byte for byte, in two kinds:
// - byte-level BPE: Llama-3, Qwen2/2.5/3, SmolLM/SmolLM2, GPT-2, Mistral tekken;
// - SentencePiece-style BPE (characters, `byte_fallback` to <0xXX> tokens, unk): Llama-2,
//   Mistral 7B v0.1-v0.3, Mixtral, TinyLlama. A tokenizer.json whose pre_tokenizer has no
//   ByteLevel is of this kind.
// Also constructible from the pieces a GGUF file stores (see from_gguf_parts): "gpt2" (byte-level)
// and "llama" (SentencePiece BPE: scored vocab, encoded exactly as sentencepiece does).
//
// Supported tokenizer.json components (anything else gives Unimplemented naming the component;
// a malformed entry of a supported one gives Corruption naming the file and the field):
//   model:          BPE: merges as "a b" strings or ["a","b"] pairs; ignore_merges; byte_fallback,
//                   unk_token, fuse_unk (byte-level: only with all 256 byte chars in the vocab,
//                   where they never fire). No continuing_subword_prefix, end_of_word_suffix or
//                   dropout.
//   normalizer:     null, NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend, Replace
//                   (String or Regex pattern), or a Sequence of those.
//   pre_tokenizer:  Split (the regexes of data/detail/pretokenize.h, any regex of the general
//                   matcher, or a literal String; every behavior, invert), Digits, ByteLevel
//                   (add_prefix_space, use_regex = GPT-2 regex), Metaspace (replacement,
//                   prepend_scheme always/first/never or add_prefix_space, split; not after
//                   ByteLevel), Whitespace, WhitespaceSplit, Punctuation, CharDelimiterSplit,
//                   BertPreTokenizer, or a Sequence of those.
//   post_processor: null, ByteLevel, TemplateProcessing ("single" template), RobertaProcessing,
//                   BertProcessing, or a Sequence of those.
//   decoder:        ByteLevel (byte-level models only), Replace (String), ByteFallback, Fuse, Strip,
//                   Metaspace, a Sequence of those, or null (token strings joined with " "), run
//                   on every token (added ones included) as HF runs them.
//   added_tokens:   matched before normalization (normalized:false) or after it (normalized:true,
//                   content normalized too), leftmost-longest; lstrip / rstrip / single_word honoured
//                   as HF's find_matches does (tests/data/tokenizer_config_variants_test.cc).
//
// Thread safety: encode/decode are const and may be called from several threads (the internal
// piece cache is in shards, each guarded by a mutex). Copies share the vocabulary and cache; the setters change
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

// What a GGUF file carries for a vocabulary of model "gpt2" (byte-level BPE) or "llama"
// (SentencePiece BPE).
//
// "gpt2": tokens in the byte-level alphabet plus merges. Token types: 3 -> special added token
// (matched on raw text), 4 -> non-special added token (matched after the normalizer), others ->
// vocab entries.
//
// "llama": tokens ("▁the", "<0x0A>", ...) with scores and types, no merges. Encoding equals
// sentencepiece's BPE (highest-scoring merged piece first, leftmost on ties; characters missing
// from the vocab -> <0xXX> byte tokens) on the text with ' ' -> "▁" and, when add_space_prefix,
// a "▁" before the text and after every special token (as llama.cpp and HF's legacy Llama
// tokenizer.json). Types: 1 normal (merge targets), 2 unknown and 3 control -> special added
// tokens, 4 user-defined -> non-special added token matched on raw text, 5 unused -> never
// produced, 6 byte -> "<0xXX>", all 256 required. Decoding: ▁ -> ' ', byte tokens -> bytes,
// one leading space dropped when add_space_prefix (HF's Replace/ByteFallback/Fuse/Strip).
struct GgufTokenizerParts {
  std::vector<std::string> tokens;      // tokenizer.ggml.tokens; index = id
  std::vector<std::string> merges;      // tokenizer.ggml.merges, "a b" form, index = rank ("gpt2")
  std::vector<int32_t> token_types;     // tokenizer.ggml.token_type (1 normal, 2 unknown, 3 control,
                                        // 4 user-defined, 5 unused, 6 byte); empty = all normal
                                        // ("gpt2" only: "llama" requires them)
  std::string pre;                      // tokenizer.ggml.pre ("gpt2"): a name data/detail/gguf_pre.cc
                                        // knows ("llama-bpe", "qwen2", "deepseek-llm", ...), else
                                        // Unimplemented
  int32_t bos_id = -1;                  // tokenizer.ggml.bos_token_id (-1 = none)
  int32_t eos_id = -1;                  // tokenizer.ggml.eos_token_id
  int32_t pad_id = -1;                  // tokenizer.ggml.padding_token_id
  bool add_bos = false;                 // tokenizer.ggml.add_bos_token: encode(kYes) prepends bos
  std::string chat_template;            // tokenizer.chat_template ("" if absent)
  std::string model = "gpt2";           // tokenizer.ggml.model: "gpt2" | "llama"; else Unimplemented
  std::vector<float> scores;            // tokenizer.ggml.scores ("llama": one finite score per token)
  bool add_space_prefix = true;         // tokenizer.ggml.add_space_prefix ("llama")
};

// The two HF tokenizer files a model directory holds (model_tokenizer.h gguf_hf_tokenizer_files).
struct HfTokenizerFiles {
  std::string tokenizer_json, tokenizer_config_json;
};

// The chat template a tokenizer directory holds, as Tokenizer::from_dir reads it (chat_template.jinja
// and additional_chat_templates/ over tokenizer_config.json's chat_template: tokenizer.cc Note
// [chat template files]), without reading the vocabulary: {text, where it came from}, text ""
// when there is none. Errors name the file.
struct DirChatTemplate {
  std::string text, origin;
  // The "tool_use" template beside the default (a list-form chat_template's entry, or
  // additional_chat_templates/tool_use.jinja): transformers renders a conversation given tools
  // with it. "" when there is none.
  std::string tool_use, tool_use_origin;
};
StatusOr<DirChatTemplate> read_dir_chat_template(const std::string& dir);

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
  // tokenizer.json, or a path ending in ".model": a sentencepiece model read as from_dir reads it
  // with no tokenizer_config.json.
  static StatusOr<Tokenizer> from_file(const std::string& tokenizer_json_path);
  // A HF model directory: tokenizer.json plus, when present, tokenizer_config.json (bos/eos/pad
  // token strings, chat_template) and generation_config.json (eos_token_id, first entry of a list).
  // Without tokenizer.json, a sentencepiece BPE tokenizer.model is read as transformers' LlamaTokenizer
  // reads it (data/detail/tokenizer_spm_model.cc Note [tokenizer.model as transformers reads it]).
  static StatusOr<Tokenizer> from_dir(const std::string& dir);
  // Builds the tokenizer from GGUF metadata (see GgufTokenizerParts). Merges and tokens are
  // validated like tokenizer.json's (Corruption naming the merge index on a bad entry); for
  // "llama", scores (count, finite) and the byte tokens too (Corruption naming the key).
  static StatusOr<Tokenizer> from_gguf_parts(const GgufTokenizerParts& parts);

  // Text -> ids, as HF `tokenizer.encode(text, add_special_tokens=...)`. Never fails: invalid
  // UTF-8 bytes are tokenized as raw bytes.
  std::vector<int32_t> encode(std::string_view text, AddSpecial add = AddSpecial::kNo) const;
  // Ids -> text, as HF `tokenizer.decode(ids, skip_special_tokens=...)`: the file's decoder chain
  // over every token (ByteLevel: lossy UTF-8, invalid sequences become U+FFFD; ByteFallback: U+FFFD
  // per byte of an invalid run); a GGUF byte-level vocab decodes with ByteLevel. Unknown ids
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
  // Where the chat template came from, for its error messages ("DIR/tokenizer_config.json
  // chat_template", "F.gguf tokenizer.chat_template").
  const std::string& chat_template_origin() const { return chat_template_origin_; }
  void set_special_ids(int32_t bos, int32_t eos, int32_t pad);
  // Replaces the templates: the tool_use one too (set it after, if there is one).
  void set_chat_template(std::string tmpl, std::string origin = "tokenizer chat_template");
  // The "tool_use" template (DirChatTemplate::tool_use); "" when there is none.
  const std::string& tool_use_template() const { return tool_use_; }
  const std::string& tool_use_origin() const { return tool_use_origin_; }
  void set_tool_use_template(std::string tmpl, std::string origin) {
    tool_use_ = std::move(tmpl);
    tool_use_origin_ = std::move(origin);
  }

 private:
  std::shared_ptr<tok::TokenizerImpl> impl_;
  int32_t bos_ = -1, eos_ = -1, pad_ = -1;
  std::string chat_template_;
  std::string chat_template_origin_ = "tokenizer chat_template";
  std::string tool_use_, tool_use_origin_;
};

}  // namespace st
