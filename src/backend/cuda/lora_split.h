// The LoRA ops on tensor cores: f32 operands split into exact bf16 parts, products by cuBLASLt.
//
// Note [split LoRA products]: every LoRA op is a skinny GEMM with one bf16 operand (the
// activation) and one f32 operand (A, B, t or dt). The SIMT kernels in lora_ops.cu are latency-
// bound at 10-35 us per op on model shapes (RESULTS session 3, 2-10x their bytes). Tensor cores
// want both operands in bf16, and f32 must not be rounded to bf16 (the contract is f32 math from
// the stored values). So each f32 value v is written as the sum of three bf16 parts
//   hi = bf16(v), mid = bf16(v - hi), lo = bf16(v - hi - mid)
// (each subtraction is exact in f32; hi + mid + lo carries all 24 bits of v). A bf16 x f32 product
// then is x·hi + x·mid + x·lo: one GEMM against the parts stacked along the output axis ([3r]
// columns of f32 partial sums), and a small kernel adds them, smallest first, and applies the scale
// and the accumulation rule of backend.h (g = rnd(g + rnd(scale·rnd(sum)))). An f32 x f32 product
// (lora_up's t·Bᵀ, lora_dx's dt·A) keeps the six part pairs down to 2^-16 relative weight
// (hi·hi, hi·mid, mid·hi, hi·lo, mid·mid, lo·hi) stacked along K, so the GEMM's epilogue does the
// y += s·(...) update with its one rounding. Products of bf16 values are exact in the tensor cores'
// f32 accumulators; what remains is f32 summation order (fixed: cuBLASLt's choice per shape is
// cached and deterministic) and the dropped pairs (< 2^-23 relative).
//
// Taken for bf16 activations when r and the activation widths are multiples of 8 (cuBLASLt's
// 16-byte rows); f32 activations (the exact-f32 goldens), other shapes and lora_dx with dropout keep
// the SIMT kernels. STREAMTUNE_LORA=kernels pins the SIMT kernels (A/B benches).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace st::cuda {

class GemmRunner;

enum class LoraSplitOp { kDown, kUp, kGradB, kDt, kGradA, kDx };

// Whether an op whose activation is `act` ([N, C]) with rank r takes the split path.
bool lora_split_eligible(const Tensor& act, int64_t r);
// Device scratch (floats) the op needs: N rows, in / out widths, rank r.
int64_t lora_split_scratch_floats(LoraSplitOp op, int64_t N, int64_t in, int64_t out, int64_t r);

// As backend.h's lora_* ops (same shapes and contract); `scratch` holds lora_split_scratch_floats.
void split_lora_down(GemmRunner& g, Tensor t, Tensor x, Tensor a, float* scratch, cudaStream_t s);
void split_lora_up(GemmRunner& g, Tensor y, Tensor t, Tensor b, float scale, float* scratch, cudaStream_t s);
void split_lora_grad_b(GemmRunner& g, Tensor db, Tensor dy, Tensor t, float scale, float* scratch, cudaStream_t s);
void split_lora_dt(GemmRunner& g, Tensor dt, Tensor dy, Tensor b, float scale, float* scratch, cudaStream_t s);
void split_lora_grad_a(GemmRunner& g, Tensor da, Tensor dt, Tensor x, float* scratch, cudaStream_t s);
void split_lora_dx(GemmRunner& g, Tensor dx, Tensor dt, Tensor a, float* scratch, cudaStream_t s);

}  // namespace st::cuda
