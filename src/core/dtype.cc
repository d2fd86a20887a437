#include "core/dtype.h"

#include <cmath>

#include "core/check.h"

namespace st {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kU8: return "uint8";
  }
  return "?";
}

const char* dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
  }
  return "?";
}

StatusOr<DType> dtype_from_safetensors(std::string_view s) {
  if (s == "F32") return DType::kF32;
  if (s == "BF16") return DType::kBF16;
  if (s == "F16") return DType::kF16;
  if (s == "I32") return DType::kI32;
  if (s == "I64") return DType::kI64;
  if (s == "U8") return DType::kU8;
  return Unimplemented(Str() << "unsupported safetensors dtype '" << std::string(s) << "'");
}

StatusOr<DType> dtype_from_user(std::string_view s) {
  if (s == "float32" || s == "fp32" || s == "f32") return DType::kF32;
  if (s == "bfloat16" || s == "bf16") return DType::kBF16;
  if (s == "float16" || s == "fp16" || s == "f16") return DType::kF16;
  return InvalidArgument(Str() << "unknown dtype '" << std::string(s) << "' (expected bfloat16, float16 or float32)");
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    v = man ? std::nanf("") : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow after rounding
  if (a < 0x38800000u) {                                                 // subnormal or zero in f16
    float af;
    std::memcpy(&af, &a, 4);
    float scaled = af * 16777216.0f;  // 2^24: f16 subnormal unit
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t exp = ((a >> 23) - 112u) << 10;
  uint32_t man = (a >> 13) & 0x3ffu;
  uint32_t rest = a & 0x1fffu;
  uint32_t h = exp | man;
  if (rest > 0x1000u || (rest == 0x1000u && (man & 1u))) h += 1;
  return static_cast<uint16_t>(sign | h);
}

static float load_elem(const void* p, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: CHECK(false, "convert_elements: non-float dtype " << dtype_name(t));
  }
  return 0;
}

void convert_elements(void* dst, DType dst_t, const void* src, DType src_t, size_t n) {
  if (dst_t == src_t) {
    std::memcpy(dst, src, n * dtype_size(dst_t));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    float v = load_elem(src, src_t, i);
    switch (dst_t) {
      case DType::kF32: static_cast<float*>(dst)[i] = v; break;
      case DType::kBF16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
      case DType::kF16: static_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
      default: CHECK(false, "convert_elements: non-float dtype " << dtype_name(dst_t));
    }
  }
}

namespace {

// First i with (x[i] & mask) == mask: the exponent all ones (NaN or infinity). Blocks of 64
// are tested branch-free first so the common all-finite case vectorizes.
template <typename U>
int64_t first_all_ones(const U* x, size_t n, U mask) {
  constexpr size_t kBlock = 64;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    U hit = 0;
    for (size_t k = 0; k < kBlock; ++k) hit |= static_cast<U>((x[i + k] & mask) == mask);
    if (hit) break;
  }
  for (; i < n; ++i)
    if ((x[i] & mask) == mask) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace

int64_t first_nonfinite(const void* data, DType t, size_t n) {
  switch (t) {
    case DType::kF32: return first_all_ones(static_cast<const uint32_t*>(data), n, uint32_t{0x7F800000u});
    case DType::kBF16: return first_all_ones(static_cast<const uint16_t*>(data), n, uint16_t{0x7F80u});
    case DType::kF16: return first_all_ones(static_cast<const uint16_t*>(data), n, uint16_t{0x7C00u});
    default: return -1;
  }
}

}  // namespace st
