// NF4: the 4-bit NormalFloat code of QLoRA (bitsandbytes quant_type "nf4"; formats.md §5.1-5.2).
//
// A weight is quantized in blocks of kNf4Block consecutive elements (row-major, as bnb flattens a
// Linear weight [out, in]): absmax[b] = max |x| over block b (f32), and each element becomes the
// index of the nearest of 16 code values to x * (1 / absmax[b]) -- bnb's CUDA kernel multiplies
// by the reciprocal and picks the index with a decision tree over the midpoints between codes
// (ties go to the lower code). Two indices per byte, element 2k in the HIGH nibble.
//
// Dequantization (the only thing the training path runs): w = code[index] * absmax[block] in f32,
// rounded once to the compute dtype -- the same product on every backend, so the CPU reference and
// CUDA give the same bits.
//
// Note [NF4 zero block]: an all-zero block has absmax 0; bnb's reciprocal is then inf and its
// decision tree sees NaN and emits index 0 (code -1.0). We emit index 7 (code 0.0) instead: the
// dequantized values are zeros either way (-1 * 0 = -0 in bnb, +0 here).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace st {

constexpr int64_t kNf4Block = 64;  // bnb's default blocksize, the one QLoRA uses

// The 16 code values (bnb get_4bit_type("nf4")), index order = value order.
extern const float kNf4Code[16];

// The index of the code nearest to x (x already scaled into [-1, 1]); bnb's dQuantizeNF4.
uint8_t nf4_index(float x);

inline int64_t nf4_code_bytes(int64_t n) { return (n + 1) / 2; }
inline int64_t nf4_blocks(int64_t n) { return (n + kNf4Block - 1) / kNf4Block; }

// Quantizes x[n] into codes[nf4_code_bytes(n)] and absmax[nf4_blocks(n)]. An odd n pads the last
// low nibble with index 0, as bnb does. Non-finite input is the caller's to refuse (nf4_check).
void nf4_quantize(const float* x, int64_t n, uint8_t* codes, float* absmax);

// out[e] = round_to(dtype, kNf4Code[index(e)] * absmax[e / kNf4Block]); dtype f32, bf16 or f16.
void nf4_dequantize(void* out, DType dtype, const uint8_t* codes, const float* absmax, int64_t n);

// Index of the first non-finite value of x[n], or -1: a NaN/inf weight cannot be quantized (its
// whole block would decode to NaN or zeros), so the packer refuses it naming the tensor.
int64_t nf4_first_nonfinite(const float* x, int64_t n);

}  // namespace st
