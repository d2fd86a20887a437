// ggml tensor type ids used in GGUF files, with their block geometry (formats.md §4.4).
//
// Only types whose block layout we know exactly are on the allowlist: a GGUF tensor of any
// other type (the grid-based IQ1/IQ2/IQ3, TQ*, MXFP4, ...) is rejected when the file is
// opened. Being on the allowlist means the reader can size and bounds-check the tensor; whether
// it can be dequantised is a separate question (ggml_can_dequantize).
#pragma once

#include <cstdint>

namespace st {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,  // 4-bit non-linear codebook, 32-element blocks
  kIQ4_XS = 23,  // IQ4_NL codebook, 256-element super-blocks with 6-bit sub-block scales
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;     // as ggml spells it: "Q4_K"
  int64_t block_elems;  // elements per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
  bool dequantizable;   // gguf_dequant.h can turn it into f32
};

// Traits of an on-disk type id, or nullptr when the id is not on the allowlist.
const GgmlTypeTraits* ggml_type_traits(uint32_t id);
// Traits of an allowlisted type (never null).
const GgmlTypeTraits& ggml_traits(GgmlType t);
inline const char* ggml_type_name(GgmlType t) { return ggml_traits(t).name; }
inline bool ggml_can_dequantize(GgmlType t) { return ggml_traits(t).dequantizable; }

}  // namespace st
