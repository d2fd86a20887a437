// Learning-rate schedules with HF transformers semantics (optimization.py get_scheduler; checked
// against transformers itself: tests/fixtures/lr/hf_lr.json, tools/ref/lr_ref.py):
//   warmup (step < W):  lr * step / max(1, W)                          (every kind)
//   linear:   lr * max(0, (T - step) / max(1, T - W))
//   cosine:   lr * max(0, 0.5 * (1 + cos(pi * 2c * p))), p = (step - W) / max(1, T - W), c = 0.5,
//             with a floor r (cosine_min_lr_ratio; HF's cosine_with_min_lr min_lr_rate, or
//             min_lr / lr): lr * ((1 - r) * that + r)
//   cosine_with_restarts: p >= 1 -> 0, else lr * max(0, 0.5 * (1 + cos(pi * ((c * p) mod 1)))), c = 1
//   polynomial: step > T -> lr_end, else (lr - lr_end) * (1 - (step - W) / (T - W))^power + lr_end
//   inverse_sqrt: lr / sqrt((step + timescale - W) / timescale), timescale = W or 10000
//   constant: lr (HF "constant" with W > 0 behaves as constant_with_warmup, as here)
// `step` is the number of optimizer steps already taken (0 for the first step), T = total steps.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace st {

struct TrainConfig;

enum class LrKind { kConstant, kLinear, kCosine, kCosineRestarts, kPolynomial, kInverseSqrt };

struct LrSchedule {
  LrKind kind = LrKind::kCosine;
  double base_lr = 2e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0.0;  // cosine only
  double num_cycles = 0.5;    // cosine, cosine_with_restarts
  double lr_end = 1e-7;       // polynomial
  double power = 1.0;         // polynomial
  int64_t timescale = 0;      // inverse_sqrt (0: warmup_steps, or 10000 without warmup)
};

// The scheduler names HF accepts that run here; InvalidArgument otherwise.
StatusOr<LrKind> parse_lr_kind(const std::string& name);
// The schedule a config asks for (total / warmup steps set later, when they are known);
// InvalidArgument for kwargs the scheduler does not take or values HF refuses.
StatusOr<LrSchedule> lr_schedule_from(const TrainConfig& tc);
double lr_at(const LrSchedule& s, int64_t step);

}  // namespace st
