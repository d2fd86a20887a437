#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace st {

StatusOr<LrKind> parse_lr_kind(const std::string& name) {
  if (name == "constant" || name == "constant_with_warmup") return LrKind::kConstant;
  if (name == "linear") return LrKind::kLinear;
  if (name == "cosine") return LrKind::kCosine;
  return InvalidArgument(Str() << "lr_scheduler '" << name << "' is not supported (constant, linear, cosine)");
}

double lr_at(const LrSchedule& s, int64_t step) {
  const double W = static_cast<double>(s.warmup_steps), T = static_cast<double>(s.total_steps);
  const double x = static_cast<double>(step);
  if (step < s.warmup_steps) return s.base_lr * (x / std::max(1.0, W));
  switch (s.kind) {
    case LrKind::kConstant: return s.base_lr;
    case LrKind::kLinear: return s.base_lr * std::max(0.0, (T - x) / std::max(1.0, T - W));
    case LrKind::kCosine: {
      const double progress = (x - W) / std::max(1.0, T - W);
      const double f = std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * 2.0 * 0.5 * progress)));
      return s.base_lr * ((1.0 - s.min_lr_ratio) * f + s.min_lr_ratio);  // r = 0: exactly f
    }
  }
  return s.base_lr;
}

}  // namespace st
