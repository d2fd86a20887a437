// GgufCheckpoint: open/validate, HF-name lookups, and reads with the q/k un-permutation.
#include "io/gguf_checkpoint.h"

#include <algorithm>
#include <vector>

#include "io/gguf_dequant.h"

namespace st {
namespace {

// HF shapes the config implies for the tensors we know (others: no expectation).
std::vector<int64_t> expected_shape(const ModelConfig& c, const std::string& hf) {
  auto ends = [&](const char* s) {
    std::string suf(s);
    return hf.size() >= suf.size() && hf.compare(hf.size() - suf.size(), suf.size(), suf) == 0;
  };
  const int64_t H = c.hidden_size, F = c.intermediate_size, D = c.head_dim;
  if (hf == "model.embed_tokens.weight" || hf == "lm_head.weight") return {c.vocab_size, H};
  if (hf == "model.norm.weight" || ends("layernorm.weight")) return {H};
  if (ends("q_proj.weight")) return {c.q_dim(), H};
  if (ends("k_proj.weight") || ends("v_proj.weight")) return {c.kv_dim(), H};
  if (ends("q_proj.bias")) return {c.q_dim()};
  if (ends("k_proj.bias") || ends("v_proj.bias")) return {c.kv_dim()};
  if (ends("o_proj.weight")) return {H, c.q_dim()};
  if (ends("q_norm.weight") || ends("k_norm.weight")) return {D};
  if (ends("gate_proj.weight") || ends("up_proj.weight")) return {F, H};
  if (ends("down_proj.weight")) return {H, F};
  return {};
}

// The HF names every model of this config must have (optional ones by config flags).
std::vector<std::string> required_names(const ModelConfig& c) {
  std::vector<std::string> names = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!c.tie_word_embeddings) names.push_back("lm_head.weight");
  std::vector<std::string> per = {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                  "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                  "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                  "mlp.down_proj.weight"};
  if (c.attention_bias) per.insert(per.end(), {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"});
  if (c.qk_norm) per.insert(per.end(), {"self_attn.q_norm.weight", "self_attn.k_norm.weight"});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    for (const std::string& s : per) names.push_back("model.layers." + std::to_string(l) + "." + s);
  }
  return names;
}

std::string shape_str(const std::vector<int64_t>& s) {
  Str o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o;
}

}  // namespace

StatusOr<GgufCheckpoint> GgufCheckpoint::open(const std::string& path) {
  GgufCheckpoint ck;
  ASSIGN_OR_RETURN(ck.file_, GgufFile::open(path));
  ASSIGN_OR_RETURN(ck.config_, gguf_model_config(ck.file_));
  for (size_t i = 0; i < ck.file_.tensors().size(); ++i) {
    const GgufTensorInfo& t = ck.file_.tensors()[i];
    std::string hf;
    if (t.name != "rope_freqs.weight") {  // consumed by the config, not a weight
      StatusOr<std::string> m = gguf_to_hf_name(t.name);
      if (!m.ok()) return Unimplemented(Str() << "gguf " << path << ": unknown tensor '" << t.name << "'");
      hf = *m;
      ck.by_hf_.emplace_back(hf, i);
    }
    ck.hf_names_.push_back(hf);
  }
  std::sort(ck.by_hf_.begin(), ck.by_hf_.end());
  RETURN_IF_ERROR(ck.check_tensors());
  return ck;
}

Status GgufCheckpoint::check_tensors() const {
  for (const auto& [hf, i] : by_hf_) {
    const GgufTensorInfo& t = file_.tensors()[i];
    std::vector<int64_t> want = expected_shape(config_, hf);
    if (!want.empty() && t.hf_shape() != want) {
      return Corruption(Str() << "gguf " << path() << ": tensor '" << t.name << "' (" << hf << ") has HF shape "
                              << shape_str(t.hf_shape()) << ", the config implies " << shape_str(want));
    }
    if (!ggml_can_dequantize(t.type)) {
      return Unimplemented(Str() << "gguf " << path() << ": tensor '" << t.name << "' has type "
                                 << ggml_type_name(t.type) << ", which we cannot dequantise");
    }
    int64_t heads = permuted_heads(hf);
    if (heads > 0 && t.hf_shape()[0] != heads * config_.head_dim) {
      return Corruption(Str() << "gguf " << path() << ": tensor '" << t.name << "' rows do not split into heads");
    }
  }
  for (const std::string& n : required_names(config_)) {
    if (!has(n)) {
      ASSIGN_OR_RETURN(std::string g, hf_to_gguf_name(n));
      return NotFound(Str() << "gguf " << path() << ": tensor '" << g << "' (" << n << ") is missing");
    }
  }
  // Layers beyond block_count would be silently ignored by the loader: reject them.
  if (by_hf_.size() != required_names(config_).size()) {
    return Corruption(Str() << "gguf " << path() << ": " << by_hf_.size() << " weights, the config implies "
                            << required_names(config_).size());
  }
  return Status::OK();
}

std::vector<std::string> GgufCheckpoint::tensor_names() const {
  std::vector<std::string> out;
  for (const std::string& n : hf_names_) {
    if (!n.empty()) out.push_back(n);
  }
  return out;
}

StatusOr<const GgufTensorInfo*> GgufCheckpoint::find(const std::string& hf_name) const {
  auto it = std::lower_bound(by_hf_.begin(), by_hf_.end(), std::make_pair(hf_name, size_t{0}));
  if (it == by_hf_.end() || it->first != hf_name) {
    return NotFound(Str() << "gguf " << path() << ": no tensor '" << hf_name << "'");
  }
  return &file_.tensors()[it->second];
}

bool GgufCheckpoint::has(const std::string& hf_name) const { return find(hf_name).ok(); }

StatusOr<std::vector<int64_t>> GgufCheckpoint::shape(const std::string& hf_name) const {
  ASSIGN_OR_RETURN(const GgufTensorInfo* t, find(hf_name));
  return t->hf_shape();
}

int64_t GgufCheckpoint::permuted_heads(const std::string& hf) const {
  if (config_.arch != Arch::kLlama) return 0;
  auto ends = [&](const std::string& s) {
    return hf.size() >= s.size() && hf.compare(hf.size() - s.size(), s.size(), s) == 0;
  };
  if (ends("self_attn.q_proj.weight") || ends("self_attn.q_proj.bias")) return config_.num_heads;
  if (ends("self_attn.k_proj.weight") || ends("self_attn.k_proj.bias")) return config_.num_kv_heads;
  return 0;
}

// Note [q/k un-permutation]: llama.cpp's converter stored HF row h*D + a*D/2 + i at GGUF row
// h*D + 2*i + a (formats.md §2.7). Whole rows move, and quantisation blocks never cross a row,
// so each HF row is dequantised straight from its GGUF row.
Status GgufCheckpoint::read_tensor_as(const std::string& hf_name, const std::vector<int64_t>& expect_shape,
                                      DType dst_dtype, void* dst) const {
  ASSIGN_OR_RETURN(const GgufTensorInfo* t, find(hf_name));
  if (t->hf_shape() != expect_shape) {
    return InvalidArgument(Str() << "gguf " << path() << ": tensor '" << hf_name << "' has shape "
                                 << shape_str(t->hf_shape()) << ", expected " << shape_str(expect_shape));
  }
  const uint8_t* src = file_.data(*t);
  const int64_t heads = permuted_heads(hf_name);
  Status s;
  if (heads == 0) {
    s = dequantize_to(t->type, src, t->numel(), dst_dtype, dst);
  } else {
    const int64_t D = config_.head_dim, rows = heads * D, inner = t->numel() / rows;
    const uint64_t row_bytes = t->nbytes / static_cast<uint64_t>(rows);
    const size_t out_row = static_cast<size_t>(inner) * dtype_size(dst_dtype);
    for (int64_t r = 0; r < rows && s.ok(); ++r) {
      const int64_t g = gguf_row_of_hf_row(r, D);
      s = dequantize_to(t->type, src + static_cast<uint64_t>(g) * row_bytes, inner, dst_dtype,
                        static_cast<uint8_t*>(dst) + static_cast<size_t>(r) * out_row);
    }
  }
  if (!s.ok()) return s.with_context(Str() << "gguf " << path() << ": tensor '" << hf_name << "'");
  return Status::OK();
}

}  // namespace st
