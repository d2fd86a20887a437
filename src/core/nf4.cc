#include "core/nf4.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace st {

const float kNf4Code[16] = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};

namespace {
// Midpoints between neighbouring codes as bnb's decision tree writes them (float literals of the
// f64 midpoints): index i + 1 is chosen when x > kMid[i].
const float kMid[15] = {
    -0.8480964004993439f,  -0.6106329262256622f,  -0.4599952697753906f, -0.33967943489551544f,
    -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
    0.1202552504837513f,   0.2035212516784668f,   0.2920137718319893f,   0.3893125355243683f,
    0.5016634166240692f,   0.6427869200706482f,   0.8614784181118011f,
};
}  // namespace

uint8_t nf4_index(float x) {
  // Counting the midpoints below x is the decision tree's answer (the tree compares the same
  // thresholds with `>`); NaN compares false everywhere and gives 0, as in bnb.
  uint8_t i = 0;
  for (float m : kMid) i += x > m ? 1 : 0;
  return i;
}

void nf4_quantize(const float* x, int64_t n, uint8_t* codes, float* absmax) {
  for (int64_t b = 0; b < nf4_blocks(n); ++b) {
    const int64_t lo = b * kNf4Block, hi = std::min(n, lo + kNf4Block);
    float amax = 0.0f;
    for (int64_t e = lo; e < hi; ++e) amax = std::fmax(amax, std::fabs(x[e]));
    absmax[b] = amax;
    const float inv = 1.0f / amax;
    for (int64_t e = lo; e < hi; ++e) {
      const uint8_t q = amax > 0.0f ? nf4_index(x[e] * inv) : 7;  // Note [NF4 zero block]
      uint8_t& byte = codes[e / 2];
      byte = (e % 2 == 0) ? static_cast<uint8_t>(q << 4) : static_cast<uint8_t>(byte | q);
    }
  }
}

void nf4_dequantize(void* out, DType dtype, const uint8_t* codes, const float* absmax, int64_t n) {
  for (int64_t e = 0; e < n; ++e) {
    const uint8_t byte = codes[e / 2];
    const uint8_t q = (e % 2 == 0) ? (byte >> 4) : (byte & 0xF);
    const float w = kNf4Code[q] * absmax[e / kNf4Block];
    switch (dtype) {
      case DType::kF32: static_cast<float*>(out)[e] = w; break;
      case DType::kBF16: static_cast<uint16_t*>(out)[e] = f32_to_bf16(w); break;
      case DType::kF16: static_cast<uint16_t*>(out)[e] = f32_to_f16(w); break;
      default: CHECK(false, "nf4_dequantize: output dtype " << dtype_name(dtype));
    }
  }
}

int64_t nf4_first_nonfinite(const float* x, int64_t n) {
  for (int64_t e = 0; e < n; ++e)
    if (!std::isfinite(x[e])) return e;
  return -1;
}

}  // namespace st
