// Launchers of the CUDA backend's kernels (one file per op family). Each takes the stream to
// enqueue on and CHECKs nothing about shapes: CudaBackend validates before calling.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace st::cuda {

// elementwise.cu
void launch_add_bias(Tensor y, Tensor bias, cudaStream_t s);
void launch_add(Tensor y, Tensor a, Tensor b, cudaStream_t s);
void launch_scale(Tensor y, Tensor x, float f, cudaStream_t s);
void launch_convert(Tensor dst, Tensor src, cudaStream_t s);
void launch_embedding(Tensor out, Tensor table, const int32_t* ids, cudaStream_t s);
void launch_swiglu(Tensor h, Tensor gate, Tensor up, cudaStream_t s);
void launch_swiglu_backward(Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up, cudaStream_t s);
void launch_dropout(Tensor y, Tensor x, float p, DropoutSeed seed, cudaStream_t s);
void launch_uniform_noise(Tensor x, float magnitude, DropoutSeed seed, cudaStream_t s);
void launch_adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const Backend::AdamW& h, cudaStream_t s);
void launch_rope(Tensor x, const int32_t* positions, Tensor inv_freq, bool inverse, cudaStream_t s);
// out[j][i] = starts[i] * mult[j] for i < n, j < 3 (out[j] = out + j * stride): a ragged
// attention's element offsets of q/out, k/v and lse from token offsets (attention_cudnn.h).
void launch_document_offsets(int32_t* out, int64_t stride, const int32_t* starts, int64_t n, int32_t mult0,
                             int32_t mult1, int32_t mult2, cudaStream_t s);
// scratch: at least kSumSquaresBlocks floats of device memory.
constexpr int kSumSquaresBlocks = 1024;
void launch_sum_squares(Tensor out, Tensor x, float* scratch, cudaStream_t s);

// nf4.cu: w [out, in] f32/bf16 (numel % 64 == 0, 16-byte aligned), codes 4-byte aligned.
void launch_dequant_nf4(Tensor w, Tensor codes, Tensor absmax, cudaStream_t s);
// code12.cu
void launch_decode_code12(Tensor w, Tensor body, Tensor aux, cudaStream_t s);

// norm.cu
// q and k [tokens, heads, D] (their own head counts) in one launch, the bits of launch_rope on
// each; false (nothing launched) when the shapes or alignment need the separate kernels.
bool launch_rope_qk(Tensor q, Tensor k, const int32_t* positions, Tensor inv_freq, bool inverse, cudaStream_t s);
void launch_rmsnorm(Tensor y, Tensor rstd, Tensor x, Tensor w, float eps, cudaStream_t s);
// res (optional): dx = rnd(rnd(gradient) + res), the bits of the backward followed by launch_add.
void launch_rmsnorm_backward(Tensor dx, Tensor dy, Tensor x, Tensor w, Tensor rstd, cudaStream_t s,
                             Tensor res = Tensor());

// cross_entropy.cu. scratch: at least R floats of device memory.
void launch_cross_entropy(Tensor logits, Tensor loss_sum, const int32_t* labels, float grad_scale,
                          float* scratch, cudaStream_t s);

// cross_entropy_chunked.cu: the vocabulary-chunked head (backend.h ce_chunk / ce_finish). Labels,
// m, s, target, acc, loss_sum: device memory. acc / dx may be empty (inference / no gradient).
void launch_ce_chunk(Tensor logits, Tensor acc, Tensor m, Tensor s, Tensor target, const int32_t* labels,
                     int64_t col0, cudaStream_t st);
void launch_ce_finish(Tensor dx, Tensor loss_sum, Tensor acc, Tensor m, Tensor s, Tensor target, Tensor w_label,
                      const int32_t* labels, float grad_scale, const float* row_scale, cudaStream_t st);

// lora_ops.cu: the fused LoRA ops (backend.h "LoRA"). Ops that split a reduction over blocks
// write partial sums to `scratch`: at least lora_scratch_floats(N, C, r, op) floats of device
// memory, where C is the streamed activation's width (x: in, dy: out).
enum class LoraScratchOp { kRowDot /* lora_down, lora_dt */, kColSum /* lora_grad_a, lora_grad_b */ };
int64_t lora_scratch_floats(int64_t N, int64_t C, int64_t r, LoraScratchOp op);
void launch_lora_down(Tensor t, Tensor x, Tensor a, float dropout_p, DropoutSeed seed, float* scratch, cudaStream_t s);
void launch_lora_up(Tensor y, Tensor t, Tensor b, float scale, cudaStream_t s);
void launch_lora_grad_b(Tensor db, Tensor dy, Tensor t, float scale, float* scratch, cudaStream_t s);
void launch_lora_dt(Tensor dt, Tensor dy, Tensor b, float scale, float* scratch, cudaStream_t s);
void launch_lora_grad_a(Tensor da, Tensor dt, Tensor x, float dropout_p, DropoutSeed seed, float* scratch,
                        cudaStream_t s);
void launch_lora_dx(Tensor dx, Tensor dt, Tensor a, float dropout_p, DropoutSeed seed, cudaStream_t s);
// lora_tc.cu: the same ops on tensor cores (Note [split LoRA products]) where *_ok says so: bf16
// activations, r a multiple of 8 up to 64, the row dot's reduction axis a multiple of 32 on a
// 16-byte aligned activation, the row update's width a multiple of 8. STREAMTUNE_LORA=kernels: never.
bool lora_tc_rowdot_ok(const Tensor& act, int64_t r);
bool lora_tc_update_ok(const Tensor& act, const Tensor& rt, int64_t r);  // rt: t / dt
// The row dots split long reductions over blocks (and lora_dt may stage a transposed B): scratch of
// lora_tc_rowdot_scratch_floats(N, K, r, dt) floats, K = in (lora_down) or out (lora_dt, dt = true).
int64_t lora_tc_rowdot_scratch_floats(int64_t N, int64_t K, int64_t r, bool dt);
void launch_lora_down_tc(Tensor t, Tensor x, Tensor a, float dropout_p, DropoutSeed seed, float* scratch,
                         cudaStream_t s);
void launch_lora_dt_tc(Tensor dt, Tensor dy, Tensor b, float scale, float* scratch, cudaStream_t s);
void launch_lora_up_tc(Tensor y, Tensor t, Tensor b, float scale, cudaStream_t s);
void launch_lora_dx_tc(Tensor dx, Tensor dt, Tensor a, float dropout_p, DropoutSeed seed, cudaStream_t s);
// Column sums (grad_a, grad_b) on tensor cores: bf16 activation, r a multiple of 8 up to 32, width a
// multiple of 8, 16-byte aligned; scratch: lora_tc_colsum_scratch_floats(N, C, r) floats.
bool lora_tc_colsum_ok(const Tensor& act, int64_t r);
int64_t lora_tc_colsum_scratch_floats(int64_t N, int64_t C, int64_t r);
void launch_lora_grad_b_tc(Tensor db, Tensor dy, Tensor t, float scale, float* scratch, cudaStream_t s);
void launch_lora_grad_a_tc(Tensor da, Tensor dt, Tensor x, float dropout_p, DropoutSeed seed, float* scratch,
                           cudaStream_t s);
// out[i] = rnd(scale · sum_s part[s][i]) for i < n, s in order (lora_ops.cu).
void launch_lora_sum_splits(float* out, const float* part, int64_t n, int splits, float scale, cudaStream_t s);
// g[k*gks + c*gcs] = rnd(g + rnd(scale · sum_s part[s][k*C + c])), s in order (lora_ops.cu).
void launch_lora_add_splits(float* g, int64_t gks, int64_t gcs, const float* part, int64_t C, int64_t r, int splits,
                            float scale, cudaStream_t s);

// dora_ops.cu: the DoRA ops (backend.h "DoRA"). dora_norm (W [out, in] f32/bf16) and dora_backward
// split long reductions over blocks: scratch of dora_*_scratch_floats() floats of device memory
// (0: none needed, scratch may be null). dora_combine and dora_backward take 16-byte vector paths
// where the dtypes, width and alignment allow; both paths give the same bits.
int64_t dora_norm_scratch_floats(int64_t out, int64_t in, int64_t r);
int64_t dora_backward_scratch_floats(int64_t N, int64_t out);
void launch_dora_norm(Tensor norm, Tensor scale, Tensor w, Tensor a, Tensor b, Tensor mag, float s, float* scratch,
                      cudaStream_t st);
void launch_dora_combine(Tensor y, Tensor scale, Tensor bias, Tensor residual, cudaStream_t s);
void launch_dora_backward(Tensor g, Tensor dmag, Tensor dy, Tensor v, Tensor scale, Tensor norm, float* scratch,
                          cudaStream_t s);

// attention.cu
void launch_attention(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, const SeqLayout& L,
                      const AttnShape& a, cudaStream_t s);
// scratch: attention_backward_scratch_floats() floats of device memory (GQA per-head dK/dV, then
// the tensor-core path's delta = rowsum(dO*O) [B, NH, T]).
inline int64_t attention_backward_scratch_floats(const SeqLayout& L, const AttnShape& a) {
  return (a.num_heads == a.num_kv_heads ? 0 : 2 * L.batch * L.seq * a.num_heads * a.head_dim) +
         L.batch * a.num_heads * L.seq;
}
void launch_attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v,
                               Tensor out, Tensor lse, const SeqLayout& L, const AttnShape& a, float* scratch,
                               cudaStream_t s);

// attention_kv.cu (decode against a KV cache; v_cache must have k_cache's dtype)
void launch_attention_kv(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache, int64_t q_start,
                         const AttnShape& s, cudaStream_t stream);

}  // namespace st::cuda
