#include "model/presets.h"

#include <algorithm>
#include <cctype>
#include <functional>

namespace st {
namespace {

struct Dims {
  int64_t hidden, layers, heads, kv_heads, inter, vocab;
};

ModelConfig base(Arch arch, const Dims& d) {
  ModelConfig c;
  c.arch = arch;
  c.hidden_size = d.hidden;
  c.num_layers = d.layers;
  c.num_heads = d.heads;
  c.num_kv_heads = d.kv_heads;
  c.intermediate_size = d.inter;
  c.vocab_size = d.vocab;
  c.head_dim = d.hidden / d.heads;
  c.torch_dtype = "bfloat16";
  return c;
}

// Qwen2 family: q/k/v biases always, theta 1e6, eps 1e-6, bos = eos = <|endoftext|> (base models).
ModelConfig qwen25(const Dims& d, bool tied, int64_t max_pos, double eps) {
  ModelConfig c = base(Arch::kQwen2, d);
  c.attention_bias = true;
  c.tie_word_embeddings = tied;
  c.rope_theta = 1e6;
  c.rms_norm_eps = eps;
  c.max_position_embeddings = max_pos;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151643};
  return c;
}

// Llama 3 family: theta 500000, eps 1e-5, bos <|begin_of_text|>, eos <|end_of_text|>.
ModelConfig llama3(const Dims& d, int64_t max_pos) {
  ModelConfig c = base(Arch::kLlama, d);
  c.rope_theta = 500000.0;
  c.rms_norm_eps = 1e-5;
  c.max_position_embeddings = max_pos;
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001};
  return c;
}

ModelConfig tiny_llama() {
  ModelConfig c = base(Arch::kLlama, {64, 2, 4, 2, 160, 512});
  c.rms_norm_eps = 1e-5;
  c.max_position_embeddings = 256;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

ModelConfig tiny_qwen2() {
  ModelConfig c = base(Arch::kQwen2, {64, 2, 4, 2, 160, 512});
  c.attention_bias = true;
  c.tie_word_embeddings = true;
  c.rope_theta = 1e6;
  c.max_position_embeddings = 256;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

ModelConfig tiny_qwen3() {
  ModelConfig c = base(Arch::kQwen3, {64, 2, 4, 2, 160, 512});
  c.head_dim = 32;  // != hidden / heads on purpose: q_proj is [128, 64]
  c.qk_norm = true;
  c.tie_word_embeddings = true;
  c.rope_theta = 1e6;
  c.max_position_embeddings = 256;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

ModelConfig smollm2_135m() {
  // HuggingFaceTB/SmolLM2-135M (arch llama).
  ModelConfig c = base(Arch::kLlama, {576, 30, 9, 3, 1536, 49152});
  c.tie_word_embeddings = true;
  c.rope_theta = 100000.0;
  c.rms_norm_eps = 1e-5;
  c.max_position_embeddings = 8192;
  c.bos_token_id = 0;
  c.eos_token_ids = {0};
  return c;
}

// mistralai/Mistral-7B-v0.1: sliding-window attention over 4096 tokens on every layer.
ModelConfig mistral_7b() {
  ModelConfig c = base(Arch::kMistral, {4096, 32, 32, 8, 14336, 32000});
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-5;
  c.max_position_embeddings = 32768;
  c.sliding_window = 4096;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

ModelConfig llama31_8b() {
  ModelConfig c = llama3({4096, 32, 32, 8, 14336, 128256}, 131072);
  c.rope_scaling = RopeScaling::kLlama3;
  c.rope_factor = 8.0;
  c.rope_low_freq_factor = 1.0;
  c.rope_high_freq_factor = 4.0;
  c.rope_original_max_pos = 8192;
  return c;
}

struct Preset {
  const char* name;
  const char* summary;
  std::function<ModelConfig()> make;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> kPresets = {
      {"tiny-llama", "test model: llama, H 64, 2 layers, 4 heads / 2 kv, F 160, V 512", tiny_llama},
      {"tiny-qwen2", "test model: qwen2 (q/k/v biases, tied), same dims as tiny-llama", tiny_qwen2},
      {"tiny-qwen3", "test model: qwen3 (qk norm, head_dim 32, tied)", tiny_qwen3},
      {"smollm2-135m", "HuggingFaceTB/SmolLM2-135M shapes", smollm2_135m},
      {"qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B shapes",
       [] { return qwen25({896, 24, 14, 2, 4864, 151936}, true, 32768, 1e-6); }},
      {"qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B shapes",
       [] { return qwen25({1536, 28, 12, 2, 8960, 151936}, true, 131072, 1e-6); }},
      {"qwen2.5-3b", "Qwen/Qwen2.5-3B shapes",
       [] { return qwen25({2048, 36, 16, 2, 11008, 151936}, true, 32768, 1e-6); }},
      {"qwen2.5-7b", "Qwen/Qwen2.5-7B shapes",
       [] { return qwen25({3584, 28, 28, 4, 18944, 152064}, false, 131072, 1e-6); }},
      {"qwen2.5-14b", "Qwen/Qwen2.5-14B shapes",
       [] { return qwen25({5120, 48, 40, 8, 13824, 152064}, false, 131072, 1e-5); }},
      {"llama3-8b", "meta-llama/Meta-Llama-3-8B shapes (no rope scaling)",
       [] { return llama3({4096, 32, 32, 8, 14336, 128256}, 8192); }},
      {"llama3.1-8b", "meta-llama/Llama-3.1-8B shapes (llama3 rope scaling, factor 8)", llama31_8b},
      {"mistral-7b", "mistralai/Mistral-7B-v0.1 shapes (sliding window 4096)", mistral_7b},
      {"llama3-70b", "meta-llama/Meta-Llama-3-70B shapes",
       [] { return llama3({8192, 80, 64, 8, 28672, 128256}, 8192); }},
  };
  return kPresets;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

}  // namespace

StatusOr<ModelConfig> model_preset(const std::string& name) {
  const std::string want = lower(name);
  std::string known;
  for (const Preset& p : presets()) {
    if (want == p.name) return p.make();
    known += known.empty() ? p.name : std::string(", ") + p.name;
  }
  return NotFound(Str() << "unknown model preset '" << name << "' (known: " << known << ")");
}

std::vector<ModelPresetInfo> model_preset_list() {
  std::vector<ModelPresetInfo> out;
  for (const Preset& p : presets()) out.push_back({p.name, p.summary});
  return out;
}

}  // namespace st
