#include "core/checksum.h"

#include <cstdio>
#include <cstring>

namespace st {
namespace {

constexpr uint64_t kMul1 = 0x9E3779B97F4A7C15ull;  // odd: multiplication is a bijection mod 2^64
constexpr uint64_t kMul2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kMul3 = 0x165667B19E3779F9ull;
constexpr int kLanes = 8;  // independent chains, so the multiplies overlap (~10 GB/s a core)

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t step(uint64_t lane, uint64_t w) { return rotl(lane ^ (w * kMul1), 29) * kMul2; }
inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kMul2;
  h ^= h >> 29;
  h *= kMul3;
  return h ^ (h >> 32);
}

}  // namespace

uint64_t checksum64(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t lane[kLanes];
  for (int i = 0; i < kLanes; ++i) lane[i] = kMul3 * static_cast<uint64_t>(i + 1);
  size_t off = 0;
  for (; off + 8 * kLanes <= bytes; off += 8 * kLanes) {
    for (int i = 0; i < kLanes; ++i) {
      uint64_t w;
      std::memcpy(&w, p + off + 8 * i, 8);
      lane[i] = step(lane[i], w);
    }
  }
  for (int i = 0; off < bytes; off += 8, i = (i + 1) % kLanes) {  // the tail, zero-padded
    uint64_t w = 0;
    std::memcpy(&w, p + off, bytes - off < 8 ? bytes - off : 8);
    lane[i] = step(lane[i], w);
  }
  uint64_t h = static_cast<uint64_t>(bytes);
  for (int i = 0; i < kLanes; ++i) h = h * kMul1 + lane[i];  // odd multiplier: each lane counts
  return avalanche(h);
}

std::string checksum_hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace st
