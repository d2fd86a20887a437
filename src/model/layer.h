// One decoder layer (Llama / Mistral / Qwen2 / Qwen3) with LoRA: forward, and backward with
// per-layer recomputation (only the layer input is saved between the passes; design.md §1).
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

#include "backend/backend.h"
#include "io/hf_config.h"
#include "model/lora.h"
#include "model/weights.h"

namespace st {

struct LayerCtx {
  Backend* be = nullptr;
  const ModelConfig* cfg = nullptr;
  DType act = DType::kF32;     // activation dtype; equals the weights' dtype
  int64_t tokens = 0;          // N = B*T
  SeqLayout seq;               // positions / doc ids (backend memory)
  Tensor inv_freq;             // f32 [D/2], backend memory
  void* scratch = nullptr;     // backend memory, layer_scratch_bytes(...) bytes
  size_t scratch_bytes = 0;
  bool train = true;           // dropout on the LoRA input only when training
  uint64_t dropout_seed = 0;   // per (micro-batch, layer); targets derive theirs from it
  // Note [saved attention]: selective recompute. When set (backend memory, this layer's own
  // buffers: att act [N, NH*D], lse f32 [N*NH]), the training forward writes the attention output
  // and its log-sum-exp there, and the backward's recompute reuses them instead of running the
  // attention forward again. The kernels are deterministic, so the bits are the same either way.
  Tensor saved_att, saved_lse;
};

// Bytes of scratch one layer's forward or backward needs for `tokens` tokens in `batch` rows.
size_t layer_scratch_bytes(const ModelConfig& c, int64_t tokens, const LoraConfig& lc, DType act);

// out[N,H] = layer(x[N,H]). x and out: act dtype, backend memory, distinct. Enqueues on compute.
void layer_forward(const LayerCtx& ctx, const LayerWeights& w, const LoraLayer& lora, Tensor x, Tensor out);

// Recomputes the forward from x (less the attention core when ctx.saved_att is set; the
// forward of this micro-batch must have filled it), then back-propagates dout[N,H]: writes dx[N,H] (distinct from
// dout and x) and ACCUMULATES (+=) the LoRA gradients da/db of `lora`.
void layer_backward(const LayerCtx& ctx, const LayerWeights& w, const LoraLayer& lora, Tensor x, Tensor dout,
                    Tensor dx);

}  // namespace st
