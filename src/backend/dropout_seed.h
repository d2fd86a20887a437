// DropoutSeed: the seed argument of the dropout ops (backend.h), shared by both backends and the
// CUDA kernels (which read it on the device).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define ST_HD __host__ __device__
#else
#define ST_HD
#endif

namespace st {

// The seed an op draws its mask from: `value`, or -- when `base` is set -- *base ^ value, read when
// the op runs (`base` is backend memory). Launch plans (backend.h Note [launch plans]) record the
// pointer, so a replay draws the mask of whatever seed the caller stored there for this run.
struct DropoutSeed {
  uint64_t value = 0;
  const uint64_t* base = nullptr;
  constexpr DropoutSeed(uint64_t v = 0, const uint64_t* b = nullptr) : value(v), base(b) {}  // NOLINT: implicit
  ST_HD uint64_t get() const { return base != nullptr ? (*base ^ value) : value; }
  // The seed for drop probability p: memory is read only when a mask is drawn (0 < p < 1).
  ST_HD uint64_t for_p(float p) const { return p > 0.0f && p < 1.0f ? get() : 0; }
};

}  // namespace st
