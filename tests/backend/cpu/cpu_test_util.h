// Shared helpers for the CPU backend tests: seeded inputs, f32/bf16 host tensors, double-precision
// reference forwards (the oracles) and error metrics.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace st::test {

inline std::unique_ptr<Backend> cpu_backend() {
  auto b = make_cpu_backend({});
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  return std::move(b).value();
}

// Values exactly representable in f32 so the f32 backend and the double reference see equal inputs.
inline std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

inline Tensor view(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::kF32, dims);
}

// max |a - b| / max(max |b|, floor): a scale-aware relative error.
inline double rel_err(const std::vector<float>& a, const std::vector<double>& b, double floor = 1e-12) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0.0, den = floor;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / den;
}

// Central finite differences of the scalar f(x) at x, in double.
template <typename F>
std::vector<double> fd_grad(std::vector<double> x, F f, double h = 1e-5) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// ---- double references ----------------------------------------------------------------------
struct AttnRef {
  int64_t B, T, NH, KVH, D;
  double scale;
  const int32_t* doc = nullptr;
  int64_t window = 0;  // sliding window: t - window < j <= t (0: none)

  // The explicit [B, T, T] mask.
  bool mask(int64_t b, int64_t t, int64_t j) const {
    return j <= t && (window == 0 || j > t - window) && (doc == nullptr || doc[b * T + j] == doc[b * T + t]);
  }
  // out [B*T, NH, D]; lse [B, NH, T] when non-null.
  std::vector<double> forward(const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, std::vector<double>* lse = nullptr) const {
    std::vector<double> out(q.size(), 0.0);
    if (lse) lse->assign(B * NH * T, 0.0);
    const int64_t group = NH / KVH;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h)
        for (int64_t t = 0; t < T; ++t) {
          std::vector<double> s(T, -INFINITY);
          double m = -INFINITY;
          for (int64_t j = 0; j < T; ++j) {
            if (!mask(b, t, j)) continue;
            double d = 0;
            for (int64_t e = 0; e < D; ++e)
              d += q[((b * T + t) * NH + h) * D + e] * k[((b * T + j) * KVH + h / group) * D + e];
            s[j] = d * scale;
            m = std::max(m, s[j]);
          }
          double l = 0;
          for (int64_t j = 0; j < T; ++j) l += mask(b, t, j) ? std::exp(s[j] - m) : 0.0;
          for (int64_t j = 0; j < T; ++j) {
            if (!mask(b, t, j)) continue;
            const double p = std::exp(s[j] - m) / l;
            for (int64_t e = 0; e < D; ++e)
              out[((b * T + t) * NH + h) * D + e] += p * v[((b * T + j) * KVH + h / group) * D + e];
          }
          if (lse) (*lse)[(b * NH + h) * T + t] = m + std::log(l);
        }
    return out;
  }
};

inline std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& w, int64_t N,
                                       double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / N; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < N; ++i) ss += x[r * N + i] * x[r * N + i];
    const double rs = 1.0 / std::sqrt(ss / N + eps);
    for (int64_t i = 0; i < N; ++i) y[r * N + i] = w[i] * x[r * N + i] * rs;
  }
  return y;
}

// HF rotate-half; the angle is the f32 product float(pos) * inv_freq[i] (as the contract says).
inline std::vector<double> rope_ref(const std::vector<double>& x, const std::vector<int32_t>& pos,
                                    const std::vector<float>& inv_freq, int64_t H, int64_t D) {
  std::vector<double> y(x.size());
  const int64_t half = D / 2;
  for (size_t t = 0; t < pos.size(); ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const float a = static_cast<float>(pos[t]) * inv_freq[i];
        const double c = std::cos(static_cast<double>(a)), s = std::sin(static_cast<double>(a));
        const size_t o = (t * H + h) * D;
        y[o + i] = x[o + i] * c - x[o + i + half] * s;
        y[o + i + half] = x[o + i + half] * c + x[o + i] * s;
      }
  return y;
}

inline std::vector<float> rope_inv_freq(int64_t D, float theta = 10000.0f) {
  std::vector<float> f(D / 2);
  for (int64_t i = 0; i < D / 2; ++i) f[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / D);
  return f;
}

// Sum over rows with label != -100 of -log softmax[label].
inline double cross_entropy_ref(const std::vector<double>& logits, const std::vector<int32_t>& labels, int64_t V) {
  double loss = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] == -100) continue;
    double m = -INFINITY;
    for (int64_t i = 0; i < V; ++i) m = std::max(m, logits[r * V + i]);
    double se = 0;
    for (int64_t i = 0; i < V; ++i) se += std::exp(logits[r * V + i] - m);
    loss += m + std::log(se) - logits[r * V + labels[r]];
  }
  return loss;
}

}  // namespace st::test
