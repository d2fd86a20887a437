// Fused softmax cross-entropy: per-row work in parallel, row losses summed in row order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/detail/kernels.h"

namespace st::cpu {

namespace {
constexpr int32_t kIgnoreIndex = -100;
}

void cross_entropy(Tensor logits, Tensor loss_sum, const int32_t* labels, float grad_scale) {
  check_float(logits, "cross_entropy logits");
  CHECK(loss_sum.dtype == DType::kF32 && loss_sum.numel() >= 1, "cross_entropy: loss_sum must be f32 [1]");
  const int64_t R = logits.rows(), V = logits.cols();
  std::vector<double> row_loss(static_cast<size_t>(R), 0.0);
#pragma omp parallel
  {
    std::vector<float> x(static_cast<size_t>(V));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      const int32_t label = labels[r];
      if (label == kIgnoreIndex) {
        std::fill(x.begin(), x.end(), 0.0f);
        store_f32(logits, r * V, V, x.data());
        continue;
      }
      CHECK(label >= 0 && label < V, "cross_entropy: label " << label << " out of [0," << V << ") at row " << r);
      load_f32(logits, r * V, V, x.data());
      float m = x[0];
      for (int64_t i = 1; i < V; ++i) m = std::max(m, x[i]);
      double se = 0.0;
      for (int64_t i = 0; i < V; ++i) se += std::exp(static_cast<double>(x[i]) - m);
      const double lse = m + std::log(se);
      row_loss[static_cast<size_t>(r)] = lse - x[label];
      for (int64_t i = 0; i < V; ++i) {
        const double p = std::exp(static_cast<double>(x[i]) - lse);
        x[i] = static_cast<float>(grad_scale * (p - (i == label ? 1.0 : 0.0)));
      }
      store_f32(logits, r * V, V, x.data());
    }
  }
  double total = 0.0;
  for (double l : row_loss) total += l;
  loss_sum.ptr<float>()[0] += static_cast<float>(total);
}

}  // namespace st::cpu

// ---- vocabulary-chunked cross-entropy (backend.h: ce_chunk / ce_finish) ------------------------

namespace st::cpu {

namespace {
void check_state(const Tensor& t, int64_t rows, const char* what) {
  CHECK(t.dtype == DType::kF32 && t.numel() == rows, what << " must be f32 [" << rows << "]");
}
}  // namespace

void ce_chunk(Tensor logits, Tensor acc, Tensor m, Tensor s, Tensor target, const int32_t* labels, int64_t col0) {
  check_float(logits, "ce_chunk logits");
  const int64_t R = logits.rows(), C = logits.cols();
  check_state(m, R, "ce_chunk m");
  check_state(s, R, "ce_chunk s");
  check_state(target, R, "ce_chunk target");
  const bool train = !acc.empty();
  if (train) CHECK(acc.dtype == DType::kF32 && acc.rows() == R, "ce_chunk: acc must be f32 [" << R << ", H]");
  const int64_t H = train ? acc.cols() : 0;
  const bool first = col0 == 0;
  float* mp = m.ptr<float>();
  float* sp = s.ptr<float>();
  float* tp = target.ptr<float>();
#pragma omp parallel
  {
    std::vector<float> x(static_cast<size_t>(C));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      load_f32(logits, r * C, C, x.data());
      float mc = -INFINITY;
      for (int64_t j = 0; j < C; ++j) mc = std::max(mc, x[j]);
      const float m_old = first ? -INFINITY : mp[r];
      const float s_old = first ? 0.0f : sp[r];
      const float m_new = std::max(m_old, mc);
      double se = 0.0;
      for (int64_t j = 0; j < C; ++j) se += std::exp(static_cast<double>(x[j]) - m_new);
      const float rescale = m_old == -INFINITY ? 0.0f : std::exp(m_old - m_new);
      sp[r] = static_cast<float>(static_cast<double>(s_old) * rescale + se);
      mp[r] = m_new;
      if (first) tp[r] = 0.0f;
      const int64_t label = labels[r];
      if (label >= col0 && label < col0 + C) tp[r] = x[label - col0];
      if (!train) continue;
      for (int64_t j = 0; j < C; ++j) x[j] = static_cast<float>(std::exp(static_cast<double>(x[j]) - m_new));
      store_f32(logits, r * C, C, x.data());
      if (!first) {
        float* a = acc.ptr<float>() + r * H;
        for (int64_t h = 0; h < H; ++h) a[h] *= rescale;
      }
    }
  }
}

void ce_finish(Tensor dx, Tensor loss_sum, Tensor acc, Tensor m, Tensor s, Tensor target, Tensor w_label,
               const int32_t* labels, float grad_scale, Tensor row_scale) {
  const int64_t R = m.numel();
  check_state(m, R, "ce_finish m");
  check_state(s, R, "ce_finish s");
  check_state(target, R, "ce_finish target");
  CHECK(loss_sum.dtype == DType::kF32 && loss_sum.numel() >= 1, "ce_finish: loss_sum must be f32 [1]");
  const bool grad = !dx.empty();
  int64_t H = 0;
  if (grad) {
    check_float(dx, "ce_finish dx");
    check_float(w_label, "ce_finish w_label");
    H = dx.cols();
    CHECK(dx.rows() == R && acc.dtype == DType::kF32 && acc.rows() == R && acc.cols() == H &&
              w_label.rows() == R && w_label.cols() == H,
          "ce_finish: dx, acc (f32) and w_label must be [" << R << ", H]");
    if (!row_scale.empty()) check_state(row_scale, R, "ce_finish row_scale");
  }
  const float* rs = grad && !row_scale.empty() ? row_scale.ptr<float>() : nullptr;
  const float* mp = m.ptr<float>();
  const float* sp = s.ptr<float>();
  const float* tp = target.ptr<float>();
  std::vector<double> row_loss(static_cast<size_t>(R), 0.0);
#pragma omp parallel
  {
    std::vector<float> w(static_cast<size_t>(H)), d(static_cast<size_t>(H));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      const bool counted = labels[r] != kIgnoreIndex;
      if (counted)
        row_loss[static_cast<size_t>(r)] = static_cast<double>(mp[r]) + std::log(static_cast<double>(sp[r])) - tp[r];
      if (!grad) continue;
      if (counted) {
        load_f32(w_label, r * H, H, w.data());
        const float* a = acc.ptr<float>() + r * H;
        const float inv_s = 1.0f / sp[r];
        const float g = rs ? grad_scale * rs[r] : grad_scale;
        for (int64_t h = 0; h < H; ++h) d[h] = g * (a[h] * inv_s - w[h]);
      } else {
        std::fill(d.begin(), d.end(), 0.0f);
      }
      store_f32(dx, r * H, H, d.data());
    }
  }
  double total = 0.0;
  for (double l : row_loss) total += l;
  loss_sum.ptr<float>()[0] += static_cast<float>(total);
}

}  // namespace st::cpu
