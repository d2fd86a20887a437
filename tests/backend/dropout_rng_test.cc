// The dropout mask's integer form (dropout_rng.h dropout_threshold / dropout_keep) decides exactly
// as the f32 compare uniform(seed, i) >= p it replaced: probed at every 24-bit value around the
// threshold of 20,000 random p and of the p where p * 2^24 is a whole number, and over 2^20
// counters at a few p against the full splitmix64 (its last step cannot touch the 24 bits used).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "backend/dropout_rng.h"

namespace st {
namespace {

bool keep_f32(uint32_t bits, float p) { return static_cast<float>(bits) * (1.0f / 16777216.0f) >= p; }

TEST(DropoutRng, IntegerThresholdIsTheF32Compare) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  auto probe = [](float p) {
    const uint32_t thr = dropout_threshold(p);
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(thr) - 3);
    const int64_t hi = std::min<int64_t>((int64_t{1} << 24) - 1, static_cast<int64_t>(thr) + 3);
    for (int64_t b = lo; b <= hi; ++b)
      ASSERT_EQ(static_cast<uint32_t>(b) >= thr, keep_f32(static_cast<uint32_t>(b), p)) << "p=" << p << " bits=" << b;
    for (uint32_t b : {0u, 1u, (1u << 24) - 1})
      ASSERT_EQ(b >= thr, keep_f32(b, p)) << "p=" << p << " bits=" << b;
  };
  for (int i = 0; i < 20000; ++i) probe(u(rng));
  for (int64_t k = 1; k < (1 << 24); k += 4099) {
    const float p = static_cast<float>(k) / 16777216.0f;  // exact: p * 2^24 == k
    probe(p);
    probe(std::nextafter(p, 0.0f));
    probe(std::nextafter(p, 1.0f));
  }
  for (float p : {1e-9f, 0.05f, 0.1f, 0.5f, 0.999999f, 0.0f, -0.5f, 1.0f, 2.0f}) probe(p);
  EXPECT_EQ(dropout_threshold(0.0f), 0u);
  EXPECT_EQ(dropout_threshold(1.0f), 1u << 24);
}

TEST(DropoutRng, KeepMatchesUniformOverCounters) {
  for (float p : {0.05f, 0.1f, 0.3f, 0.5f}) {
    int64_t kept = 0;
    for (uint64_t i = 0; i < (1u << 20); ++i) {
      const bool k = dropout_keep(0x1234ABCDull, i, p);
      // The full splitmix64, last step included, gives the same 24 bits.
      const uint64_t full = splitmix64(0x1234ABCDull ^ (i * 0x9E3779B97F4A7C15ull)) >> 40;
      ASSERT_EQ(dropout_bits(0x1234ABCDull, i), full) << "i=" << i;
      ASSERT_EQ(k, static_cast<float>(full) * (1.0f / 16777216.0f) >= p) << "p=" << p << " i=" << i;
      kept += k;
    }
    // And it is a dropout of rate p: within 6 sigma of (1 - p) n.
    const double n = 1u << 20, want = (1.0 - p) * n, sd = std::sqrt(n * p * (1.0 - p));
    EXPECT_LT(std::abs(kept - want), 6 * sd) << "p=" << p;
  }
}

}  // namespace
}  // namespace st
