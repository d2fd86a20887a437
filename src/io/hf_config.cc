#include "io/hf_config.h"

#include <algorithm>
#include <cmath>

#include "core/file.h"

namespace st {
namespace {

struct ArchInfo {
  Arch arch;
  const char* model_type;
  const char* class_name;
  int64_t default_max_pos;  // the config class default when the key is absent
};

constexpr ArchInfo kArchs[] = {
    {Arch::kLlama, "llama", "LlamaForCausalLM", 2048},
    {Arch::kMistral, "mistral", "MistralForCausalLM", 4096 * 32},
    {Arch::kQwen2, "qwen2", "Qwen2ForCausalLM", 32768},
    {Arch::kQwen3, "qwen3", "Qwen3ForCausalLM", 32768},
};

const ArchInfo& arch_info(Arch a) {
  for (const ArchInfo& i : kArchs)
    if (i.arch == a) return i;
  return kArchs[0];
}

bool present(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

// Optional typed getters: absent or null keeps the default; a wrong type is an error naming the key.
Status opt_int(const Json& j, const char* key, const std::string& what, int64_t* out) {
  if (!present(j, key)) return Status::OK();
  ASSIGN_OR_RETURN(*out, json_int(j, key, what));
  return Status::OK();
}

Status opt_number(const Json& j, const char* key, const std::string& what, double* out) {
  if (!present(j, key)) return Status::OK();
  ASSIGN_OR_RETURN(*out, json_number(j, key, what));
  return Status::OK();
}

Status opt_bool(const Json& j, const char* key, const std::string& what, bool* out) {
  if (!present(j, key)) return Status::OK();
  const Json& v = j.at(key);
  if (!v.is_boolean()) return Corruption(Str() << what << ": key '" << key << "' is not a boolean");
  *out = v.get<bool>();
  return Status::OK();
}

Status parse_eos(const Json& j, const std::string& what, std::vector<int64_t>* out) {
  if (!present(j, "eos_token_id")) return Status::OK();
  const Json& v = j.at("eos_token_id");
  if (v.is_number_integer()) {
    out->push_back(v.get<int64_t>());
    return Status::OK();
  }
  if (!v.is_array()) return Corruption(Str() << what << ": 'eos_token_id' is neither an integer nor a list");
  for (const Json& e : v) {
    if (!e.is_number_integer()) return Corruption(Str() << what << ": 'eos_token_id' list holds a non-integer");
    out->push_back(e.get<int64_t>());
  }
  return Status::OK();
}

// A present, non-null number (transformers reads these with .get(): null means absent).
Status opt_number_nonnull(const Json& j, const char* key, const std::string& what, double* out) {
  if (!present(j, key) || j.at(key).is_null()) return Status::OK();
  return opt_number(j, key, what, out);
}

// yarn as transformers' _compute_yarn_parameters reads it: factor (null: max_position_embeddings /
// original_max_position_embeddings), original_max_position_embeddings (default: max_position_
// embeddings), beta_fast / beta_slow (0 or null: 32 / 1, HF's `or`), truncate (default true), and
// attention_factor (default: 0.1 ln(factor) + 1 for factor > 1, or the mscale / mscale_all_dim ratio).
Status parse_yarn(const Json& rp, const std::string& ctx, ModelConfig* c) {
  c->rope_scaling = RopeScaling::kYarn;
  c->rope_original_max_pos = c->max_position_embeddings;
  RETURN_IF_ERROR(opt_int(rp, "original_max_position_embeddings", ctx, &c->rope_original_max_pos));
  if (c->rope_original_max_pos <= 0)
    return InvalidArgument(Str() << ctx << ": yarn needs original_max_position_embeddings > 0");
  double factor = 0;
  RETURN_IF_ERROR(opt_number_nonnull(rp, "factor", ctx, &factor));
  c->rope_factor = factor != 0 ? factor
                               : static_cast<double>(c->max_position_embeddings) /
                                     static_cast<double>(c->rope_original_max_pos);
  double fast = 0, slow = 0;
  RETURN_IF_ERROR(opt_number_nonnull(rp, "beta_fast", ctx, &fast));
  RETURN_IF_ERROR(opt_number_nonnull(rp, "beta_slow", ctx, &slow));
  c->rope_beta_fast = fast != 0 ? fast : 32.0;
  c->rope_beta_slow = slow != 0 ? slow : 1.0;
  if (!(c->rope_beta_fast > 0) || !(c->rope_beta_slow > 0))
    return InvalidArgument(Str() << ctx << ": yarn beta_fast and beta_slow must be positive");
  c->rope_truncate = true;
  if (present(rp, "truncate") && !rp.at("truncate").is_null()) {
    if (!rp.at("truncate").is_boolean()) return Corruption(Str() << ctx << ": 'truncate' is not a boolean");
    c->rope_truncate = rp.at("truncate").get<bool>();
  }
  auto get_mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  double attn = 0, mscale = 0, mscale_all = 0;
  RETURN_IF_ERROR(opt_number_nonnull(rp, "attention_factor", ctx, &attn));
  RETURN_IF_ERROR(opt_number_nonnull(rp, "mscale", ctx, &mscale));
  RETURN_IF_ERROR(opt_number_nonnull(rp, "mscale_all_dim", ctx, &mscale_all));
  const bool given = present(rp, "attention_factor") && !rp.at("attention_factor").is_null();
  if (given) c->rope_attention_factor = attn;
  else if (mscale != 0 && mscale_all != 0)
    c->rope_attention_factor = get_mscale(c->rope_factor, mscale) / get_mscale(c->rope_factor, mscale_all);
  else c->rope_attention_factor = get_mscale(c->rope_factor, 1.0);
  if (!(c->rope_attention_factor > 0) || !std::isfinite(c->rope_attention_factor))
    return InvalidArgument(Str() << ctx << ": yarn attention_factor must be positive");
  return Status::OK();
}

// transformers v5 lets a legacy `rope_scaling` dict win over `rope_parameters`; theta comes from
// the chosen dict, else the top-level v4 `rope_theta`.
Status parse_rope(const Json& j, const std::string& what, ModelConfig* c) {
  const Json* rp = nullptr;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!present(j, key)) continue;
    const Json& v = j.at(key);
    if (!v.is_object()) return Corruption(Str() << what << ": '" << key << "' is not an object");
    if (!v.empty()) {
      rp = &v;
      break;
    }
  }
  RETURN_IF_ERROR(opt_number(j, "rope_theta", what, &c->rope_theta));
  if (rp == nullptr) return Status::OK();
  const std::string ctx = what + " rope parameters";
  RETURN_IF_ERROR(opt_number(*rp, "rope_theta", ctx, &c->rope_theta));
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    if (!present(*rp, key)) continue;
    ASSIGN_OR_RETURN(type, json_string(*rp, key, ctx));
    break;
  }
  if (type == "default") return Status::OK();
  if (type == "linear") {
    c->rope_scaling = RopeScaling::kLinear;
    ASSIGN_OR_RETURN(c->rope_factor, json_number(*rp, "factor", ctx));
  } else if (type == "llama3") {
    c->rope_scaling = RopeScaling::kLlama3;
    ASSIGN_OR_RETURN(c->rope_factor, json_number(*rp, "factor", ctx));
    ASSIGN_OR_RETURN(c->rope_low_freq_factor, json_number(*rp, "low_freq_factor", ctx));
    ASSIGN_OR_RETURN(c->rope_high_freq_factor, json_number(*rp, "high_freq_factor", ctx));
    c->rope_original_max_pos = c->max_position_embeddings;  // HF's fallback
    RETURN_IF_ERROR(opt_int(*rp, "original_max_position_embeddings", ctx, &c->rope_original_max_pos));
    if (!(c->rope_low_freq_factor > 0) || !(c->rope_high_freq_factor > c->rope_low_freq_factor) ||
        c->rope_original_max_pos <= 0)
      return InvalidArgument(Str() << ctx << ": llama3 rope needs 0 < low_freq_factor < high_freq_factor and "
                                      "original_max_position_embeddings > 0");
  } else if (type == "yarn") {
    RETURN_IF_ERROR(parse_yarn(*rp, ctx, c));
  } else if (type == "dynamic") {
    c->rope_scaling = RopeScaling::kDynamic;
    ASSIGN_OR_RETURN(c->rope_factor, json_number(*rp, "factor", ctx));
  } else {
    return Unimplemented(Str() << what << ": rope_type '" << type
                               << "' is not supported (default, linear, dynamic, llama3, yarn)");
  }
  if (!(c->rope_factor > 0) || !std::isfinite(c->rope_factor))
    return InvalidArgument(Str() << ctx << ": rope factor must be positive, got " << c->rope_factor);
  return Status::OK();
}

Status parse_sizes(const Json& j, const std::string& what, ModelConfig* c) {
  ASSIGN_OR_RETURN(c->vocab_size, json_int(j, "vocab_size", what));
  ASSIGN_OR_RETURN(c->hidden_size, json_int(j, "hidden_size", what));
  ASSIGN_OR_RETURN(c->intermediate_size, json_int(j, "intermediate_size", what));
  ASSIGN_OR_RETURN(c->num_layers, json_int(j, "num_hidden_layers", what));
  ASSIGN_OR_RETURN(c->num_heads, json_int(j, "num_attention_heads", what));
  c->num_kv_heads = c->num_heads;
  RETURN_IF_ERROR(opt_int(j, "num_key_value_heads", what, &c->num_kv_heads));
  if (c->hidden_size > 0 && c->num_heads > 0) c->head_dim = c->hidden_size / c->num_heads;
  RETURN_IF_ERROR(opt_int(j, "head_dim", what, &c->head_dim));
  RETURN_IF_ERROR(opt_number(j, "rms_norm_eps", what, &c->rms_norm_eps));
  c->max_position_embeddings = arch_info(c->arch).default_max_pos;
  RETURN_IF_ERROR(opt_int(j, "max_position_embeddings", what, &c->max_position_embeddings));
  return Status::OK();
}

Status validate(const ModelConfig& c, const std::string& what) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", c.vocab_size},         {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size}, {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads}, {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},             {"max_position_embeddings", c.max_position_embeddings}};
  for (const auto& [key, v] : sizes)
    if (v <= 0) return InvalidArgument(Str() << what << ": '" << key << "' must be positive, got " << v);
  RETURN_IF_ERROR(check_size_limits(c, what));
  if (c.num_heads % c.num_kv_heads != 0)
    return InvalidArgument(Str() << what << ": num_attention_heads " << c.num_heads
                                 << " is not a multiple of num_key_value_heads " << c.num_kv_heads);
  if (c.head_dim % 2 != 0) return InvalidArgument(Str() << what << ": head_dim " << c.head_dim << " must be even");
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps))
    return InvalidArgument(Str() << what << ": rms_norm_eps must be positive, got " << c.rms_norm_eps);
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    return InvalidArgument(Str() << what << ": rope_theta must be positive, got " << c.rope_theta);
  return Status::OK();
}

// Sliding-window attention, as transformers' configs resolve it (hf_config.h: sliding_window).
Status parse_sliding_window(const Json& j, const std::string& what, ModelConfig* c) {
  constexpr int64_t kHfDefaultWindow = 4096;  // MistralConfig / Qwen2Config / Qwen3Config default
  int64_t window = 0, max_window_layers = 28;  // Qwen2Config / Qwen3Config default
  bool per_layer_from_max = false;
  if (c->arch == Arch::kMistral) {
    window = j.contains("sliding_window") ? 0 : kHfDefaultWindow;  // absent: the class default; null: none
    RETURN_IF_ERROR(opt_int(j, "sliding_window", what, &window));
  } else if (c->arch == Arch::kQwen2 || c->arch == Arch::kQwen3) {
    bool use = false;
    RETURN_IF_ERROR(opt_bool(j, "use_sliding_window", what, &use));
    if (use) {
      window = j.contains("sliding_window") ? 0 : kHfDefaultWindow;
      RETURN_IF_ERROR(opt_int(j, "sliding_window", what, &window));
      RETURN_IF_ERROR(opt_int(j, "max_window_layers", what, &max_window_layers));
      per_layer_from_max = true;
    }
  }
  if (window < 0) return InvalidArgument(Str() << what << ": sliding_window " << window << " must be >= 0");
  c->sliding_window = window;
  c->sliding_layers.clear();
  if (window == 0) return Status::OK();
  if (present(j, "layer_types")) {
    const Json& lt = j.at("layer_types");
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c->num_layers)
      return InvalidArgument(Str() << what << ": 'layer_types' must be a list of " << c->num_layers << " entries");
    for (size_t i = 0; i < lt.size(); ++i) {
      const std::string t = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
      if (t != "full_attention" && t != "sliding_attention")
        return Unimplemented(Str() << what << ": layer_types[" << i << "] = '" << t
                                   << "' is not supported (full_attention, sliding_attention)");
      c->sliding_layers.push_back(t == "sliding_attention" ? 1 : 0);
    }
  } else if (per_layer_from_max) {
    for (int64_t i = 0; i < c->num_layers; ++i) c->sliding_layers.push_back(i >= max_window_layers ? 1 : 0);
  }
  return Status::OK();
}

// Family-specific flags: Qwen2 always has q/k/v biases and never an o_proj bias; llama/mistral/qwen3
// read `attention_bias`, which in HF covers o_proj too.
Status parse_family(const Json& j, const std::string& what, ModelConfig* c) {
  if (c->arch == Arch::kQwen2) {
    c->attention_bias = true;
  } else {
    RETURN_IF_ERROR(opt_bool(j, "attention_bias", what, &c->attention_bias));
    c->o_proj_bias = c->attention_bias;
  }
  RETURN_IF_ERROR(parse_sliding_window(j, what, c));
  c->qk_norm = c->arch == Arch::kQwen3;
  bool mlp_bias = false;
  RETURN_IF_ERROR(opt_bool(j, "mlp_bias", what, &mlp_bias));
  if (mlp_bias) return Unimplemented(Str() << what << ": mlp_bias = true is not supported");
  if (present(j, "hidden_act")) {
    ASSIGN_OR_RETURN(std::string act, json_string(j, "hidden_act", what));
    if (act != "silu") return Unimplemented(Str() << what << ": hidden_act '" << act << "' (only silu)");
  }
  return Status::OK();
}

}  // namespace

Status check_size_limits(const ModelConfig& c, const std::string& what) {
  const struct {
    const char* key;
    int64_t v, max;
  } sizes[] = {{"vocab_size", c.vocab_size, int64_t{1} << 24},
               {"hidden_size", c.hidden_size, int64_t{1} << 18},
               {"intermediate_size", c.intermediate_size, int64_t{1} << 21},
               {"num_hidden_layers", c.num_layers, int64_t{1} << 12},
               {"num_attention_heads", c.num_heads, int64_t{1} << 12},
               {"num_key_value_heads", c.num_kv_heads, int64_t{1} << 12},
               {"head_dim", c.head_dim, int64_t{1} << 14}};
  for (const auto& s : sizes)
    if (s.v > s.max)
      return InvalidArgument(Str() << what << ": '" << s.key << "' = " << s.v
                                   << " is beyond any supported model (at most " << s.max << "): a damaged config?");
  return Status::OK();
}

const char* arch_name(Arch a) { return arch_info(a).model_type; }

int64_t ModelConfig::layer_params() const {
  const int64_t H = hidden_size;
  int64_t n = H * q_dim() + 2 * H * kv_dim() + q_dim() * H;  // q, k, v, o
  n += 3 * H * intermediate_size;                           // gate, up, down
  n += 2 * H;                                               // input / post-attention norms
  if (attention_bias) n += q_dim() + 2 * kv_dim();
  if (o_proj_bias) n += H;
  if (qk_norm) n += 2 * head_dim;
  return n;
}

int64_t ModelConfig::total_params() const {
  int64_t n = num_layers * layer_params() + vocab_size * hidden_size + hidden_size;
  if (!tie_word_embeddings) n += vocab_size * hidden_size;
  return n;
}

StatusOr<ModelConfig> parse_hf_config(const Json& j, const std::string& what) {
  if (!j.is_object()) return Corruption(Str() << what << ": config is not a JSON object");
  ASSIGN_OR_RETURN(std::string model_type, json_string(j, "model_type", what));
  ModelConfig c;
  bool known = false;
  for (const ArchInfo& i : kArchs) {
    if (model_type == i.model_type) {
      c.arch = i.arch;
      known = true;
    }
  }
  if (!known)
    return Unimplemented(Str() << what << ": model_type '" << model_type
                               << "' is not supported (llama, mistral, qwen2, qwen3)");
  RETURN_IF_ERROR(parse_sizes(j, what, &c));
  RETURN_IF_ERROR(parse_rope(j, what, &c));
  RETURN_IF_ERROR(parse_family(j, what, &c));
  RETURN_IF_ERROR(opt_bool(j, "tie_word_embeddings", what, &c.tie_word_embeddings));
  RETURN_IF_ERROR(opt_number(j, "attention_dropout", what, &c.attention_dropout));
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (!present(j, key) || !c.torch_dtype.empty()) continue;
    ASSIGN_OR_RETURN(c.torch_dtype, json_string(j, key, what));
  }
  RETURN_IF_ERROR(opt_int(j, "bos_token_id", what, &c.bos_token_id));
  RETURN_IF_ERROR(parse_eos(j, what, &c.eos_token_ids));
  RETURN_IF_ERROR(validate(c, what));
  return c;
}

StatusOr<ModelConfig> load_hf_config(const std::string& config_json_path) {
  ASSIGN_OR_RETURN(Json j, read_json_file(config_json_path));
  return parse_hf_config(j, config_json_path);
}

Json hf_config_to_json(const ModelConfig& c) {
  const ArchInfo& a = arch_info(c.arch);
  Json j = Json::object();
  j["architectures"] = Json::array({a.class_name});
  j["model_type"] = a.model_type;
  const std::string dt = c.torch_dtype.empty() ? "float32" : c.torch_dtype;
  j["dtype"] = dt;
  j["torch_dtype"] = dt;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.arch != Arch::kQwen2) j["attention_bias"] = c.attention_bias;
  // Sliding window: written out explicitly (an absent Mistral key means HF's default 4096), with
  // the per-layer list whenever not every layer is windowed (Qwen: always, as its default
  // max_window_layers of 28 would otherwise apply).
  std::vector<bool> windowed;
  for (int64_t l = 0; l < c.num_layers; ++l) windowed.push_back(c.attention_window(l) > 0);
  const bool any = std::find(windowed.begin(), windowed.end(), true) != windowed.end();
  const bool all = std::find(windowed.begin(), windowed.end(), false) == windowed.end();
  const bool qwen = c.arch == Arch::kQwen2 || c.arch == Arch::kQwen3;
  if (qwen) j["use_sliding_window"] = any;
  j["sliding_window"] = any ? Json(c.sliding_window) : Json(nullptr);
  if (any && (qwen || !all)) {
    const int64_t first = std::find(windowed.begin(), windowed.end(), true) - windowed.begin();
    if (std::find(windowed.begin() + first, windowed.end(), false) == windowed.end()) j["max_window_layers"] = first;
    Json types = Json::array();
    for (bool w : windowed) types.push_back(w ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
  }
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  if (c.eos_token_ids.size() > 1) j["eos_token_id"] = c.eos_token_ids;
  j["rope_theta"] = c.rope_theta;
  Json rp = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}};
  if (c.rope_scaling == RopeScaling::kLinear) {
    rp["rope_type"] = "linear";
    rp["factor"] = c.rope_factor;
  } else if (c.rope_scaling == RopeScaling::kLlama3) {
    rp["rope_type"] = "llama3";
    rp["factor"] = c.rope_factor;
    rp["low_freq_factor"] = c.rope_low_freq_factor;
    rp["high_freq_factor"] = c.rope_high_freq_factor;
    rp["original_max_position_embeddings"] = c.rope_original_max_pos;
  } else if (c.rope_scaling == RopeScaling::kDynamic) {
    rp["rope_type"] = "dynamic";
    rp["factor"] = c.rope_factor;
  } else if (c.rope_scaling == RopeScaling::kYarn) {
    rp["rope_type"] = "yarn";
    rp["factor"] = c.rope_factor;
    rp["original_max_position_embeddings"] = c.rope_original_max_pos;
    rp["beta_fast"] = c.rope_beta_fast;
    rp["beta_slow"] = c.rope_beta_slow;
    rp["truncate"] = c.rope_truncate;
    rp["attention_factor"] = c.rope_attention_factor;
  }
  j["rope_parameters"] = rp;
  // v4 readers only know rope_scaling; v5 gives it priority, so it must match rope_parameters.
  j["rope_scaling"] = c.rope_scaling == RopeScaling::kNone ? Json(nullptr) : rp;
  return j;
}

namespace {

// transformers _compute_yarn_parameters in its float32 steps: pos_freqs = base ** (2i / dim);
// extrapolation 1 / pos_freqs, interpolation 1 / (factor * pos_freqs), blended by a ramp over the
// dimensions between the correction bounds of beta_fast and beta_slow rotations.
void yarn_inv_freq(const ModelConfig& c, std::vector<float>* inv) {
  const int64_t dim = c.head_dim;
  const double base = c.rope_theta, pi = M_PI;
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) * std::log(static_cast<double>(c.rope_original_max_pos) / (rotations * 2 * pi))) /
           (2 * std::log(base));
  };
  double low = correction_dim(c.rope_beta_fast), high = correction_dim(c.rope_beta_slow);
  if (c.rope_truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // HF: prevents a zero-width ramp
  const float lo = static_cast<float>(low), span = static_cast<float>(high - low);
  const float factor = static_cast<float>(c.rope_factor);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float pos = static_cast<float>(std::pow(base, static_cast<double>(e)));
    const float extrapolation = 1.0f / pos, interpolation = 1.0f / (factor * pos);
    const float ramp = std::clamp((static_cast<float>(i) - lo) / span, 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    (*inv)[static_cast<size_t>(i)] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
}

}  // namespace

std::vector<float> rope_inv_freq(const ModelConfig& c) {
  const int64_t dim = c.head_dim;
  const float theta = static_cast<float>(c.rope_theta);
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    // torch: arange(0, dim, 2).float() / dim in f32, then base ** that (f32 pow), then 1.0 / x.
    const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float p = static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(e)));
    inv[static_cast<size_t>(i)] = 1.0f / p;
  }
  if (c.rope_scaling == RopeScaling::kLinear) {
    const float f = static_cast<float>(c.rope_factor);
    for (float& v : inv) v /= f;
  } else if (c.rope_scaling == RopeScaling::kLlama3) {
    // transformers _compute_llama3_parameters; python scalars meet f32 tensors as f32 values.
    const double old_ctx = static_cast<double>(c.rope_original_max_pos);
    const float low_wl = static_cast<float>(old_ctx / c.rope_low_freq_factor);
    const float high_wl = static_cast<float>(old_ctx / c.rope_high_freq_factor);
    const float factor = static_cast<float>(c.rope_factor);
    const float lowf = static_cast<float>(c.rope_low_freq_factor);
    const float span = static_cast<float>(c.rope_high_freq_factor - c.rope_low_freq_factor);
    const float two_pi = static_cast<float>(2.0 * M_PI);
    const float ctx_f = static_cast<float>(old_ctx);
    for (float& v : inv) {
      const float wl = two_pi / v;
      float llama = wl > low_wl ? v / factor : v;
      const float s = (ctx_f / wl - lowf) / span;
      const float smoothed = (1.0f - s) * llama / factor + s * llama;
      const bool medium = !(wl < high_wl) && !(wl > low_wl);
      v = medium ? smoothed : llama;
    }
  } else if (c.rope_scaling == RopeScaling::kYarn) {
    yarn_inv_freq(c, &inv);
  }
  return inv;
}

float rope_attention_scale(const ModelConfig& c) {
  const double s = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const double a = c.rope_scaling == RopeScaling::kYarn ? c.rope_attention_factor : 1.0;
  return static_cast<float>(s * a * a);
}

Status check_rope_positions(const ModelConfig& c, int64_t n, const std::string& what) {
  if (c.rope_scaling != RopeScaling::kDynamic || n <= c.max_position_embeddings) return Status::OK();
  return Unimplemented(Str() << what << " reaches position " << n << ", past max_position_embeddings "
                             << c.max_position_embeddings
                             << " with dynamic NTK RoPE (rope_type 'dynamic'): transformers rescales the "
                                "frequencies there, which is not supported; shorten it to "
                             << c.max_position_embeddings << " tokens");
}

}  // namespace st
