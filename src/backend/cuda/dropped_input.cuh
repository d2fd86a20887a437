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

// Eight bf16 of one 16-byte load, flat indices i0 .. i0+7, dropped out in place.
__device__ __forceinline__ uint4 dropped_input8(uint4 v, uint64_t seed, int64_t i0, float p) {
  __nv_bfloat16* e = reinterpret_cast<__nv_bfloat16*>(&v);
#pragma unroll
  for (int j = 0; j < 8; ++j)
    e[j] = __float2bfloat16_rn(dropout_apply(seed, static_cast<uint64_t>(i0 + j), p, __bfloat162float(e[j])));
  return v;
}

}  // namespace st::cuda
