// NF4 quantization (core/nf4.h) against the facts of formats.md §5.1-5.2: the code table, the
// nearest-code rule with bnb's midpoints (ties to the lower code), high-nibble-first packing,
// per-64 block scales, odd sizes, and dequantization as one f32 product rounded once.
#include "core/nf4.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace st {
namespace {

// Brute force: the index of the nearest code, the lower one on a tie.
uint8_t nearest(float x) {
  uint8_t best = 0;
  for (uint8_t i = 1; i < 16; ++i)
    if (std::fabs(static_cast<double>(x) - kNf4Code[i]) < std::fabs(static_cast<double>(x) - kNf4Code[best])) best = i;
  return best;
}

TEST(Nf4, CodeTableIsSortedWithExactEnds) {
  EXPECT_EQ(kNf4Code[0], -1.0f);
  EXPECT_EQ(kNf4Code[7], 0.0f);
  EXPECT_EQ(kNf4Code[15], 1.0f);
  EXPECT_EQ(kNf4Code[12], 0.44070982933044434f);
  for (int i = 1; i < 16; ++i) EXPECT_LT(kNf4Code[i - 1], kNf4Code[i]);
}

TEST(Nf4, IndexIsTheNearestCode) {
  int checked = 0;
  for (int k = -20000; k <= 20000; ++k) {
    const float x = static_cast<float>(k) / 20000.0f;
    ASSERT_EQ(nf4_index(x), nearest(x)) << "x = " << x;
    ++checked;
  }
  EXPECT_EQ(checked, 40001);
  // Known answers: 0.5 sits below the 0.4407/0.5626 midpoint (0.50166), so it maps to 12.
  EXPECT_EQ(nf4_index(0.5f), 12);
  EXPECT_EQ(nf4_index(0.51f), 13);
  EXPECT_EQ(nf4_index(-1.0f), 0);
  EXPECT_EQ(nf4_index(1.0f), 15);
  EXPECT_EQ(nf4_index(0.0f), 7);
  // A value exactly on bnb's threshold goes to the lower code (the tree tests x > threshold).
  EXPECT_EQ(nf4_index(0.8614784181118011f), 14);
  EXPECT_EQ(nf4_index(std::nextafter(0.8614784181118011f, 2.0f)), 15);
}

TEST(Nf4, QuantizePacksHighNibbleFirstWithBlockScales) {
  std::vector<float> x(130, 0.0f);  // two full blocks + a partial third
  x[0] = 2.0f;    // absmax of block 0 -> index 15
  x[1] = -1.0f;   // -0.5 -> between -0.5251 and -0.3949: nearest -0.5251 (index 2)
  x[2] = 1.0f;    // 0.5 -> 12
  x[3] = -2.0f;   // -1 -> 0
  x[64] = -0.25f; // block 1: absmax 0.25, -1 -> 0
  x[65] = 0.125f; // 0.5 -> 12
  x[128] = 3.0f;  // block 2 (partial, 2 elements): 15
  x[129] = 0.0f;  //                                 7
  std::vector<uint8_t> codes(static_cast<size_t>(nf4_code_bytes(130)));
  std::vector<float> absmax(static_cast<size_t>(nf4_blocks(130)));
  ASSERT_EQ(codes.size(), 65u);
  ASSERT_EQ(absmax.size(), 3u);
  nf4_quantize(x.data(), 130, codes.data(), absmax.data());
  EXPECT_EQ(absmax[0], 2.0f);
  EXPECT_EQ(absmax[1], 0.25f);
  EXPECT_EQ(absmax[2], 3.0f);
  EXPECT_EQ(codes[0], (15 << 4) | 2);
  EXPECT_EQ(codes[1], (12 << 4) | 0);
  EXPECT_EQ(codes[2], (7 << 4) | 7);  // zeros
  EXPECT_EQ(codes[32], (0 << 4) | 12);
  EXPECT_EQ(codes[64], (15 << 4) | 7);
}

TEST(Nf4, OddLengthPadsTheLastLowNibbleWithZeroIndex) {
  const float x[3] = {1.0f, -1.0f, 1.0f};
  uint8_t codes[2] = {0xAA, 0xAA};
  float absmax[1];
  nf4_quantize(x, 3, codes, absmax);
  EXPECT_EQ(codes[0], (15 << 4) | 0);
  EXPECT_EQ(codes[1], 15 << 4);  // low nibble 0, whatever was there
}

TEST(Nf4, ZeroBlockDecodesToZeros) {
  std::vector<float> x(64, 0.0f);
  std::vector<uint8_t> codes(32);
  float absmax = -1;
  nf4_quantize(x.data(), 64, codes.data(), &absmax);
  EXPECT_EQ(absmax, 0.0f);
  for (uint8_t c : codes) EXPECT_EQ(c, 0x77);  // Note [NF4 zero block]
  std::vector<float> y(64, 1.0f);
  nf4_dequantize(y.data(), DType::kF32, codes.data(), &absmax, 64);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(Nf4, DequantizeIsOneProductRoundedOnce) {
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * (1.0f + static_cast<float>(i / 64));
  std::vector<uint8_t> codes(128);
  std::vector<float> absmax(4);
  nf4_quantize(x.data(), 256, codes.data(), absmax.data());
  std::vector<float> f(256);
  std::vector<uint16_t> b(256);
  nf4_dequantize(f.data(), DType::kF32, codes.data(), absmax.data(), 256);
  nf4_dequantize(b.data(), DType::kBF16, codes.data(), absmax.data(), 256);
  for (int e = 0; e < 256; ++e) {
    const int q = e % 2 == 0 ? codes[e / 2] >> 4 : codes[e / 2] & 0xF;
    const float want = kNf4Code[q] * absmax[e / 64];
    ASSERT_EQ(f[e], want) << e;
    ASSERT_EQ(b[e], f32_to_bf16(want)) << e;
    // Within half the widest gap between codes (0.3038, between -1.0 and -0.6962) of the block scale.
    ASSERT_LE(std::fabs(f[e] - x[e]), 0.1520f * absmax[e / 64] + 1e-7f) << e;
  }
}

TEST(Nf4, FirstNonFinite) {
  std::vector<float> x(10, 1.0f);
  EXPECT_EQ(nf4_first_nonfinite(x.data(), 10), -1);
  x[7] = std::nanf("");
  EXPECT_EQ(nf4_first_nonfinite(x.data(), 10), 7);
  x[3] = INFINITY;
  EXPECT_EQ(nf4_first_nonfinite(x.data(), 10), 3);
}

}  // namespace
}  // namespace st
