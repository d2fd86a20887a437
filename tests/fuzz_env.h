// Knobs for the hostile-input tests' random loops, so a long sweep can be run by hand (for
// instance under the sanitizer build, -DSTREAMTUNE_SANITIZE=ON) without editing them:
//   FUZZ_SEED=n   each test mixes n into its own seed (a sweep walks n = 1, 2, 3, ...);
//   FUZZ_SCALE=k  each test runs k times its own iteration count.
// Unset (CI), every test runs its own seed and count.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace st::testing_util {

inline uint64_t fuzz_seed(uint64_t own) {
  const char* s = std::getenv("FUZZ_SEED");
  if (s == nullptr || *s == '\0') return own;
  return own ^ (0x9E3779B97F4A7C15ull * (std::strtoull(s, nullptr, 10) + 1));
}

inline int fuzz_iters(int own) {
  const char* s = std::getenv("FUZZ_SCALE");
  const long k = s == nullptr ? 1 : std::strtol(s, nullptr, 10);
  return k > 1 ? static_cast<int>(own * k) : own;
}

}  // namespace st::testing_util
