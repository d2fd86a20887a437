// Builders of TokenizerImpl from tokenizer.json and from GGUF metadata.
#pragma once

#include <memory>
#include <string>

#include "core/json.h"
#include "data/detail/tokenizer_impl.h"
#include "data/tokenizer.h"

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
// Every tokenizer.ggml.pre name gguf_pre_tokenizer knows.
std::vector<std::string> gguf_pre_names();

}  // namespace st::tok
