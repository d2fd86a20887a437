// Fused softmax cross-entropy: per-row work in parallel, row losses summed in row order.
#include <algorithm>
#include <cmath>

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
