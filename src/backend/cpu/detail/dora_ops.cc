// The DoRA ops (backend.h, "DoRA"): plain loops, double accumulation, one rounding on store. Rows
// (or columns) are split over threads; every sum runs in one thread in a fixed order.
#include <cmath>
#include <vector>

#include "backend/cpu/detail/kernels.h"
#include "backend/dora_args.h"

namespace st::cpu {

void dora_norm(Tensor norm, Tensor scale, Tensor w, Tensor a, Tensor b, Tensor mag, float s) {
  const int64_t out = w.rows(), in = w.cols(), r = a.rows();
  dora_args::norm_args(norm, scale, w, a, b, mag);
  const float* A = a.ptr<const float>();
  const float* B = b.ptr<const float>();
  float* nrm = norm.ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o) {
    double sq = 0.0;
    for (int64_t i = 0; i < in; ++i) {
      double ba = 0.0;
      for (int64_t k = 0; k < r; ++k) ba += static_cast<double>(B[o * r + k]) * A[k * in + i];
      const float e = load_elem(w.data, w.dtype, o * in + i) + s * static_cast<float>(ba);
      sq += static_cast<double>(e) * e;
    }
    nrm[o] = static_cast<float>(std::sqrt(sq));
  }
  if (scale.empty()) return;
  const float* m = mag.ptr<const float>();
  float* sc = scale.ptr<float>();
  for (int64_t o = 0; o < out; ++o) sc[o] = m[o] / nrm[o];
}

void dora_combine(Tensor y, Tensor scale, Tensor bias, Tensor residual) {
  const int64_t N = y.rows(), out = y.cols();
  dora_args::combine_args(y, scale, bias, residual);
  const float* sc = scale.ptr<const float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      const int64_t i = n * out + o;
      float v = sc[o] * load_elem(y.data, y.dtype, i);
      if (!bias.empty()) v += load_elem(bias.data, bias.dtype, o);
      if (!residual.empty()) v += load_elem(residual.data, residual.dtype, i);
      store_elem(y.data, y.dtype, i, v);
    }
}

void dora_backward(Tensor g, Tensor dmag, Tensor dy, Tensor v, Tensor scale, Tensor norm) {
  const int64_t N = dy.rows(), out = dy.cols();
  dora_args::backward_args(g, dmag, dy, v, scale, norm);
  const float* sc = scale.ptr<const float>();
  const float* nrm = norm.ptr<const float>();
  float* dm = dmag.ptr<float>();
  // Column sums first (every v read before g, which may alias it, is written).
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o) {
    double acc = 0.0;
    for (int64_t n = 0; n < N; ++n)
      acc += static_cast<double>(load_elem(dy.data, dy.dtype, n * out + o)) * load_elem(v.data, v.dtype, n * out + o);
    dm[o] += static_cast<float>(acc) / nrm[o];
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      const int64_t i = n * out + o;
      store_elem(g.data, g.dtype, i, sc[o] * load_elem(dy.data, dy.dtype, i));
    }
}

}  // namespace st::cpu
