// code12 (core/code12.h): lossless round trips of weight-like tensors, special values and odd
// sizes; escapes at the ends and at the capacity; the refusal past it naming the tensor; a
// deterministic table; hostile aux decoded within bounds.
#include "core/code12.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"

namespace st {
namespace {

struct Coded {
  std::vector<uint8_t> body, aux;
  Status status;
};

Coded encode(const std::vector<uint16_t>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  Coded c;
  c.body.assign(static_cast<size_t>(n), 0xAB);  // garbage: the encoder writes every byte
  c.aux.assign(static_cast<size_t>(code12_aux_bytes(n)), 0xCD);
  c.status = code12_encode(v.data(), n, c.body.data(), c.aux.data(), "t");
  return c;
}

std::vector<uint16_t> decode(const Coded& c, int64_t n) {
  std::vector<uint16_t> out(static_cast<size_t>(n), 0x1234);
  code12_decode(out.data(), c.body.data(), c.aux.data(), n);
  return out;
}

std::vector<uint16_t> normal_bf16(int64_t n, float sd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = f32_to_bf16(nd(rng));
  return v;
}

TEST(Code12, RoundTripsWeightLikeTensorsOfAnySize) {
  for (int64_t n : {1, 2, 7, 8, 9, 255, 256, 257, 4096, 4097, 100000}) {
    const std::vector<uint16_t> v = normal_bf16(n, 0.02f, static_cast<uint32_t>(n));
    const Coded c = encode(v);
    ASSERT_TRUE(c.status.ok()) << n << ": " << c.status.to_string();
    EXPECT_EQ(decode(c, n), v) << "n " << n;
    EXPECT_LE(code12_escapes(c.aux.data(), n), code12_capacity(n));
  }
}

TEST(Code12, BigTensorsCodeOnSeveralThreadsWithEscapesInOrder) {
  const int64_t n = (int64_t{1} << 22) + 1234;  // past the threading threshold, not a round size
  std::vector<uint16_t> v = normal_bf16(n, 0.02f, 9);
  for (int64_t k = 0; k < 200; ++k) v[static_cast<size_t>(k * (n / 200) + (k % 3))] = 0x7F80;  // escapes in every chunk
  v.back() = 0xFFC0;
  const Coded c = encode(v);
  ASSERT_TRUE(c.status.ok()) << c.status.to_string();
  EXPECT_EQ(decode(c, n), v);
  EXPECT_GE(code12_escapes(c.aux.data(), n), 201);
  // The escapes' indices are strictly increasing: the decoders' search relies on it.
  const uint8_t* idx = c.aux.data() + code12_idx_offset(n);
  uint32_t prev = 0;
  for (int64_t j = 0; j < code12_escapes(c.aux.data(), n); ++j) {
    uint32_t i32;
    std::memcpy(&i32, idx + 4 * j, 4);
    if (j > 0) {
      ASSERT_GT(i32, prev) << "escape " << j;
    }
    prev = i32;
  }
}

TEST(Code12, SizeIsTwelveBitsAndTheEscapeRoom) {
  const int64_t n = 896 * 4864;  // Qwen2.5-0.5B's gate_proj
  const double bits = 8.0 * static_cast<double>(n + code12_aux_bytes(n)) / static_cast<double>(n);
  EXPECT_GT(bits, 12.0);
  EXPECT_LT(bits, 12.2);
  EXPECT_EQ(code12_aux_bytes(n) % 4, 0);
  EXPECT_EQ(code12_idx_offset(n) % 4, 0);
  EXPECT_EQ(code12_capacity(1), 1);
  EXPECT_EQ(code12_capacity(256), 1);
  EXPECT_EQ(code12_capacity(257), 2);
}

TEST(Code12, SpecialValuesRoundTripAsEscapesOrCodes) {
  std::vector<uint16_t> v = normal_bf16(4096, 0.02f, 7);
  const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC1, 0xFFFF, 0x7F7F, 0x3F80};
  for (size_t i = 0; i < std::size(specials); ++i) v[i * 397] = specials[i];
  v.front() = 0x7FC0;  // NaN at the first element
  v.back() = 0xFF80;   // -inf at the last
  const Coded c = encode(v);
  ASSERT_TRUE(c.status.ok()) << c.status.to_string();
  EXPECT_EQ(decode(c, 4096), v);
  EXPECT_GE(code12_escapes(c.aux.data(), 4096), 3);  // NaN, inf and 1.0 are far outside the table
}

TEST(Code12, ExactlyTheCapacityCodesAndOneMoreIsRefusedNamingTheTensor) {
  const int64_t n = 2048;  // capacity 8
  for (int extra : {0, 1}) {
    std::vector<uint16_t> v(static_cast<size_t>(n), f32_to_bf16(0.01f));
    // 15 other exponents fill the table (each twice, so they outrank the escapes); then
    // capacity + extra elements with exponents of their own.
    int64_t i = 0;
    for (int e = 0; e < 14; ++e)
      for (int k = 0; k < 2; ++k) v[static_cast<size_t>(i++)] = static_cast<uint16_t>((100 + e) << 7);
    for (int64_t k = 0; k < code12_capacity(n) + extra; ++k) v[static_cast<size_t>(i++)] = static_cast<uint16_t>((200 + k) << 7);
    const Coded c = encode(v);
    if (extra == 0) {
      ASSERT_TRUE(c.status.ok()) << c.status.to_string();
      EXPECT_EQ(code12_escapes(c.aux.data(), n), code12_capacity(n));
      EXPECT_EQ(decode(c, n), v);
    } else {
      ASSERT_FALSE(c.status.ok());
      EXPECT_NE(c.status.message().find("t: 9 of 2048"), std::string::npos) << c.status.message();
      EXPECT_NE(c.status.message().find("at most 8"), std::string::npos) << c.status.message();
    }
  }
}

TEST(Code12, TableIsTheFifteenMostCommonExponentsTiesToTheSmaller) {
  std::vector<uint16_t> v;
  for (int e = 0; e < 16; ++e) v.push_back(static_cast<uint16_t>((110 + e) << 7));  // 16 exponents, once each
  for (int k = 0; k < 3; ++k) v.push_back(static_cast<uint16_t>(125 << 7));          // 125 the most common
  const Coded c = encode(v);
  ASSERT_TRUE(c.status.ok()) << c.status.to_string();
  EXPECT_EQ(c.aux[0], 125);
  for (int k = 1; k < 15; ++k) EXPECT_EQ(c.aux[static_cast<size_t>(k)], 110 + k - 1) << k;  // ties: smaller first
  EXPECT_EQ(c.aux[15], 0);
  EXPECT_EQ(code12_escapes(c.aux.data(), static_cast<int64_t>(v.size())), 1);  // exponent 124 escapes
  EXPECT_EQ(decode(c, static_cast<int64_t>(v.size())), v);
}

TEST(Code12, HostileAuxDecodesWithinBoundsAndAlike) {
  const int64_t n = 1000;
  Coded c = encode(normal_bf16(n, 0.02f, 3));
  ASSERT_TRUE(c.status.ok());
  std::mt19937 rng(5);
  for (uint8_t& b : c.aux) b = static_cast<uint8_t>(rng());
  const uint32_t huge = 0xFFFFFFFFu;
  std::memcpy(c.aux.data() + 16, &huge, 4);  // count past the capacity: clamped
  EXPECT_EQ(code12_escapes(c.aux.data(), n), code12_capacity(n));
  const std::vector<uint16_t> a = decode(c, n), b = decode(c, n);
  EXPECT_EQ(a, b);
  // Every escape decodes to a stored value or 0; nothing past the arrays is read (the vectors are
  // exactly sized; a sanitizer build would flag it).
  for (int64_t i = 0; i < n; ++i) (void)code12_escape_value(c.aux.data(), n, i);
}

}  // namespace
}  // namespace st
