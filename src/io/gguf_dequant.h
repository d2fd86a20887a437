// Dequantisation of GGUF tensor data to f32 (and from there to bf16/f16 with RNE, core/dtype.h).
//
// Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K (block layouts in formats.md §4.5).
// The arithmetic follows ggml's dequantize_row_* in the same operation order (for example Q4_K
// computes d*sc and dmin*m first), so results equal ggml's / gguf-py's bit for bit when the
// compiler does not fuse multiply-adds.
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
