// The DoRA ops (backend.h, "DoRA"): plain loops, double accumulation, one rounding on store. Rows
// (or columns) are split over threads; every sum runs in one thread in a fixed order.
#include <cmath>
#include <vector>

#include "backend/cpu/detail/kernels.h"

namespace st::cpu {
namespace {

void check_vec(const Tensor& t, int64_t n, const char* what) {
  CHECK(t.dtype == DType::kF32 && t.numel() == n && (t.data != nullptr || n == 0),
        what << ": f32 [" << n << "] expected, got " << dtype_name(t.dtype) << " " << shape_of(t));
}

void check_act_2d(const Tensor& t, int64_t rows, int64_t cols, const char* what) {
  check_float(t, what);
  CHECK(t.rows() == rows && t.cols() == cols && t.numel() == rows * cols,
        what << ": shape " << shape_of(t) << ", expected [" << rows << "," << cols << "]");
}

}  // namespace

void dora_norm(Tensor norm, Tensor scale, Tensor w, Tensor a, Tensor b, Tensor mag, float s) {
  const int64_t out = w.rows(), in = w.cols(), r = a.rows();
  check_act_2d(w, out, in, "dora_norm W");
  CHECK(a.dtype == DType::kF32 && a.rows() == r && a.cols() == in, "dora_norm A: f32 [r," << in << "] expected, got " << shape_of(a));
  CHECK(b.dtype == DType::kF32 && b.rows() == out && b.cols() == r, "dora_norm B: f32 [" << out << ",r] expected, got " << shape_of(b));
  check_vec(norm, out, "dora_norm norm");
  if (!scale.empty()) {
    check_vec(scale, out, "dora_norm scale");
    check_vec(mag, out, "dora_norm mag");
  }
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
  check_act_2d(y, N, out, "dora_combine y");
  check_vec(scale, out, "dora_combine scale");
  if (!bias.empty()) {
    check_float(bias, "dora_combine bias");
    CHECK(bias.numel() == out, "dora_combine bias: " << shape_of(bias) << ", expected [" << out << "]");
  }
  if (!residual.empty()) {
    check_act_2d(residual, N, out, "dora_combine residual");
    CHECK(residual.data != y.data, "dora_combine: residual aliases y");
  }
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
  check_act_2d(dy, N, out, "dora_backward dy");
  check_act_2d(v, N, out, "dora_backward v");
  check_act_2d(g, N, out, "dora_backward g");
  check_vec(dmag, out, "dora_backward dmag");
  check_vec(scale, out, "dora_backward scale");
  check_vec(norm, out, "dora_backward norm");
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
