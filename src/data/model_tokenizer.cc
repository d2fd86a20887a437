#include "data/model_tokenizer.h"

#include "core/file.h"
#include "io/gguf_checkpoint.h"

namespace st {

StatusOr<Tokenizer> load_model_tokenizer(const std::string& model_path, int32_t* eot_id) {
  if (eot_id) *eot_id = -1;
  if (is_directory(model_path)) return Tokenizer::from_dir(model_path);
  ASSIGN_OR_RETURN(GgufCheckpoint g, GgufCheckpoint::open(model_path));
  ASSIGN_OR_RETURN(GgufTokenizerData d, g.tokenizer(), model_path);
  if (d.model != "gpt2")
    return Unimplemented(Str() << model_path << ": tokenizer.ggml.model '" << d.model
                               << "' (only byte-level BPE, 'gpt2', is supported)");
  GgufTokenizerParts p{d.tokens, d.merges, d.token_types, d.pre, d.bos_id, d.eos_id, d.pad_id, d.add_bos,
                       d.chat_template};
  if (eot_id) *eot_id = d.eot_id;
  return Tokenizer::from_gguf_parts(p);
}

}  // namespace st
