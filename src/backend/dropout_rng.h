// The dropout RNG shared by the CPU and CUDA backends (backend.h: dropout). Counter-based, so
// element i's decision depends only on (seed, i): any thread/block order gives the same mask and
// backward re-derives it instead of storing it.
//
//   uniform(seed, i) = (splitmix64(seed ^ (i * 0x9E3779B97F4A7C15)) >> 40) * 2^-24   in [0, 1)
//   keep(seed, i, p) = uniform(seed, i) >= p           (the comparison is in f32)
//   kept value       = x * dropout_scale(p),  dropout_scale(p) = 1.0f / (1.0f - p)  (f32)
//   p >= 1 drops everything (value 0); p <= 0 keeps everything unscaled.
// i is the flat element index of the tensor. The top 24 bits are exact in a float, so both
// backends get the very same uniform value.
#pragma once

#include <cstdint>

#include "backend/dropout_seed.h"

namespace st {

// SplitMix64 finaliser (Steele, Lea, Flood 2014): increment by the golden gamma, then mix.
ST_HD inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

ST_HD inline float dropout_uniform(uint64_t seed, uint64_t i) {
  uint64_t bits = splitmix64(seed ^ (i * 0x9E3779B97F4A7C15ull)) >> 40;  // 24 bits
  return static_cast<float>(bits) * (1.0f / 16777216.0f);
}

ST_HD inline bool dropout_keep(uint64_t seed, uint64_t i, float p) { return dropout_uniform(seed, i) >= p; }

ST_HD inline float dropout_scale(float p) { return p >= 1.0f ? 0.0f : (p <= 0.0f ? 1.0f : 1.0f / (1.0f - p)); }

// y for element i: x scaled if kept, 0 if dropped.
ST_HD inline float dropout_apply(uint64_t seed, uint64_t i, float p, float x) {
  if (p <= 0.0f) return x;
  if (p >= 1.0f) return 0.0f;
  return dropout_keep(seed, i, p) ? x * dropout_scale(p) : 0.0f;
}

}  // namespace st
