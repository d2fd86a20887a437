// Builders of TokenizerImpl from tokenizer.json and from GGUF metadata.
#pragma once

#include <memory>
#include <string>

#include "core/json.h"
#include "data/detail/tokenizer_impl.h"
#include "data/tokenizer.h"
#include "io/spm_model.h"

namespace st::tok {

StatusOr<std::shared_ptr<TokenizerImpl>> impl_from_json(const Json& j, const std::string& what);
StatusOr<std::shared_ptr<TokenizerImpl>> impl_from_gguf(const GgufTokenizerParts& p);

// A tokenizer.json "pre_tokenizer" object: appends its steps to t->steps.
Status parse_pre_tokenizer(const Json& j, TokenizerImpl* t, const std::string& what);
// The HF pipeline behind a GGUF byte-level vocabulary's tokenizer.ggml.pre name (gguf_pre.cc
// Note [GGUF pre-tokenizers]): the tokenizer.json pre_tokenizer, an NFC normalizer or none, and
// the BPE model's ignore_merges. Unimplemented (naming `what`) for an unknown name.
struct GgufPreRecipe {
  Json pre;
  bool nfc = false;
  bool ignore_merges = false;
};
StatusOr<GgufPreRecipe> gguf_pre_recipe(const std::string& name, const std::string& what);
// The same, applied to `t`.
Status gguf_pre_tokenizer(const std::string& name, TokenizerImpl* t, const std::string& what);
// tokenizer.json and tokenizer_config.json for a GGUF vocabulary (tokenizer_export.cc): what the
// HF tokenizer it was converted from holds, so a merged GGUF base loads in transformers.
StatusOr<HfTokenizerFiles> export_hf_tokenizer(const GgufTokenizerParts& p, const std::string& what);
// What tokenizer_config.json says of a LlamaTokenizer built from tokenizer.model (transformers'
// defaults where a key is absent; an empty token string: none).
struct SpmLlamaOptions {
  bool legacy = false;
  bool add_prefix_space = true;
  bool add_bos = false, add_eos = false;  // transformers 5.x: no bos unless add_bos_token is true
  std::string unk = "<unk>", bos = "<s>", eos = "</s>";
};
// The tokenizer.json transformers builds from a sentencepiece BPE model (tokenizer_spm_model.cc
// Note [tokenizer.model as transformers reads it]); refuses other model types by name.
StatusOr<std::string> spm_llama_tokenizer_json(const SpmModel& m, const SpmLlamaOptions& o, const std::string& what);
// Every tokenizer.ggml.pre name gguf_pre_tokenizer knows.
std::vector<std::string> gguf_pre_names();

}  // namespace st::tok
