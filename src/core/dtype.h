// Element types and scalar conversions. bf16 rounding is round-to-nearest-even (as torch),
// NaN stays NaN (quiet). f16 conversions are IEEE binary16 with RNE, subnormals kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/status.h"

namespace st {

enum class DType : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2, kI32 = 3, kI64 = 4, kU8 = 5 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);                 // "float32", "bfloat16", ...
const char* dtype_safetensors_name(DType t);     // "F32", "BF16", "F16", "I32", "I64", "U8"
StatusOr<DType> dtype_from_safetensors(std::string_view s);
// Accepts "float32"/"fp32"/"f32", "bfloat16"/"bf16", "float16"/"fp16"/"f16".
StatusOr<DType> dtype_from_user(std::string_view s);

// A bfloat16 value as raw bits.
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

inline float bf16_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<uint16_t>((u >> 16) | 0x40);
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Bulk conversions between any two of {f32, bf16, f16}: dst[i] = src[i].
void convert_elements(void* dst, DType dst_t, const void* src, DType src_t, size_t n);

// Index of the first NaN or infinity among n elements of a float dtype (f32, bf16, f16), or -1
// (also for integer dtypes). Exponent-bit tests, ~memory speed.
int64_t first_nonfinite(const void* data, DType t, size_t n);

}  // namespace st
