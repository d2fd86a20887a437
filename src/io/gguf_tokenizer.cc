// read_gguf_tokenizer: tokenizer.ggml.* keys (formats.md §4.8) into GgufTokenizerData.
#include <cmath>
#include <limits>

#include "io/gguf_checkpoint.h"

namespace st {
namespace {

// An optional token id key: -1 when absent; InvalidArgument when outside [0, vocab).
StatusOr<int32_t> token_id(const GgufFile& f, const std::string& key, size_t vocab) {
  ASSIGN_OR_RETURN(int64_t id, f.get_int_or(key, -1));
  if (id == -1) return -1;
  if (id < 0 || static_cast<uint64_t>(id) >= vocab) {
    return InvalidArgument(Str() << "gguf " << f.path() << ": key '" << key << "' = " << id << " is outside the "
                                 << vocab << "-token vocabulary");
  }
  return static_cast<int32_t>(id);
}

StatusOr<bool> bool_or(const GgufFile& f, const std::string& key, bool dflt) {
  if (!f.has(key)) return dflt;
  return f.get_bool(key);
}

}  // namespace

StatusOr<GgufTokenizerData> read_gguf_tokenizer(const GgufFile& f) {
  GgufTokenizerData d;
  ASSIGN_OR_RETURN(d.model, f.get_string_or("tokenizer.ggml.model", ""));
  ASSIGN_OR_RETURN(d.pre, f.get_string_or("tokenizer.ggml.pre", ""));
  ASSIGN_OR_RETURN(d.tokens, f.get_string_array("tokenizer.ggml.tokens"));
  if (d.tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument(Str() << "gguf " << f.path() << ": vocabulary too large");
  }
  if (f.has("tokenizer.ggml.merges")) {
    ASSIGN_OR_RETURN(d.merges, f.get_string_array("tokenizer.ggml.merges"));
  }
  if (f.has("tokenizer.ggml.token_type")) {
    ASSIGN_OR_RETURN(std::vector<int64_t> types, f.get_int_array("tokenizer.ggml.token_type"));
    if (types.size() != d.tokens.size()) {
      return InvalidArgument(Str() << "gguf " << f.path() << ": key 'tokenizer.ggml.token_type' has " << types.size()
                                   << " entries for " << d.tokens.size() << " tokens");
    }
    for (int64_t t : types) {
      if (t < 0 || t > 6) {
        return InvalidArgument(Str() << "gguf " << f.path() << ": key 'tokenizer.ggml.token_type': value " << t);
      }
      d.token_types.push_back(static_cast<int32_t>(t));
    }
  }
  if (f.has("tokenizer.ggml.scores")) {
    ASSIGN_OR_RETURN(std::vector<double> scores, f.get_float_array("tokenizer.ggml.scores"));
    if (scores.size() != d.tokens.size()) {
      return InvalidArgument(Str() << "gguf " << f.path() << ": key 'tokenizer.ggml.scores' has " << scores.size()
                                   << " entries for " << d.tokens.size() << " tokens");
    }
    for (size_t i = 0; i < scores.size(); ++i) {
      if (!std::isfinite(scores[i]) || std::fabs(scores[i]) > std::numeric_limits<float>::max()) {
        return InvalidArgument(Str() << "gguf " << f.path() << ": key 'tokenizer.ggml.scores': entry " << i << " = "
                                     << scores[i] << " is not a finite f32");
      }
      d.scores.push_back(static_cast<float>(scores[i]));
    }
  }
  const size_t v = d.tokens.size();
  ASSIGN_OR_RETURN(d.bos_id, token_id(f, "tokenizer.ggml.bos_token_id", v));
  ASSIGN_OR_RETURN(d.eos_id, token_id(f, "tokenizer.ggml.eos_token_id", v));
  ASSIGN_OR_RETURN(d.unk_id, token_id(f, "tokenizer.ggml.unknown_token_id", v));
  ASSIGN_OR_RETURN(d.pad_id, token_id(f, "tokenizer.ggml.padding_token_id", v));
  ASSIGN_OR_RETURN(d.eot_id, token_id(f, "tokenizer.ggml.eot_token_id", v));
  // llama.cpp adds BOS by default for SentencePiece vocabularies.
  ASSIGN_OR_RETURN(d.add_bos, bool_or(f, "tokenizer.ggml.add_bos_token", d.model == "llama"));
  ASSIGN_OR_RETURN(d.add_space_prefix, bool_or(f, "tokenizer.ggml.add_space_prefix", true));
  ASSIGN_OR_RETURN(d.add_eos, bool_or(f, "tokenizer.ggml.add_eos_token", false));
  ASSIGN_OR_RETURN(d.chat_template, f.get_string_or("tokenizer.chat_template", ""));
  return d;
}

}  // namespace st
