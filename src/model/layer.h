// One decoder layer (Llama / Mistral / Qwen2 / Qwen3) with LoRA: forward, and backward with
// per-layer recomputation (by default only the layer input is saved between the passes, design.md
// §1; Note [recompute] for keeping more when memory allows).
//
// Written with Backend ops only, so the CPU reference and CUDA run the same sequence of ops on the
// same bytes. The weights are views (model/weights.h) wherever they are now: stateless with
// respect to base weights.
//
// Math (HF pre-norm block; PEFT LoRA, formats.md §2.5, §3.7):
//   xn = rmsnorm(x); q,k,v = xn W^T (+b) + s * (drop(xn) A^T) B^T ; [Qwen3: per-head rmsnorm of q,k]
//   rope(q,k); att = attention(q,k,v); h = x + att Wo^T (+lora)
//   hn = rmsnorm(h); m = silu(hn Wg^T +lora) * (hn Wu^T +lora); out = h + m Wd^T (+lora)
// The LoRA path does f32 math, as PEFT does: fused Backend ops read bf16 or f32 activations
// directly and round once on store (layer.cc Note [fused LoRA]).
//
// Note [layer scratch]: all intermediates come from one caller-owned scratch region of
// layer_scratch_bytes(...) bytes, carved per call (model/carver.h). No allocation happens here.
#pragma once

#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "io/hf_config.h"
#include "model/lora.h"
#include "model/weights.h"

namespace st {

enum class Recompute { kFull, kAttention, kNone };  // Note [recompute]
const char* recompute_name(Recompute r);           // "full" | "attention" | "none"
bool parse_recompute(const std::string& s, Recompute* out);

struct LayerCtx {
  Backend* be = nullptr;
  const ModelConfig* cfg = nullptr;
  int64_t layer = 0;           // index in the model (its attention window: ModelConfig::attention_window)
  DType act = DType::kF32;     // activation dtype; equals the weights' dtype
  int64_t tokens = 0;          // N = B*T
  SeqLayout seq;               // positions / doc ids (backend memory)
  Tensor inv_freq;             // f32 [D/2], backend memory
  void* scratch = nullptr;     // backend memory, layer_scratch_bytes(...) bytes
  size_t scratch_bytes = 0;
  bool train = true;           // dropout on the LoRA input only when training
  uint64_t dropout_seed = 0;   // per (micro-batch, layer); targets derive theirs from it
  // When set (backend memory): holds dropout_seed, and the dropout ops read it from there when they
  // run, so a recorded launch plan of this visit draws each micro-batch's own masks
  // (model/launch_plans.h Note [layer launch plans]).
  const uint64_t* dropout_seed_slot = nullptr;
  // Note [recompute]: how much of the forward the backward runs again. kFull keeps only the layer
  // input (per-layer checkpointing); kAttention keeps the attention output + its log-sum-exp;
  // kNone keeps every intermediate the backward reads, so the backward runs no forward op at all.
  // Every mode also keeps the LoRA down-projections t (layer.cc Note [kept LoRA t]). The kept
  // tensors live in `saved` (backend memory, this layer's own region of layer_saved_bytes(...)
  // bytes, filled by this micro-batch's training forward; null outside training, where kFull
  // forms t in the scratch). The kernels are deterministic, so the bits are the same in every
  // mode; only time and memory differ.
  Recompute recompute = Recompute::kFull;
  void* saved = nullptr;
  size_t saved_bytes = 0;
  // Backward only: the scratch (and saved region) still hold this micro-batch's training forward
  // of this layer -- the last layer, whose backward follows its forward with only the head (its own
  // scratch) in between -- so the backward recomputes nothing: the same bits (the forward ops are
  // deterministic), one layer's forward less at the forward->backward turn.
  bool forward_current = false;
};

// The attention geometry of layer `layer` of `c` (heads, kv heads, head dim, softmax scale, sliding
// window).
AttnShape attention_shape(const ModelConfig& c, int64_t layer);
// The distinct attention geometries of `c`'s layers (one, or two with per-layer sliding windows):
// what the fused-attention workspace must be planned for.
std::vector<AttnShape> attention_shapes(const ModelConfig& c);
// Backend::fused_attention_workspace for every geometry of `c` (the largest; 0 = none fused).
// `packed`: rows of several documents (sample_packing) -- Note [packed attention allowance].
uint64_t fused_attention_workspace(Backend* be, int64_t batch, int64_t seq, const ModelConfig& c,
                                   bool packed = false);
// Backend::fused_attention_min_workspace likewise (0 for packed rows: their ragged graphs have no
// chunked backward).
uint64_t fused_attention_min_workspace(Backend* be, int64_t batch, int64_t seq, const ModelConfig& c, bool packed);

// Bytes of scratch one layer's forward or backward needs for `tokens` tokens (any Recompute), with
// the dequantization staging of an NF4 base (layer.cc Note [NF4 base]).
size_t layer_scratch_bytes(const ModelConfig& c, int64_t tokens, const LoraConfig& lc, DType act,
                           BaseQuant quant = BaseQuant::kNone);
// Bytes one layer keeps from its training forward for its backward under `r` (for kFull: the LoRA
// down-projections only).
size_t layer_saved_bytes(const ModelConfig& c, int64_t tokens, const LoraConfig& lc, DType act, Recompute r);

// out[N,H] = layer(x[N,H]). x and out: act dtype, backend memory, distinct. Enqueues on compute.
void layer_forward(const LayerCtx& ctx, const LayerWeights& w, const LoraLayer& lora, Tensor x, Tensor out);

// DoRA (layer.cc Note [DoRA]): m = ||W + s B A||_row for every DoRA target of the layer, through
// the forward's own dora_norm (so with B = 0, PEFT's init, the first scale m / norm is exactly 1).
// Uses ctx's scratch (the dequantization staging of an NF4 base). Enqueues on compute.
void layer_dora_init(const LayerCtx& ctx, const LayerWeights& w, const LoraLayer& lora);

// Recomputes what ctx.recompute says from x (Note [recompute]; with a saved region this
// micro-batch's training forward must have filled ctx.saved), then back-propagates dout[N,H]: writes dx[N,H] (distinct from
// dout and x; empty: not computed, the LoRA gradients only) and ACCUMULATES (+=) the LoRA gradients da/db of `lora`.
void layer_backward(const LayerCtx& ctx, const LayerWeights& w, const LoraLayer& lora, Tensor x, Tensor dout,
                    Tensor dx);

}  // namespace st
