// Decode-time attention against a KV cache (Backend::attention_kv), one sequence.
//
// Same arithmetic as the training forward (attention.cc): f32 scores from an 8-lane fixed-order
// dot, softmax and the weighted sum of v in double, one rounding on store. So for the same q, k, v
// a query row gets the bits the full-sequence forward gives it, and prefill + step-by-step decode
// reproduce the training forward's logits (tests/model/decode_test.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <omp.h>

#include "backend/cpu/detail/kernels.h"

namespace st::cpu {
namespace {

// Identical lane structure to attention.cc's dot (the bits must match it).
inline float kv_dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

void attention_kv(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache, int64_t q_start, const AttnShape& s) {
  check_float(q, "attention_kv q");
  check_float(k_cache, "attention_kv k_cache");
  check_float(v_cache, "attention_kv v_cache");
  check_float(out, "attention_kv out");
  const int64_t NH = s.num_heads, KVH = s.num_kv_heads, D = s.head_dim;
  CHECK(NH > 0 && KVH > 0 && NH % KVH == 0 && D > 0, "attention_kv: NH " << NH << " KVH " << KVH << " D " << D);
  CHECK(q.numel() % (NH * D) == 0 && out.numel() == q.numel(), "attention_kv q " << shape_of(q) << " out "
                                                                                  << shape_of(out));
  CHECK(k_cache.numel() % (KVH * D) == 0 && v_cache.numel() == k_cache.numel(),
        "attention_kv k " << shape_of(k_cache) << " v " << shape_of(v_cache));
  const int64_t Tq = q.numel() / (NH * D), Tk = k_cache.numel() / (KVH * D), group = NH / KVH;
  CHECK(q_start >= 0 && q_start + Tq <= Tk, "attention_kv: q_start " << q_start << " + Tq " << Tq << " > Tk " << Tk);
  if (Tq == 0) return;
  const int64_t used = q_start + Tq;  // cache rows that can be read
  // Only the rows that can be read are viewed (converted when the cache is not f32).
  const F32View qv(q), kv(Tensor(k_cache.data, k_cache.dtype, {used * KVH * D})),
      vv(Tensor(v_cache.data, v_cache.dtype, {used * KVH * D}));
  const float *qp = qv.data(), *kp = kv.data(), *vp = vv.data();
  const int64_t items = Tq * NH;
#pragma omp parallel
  {
    std::vector<float> sc(static_cast<size_t>(used));
    std::vector<double> acc(static_cast<size_t>(D));
    std::vector<float> orow(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 4)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t i = it / NH, h = it % NH, g = h / group, last = q_start + i;
      // Keys the training forward's mask lets through, in the same order (a sliding window
      // starts later; the masked keys add nothing there either).
      const int64_t first = s.window > 0 ? std::max<int64_t>(0, last - s.window + 1) : 0;
      const float* qr = qp + (i * NH + h) * D;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = first; j <= last; ++j) {
        sc[j] = kv_dot(qr, kp + (j * KVH + g) * D, D) * s.scale;
        m = std::max(m, sc[j]);
      }
      double l = 0.0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = first; j <= last; ++j) {
        const double p = std::exp(static_cast<double>(sc[j]) - m);
        l += p;
        const float* vr = vp + (j * KVH + g) * D;
        for (int64_t d = 0; d < D; ++d) acc[d] += p * vr[d];
      }
      for (int64_t d = 0; d < D; ++d) orow[d] = static_cast<float>(acc[d] / l);
      store_f32(out, (i * NH + h) * D, D, orow.data());
    }
  }
}

}  // namespace st::cpu
