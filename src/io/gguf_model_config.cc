// GGUF -> HF tensor names and GGUF metadata -> ModelConfig (formats.md §4.7, §4.9, §2.3).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "io/gguf_checkpoint.h"

namespace st {
namespace {

// Per-layer suffixes: GGUF "blk.N.<g>" <-> HF "model.layers.N.<h>".
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};
constexpr std::pair<const char*, const char*> kGlobalNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// Splits "<prefix><N>.<rest>" into N and rest; false when the shape does not match.
bool split_layer(const std::string& name, const std::string& prefix, std::string* n, std::string* rest) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return false;
  *n = name.substr(prefix.size(), dot - prefix.size());
  for (char c : *n) {
    if (c < '0' || c > '9') return false;
  }
  if (n->size() > 1 && (*n)[0] == '0') return false;  // one spelling per layer index
  *rest = name.substr(dot + 1);
  return true;
}

// Shortest decimal that rounds back to the same f32 (9.99999975e-06 -> 1e-05): GGUF stores eps
// and rope base as f32, HF configs hold the decimal the f32 came from.
double f32_to_decimal(double v) {
  float f = static_cast<float>(v);
  char buf[32];
  for (int p = 1; p <= 9; ++p) {
    std::snprintf(buf, sizeof(buf), "%.*g", p, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) return std::strtod(buf, nullptr);
  }
  return v;
}

// A per-layer count that gguf-py may write as a scalar or as an array (one per layer).
StatusOr<int64_t> uniform_int(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (v != nullptr && v->type == GgufValueType::kArray) {
    ASSIGN_OR_RETURN(std::vector<int64_t> xs, f.get_int_array(key));
    if (xs.empty()) return InvalidArgument(Str() << "gguf " << f.path() << ": key '" << key << "' is an empty array");
    for (int64_t x : xs) {
      if (x != xs[0]) return Unimplemented(Str() << "gguf " << f.path() << ": key '" << key << "' varies per layer");
    }
    return xs[0];
  }
  return f.get_int(key);
}

Status bad_config(const GgufFile& f, const std::string& what) {
  return InvalidArgument(Str() << "gguf " << f.path() << ": " << what);
}

StatusOr<Arch> parse_arch(const GgufFile& f) {
  ASSIGN_OR_RETURN(std::string a, f.get_string("general.architecture"));
  if (a == "llama") return Arch::kLlama;
  if (a == "qwen2") return Arch::kQwen2;
  if (a == "qwen3") return Arch::kQwen3;
  return Unimplemented(Str() << "gguf " << f.path() << ": general.architecture '" << a
                             << "' (supported: llama, qwen2, qwen3)");
}

// llama3 rope scaling shows up only as rope_freqs.weight (formats.md §4.7). Accept it when it
// equals the llama3 formula with Meta's published low/high factors and original context.
Status read_llama3_scaling(const GgufFile& f, ModelConfig* c) {
  const GgufTensorInfo* t = f.find_tensor("rope_freqs.weight");
  if (t == nullptr) return Status::OK();
  Status unsupported = Unimplemented(Str() << "gguf " << f.path() << ": tensor 'rope_freqs.weight' does not match "
                                           << "llama3 rope scaling (low 1, high 4, original context 8192)");
  if (t->type != GgmlType::kF32 || t->ne.size() != 1 || t->ne[0] * 2 != c->head_dim) return unsupported;
  std::vector<float> freqs(static_cast<size_t>(t->ne[0]));
  std::memcpy(freqs.data(), f.data(*t), freqs.size() * sizeof(float));  // alignment may be < 4
  float factor = 0;
  for (float x : freqs) factor = std::max(factor, x);
  if (!(factor >= 1.0f)) return unsupported;
  const double low = 1.0, high = 4.0, orig = 8192.0, pi = 3.14159265358979323846;
  for (int64_t i = 0; i < t->ne[0]; ++i) {
    double inv = 1.0 / std::pow(c->rope_theta, 2.0 * static_cast<double>(i) / static_cast<double>(c->head_dim));
    double wavelen = 2 * pi / inv, want = 1.0;
    if (wavelen > orig / low) want = factor;
    else if (wavelen >= orig / high) {
      double s = (orig / wavelen - low) / (high - low);
      want = 1.0 / ((1 - s) / factor + s);
    }
    if (std::fabs(freqs[static_cast<size_t>(i)] - want) > 1e-4 * want) return unsupported;
  }
  c->rope_scaling = RopeScaling::kLlama3;
  c->rope_factor = factor;
  c->rope_low_freq_factor = low;
  c->rope_high_freq_factor = high;
  c->rope_original_max_pos = static_cast<int64_t>(orig);
  return Status::OK();
}

// yarn as llama.cpp's converter writes it (convert_hf_to_gguf: the factor and the original context
// only): HF's defaults for the rest (beta_fast 32, beta_slow 1, truncate, attention factor
// 0.1 ln(factor) + 1). The keys that change the attention factor in llama.cpp (attn_factor != 1,
// yarn_log_multiplier: DeepSeek-style mscale) have no HF counterpart here and are refused by name.
Status read_yarn(const GgufFile& f, const std::string& p, ModelConfig* c) {
  c->rope_scaling = RopeScaling::kYarn;
  ASSIGN_OR_RETURN(double factor, f.get_float(p + "rope.scaling.factor"));
  c->rope_factor = f32_to_decimal(factor);
  ASSIGN_OR_RETURN(c->rope_original_max_pos,
                   f.get_int_or(p + "rope.scaling.original_context_length", c->max_position_embeddings));
  if (!(c->rope_factor > 0) || !std::isfinite(c->rope_factor) || c->rope_original_max_pos <= 0)
    return bad_config(f, Str() << "yarn needs a finite " << p << "rope.scaling.factor > 0 (got " << c->rope_factor
                               << ") and an original context length > 0");
  ASSIGN_OR_RETURN(double attn, f.get_float_or(p + "rope.scaling.attn_factor", 1.0));
  if (attn != 1.0)
    return Unimplemented(Str() << "gguf " << f.path() << ": key '" << p << "rope.scaling.attn_factor' = " << attn);
  if (f.has(p + "rope.scaling.yarn_log_multiplier"))
    return Unimplemented(Str() << "gguf " << f.path() << ": key '" << p << "rope.scaling.yarn_log_multiplier'");
  c->rope_attention_factor = c->rope_factor > 1 ? 0.1 * std::log(c->rope_factor) + 1.0 : 1.0;
  return Status::OK();
}

Status read_rope(const GgufFile& f, const std::string& p, ModelConfig* c) {
  ASSIGN_OR_RETURN(double theta, f.get_float_or(p + "rope.freq_base", 10000.0));
  c->rope_theta = f32_to_decimal(theta);
  if (!(c->rope_theta > 0) || !std::isfinite(c->rope_theta))
    return bad_config(f, Str() << "key '" << p << "rope.freq_base' = " << c->rope_theta << " must be positive");
  ASSIGN_OR_RETURN(std::string type, f.get_string_or(p + "rope.scaling.type", "none"));
  // Two scalings in one file: one of them used to be dropped silently (session 23 audit).
  if (type != "none" && f.find_tensor("rope_freqs.weight") != nullptr)
    return Unimplemented(Str() << "gguf " << f.path() << ": both '" << p << "rope.scaling.type' = '" << type
                               << "' and a rope_freqs.weight tensor (two RoPE scalings)");
  if (type == "linear") {
    c->rope_scaling = RopeScaling::kLinear;
    ASSIGN_OR_RETURN(double factor, f.get_float(p + "rope.scaling.factor"));
    c->rope_factor = f32_to_decimal(factor);
    if (!(c->rope_factor > 0) || !std::isfinite(c->rope_factor))
      return bad_config(f, Str() << "key '" << p << "rope.scaling.factor' = " << c->rope_factor << " must be positive");
  } else if (type == "yarn") {
    return read_yarn(f, p, c);
  } else if (type != "none") {
    return Unimplemented(Str() << "gguf " << f.path() << ": key '" << p << "rope.scaling.type' = '" << type << "'");
  }
  return read_llama3_scaling(f, c);
}

Status read_sizes(const GgufFile& f, const std::string& p, ModelConfig* c) {
  ASSIGN_OR_RETURN(c->hidden_size, f.get_int(p + "embedding_length"));
  ASSIGN_OR_RETURN(c->num_layers, f.get_int(p + "block_count"));
  ASSIGN_OR_RETURN(c->intermediate_size, uniform_int(f, p + "feed_forward_length"));
  ASSIGN_OR_RETURN(c->num_heads, uniform_int(f, p + "attention.head_count"));
  c->num_kv_heads = c->num_heads;
  if (f.has(p + "attention.head_count_kv")) {
    ASSIGN_OR_RETURN(c->num_kv_heads, uniform_int(f, p + "attention.head_count_kv"));
  }
  if (c->hidden_size <= 0 || c->num_layers <= 0 || c->intermediate_size <= 0 || c->num_heads <= 0 ||
      c->num_kv_heads <= 0 || c->num_heads % c->num_kv_heads != 0) {
    return bad_config(f, Str() << "bad sizes: H " << c->hidden_size << ", L " << c->num_layers << ", F "
                               << c->intermediate_size << ", NH " << c->num_heads << ", KVH " << c->num_kv_heads);
  }
  RETURN_IF_ERROR(check_size_limits(*c, "gguf " + f.path()));
  int64_t dflt_d = c->hidden_size % c->num_heads == 0 ? c->hidden_size / c->num_heads : 0;
  ASSIGN_OR_RETURN(c->head_dim, f.get_int_or(p + "attention.key_length", dflt_d));
  ASSIGN_OR_RETURN(int64_t v_dim, f.get_int_or(p + "attention.value_length", c->head_dim));
  ASSIGN_OR_RETURN(int64_t rot, f.get_int_or(p + "rope.dimension_count", c->head_dim));
  if (c->head_dim <= 0 || c->head_dim % 2 != 0 || v_dim != c->head_dim) {
    return bad_config(f, Str() << "head dim " << c->head_dim << " (value length " << v_dim << ")");
  }
  if (rot != c->head_dim) {
    return Unimplemented(Str() << "gguf " << f.path() << ": partial rotary (rope.dimension_count " << rot
                               << " != head dim " << c->head_dim << ")");
  }
  ASSIGN_OR_RETURN(double eps, f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-6));
  c->rms_norm_eps = f32_to_decimal(eps);
  // The checks config.json gets (hf_config.cc validate()), naming the GGUF key: a negative epsilon
  // gave NaN logits and a clean exit (session 22 audit).
  if (!(c->rms_norm_eps > 0) || !std::isfinite(c->rms_norm_eps))
    return bad_config(f, Str() << "key '" << p << "attention.layer_norm_rms_epsilon' = " << eps << " must be positive");
  ASSIGN_OR_RETURN(c->max_position_embeddings, f.get_int_or(p + "context_length", 0));
  if (c->max_position_embeddings < 0)  // absent reads 0: unknown, no length note
    return bad_config(f, Str() << "key '" << p << "context_length' = " << c->max_position_embeddings << " is negative");
  return Status::OK();
}

Status read_vocab(const GgufFile& f, const std::string& p, ModelConfig* c) {
  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  if (emb == nullptr) return NotFound(Str() << "gguf " << f.path() << ": tensor 'token_embd.weight' is missing");
  int64_t vocab = emb->ne.back();
  const GgufValue* toks = f.find("tokenizer.ggml.tokens");
  if (f.has(p + "vocab_size")) {
    ASSIGN_OR_RETURN(vocab, f.get_int(p + "vocab_size"));
  } else if (toks != nullptr && toks->type == GgufValueType::kArray) {
    vocab = static_cast<int64_t>(toks->count);
  }
  if (vocab <= 0 || emb->ne.size() != 2 || emb->ne[1] != vocab) {
    return bad_config(f, Str() << "vocab size " << vocab << " does not match token_embd.weight");
  }
  c->vocab_size = vocab;
  c->tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  ASSIGN_OR_RETURN(c->bos_token_id, f.get_int_or("tokenizer.ggml.bos_token_id", -1));
  ASSIGN_OR_RETURN(int64_t eos, f.get_int_or("tokenizer.ggml.eos_token_id", -1));
  if (eos >= 0) c->eos_token_ids.push_back(eos);
  ASSIGN_OR_RETURN(int64_t eot, f.get_int_or("tokenizer.ggml.eot_token_id", -1));
  if (eot >= 0 && eot != eos) c->eos_token_ids.push_back(eot);
  return Status::OK();
}

}  // namespace

StatusOr<std::string> gguf_to_hf_name(const std::string& g) {
  for (const auto& [gn, hn] : kGlobalNames) {
    if (g == gn) return std::string(hn);
  }
  std::string n, rest;
  if (split_layer(g, "blk.", &n, &rest)) {
    for (const auto& [gs, hs] : kLayerNames) {
      if (rest == gs) return "model.layers." + n + "." + hs;
    }
  }
  return NotFound(Str() << "no HF name for GGUF tensor '" << g << "'");
}

StatusOr<std::string> hf_to_gguf_name(const std::string& h) {
  for (const auto& [gn, hn] : kGlobalNames) {
    if (h == hn) return std::string(gn);
  }
  std::string n, rest;
  if (split_layer(h, "model.layers.", &n, &rest)) {
    for (const auto& [gs, hs] : kLayerNames) {
      if (rest == hs) return "blk." + n + "." + gs;
    }
  }
  return NotFound(Str() << "no GGUF name for HF tensor '" << h << "'");
}

StatusOr<ModelConfig> gguf_model_config(const GgufFile& f) {
  ModelConfig c;
  ASSIGN_OR_RETURN(c.arch, parse_arch(f));
  std::string p;
  ASSIGN_OR_RETURN(p, f.get_string("general.architecture"));
  p += ".";
  RETURN_IF_ERROR(read_sizes(f, p, &c));
  RETURN_IF_ERROR(read_rope(f, p, &c));
  RETURN_IF_ERROR(read_vocab(f, p, &c));
  c.attention_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  if (c.arch == Arch::kQwen2 && !c.attention_bias) return bad_config(f, "qwen2 without blk.0.attn_q.bias");
  return c;
}

}  // namespace st
