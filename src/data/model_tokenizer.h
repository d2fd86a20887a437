// The tokenizer that belongs to a model path, whatever its form: an HF directory (tokenizer.json
// + tokenizer_config.json) or a .gguf file (tokenizer.ggml.* metadata). A layer-store directory
// made by `streamtune shard` is not a model path here (it holds no tokenizer).
#pragma once

#include <string>

#include "core/status.h"
#include "data/tokenizer.h"

namespace st {

// `eot_id` (optional) receives the GGUF end-of-turn id, or -1.
StatusOr<Tokenizer> load_model_tokenizer(const std::string& model_path, int32_t* eot_id = nullptr);

}  // namespace st
