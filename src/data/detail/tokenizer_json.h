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
// The pre-tokenizer (and normalizer, ignore_merges) of a GGUF byte-level vocabulary, by its
// tokenizer.ggml.pre name (gguf_pre.cc Note [GGUF pre-tokenizers]).
Status gguf_pre_tokenizer(const std::string& name, TokenizerImpl* t, const std::string& what);
// Every tokenizer.ggml.pre name gguf_pre_tokenizer knows.
std::vector<std::string> gguf_pre_names();

}  // namespace st::tok
