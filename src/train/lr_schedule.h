// Learning-rate schedules with HF transformers semantics (optimization.py):
//   warmup (step < W):  lr * step / max(1, W)
//   linear:   lr * max(0, (T - step) / max(1, T - W))
//   cosine:   lr * max(0, 0.5 * (1 + cos(pi * (step - W) / max(1, T - W))))   (num_cycles 0.5),
//             with a floor r (min_lr_ratio, axolotl's cosine_min_lr_ratio): lr * ((1 - r) * that + r)
//   constant: lr (HF "constant" with W > 0 behaves as constant_with_warmup, as here)
// `step` is the number of optimizer steps already taken (0 for the first step), T = total steps.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace st {

enum class LrKind { kConstant, kLinear, kCosine };

struct LrSchedule {
  LrKind kind = LrKind::kCosine;
  double base_lr = 2e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0.0;  // cosine only
};

// "constant" | "constant_with_warmup" | "linear" | "cosine"; InvalidArgument otherwise.
StatusOr<LrKind> parse_lr_kind(const std::string& name);
double lr_at(const LrSchedule& s, int64_t step);

}  // namespace st
