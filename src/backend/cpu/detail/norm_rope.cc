// RMSNorm (+backward) and RoPE. Row-parallel; the sum over a row is one thread's double loop.
#include <cmath>

#include "backend/cpu/detail/kernels.h"

namespace st::cpu {

void rmsnorm(Tensor y, Tensor rstd, Tensor x, Tensor w, float eps) {
  check_float(y, "rmsnorm y");
  check_float(x, "rmsnorm x");
  check_float(w, "rmsnorm w");
  const int64_t R = x.rows(), N = x.cols();
  CHECK(y.numel() == x.numel() && w.numel() == N, "rmsnorm: y " << shape_of(y) << " x " << shape_of(x)
                                                                 << " w " << shape_of(w));
  CHECK(rstd.dtype == DType::kF32 && rstd.numel() == R, "rmsnorm: rstd must be f32 [" << R << "]");
  std::vector<float> wf(static_cast<size_t>(N));
  load_f32(w, 0, N, wf.data());
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(N));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      load_f32(x, r * N, N, row.data());
      double ss = 0.0;
      for (int64_t i = 0; i < N; ++i) ss += static_cast<double>(row[i]) * row[i];
      const float var = static_cast<float>(ss / static_cast<double>(N));
      const float rs = 1.0f / std::sqrt(var + eps);
      rstd.ptr<float>()[r] = rs;
      for (int64_t i = 0; i < N; ++i) row[i] = wf[i] * (row[i] * rs);
      store_f32(y, r * N, N, row.data());
    }
  }
}

// y_i = w_i x_i r, r = (mean(x^2)+eps)^-1/2  =>  dx_i = r w_i dy_i - x_i r^3/N * sum_j dy_j w_j x_j.
void rmsnorm_backward(Tensor dx, Tensor dy, Tensor x, Tensor w, Tensor rstd) {
  check_float(dx, "rmsnorm_backward dx");
  check_float(dy, "rmsnorm_backward dy");
  check_float(x, "rmsnorm_backward x");
  check_float(w, "rmsnorm_backward w");
  const int64_t R = x.rows(), N = x.cols();
  CHECK(dx.numel() == x.numel() && dy.numel() == x.numel() && w.numel() == N, "rmsnorm_backward shapes");
  CHECK(rstd.dtype == DType::kF32 && rstd.numel() == R, "rmsnorm_backward: rstd must be f32 [" << R << "]");
  std::vector<float> wf(static_cast<size_t>(N));
  load_f32(w, 0, N, wf.data());
#pragma omp parallel
  {
    std::vector<float> xr(static_cast<size_t>(N)), gr(static_cast<size_t>(N));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      load_f32(x, r * N, N, xr.data());
      load_f32(dy, r * N, N, gr.data());
      double dot = 0.0;
      for (int64_t i = 0; i < N; ++i) dot += static_cast<double>(gr[i]) * wf[i] * xr[i];
      const float rs = rstd.ptr<const float>()[r];
      const float c = static_cast<float>(dot / static_cast<double>(N)) * rs * rs * rs;
      for (int64_t i = 0; i < N; ++i) gr[i] = rs * wf[i] * gr[i] - xr[i] * c;
      store_f32(dx, r * N, N, gr.data());
    }
  }
}

void rope(Tensor x, const int32_t* positions, Tensor inv_freq, bool inverse) {
  check_float(x, "rope x");
  CHECK(x.ndim == 3, "rope: x must be [tokens, heads, D], got " << shape_of(x));
  const int64_t T = x.shape[0], H = x.shape[1], D = x.shape[2], half = D / 2;
  CHECK(D % 2 == 0 && inv_freq.dtype == DType::kF32 && inv_freq.numel() == half,
        "rope: D " << D << " inv_freq " << shape_of(inv_freq));
  const float* f = inv_freq.ptr<const float>();
  const float sgn = inverse ? -1.0f : 1.0f;  // the transpose rotation is the rotation by -angle
#pragma omp parallel
  {
    std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half)), row(static_cast<size_t>(D));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      const float pos = static_cast<float>(positions[t]);
      for (int64_t i = 0; i < half; ++i) {
        const float a = pos * f[i];  // f32 angle, as HF computes it
        c[i] = std::cos(a);
        s[i] = sgn * std::sin(a);
      }
      for (int64_t h = 0; h < H; ++h) {
        const int64_t off = (t * H + h) * D;
        load_f32(x, off, D, row.data());
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = row[i], x1 = row[i + half];
          row[i] = x0 * c[i] - x1 * s[i];
          row[i + half] = x1 * c[i] + x0 * s[i];
        }
        store_f32(x, off, D, row.data());
      }
    }
  }
}

}  // namespace st::cpu
