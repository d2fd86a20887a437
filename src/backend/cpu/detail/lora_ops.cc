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

// The dropped-out input of lora_down / lora_grad_a (backend.h): element i of x dropped out and
// rounded to x's dtype, as Backend::dropout would store it in a tensor of that dtype.
struct Dropped {
  float p = 0.0f;
  uint64_t seed = 0;
  float operator()(const Tensor& x, int64_t i) const {
    const float v = load_elem(x.data, x.dtype, i);
    if (p <= 0.0f) return v;
    const float d = dropout_apply(seed, static_cast<uint64_t>(i), p, v);
    return x.dtype == DType::kBF16 ? round_to_bf16(d) : d;
  }
};

// Row n of an activation as f32 (in `buf`, sized by the caller), dropped out as `drop` says.
void load_row(const Tensor& t, int64_t n, float* buf, Dropped drop) {
  for (int64_t c = 0; c < t.cols(); ++c) buf[c] = drop(t, n * t.cols() + c);
}

// out[n, k] = rnd(scale * sum_c act[n, c] * W(k, c)) for k < r, W(k, c) = w[k*ks + c*cs], summed in
// double over c in order: lora_down (A [r, in], scale 1: 1.0f * s == s, same bits) and lora_dt
// (B [out, r]) are the same row dot with the weight read in either layout.
void row_dot_into(float* out, Tensor act, const float* w, int64_t ks, int64_t cs, int64_t r, float scale,
                  Dropped drop = {}) {
  const int64_t N = act.rows(), C = act.cols();
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(C));
    std::vector<double> acc(static_cast<size_t>(r));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      load_row(act, n, row.data(), drop);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t k = 0; k < r; ++k) acc[k] += static_cast<double>(row[c]) * w[k * ks + c * cs];
      for (int64_t k = 0; k < r; ++k) out[n * r + k] = static_cast<float>(scale * acc[k]);
    }
  }
}

// y[n, c] = combine(y[n, c], sum_k t[n, k] * W(k, c), n*C + c), W(k, c) = w[k*ks + c*cs], summed in
// double over k in order: lora_up (B [out, r]) and lora_dx (A [r, in]) differ only in `combine`.
template <class Combine>
void row_update_into(Tensor y, const float* t, const float* w, int64_t ks, int64_t cs, int64_t r, Combine combine) {
  const int64_t N = y.rows(), C = y.cols();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      double s = 0.0;
      for (int64_t k = 0; k < r; ++k) s += static_cast<double>(t[n * r + k]) * w[k * ks + c * cs];
      const int64_t i = n * C + c;
      store_elem(y.data, y.dtype, i, combine(load_elem(y.data, y.dtype, i), s, i));
    }
}

// Note [grad rounding]: the gradient ops round the product to f32 first and then add it to the
// accumulator (g = g + rnd(scale * rnd(sum))), so accumulating a micro-batch directly gives the
// same bits as computing it into a zeroed buffer and adding that later (dist exact reduction).
}  // namespace

void lora_down(Tensor t, Tensor x, Tensor a, float dropout_p, uint64_t seed) {
  check_f32(t, "lora_down t");
  check_act(x, "lora_down x");
  check_f32(a, "lora_down A");
  const int64_t N = x.rows(), in = x.cols(), r = a.rows();
  check_2d(a, r, in, "lora_down A");
  check_2d(t, N, r, "lora_down t");
  row_dot_into(t.ptr<float>(), x, a.ptr<const float>(), /*ks=*/in, /*cs=*/1, r, 1.0f, {dropout_p, seed});
}

void lora_up(Tensor y, Tensor t, Tensor b, float scale) {
  check_act(y, "lora_up y");
  check_f32(t, "lora_up t");
  check_f32(b, "lora_up B");
  const int64_t N = y.rows(), out = y.cols(), r = t.cols();
  check_2d(t, N, r, "lora_up t");
  check_2d(b, out, r, "lora_up B");
  row_update_into(y, t.ptr<const float>(), b.ptr<const float>(), /*ks=*/1, /*cs=*/r, r,
                  [scale](float yv, double sum, int64_t) { return static_cast<float>(yv + scale * sum); });
}

namespace {
// g(col, k) += scale * sum_n act[n, col] * f[n, k] for every column of act [N, C] and k < r, summed
// in double over n in order, then rounded (Note [grad rounding]). g(col, k) is g[col*cs + k*ks]:
// lora_grad_b's db [out, r] and lora_grad_a's da [r, in] are the same sum, stored transposed.
void col_sum_into(float* g, int64_t cs, int64_t ks, Tensor act, const float* f, int64_t r, float scale,
                  Dropped drop = {}) {
  const int64_t N = act.rows(), C = act.cols();
#pragma omp parallel
  {
    std::vector<double> acc(static_cast<size_t>(r));
#pragma omp for schedule(static)
    for (int64_t col = 0; col < C; ++col) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < N; ++n) {
        const double v = drop(act, n * C + col);
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
  row_dot_into(dt.ptr<float>(), dy, b.ptr<const float>(), /*ks=*/1, /*cs=*/r, r, scale);
}

void lora_grad_a(Tensor da, Tensor dt, Tensor x, float dropout_p, uint64_t seed) {
  check_f32(da, "lora_grad_a da");
  check_f32(dt, "lora_grad_a dt");
  check_act(x, "lora_grad_a x");
  const int64_t N = x.rows(), in = x.cols(), r = dt.cols();
  check_2d(dt, N, r, "lora_grad_a dt");
  check_2d(da, r, in, "lora_grad_a da");
  col_sum_into(da.ptr<float>(), 1, in, x, dt.ptr<const float>(), r, 1.0f, {dropout_p, seed});  // 1.0f * x == x
}

void lora_dx(Tensor dx, Tensor dt, Tensor a, float dropout_p, uint64_t seed) {
  check_act(dx, "lora_dx dx");
  check_f32(dt, "lora_dx dt");
  check_f32(a, "lora_dx A");
  const int64_t N = dx.rows(), in = dx.cols(), r = a.rows();
  check_2d(a, r, in, "lora_dx A");
  check_2d(dt, N, r, "lora_dx dt");
  row_update_into(dx, dt.ptr<const float>(), a.ptr<const float>(), /*ks=*/in, /*cs=*/1, r,
                  [seed, dropout_p](float yv, double sum, int64_t i) {
                    // The mask sees the f32 product, as dropout() of an f32 tensor holding dt·A would.
                    return yv + dropout_apply(seed, static_cast<uint64_t>(i), dropout_p, static_cast<float>(sum));
                  });
}

}  // namespace st::cpu
