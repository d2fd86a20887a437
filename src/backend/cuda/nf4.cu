// NF4 dequantization (backend.h dequant_nf4; core/nf4.h): w = code[nibble] * absmax[block] in f32,
// rounded once to the output dtype -- the bits of the CPU reference (cpu::dequant_nf4).
//
// Memory-bound: each thread turns one 32-bit word of codes (8 elements, never straddling a
// 64-element block) into 16 bytes of bf16 (or 32 of f32), reading its block's scale once. The
// 16 code values sit in shared memory (a per-lane lookup in constant memory would serialize).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/ops.h"
#include "core/nf4.h"

namespace st::cuda {
namespace {

constexpr int kNf4Threads = 256;

template <typename T>
__device__ __forceinline__ void store8(T* out, const float* v);

template <>
__device__ __forceinline__ void store8<__nv_bfloat16>(__nv_bfloat16* out, const float* v) {
  __align__(16) __nv_bfloat16 b[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) b[i] = __float2bfloat16_rn(v[i]);
  *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(b);
}

template <>
__device__ __forceinline__ void store8<float>(float* out, const float* v) {
  reinterpret_cast<float4*>(out)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(out)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

struct Nf4Table {
  float v[16];
};

template <typename T>
__global__ void dequant_nf4_kernel(T* __restrict__ w, const uint32_t* __restrict__ codes,
                                   const float* __restrict__ absmax, int64_t words, Nf4Table table) {
  __shared__ float code[16];
  if (threadIdx.x < 16) code[threadIdx.x] = table.v[threadIdx.x];
  __syncthreads();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t c = codes[i];
    const float a = absmax[i / (kNf4Block / 8)];
    float v[8];
#pragma unroll
    for (int b = 0; b < 4; ++b) {  // byte b holds elements 2b (high nibble) and 2b + 1 (low)
      const uint32_t byte = (c >> (8 * b)) & 0xFF;
      v[2 * b] = code[byte >> 4] * a;
      v[2 * b + 1] = code[byte & 0xF] * a;
    }
    store8(w + 8 * i, v);
  }
}

}  // namespace

void launch_dequant_nf4(Tensor w, Tensor codes, Tensor absmax, cudaStream_t s) {
  const int64_t words = w.numel() / 8;
  if (words == 0) return;
  Nf4Table t;
  for (int i = 0; i < 16; ++i) t.v[i] = kNf4Code[i];
  const unsigned grid = grid_for(words, kNf4Threads, 132LL * 16);
  const auto* c = static_cast<const uint32_t*>(codes.data);
  const auto* a = static_cast<const float*>(absmax.data);
  if (w.dtype == DType::kBF16)
    dequant_nf4_kernel<<<grid, kNf4Threads, 0, s>>>(static_cast<__nv_bfloat16*>(w.data), c, a, words, t);
  else
    dequant_nf4_kernel<<<grid, kNf4Threads, 0, s>>>(static_cast<float*>(w.data), c, a, words, t);
  CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
