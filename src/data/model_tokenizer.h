// The tokenizer that belongs to a model path, whatever its form: an HF directory (tokenizer.json
// + tokenizer_config.json) or a .gguf file (tokenizer.ggml.* metadata, model "gpt2" or "llama").
// A layer-store directory made by `streamtune shard` is not a model path here (it holds no
// tokenizer).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "data/tokenizer.h"
#include "io/gguf.h"

namespace st {

// `eot_id` (optional) receives the GGUF end-of-turn id, or -1. Errors name the path.
StatusOr<Tokenizer> load_model_tokenizer(const std::string& model_path, int32_t* eot_id = nullptr);

// The tokenizer of an opened GGUF file (only its metadata is read); as load_model_tokenizer.
StatusOr<Tokenizer> gguf_file_tokenizer(const GgufFile& file, int32_t* eot_id = nullptr);

// tokenizer.json + tokenizer_config.json for an opened GGUF file's vocabulary, as the HF tokenizer
// it was converted from has them (data/detail/tokenizer_export.cc); for `merge` of a GGUF base.
StatusOr<HfTokenizerFiles> gguf_hf_tokenizer_files(const GgufFile& file);

// The tokenizer files of `model_path` written into `dir`, as HF's save_pretrained leaves them beside
// an adapter: an HF directory's tokenizer files copied (tokenizer.json, tokenizer.model,
// tokenizer_config.json, special_tokens_map.json, added_tokens.json, chat_template.jinja and
// additional_chat_templates/), a GGUF file's written from its vocabulary. A non-empty
// `chat_template` becomes the tokenizer's template: in tokenizer_config.json's chat_template and in
// chat_template.jinja (transformers before 4.47 reads the first, later ones let the second win),
// with no additional_chat_templates beside it. Each file is written atomically. Returns the names
// written.
StatusOr<std::vector<std::string>> save_model_tokenizer(const std::string& model_path, const std::string& dir,
                                                        const std::string& chat_template = "");

}  // namespace st
