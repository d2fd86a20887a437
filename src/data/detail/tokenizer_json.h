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

}  // namespace st::tok
