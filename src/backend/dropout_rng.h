// The dropout RNG shared by the CPU and CUDA backends (backend.h: dropout). Counter-based, so
// element i's decision depends only on (seed, i): any thread/block order gives the same mask and
// backward re-derives it instead of storing it.
//
//   h(seed, j)       = splitmix64(seed ^ (j * 0x9E3779B97F4A7C15)),   one per element pair j = i >> 1
//   uniform(seed, i) = (i even ? h >> 40 : (h >> 8) & 0xFFFFFF) * 2^-24   in [0, 1)
//   keep(seed, i, p) = uniform(seed, i) >= p           (the comparison is in f32)
//   kept value       = x * dropout_scale(p),  dropout_scale(p) = 1.0f / (1.0f - p)  (f32)
//   p >= 1 drops everything (value 0); p <= 0 keeps everything unscaled.
// i is the flat element index of the tensor. 24 bits are exact in a float, so both backends get
// the very same uniform value. Two elements share one hash (two disjoint 24-bit fields of it): the
// hash is the hot part of the fused LoRA ops' masks (RESULTS session 14: a splitmix64 an element
// made them compute-bound), and kernels that walk aligned pairs form both decisions at once
// (dropout_keep2). Every 64-bit output bit of splitmix64 is well mixed, so the two fields are as
// independent as two hashes' would be.
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

ST_HD inline uint64_t dropout_hash(uint64_t seed, uint64_t pair) {
  return splitmix64(seed ^ (pair * 0x9E3779B97F4A7C15ull));
}

// The uniform of the even (odd = false) or odd element of a pair whose hash is h.
ST_HD inline float dropout_uniform_of(uint64_t h, bool odd) {
  const uint64_t bits = odd ? (h >> 8) & 0xFFFFFFull : h >> 40;  // 24 bits
  return static_cast<float>(bits) * (1.0f / 16777216.0f);
}

ST_HD inline float dropout_uniform(uint64_t seed, uint64_t i) {
  return dropout_uniform_of(dropout_hash(seed, i >> 1), (i & 1) != 0);
}

ST_HD inline bool dropout_keep(uint64_t seed, uint64_t i, float p) { return dropout_uniform(seed, i) >= p; }

// keep for elements i and i + 1, i even: one hash.
ST_HD inline void dropout_keep2(uint64_t seed, uint64_t i, float p, bool* k0, bool* k1) {
  const uint64_t h = dropout_hash(seed, i >> 1);
  *k0 = dropout_uniform_of(h, false) >= p;
  *k1 = dropout_uniform_of(h, true) >= p;
}

// NEFTune's noise for element i: u(seed, i) mapped onto [-mag, mag) (2u - 1 is exact in f32).
ST_HD inline float uniform_noise_unit(uint64_t seed, uint64_t i) { return 2.0f * dropout_uniform(seed, i) - 1.0f; }

ST_HD inline float dropout_scale(float p) { return p >= 1.0f ? 0.0f : (p <= 0.0f ? 1.0f : 1.0f / (1.0f - p)); }

// y for element i: x scaled if kept, 0 if dropped.
ST_HD inline float dropout_apply(uint64_t seed, uint64_t i, float p, float x) {
  if (p <= 0.0f) return x;
  if (p >= 1.0f) return 0.0f;
  return dropout_keep(seed, i, p) ? x * dropout_scale(p) : 0.0f;
}

}  // namespace st
