// first_nonfinite (model/pack.h Note [finite base weights]): oracle std::isfinite of each value
// converted to f32, over every bf16 / f16 bit pattern and random f32 ones, at every position of
// the blocked scan (inside a 64-element block and in the tail).
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace st {
namespace {

float to_f32(const void* p, DType t) {
  float v = 0;
  convert_elements(&v, DType::kF32, p, t, 1);
  return v;
}

TEST(FirstNonfinite, EveryHalfPatternAgreesWithIsfinite) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> finite(150, 0x3F80);  // 1.0 in bf16; a finite 1.875 in f16
    EXPECT_EQ(first_nonfinite(finite.data(), t, finite.size()), -1) << dtype_name(t);
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      const uint16_t h = static_cast<uint16_t>(bits);
      const bool bad = !std::isfinite(to_f32(&h, t));
      const size_t at = bits % finite.size();  // positions in the first block, the second and the tail
      std::vector<uint16_t> x = finite;
      x[at] = h;
      ASSERT_EQ(first_nonfinite(x.data(), t, x.size()), bad ? static_cast<int64_t>(at) : -1)
          << dtype_name(t) << " 0x" << std::hex << bits;
    }
  }
}

TEST(FirstNonfinite, F32FirstOfSeveralAndIntegersNever) {
  std::mt19937 rng(5);
  std::vector<float> x(1000);
  for (float& v : x) v = std::normal_distribution<float>(0.0f, 3.0f)(rng);
  EXPECT_EQ(first_nonfinite(x.data(), DType::kF32, x.size()), -1);
  x[700] = INFINITY;
  x[900] = NAN;
  EXPECT_EQ(first_nonfinite(x.data(), DType::kF32, x.size()), 700);
  uint32_t quiet_nan_payload = 0x7FC01234u, neg_inf = 0xFF800000u, max_finite = 0x7F7FFFFFu;
  std::memcpy(&x[64], &max_finite, 4);
  EXPECT_EQ(first_nonfinite(x.data(), DType::kF32, x.size()), 700);
  std::memcpy(&x[65], &neg_inf, 4);
  EXPECT_EQ(first_nonfinite(x.data(), DType::kF32, x.size()), 65);
  std::memcpy(&x[3], &quiet_nan_payload, 4);
  EXPECT_EQ(first_nonfinite(x.data(), DType::kF32, x.size()), 3);
  EXPECT_EQ(first_nonfinite(x.data(), DType::kF32, 3), -1);  // n bounds the scan
  std::vector<int32_t> ints(100, -1);  // all bits set: a NaN pattern, but not a float dtype
  EXPECT_EQ(first_nonfinite(ints.data(), DType::kI32, ints.size()), -1);
}

}  // namespace
}  // namespace st
