// The fused LoRA ops (backend.h, "LoRA"): plain loops, double accumulation, one rounding on store.
// Parallel loops split independent output rows/columns only; every sum runs in one thread in a
// fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "backend/cpu/detail/kernels.h"
#include "backend/dropout_rng.h"

namespace st::cpu {
namespace {

void check_f32(const Tensor& t, const char* what) {
  CHECK(t.dtype == DType::kF32 && (t.data != nullptr || t.numel() == 0),
        what << ": f32 tensor expected, got " << dtype_name(t.dtype));
}

void check_act(const Tensor& t, const char* what) {
  CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16, what << ": f32 or bf16 expected, got " << dtype_name(t.dtype));
  CHECK(t.data != nullptr || t.numel() == 0, what << ": null data");
}

void check_2d(const Tensor& t, int64_t rows, int64_t cols, const char* what) {
  CHECK(t.rows() == rows && t.cols() == cols && t.numel() == rows * cols,
        what << ": shape " << shape_of(t) << ", expected [" << rows << "," << cols << "]");
}

// Row n of an activation as f32 (in `buf`, sized by the caller).
void load_row(const Tensor& t, int64_t n, float* buf) { load_f32(t, n * t.cols(), t.cols(), buf); }

// Note [grad rounding]: the gradient ops round the product to f32 first and then add it to the
// accumulator (g = g + rnd(scale * rnd(sum))), so accumulating a micro-batch directly gives the
// same bits as computing it into a zeroed buffer and adding that later (dist exact reduction).
}  // namespace

void lora_down(Tensor t, Tensor x, Tensor a) {
  check_f32(t, "lora_down t");
  check_act(x, "lora_down x");
  check_f32(a, "lora_down A");
  const int64_t N = x.rows(), in = x.cols(), r = a.rows();
  check_2d(a, r, in, "lora_down A");
  check_2d(t, N, r, "lora_down t");
  const float* A = a.ptr<const float>();
  float* T = t.ptr<float>();
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(in));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      load_row(x, n, row.data());
      for (int64_t k = 0; k < r; ++k) {
        double s = 0.0;
        for (int64_t j = 0; j < in; ++j) s += static_cast<double>(row[j]) * A[k * in + j];
        T[n * r + k] = static_cast<float>(s);
      }
    }
  }
}

void lora_up(Tensor y, Tensor t, Tensor b, float scale) {
  check_act(y, "lora_up y");
  check_f32(t, "lora_up t");
  check_f32(b, "lora_up B");
  const int64_t N = y.rows(), out = y.cols(), r = t.cols();
  check_2d(t, N, r, "lora_up t");
  check_2d(b, out, r, "lora_up B");
  const float* T = t.ptr<const float>();
  const float* B = b.ptr<const float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0.0;
      for (int64_t k = 0; k < r; ++k) s += static_cast<double>(T[n * r + k]) * B[o * r + k];
      const int64_t i = n * out + o;
      store_elem(y.data, y.dtype, i, static_cast<float>(load_elem(y.data, y.dtype, i) + scale * s));
    }
}

namespace {
// g(col, k) += scale * sum_n act[n, col] * f[n, k] for every column of act [N, C] and k < r, summed
// in double over n in order, then rounded (Note [grad rounding]). g(col, k) is g[col*cs + k*ks]:
// lora_grad_b's db [out, r] and lora_grad_a's da [r, in] are the same sum, stored transposed.
void col_sum_into(float* g, int64_t cs, int64_t ks, Tensor act, const float* f, int64_t r, float scale) {
  const int64_t N = act.rows(), C = act.cols();
#pragma omp parallel
  {
    std::vector<double> acc(static_cast<size_t>(r));
#pragma omp for schedule(static)
    for (int64_t col = 0; col < C; ++col) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < N; ++n) {
        const double v = load_elem(act.data, act.dtype, n * C + col);
        for (int64_t k = 0; k < r; ++k) acc[k] += v * f[n * r + k];
      }
      for (int64_t k = 0; k < r; ++k) g[col * cs + k * ks] += scale * static_cast<float>(acc[k]);
    }
  }
}
}  // namespace

void lora_grad_b(Tensor db, Tensor dy, Tensor t, float scale) {
  check_f32(db, "lora_grad_b db");
  check_act(dy, "lora_grad_b dy");
  check_f32(t, "lora_grad_b t");
  const int64_t N = dy.rows(), out = dy.cols(), r = t.cols();
  check_2d(t, N, r, "lora_grad_b t");
  check_2d(db, out, r, "lora_grad_b db");
  col_sum_into(db.ptr<float>(), r, 1, dy, t.ptr<const float>(), r, scale);
}

void lora_dt(Tensor dt, Tensor dy, Tensor b, float scale) {
  check_f32(dt, "lora_dt dt");
  check_act(dy, "lora_dt dy");
  check_f32(b, "lora_dt B");
  const int64_t N = dy.rows(), out = dy.cols(), r = b.cols();
  check_2d(b, out, r, "lora_dt B");
  check_2d(dt, N, r, "lora_dt dt");
  const float* B = b.ptr<const float>();
  float* DT = dt.ptr<float>();
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(out));
    std::vector<double> acc(static_cast<size_t>(r));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      load_row(dy, n, row.data());
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t o = 0; o < out; ++o)
        for (int64_t k = 0; k < r; ++k) acc[k] += static_cast<double>(row[o]) * B[o * r + k];
      for (int64_t k = 0; k < r; ++k) DT[n * r + k] = static_cast<float>(scale * acc[k]);
    }
  }
}

void lora_grad_a(Tensor da, Tensor dt, Tensor x) {
  check_f32(da, "lora_grad_a da");
  check_f32(dt, "lora_grad_a dt");
  check_act(x, "lora_grad_a x");
  const int64_t N = x.rows(), in = x.cols(), r = dt.cols();
  check_2d(dt, N, r, "lora_grad_a dt");
  check_2d(da, r, in, "lora_grad_a da");
  col_sum_into(da.ptr<float>(), 1, in, x, dt.ptr<const float>(), r, 1.0f);  // 1.0f * x == x: same bits
}

void lora_dx(Tensor dx, Tensor dt, Tensor a, float dropout_p, uint64_t seed) {
  check_act(dx, "lora_dx dx");
  check_f32(dt, "lora_dx dt");
  check_f32(a, "lora_dx A");
  const int64_t N = dx.rows(), in = dx.cols(), r = a.rows();
  check_2d(a, r, in, "lora_dx A");
  check_2d(dt, N, r, "lora_dx dt");
  const float* DT = dt.ptr<const float>();
  const float* A = a.ptr<const float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < in; ++j) {
      double s = 0.0;
      for (int64_t k = 0; k < r; ++k) s += static_cast<double>(DT[n * r + k]) * A[k * in + j];
      const int64_t i = n * in + j;
      // The mask sees the f32 product, as dropout() of an f32 tensor holding dt·A would.
      const float d = dropout_apply(seed, static_cast<uint64_t>(i), dropout_p, static_cast<float>(s));
      store_elem(dx.data, dx.dtype, i, load_elem(dx.data, dx.dtype, i) + d);
    }
}

}  // namespace st::cpu
