// The dropped-out LoRA input that lora_down and lora_grad_a read (backend.h "LoRA"): element i of
// x exactly as Backend::dropout would store it in a tensor of x's dtype -- dropout_apply in f32
// (dropout_rng.h), rounded to that dtype -- formed in registers as x is loaded instead of staged
// in memory (model/layer.cc Note [dropped input]).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/vec.cuh"
#include "backend/dropout_rng.h"

namespace st::cuda {

// The mask's parameters as a kernel reads them: p <= 0 leaves x as it is.
struct InputDrop {
  float p = 0.0f;
  DropoutSeed seed;
  __host__ __device__ bool on() const { return p > 0.0f; }
};

template <class T>
__device__ __forceinline__ float dropped_input(uint64_t seed, int64_t i, float p, float v) {
  return to_f(from_f<T>(dropout_apply(seed, static_cast<uint64_t>(i), p, v)));
}

// Eight bf16 of one 16-byte load, flat indices i0 .. i0+7 (i0 even: four pairs, four hashes),
// dropped out in place: dropout_apply's values for 0 < p < 1 (the callers' only p here).
__device__ __forceinline__ uint4 dropped_input8(uint4 v, uint64_t seed, int64_t i0, float p) {
  __nv_bfloat16* e = reinterpret_cast<__nv_bfloat16*>(&v);
  const float scale = dropout_scale(p);
#pragma unroll
  for (int j = 0; j < 8; j += 2) {
    bool k0, k1;
    dropout_keep2(seed, static_cast<uint64_t>(i0 + j), p, &k0, &k1);
    e[j] = __float2bfloat16_rn(k0 ? __bfloat162float(e[j]) * scale : 0.0f);
    e[j + 1] = __float2bfloat16_rn(k1 ? __bfloat162float(e[j + 1]) * scale : 0.0f);
  }
  return v;
}

}  // namespace st::cuda
