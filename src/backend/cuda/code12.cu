// code12 decoding (backend.h decode_code12; core/code12.h Note [code12 layout]): bf16 weights from
// their sign+mantissa bytes and 4-bit exponent codes -- the bits of the CPU reference
// (core/code12.cc code12_decode), escapes included.
//
// Memory-bound (1.5 bytes read, 2 written a weight) once the integer work is lean: each thread
// turns 8 body bytes and one 32-bit word of codes into 16 bytes of bf16, two elements a 32-bit op
// (their bytes spread into 16-bit lanes by one byte permute) unless a code is the escape. The
// 16-entry exponent table sits in shared memory.
// Escapes (~0.01% of real weights) take the lower-bound search every decoder runs, in global
// memory; they are too rare to be worth staging. Shapes or pointers the vector path cannot take
// (n % 8 != 0, misaligned) run one element a thread.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/ops.h"
#include "core/code12.h"

namespace st::cuda {
namespace {

constexpr int kCode12Threads = 256;

struct Code12Args {
  const uint8_t* body;
  const uint8_t* aux;   // table at 0, codes at kCode12HeaderBytes
  const uint32_t* idx;  // escapes' element indices
  const uint16_t* val;  // escapes' values
  int64_t capacity;     // code12_capacity(n): the stored count is clamped to it
  int64_t n;
};

// Read only when an escape is met (bytewise: the scalar path takes unaligned aux).
__device__ __forceinline__ int64_t escape_count(const Code12Args& a) {
  const uint32_t e = a.aux[16] | (a.aux[17] << 8) | (a.aux[18] << 16) | (static_cast<uint32_t>(a.aux[19]) << 24);
  return min(static_cast<int64_t>(e), a.capacity);
}

__device__ __forceinline__ uint16_t escape_value(const Code12Args& a, int64_t i) {
  const int64_t escapes = escape_count(a);
  int64_t lo = 0, hi = escapes;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (static_cast<int64_t>(a.idx[mid]) < i) lo = mid + 1;
    else hi = mid;
  }
  return lo < escapes && static_cast<int64_t>(a.idx[lo]) == i ? a.val[lo] : 0;
}

__device__ __forceinline__ uint16_t decode_one(const Code12Args& a, const uint8_t* table, int64_t i, uint32_t b,
                                               uint32_t c) {
  return c == kCode12Escape ? escape_value(a, i) : static_cast<uint16_t>(((b & 0x80) << 8) | (table[c] << 7) | (b & 0x7F));
}

__global__ void code12_vec_kernel(uint4* __restrict__ w, Code12Args a) {
  __shared__ uint8_t table[16];
  if (threadIdx.x < 16) table[threadIdx.x] = a.aux[threadIdx.x];
  __syncthreads();
  const uint2* body = reinterpret_cast<const uint2*>(a.body);
  const uint32_t* codes = reinterpret_cast<const uint32_t*>(a.aux + kCode12HeaderBytes);
  const int64_t groups = a.n / 8;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint2 b = body[g];
    const uint32_t c = codes[g];
    uint32_t out[4];
    if ((c & (c >> 1) & (c >> 2) & (c >> 3) & 0x11111111u) == 0) {  // no code 15: two lanes at a time
#pragma unroll
      for (int k = 0; k < 4; ++k) {  // elements 2k, 2k + 1: their body bytes low in two 16-bit lanes
        const uint32_t t = __byte_perm(k < 2 ? b.x : b.y, 0, k % 2 == 0 ? 0x4140 : 0x4342);
        const uint32_t e = table[(c >> (8 * k)) & 0xF] | (static_cast<uint32_t>(table[(c >> (8 * k + 4)) & 0xF]) << 16);
        out[k] = ((t & 0x00800080u) << 8) | (e << 7) | (t & 0x007F007Fu);
      }
    } else {  // an escape among the eight (~1 group in 1,000 of real weights)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint32_t bw = k < 2 ? b.x : b.y;
        const uint32_t b0 = (bw >> (16 * (k % 2))) & 0xFF, b1 = (bw >> (16 * (k % 2) + 8)) & 0xFF;
        const uint32_t c0 = (c >> (8 * k)) & 0xF, c1 = (c >> (8 * k + 4)) & 0xF;
        const uint16_t v0 = decode_one(a, table, 8 * g + 2 * k, b0, c0);
        const uint16_t v1 = decode_one(a, table, 8 * g + 2 * k + 1, b1, c1);
        out[k] = static_cast<uint32_t>(v0) | (static_cast<uint32_t>(v1) << 16);
      }
    }
    w[g] = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

__global__ void code12_scalar_kernel(uint16_t* __restrict__ w, Code12Args a) {
  __shared__ uint8_t table[16];
  if (threadIdx.x < 16) table[threadIdx.x] = a.aux[threadIdx.x];
  __syncthreads();
  const uint8_t* codes = a.aux + kCode12HeaderBytes;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t c = (codes[i / 2] >> (i % 2 == 0 ? 0 : 4)) & 0xF;
    w[i] = decode_one(a, table, i, a.body[i], c);
  }
}

}  // namespace

void launch_decode_code12(Tensor w, Tensor body, Tensor aux, cudaStream_t s) {
  const int64_t n = w.numel();
  CHECK(w.dtype == DType::kBF16 && body.dtype == DType::kU8 && aux.dtype == DType::kU8 && body.numel() == n &&
            aux.numel() == code12_aux_bytes(n),
        "decode_code12: w " << w.shape_str() << " body " << body.shape_str() << " aux " << aux.shape_str());
  CHECK(reinterpret_cast<uintptr_t>(aux.data) % 4 == 0, "decode_code12: misaligned aux");
  if (n == 0) return;
  const auto* ab = static_cast<const uint8_t*>(aux.data);
  Code12Args a{static_cast<const uint8_t*>(body.data), ab,
               reinterpret_cast<const uint32_t*>(ab + code12_idx_offset(n)),
               reinterpret_cast<const uint16_t*>(ab + code12_val_offset(n)), code12_capacity(n), n};
  const bool vec = n % 8 == 0 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(body.data) % 8 == 0;
  if (vec) {
    const unsigned grid = grid_for(n / 8, kCode12Threads, 132LL * 16);
    code12_vec_kernel<<<grid, kCode12Threads, 0, s>>>(static_cast<uint4*>(w.data), a);
  } else {
    const unsigned grid = grid_for(n, kCode12Threads, 132LL * 16);
    code12_scalar_kernel<<<grid, kCode12Threads, 0, s>>>(static_cast<uint16_t*>(w.data), a);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
