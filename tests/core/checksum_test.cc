// checksum64: every single-bit flip and every length change of a buffer changes it (the store's
// damage detection, manifest.h verify_store_file); equal bytes give equal sums at any alignment.
#include "core/checksum.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <vector>

namespace st {
namespace {

TEST(Checksum, EveryBitFlipAndLengthChangesIt) {
  std::mt19937 rng(3);
  std::vector<unsigned char> b(1000);
  for (auto& c : b) c = static_cast<unsigned char>(rng());
  const uint64_t base = checksum64(b.data(), b.size());
  std::set<uint64_t> seen = {base};
  for (size_t i = 0; i < b.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      b[i] ^= static_cast<unsigned char>(1u << bit);
      const uint64_t v = checksum64(b.data(), b.size());
      EXPECT_NE(v, base) << "byte " << i << " bit " << bit;
      seen.insert(v);
      b[i] ^= static_cast<unsigned char>(1u << bit);
    }
  EXPECT_EQ(seen.size(), 8001u);  // no two flips collide either
  for (size_t n = 0; n < 200; ++n) EXPECT_NE(checksum64(b.data(), n), checksum64(b.data(), n + 1)) << n;
  // A zero tail is not the same as a shorter buffer.
  std::vector<unsigned char> z(16, 0);
  EXPECT_NE(checksum64(z.data(), 8), checksum64(z.data(), 16));
}

TEST(Checksum, SameBytesAtAnyAlignment) {
  std::vector<unsigned char> a(300), b(301);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<unsigned char>(i * 7 + 1);
  std::memcpy(b.data() + 1, a.data(), a.size());
  EXPECT_EQ(checksum64(a.data(), a.size()), checksum64(b.data() + 1, a.size()));
  EXPECT_EQ(checksum_hex(0x0123456789abcdefull), "0123456789abcdef");
}

}  // namespace
}  // namespace st
