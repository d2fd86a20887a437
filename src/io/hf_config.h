// HF config.json -> ModelConfig for the Llama family (llama, mistral, qwen2, qwen3).
// Both transformers v5 (`rope_parameters`) and v4 (`rope_theta` / `rope_scaling`) layouts.
#pragma once

#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace st {

enum class Arch { kLlama, kMistral, kQwen2, kQwen3 };
const char* arch_name(Arch a);  // "llama", "mistral", "qwen2", "qwen3"

// kDynamic: transformers' dynamic NTK ("dynamic"): the default frequencies until a sequence
// passes max_position_embeddings, where HF rescales the base for the whole batch -- refused there
// (check_rope_positions), so within it the default is exact.
enum class RopeScaling { kNone, kLlama3, kLinear, kYarn, kDynamic };

struct ModelConfig {
  Arch arch = Arch::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;         // H
  int64_t intermediate_size = 0;   // F
  int64_t num_layers = 0;          // L
  int64_t num_heads = 0;           // NH
  int64_t num_kv_heads = 0;        // KVH (GQA: NH % KVH == 0)
  int64_t head_dim = 0;            // D (config `head_dim`, else H / NH)
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling = RopeScaling::kNone;
  // llama3 scaling parameters (rope_type "llama3") / linear factor / yarn factor.
  double rope_factor = 1.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int64_t rope_original_max_pos = 8192;  // llama3 and yarn
  // yarn (rope_type "yarn", transformers _compute_yarn_parameters): the ramp's rotation bounds,
  // whether they are rounded outwards, and the factor HF multiplies cos and sin by -- here folded
  // into the attention scale as its square (q and k both carry it), see rope_attention_scale.
  double rope_beta_fast = 32.0;
  double rope_beta_slow = 1.0;
  bool rope_truncate = true;
  double rope_attention_factor = 1.0;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;     // q/k/v biases (Qwen2: always; llama: `attention_bias`)
  bool qk_norm = false;            // Qwen3: RMSNorm on q and k per head before RoPE
  // HF's `attention_bias` on llama/mistral/qwen3 also gives o_proj a bias (Qwen2 never has one).
  bool o_proj_bias = false;
  // Sliding-window attention (as transformers builds it): query t sees key j only when
  // t - W < j <= t, W = sliding_window. Mistral: every layer (`sliding_window`, HF's default 4096
  // when the key is absent, none when null). Qwen2/Qwen3: only with `use_sliding_window`, on the
  // layers >= `max_window_layers`. An explicit `layer_types` list ("full_attention" /
  // "sliding_attention") names the layers. 0 = full causal attention everywhere.
  int64_t sliding_window = 0;
  std::vector<uint8_t> sliding_layers;  // per layer, 1 = windowed; empty = every layer (when W > 0)
  int64_t attention_window(int64_t layer) const {
    if (sliding_window <= 0) return 0;
    if (sliding_layers.empty()) return sliding_window;
    return layer >= 0 && layer < static_cast<int64_t>(sliding_layers.size()) && sliding_layers[layer] ? sliding_window : 0;
  }
  std::string torch_dtype;         // as written in config.json ("bfloat16", ...), informative
  double attention_dropout = 0.0;  // config.json's; not applied (train says so when it is > 0)
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // Parameter counts (for banners, planner and FLOP conventions).
  int64_t layer_params() const;
  int64_t total_params() const;
};

// Upper bounds on a config's sizes, far above any released model (vocab 2^24, hidden 2^18,
// intermediate 2^21, layers and heads 2^12, head_dim 2^14): sizes multiply into byte counts, so
// a damaged or hostile config is refused by name before anything is sized from it.
Status check_size_limits(const ModelConfig& c, const std::string& what);

// Parses and validates (positive sizes, GQA divisibility, supported model_type).
// `what` names the source in errors (usually the file path).
StatusOr<ModelConfig> parse_hf_config(const Json& j, const std::string& what);
StatusOr<ModelConfig> load_hf_config(const std::string& config_json_path);
// HF-style config.json for writing (init-model, merge). Uses the v5 `rope_parameters` layout
// plus v4's `rope_theta` so both transformers generations load it.
Json hf_config_to_json(const ModelConfig& c);

// Inverse frequencies for RoPE, float32 exactly as HF computes them (including llama3 and yarn scaling).
std::vector<float> rope_inv_freq(const ModelConfig& c);
// Positions [0, n) are fine for this RoPE; Unimplemented for dynamic NTK past
// max_position_embeddings (where transformers would rescale the base per batch). `what` names the
// caller's input (a sample, a prompt).
Status check_rope_positions(const ModelConfig& c, int64_t n, const std::string& what);
// The attention's softmax scale: 1/sqrt(head_dim), times yarn's attention factor squared (HF scales
// cos and sin, so q.k, by it twice; the logits are the same, rounded once fewer).
float rope_attention_scale(const ModelConfig& c);

}  // namespace st
