// Dequantisation of GGUF tensor data to f32 (and from there to bf16/f16 with RNE, core/dtype.h).
//
// Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
// IQ4_XS (block layouts in formats.md §4.5 and, byte by byte, next to each dequantiser in
// gguf_dequant.cc). Refused (Unimplemented, by name): Q8_1 and Q8_K (ggml-internal, never in
// model files) and the integer types; the grid-based IQ1/IQ2/IQ3 types are not even opened.
// The arithmetic follows ggml's dequantize_row_* in the same operation order (for example Q4_K
// computes d*sc and dmin*m first), so results equal ggml's / gguf-py's bit for bit. A fused
// multiply-add cannot change that: every product that feeds an addition is exact in f32 (an f16
// scale times small integers; tests/io/gguf_dequant_test.cc has the bit counts).
//
// All functions are pure, reentrant and thread-safe; they read `src` and write `dst` only.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "io/gguf_types.h"

namespace st {

// Bytes that `n` elements of type t occupy; n must be a multiple of the block size (CHECKed).
uint64_t ggml_nbytes(GgmlType t, int64_t n);

// dst[0..n) = dequantised src. `src` holds ggml_nbytes(t, n) bytes; n is a multiple of the
// block size. Unimplemented (naming the type) for types without a dequantiser.
Status dequantize_to_f32(GgmlType t, const void* src, int64_t n, float* dst);

// As dequantize_to_f32, then converted to dst_dtype (F32, BF16 or F16; RNE). Works in chunks, so
// no f32 copy of the whole tensor is made. InvalidArgument for a non-float dst_dtype.
Status dequantize_to(GgmlType t, const void* src, int64_t n, DType dst_dtype, void* dst);

}  // namespace st
