// Base-weight layout of one decoder layer, and views of it.
//
// Every layer's frozen weights live in one contiguous blob whose layout (tensor order, offsets,
// dtype) is computed from the ModelConfig alone, so a blob can be copied byte for byte between
// a shard file, a host arena, a pool slot and a resident buffer, and the same views work on all
// of them (design.md §1: the layer code is stateless with respect to where weights live).
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/hf_config.h"

namespace st {

// The tensors of a decoder layer; optional ones are absent unless the config has them.
enum class LayerTensor {
  kInputNorm, kQ, kK, kV, kO, kQBias, kKBias, kVBias, kQNorm, kKNorm, kPostNorm, kGate, kUp, kDown,
  // Coded bases only: each linear's second part -- NF4 block scales (Note [NF4 base layout]) or
  // code12 exponent codes (Note [code12 base layout]).
  kQAux, kKAux, kVAux, kOAux, kGateAux, kUpAux, kDownAux,
  kCount
};

// How the seven linear weights (q, k, v, o, gate, up, down) of a layer blob are stored.
enum class BaseQuant { kNone, kNF4, kCode12 };
const char* base_quant_name(BaseQuant q);  // "none" | "nf4" | "code12"
bool parse_base_quant(const std::string& s, BaseQuant* out);

// Note [NF4 base layout]: with BaseQuant::kNF4 each linear weight W [out, in] is stored as its NF4
// codes (U8 [out, in/2], core/nf4.h; HF name "...proj.weight") followed by its block scales (F32
// [out*in/64]; "...proj.weight.absmax", bnb's name). Norms and biases stay in the compute dtype.
// The layer dequantizes a weight into its scratch right before the GEMMs that read it
// (model/layer.cc Note [NF4 base]); the frozen base is the dequantized weights, exactly.
//
// Note [code12 base layout]: with BaseQuant::kCode12 (a bf16 layout only) each linear weight W
// [out, in] is stored losslessly in ~12 bits a weight (core/code12.h): its sign+mantissa bytes
// (U8 [out, in]; "...proj.weight") followed by its exponent codes and escapes (U8
// [code12_aux_bytes(out*in)]; "...proj.weight.code12"). The layer decodes a group of linears into
// the same staging as NF4 right before its GEMMs: the frozen base is the bf16 weights, bit for bit,
// while a streamed layer moves ~24% fewer bytes.

struct LayerTensorSpec {
  LayerTensor id;
  std::string hf_suffix;        // "self_attn.q_proj.weight" (HF name after "model.layers.N.")
  std::vector<int64_t> shape;   // HF shape, e.g. q_proj [NH*D, H]
  size_t offset = 0;            // within the blob, aligned to kLayerAlign
  size_t nbytes = 0;
  DType dtype = DType::kBF16;   // as stored: the layout's dtype, or U8 codes / F32 scales (NF4)
  // NF4 codes: the linear's logical shape [out, in] (shape is that of the codes, [out, in/2]).
  std::vector<int64_t> quantized_shape;
  bool quantized() const { return !quantized_shape.empty(); }
};

constexpr size_t kLayerAlign = 256;

struct LayerLayout {
  DType dtype = DType::kBF16;            // compute dtype (norms, biases, dense linears)
  BaseQuant quant = BaseQuant::kNone;
  std::vector<LayerTensorSpec> tensors;  // in blob order
  size_t bytes = 0;                      // blob size (multiple of kLayerAlign)
  const LayerTensorSpec* find(LayerTensor id) const;  // nullptr if the config lacks it
};

// An NF4 layout needs every linear [out, in] to have an even `in` and out x in a multiple of
// kNf4Block (true of every real model; blocks run over the flattened weight, as in bnb, and may
// span rows): callers check nf4_layout_error (why not, or "") first; make_layer_layout CHECKs it.
LayerLayout make_layer_layout(const ModelConfig& c, DType dtype, BaseQuant quant = BaseQuant::kNone);
std::string nf4_layout_error(const ModelConfig& c);
// The layout a layer kept resident on the device has: the dense twin of a code12 layout (decoded
// once when loaded: stream/streamed_layer_source.h Note [resident code12 layers]), else `quant`'s.
LayerLayout resident_layer_layout(const ModelConfig& c, DType dtype, BaseQuant quant);
// Why `quant` cannot store this model in `dtype` (nf4_layout_error; code12 needs bf16), or "".
std::string base_layout_error(const ModelConfig& c, DType dtype, BaseQuant quant);

// Views into one layer blob (device or host memory). Absent tensors are empty().
struct LayerWeights {
  Tensor input_norm;           // [H]
  Tensor q, k, v, o;           // q [NH*D, H], k/v [KVH*D, H], o [H, NH*D]
  Tensor q_bias, k_bias, v_bias;  // [NH*D], [KVH*D], [KVH*D]   (Qwen2)
  Tensor q_norm, k_norm;       // [D]                           (Qwen3)
  Tensor post_norm;            // [H]
  Tensor gate, up, down;       // gate/up [F, H], down [H, F]
  // Coded bases: the seven linears above are U8 -- NF4 codes [out, in/2] (Note [NF4 base layout])
  // or code12 sign+mantissa bytes [out, in] (Note [code12 base layout]) -- and these their second
  // parts: F32 block scales or U8 exponent codes. Empty for a dense base.
  Tensor q_aux, k_aux, v_aux, o_aux, gate_aux, up_aux, down_aux;
  BaseQuant quant = BaseQuant::kNone;
};

LayerWeights layer_weights_view(const LayerLayout& layout, void* blob);

// The non-layer weights ("extras"): embedding, final norm and lm_head (absent when tied).
struct ExtrasLayout {
  DType dtype = DType::kBF16;
  std::vector<LayerTensorSpec> tensors;  // hf_suffix holds the full HF name
  size_t bytes = 0;
};
ExtrasLayout make_extras_layout(const ModelConfig& c, DType dtype);
struct ExtrasWeights {
  Tensor embed;       // [V, H]
  Tensor final_norm;  // [H]
  Tensor lm_head;     // [V, H] (== embed when tied)
};
ExtrasWeights extras_weights_view(const ExtrasLayout& layout, void* blob, bool tied);

// Where the trainer gets a layer's weights for the next visit. Implementations: resident
// (every blob on the device; model/) and streamed (LayerBufferPool + Prefetcher; stream/).
//
// Protocol for one step: begin_step(visits) with the whole visit sequence (layer indices in the
// order compute will use them), then for each visit in order: acquire(layer) -> kernels reading
// the views -> release(layer). acquire makes the compute stream wait until the weights are
// there (it does not block the host in steady state); release marks, on the compute stream,
// that the kernels reading them are enqueued (the slot may be refilled once they finish).
// Memory a training step lends the source between uses (stream/prefetcher.h Note [lent activation
// memory]): layer `layer`'s saved region, dead from the end of each backward visit of the layer to
// its next visit.
struct LentRegion {
  int layer = -1;
  void* data = nullptr;
  size_t bytes = 0;  // regions of consecutive layers may be adjacent (a source may lend them together)
};

class LayerSource {
 public:
  virtual ~LayerSource() = default;
  virtual void begin_step(const std::vector<int>& visits) = 0;
  // A training step: backward[i] says visit i is its layer's backward (which frees the layer's lent
  // region). Sources that borrow nothing ignore the flags.
  virtual void begin_training_step(const std::vector<int>& visits, const std::vector<bool>& backward) {
    (void)backward;
    begin_step(visits);
  }
  // Offers these regions (between steps; the same set each call, so repeating it is free; the
  // memory must outlive the source). A source may use any of them as layer buffers inside their
  // windows, or none.
  virtual void lend_regions(const std::vector<LentRegion>& regions) { (void)regions; }
  virtual LayerWeights acquire(int layer) = 0;
  virtual void release(int layer) = 0;
  virtual void end_step() = 0;
  // A load that failed (disk read error, corrupt store) is sticky: acquire() cannot return a
  // Status, so the trainer checks this after each step and discards the step on error.
  virtual Status status() const { return Status::OK(); }
  // Whether a step's visits may copy weights in (some layer streams): evaluation then takes
  // batches through the layers together (model/model.h Note [layer-major evaluation]).
  virtual bool loads_layers() const { return false; }
};

}  // namespace st
