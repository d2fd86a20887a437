#include "model/weights.h"

#include "core/check.h"
#include "core/code12.h"
#include "core/nf4.h"

namespace st {
namespace {

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Appends a tensor spec at the next aligned offset.
void add_spec(std::vector<LayerTensorSpec>* specs, size_t* cursor, LayerTensor id, std::string name,
              std::vector<int64_t> shape, DType dtype) {
  LayerTensorSpec s;
  s.id = id;
  s.hf_suffix = std::move(name);
  s.shape = std::move(shape);
  size_t n = 1;
  for (int64_t d : s.shape) n *= static_cast<size_t>(d);
  s.nbytes = n * dtype_size(dtype);
  s.dtype = dtype;
  s.offset = *cursor;
  *cursor = align_up(s.offset + s.nbytes, kLayerAlign);
  specs->push_back(std::move(s));
}

Tensor view_of(const LayerTensorSpec& s, void* blob) {
  Tensor t;
  t.data = static_cast<char*>(blob) + s.offset;
  t.dtype = s.dtype;
  t.ndim = static_cast<int>(s.shape.size());
  for (int i = 0; i < t.ndim; ++i) t.shape[i] = s.shape[i];
  return t;
}

}  // namespace

const LayerTensorSpec* LayerLayout::find(LayerTensor id) const {
  for (const auto& t : tensors)
    if (t.id == id) return &t;
  return nullptr;
}

const char* base_quant_name(BaseQuant q) {
  switch (q) {
    case BaseQuant::kNF4: return "nf4";
    case BaseQuant::kCode12: return "code12";
    case BaseQuant::kNone: break;
  }
  return "none";
}

bool parse_base_quant(const std::string& s, BaseQuant* out) {
  for (BaseQuant q : {BaseQuant::kNone, BaseQuant::kNF4, BaseQuant::kCode12})
    if (s == base_quant_name(q)) {
      *out = q;
      return true;
    }
  return false;
}

std::string nf4_layout_error(const ModelConfig& c) {
  const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  const std::pair<int64_t, int64_t> linears[] = {{Q, H}, {KV, H}, {H, Q}, {F, H}, {H, F}};
  for (auto [out, in] : linears)
    if (in % 2 != 0 || (out * in) % kNf4Block != 0)
      return Str() << "an NF4 base needs every linear [out, in] to have an even in and out x in a multiple of "
                   << kNf4Block << " (this model has [" << out << ", " << in << "])";
  return "";
}

LayerLayout resident_layer_layout(const ModelConfig& c, DType dtype, BaseQuant quant) {
  return make_layer_layout(c, dtype, quant == BaseQuant::kCode12 ? BaseQuant::kNone : quant);
}

std::string base_layout_error(const ModelConfig& c, DType dtype, BaseQuant quant) {
  if (quant == BaseQuant::kNF4) return nf4_layout_error(c);
  if (quant == BaseQuant::kCode12 && dtype != DType::kBF16)
    return Str() << "a code12 base codes bfloat16 weights (this store is " << dtype_name(dtype) << ")";
  return "";
}

// Blob order follows the LayerTensor enum; optional tensors are skipped when the config lacks them.
// NF4: each linear's codes are followed by its scales (Note [NF4 base layout]).
LayerLayout make_layer_layout(const ModelConfig& c, DType dtype, BaseQuant quant) {
  LayerLayout l;
  l.dtype = dtype;
  l.quant = quant;
  size_t cur = 0;
  const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size, D = c.head_dim;
  auto add = [&](LayerTensor id, const char* name, std::vector<int64_t> shape) {
    add_spec(&l.tensors, &cur, id, name, std::move(shape), dtype);
  };
  CHECK(base_layout_error(c, dtype, quant).empty(), base_layout_error(c, dtype, quant));
  auto linear = [&](LayerTensor id, LayerTensor aux_id, const char* name, int64_t out, int64_t in) {
    if (quant == BaseQuant::kNone) return add(id, name, {out, in});
    if (quant == BaseQuant::kCode12) {
      add_spec(&l.tensors, &cur, id, name, {out, in}, DType::kU8);
      l.tensors.back().quantized_shape = {out, in};
      add_spec(&l.tensors, &cur, aux_id, std::string(name) + ".code12", {code12_aux_bytes(out * in)}, DType::kU8);
      return;
    }
    add_spec(&l.tensors, &cur, id, name, {out, in / 2}, DType::kU8);
    l.tensors.back().quantized_shape = {out, in};
    add_spec(&l.tensors, &cur, aux_id, std::string(name) + ".absmax", {out * in / kNf4Block}, DType::kF32);
  };
  add(LayerTensor::kInputNorm, "input_layernorm.weight", {H});
  linear(LayerTensor::kQ, LayerTensor::kQAux, "self_attn.q_proj.weight", Q, H);
  linear(LayerTensor::kK, LayerTensor::kKAux, "self_attn.k_proj.weight", KV, H);
  linear(LayerTensor::kV, LayerTensor::kVAux, "self_attn.v_proj.weight", KV, H);
  linear(LayerTensor::kO, LayerTensor::kOAux, "self_attn.o_proj.weight", H, Q);
  if (c.attention_bias) {
    add(LayerTensor::kQBias, "self_attn.q_proj.bias", {Q});
    add(LayerTensor::kKBias, "self_attn.k_proj.bias", {KV});
    add(LayerTensor::kVBias, "self_attn.v_proj.bias", {KV});
  }
  if (c.qk_norm) {
    add(LayerTensor::kQNorm, "self_attn.q_norm.weight", {D});
    add(LayerTensor::kKNorm, "self_attn.k_norm.weight", {D});
  }
  add(LayerTensor::kPostNorm, "post_attention_layernorm.weight", {H});
  linear(LayerTensor::kGate, LayerTensor::kGateAux, "mlp.gate_proj.weight", F, H);
  linear(LayerTensor::kUp, LayerTensor::kUpAux, "mlp.up_proj.weight", F, H);
  linear(LayerTensor::kDown, LayerTensor::kDownAux, "mlp.down_proj.weight", H, F);
  l.bytes = cur;
  return l;
}

LayerWeights layer_weights_view(const LayerLayout& layout, void* blob) {
  LayerWeights w;
  w.quant = layout.quant;
  for (const auto& s : layout.tensors) {
    Tensor t = view_of(s, blob);
    switch (s.id) {
      case LayerTensor::kInputNorm: w.input_norm = t; break;
      case LayerTensor::kQ: w.q = t; break;
      case LayerTensor::kK: w.k = t; break;
      case LayerTensor::kV: w.v = t; break;
      case LayerTensor::kO: w.o = t; break;
      case LayerTensor::kQBias: w.q_bias = t; break;
      case LayerTensor::kKBias: w.k_bias = t; break;
      case LayerTensor::kVBias: w.v_bias = t; break;
      case LayerTensor::kQNorm: w.q_norm = t; break;
      case LayerTensor::kKNorm: w.k_norm = t; break;
      case LayerTensor::kPostNorm: w.post_norm = t; break;
      case LayerTensor::kGate: w.gate = t; break;
      case LayerTensor::kUp: w.up = t; break;
      case LayerTensor::kDown: w.down = t; break;
      case LayerTensor::kQAux: w.q_aux = t; break;
      case LayerTensor::kKAux: w.k_aux = t; break;
      case LayerTensor::kVAux: w.v_aux = t; break;
      case LayerTensor::kOAux: w.o_aux = t; break;
      case LayerTensor::kGateAux: w.gate_aux = t; break;
      case LayerTensor::kUpAux: w.up_aux = t; break;
      case LayerTensor::kDownAux: w.down_aux = t; break;
      case LayerTensor::kCount: break;
    }
  }
  return w;
}

// Extras order: embedding, final norm, lm_head (only when untied). Ids reuse LayerTensor slots
// only as tags: kInputNorm = embed, kPostNorm = final norm, kO = lm_head (see extras_weights_view).
ExtrasLayout make_extras_layout(const ModelConfig& c, DType dtype) {
  ExtrasLayout l;
  l.dtype = dtype;
  size_t cur = 0;
  add_spec(&l.tensors, &cur, LayerTensor::kInputNorm, "model.embed_tokens.weight", {c.vocab_size, c.hidden_size},
           dtype);
  add_spec(&l.tensors, &cur, LayerTensor::kPostNorm, "model.norm.weight", {c.hidden_size}, dtype);
  if (!c.tie_word_embeddings)
    add_spec(&l.tensors, &cur, LayerTensor::kO, "lm_head.weight", {c.vocab_size, c.hidden_size}, dtype);
  l.bytes = cur;
  return l;
}

ExtrasWeights extras_weights_view(const ExtrasLayout& layout, void* blob, bool tied) {
  ExtrasWeights w;
  for (const auto& s : layout.tensors) {
    Tensor t = view_of(s, blob);
    if (s.hf_suffix == "model.embed_tokens.weight") w.embed = t;
    else if (s.hf_suffix == "model.norm.weight") w.final_norm = t;
    else if (s.hf_suffix == "lm_head.weight") w.lm_head = t;
  }
  if (tied || w.lm_head.empty()) w.lm_head = w.embed;
  return w;
}

}  // namespace st
