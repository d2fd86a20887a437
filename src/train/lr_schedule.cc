#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "train/train_config.h"

namespace st {

StatusOr<LrKind> parse_lr_kind(const std::string& name) {
  if (name == "constant" || name == "constant_with_warmup") return LrKind::kConstant;
  if (name == "linear") return LrKind::kLinear;
  if (name == "cosine" || name == "cosine_with_min_lr") return LrKind::kCosine;
  if (name == "cosine_with_restarts") return LrKind::kCosineRestarts;
  if (name == "polynomial") return LrKind::kPolynomial;
  if (name == "inverse_sqrt") return LrKind::kInverseSqrt;
  return InvalidArgument(Str() << "lr_scheduler '" << name
                               << "' is not supported (constant, constant_with_warmup, linear, cosine, "
                                  "cosine_with_restarts, cosine_with_min_lr, polynomial, inverse_sqrt)");
}

StatusOr<LrSchedule> lr_schedule_from(const TrainConfig& tc) {
  LrSchedule s;
  ASSIGN_OR_RETURN(s.kind, parse_lr_kind(tc.lr_scheduler));
  s.base_lr = tc.learning_rate;
  s.warmup_steps = tc.warmup_steps;
  s.total_steps = std::max<int64_t>(tc.max_steps, 1);
  const std::string& name = tc.lr_scheduler;
  auto refuse = [&](const char* kwarg) {
    return InvalidArgument(Str() << "lr_scheduler_kwargs: '" << kwarg << "' does not apply to lr_scheduler " << name);
  };
  const bool cosine = s.kind == LrKind::kCosine, restarts = s.kind == LrKind::kCosineRestarts;
  if (tc.lr_num_cycles >= 0 && !cosine && !restarts) return refuse("num_cycles");
  if ((tc.lr_end >= 0 || tc.lr_power >= 0) && s.kind != LrKind::kPolynomial)
    return refuse(tc.lr_end >= 0 ? "lr_end" : "power");
  if (tc.lr_timescale >= 0 && s.kind != LrKind::kInverseSqrt) return refuse("timescale");
  if (tc.min_lr >= 0 && name != "cosine_with_min_lr") return refuse("min_lr");
  if (tc.cosine_min_lr_ratio > 0 && !cosine)
    return InvalidArgument(Str() << "cosine_min_lr_ratio (min_lr_rate) needs lr_scheduler cosine or cosine_with_min_lr "
                                    "(got " << name << ")");
  s.num_cycles = tc.lr_num_cycles >= 0 ? tc.lr_num_cycles : (restarts ? 1.0 : 0.5);
  s.min_lr_ratio = tc.cosine_min_lr_ratio;
  if (name == "cosine_with_min_lr") {  // HF: exactly one of min_lr, min_lr_rate
    if ((tc.min_lr >= 0) == (tc.cosine_min_lr_ratio > 0))
      return InvalidArgument("lr_scheduler cosine_with_min_lr needs exactly one of lr_scheduler_kwargs min_lr "
                             "and min_lr_rate (or cosine_min_lr_ratio)");
    if (tc.min_lr >= 0) s.min_lr_ratio = tc.min_lr / tc.learning_rate;
  }
  if (s.kind == LrKind::kPolynomial) {
    s.lr_end = tc.lr_end >= 0 ? tc.lr_end : 1e-7;
    s.power = tc.lr_power >= 0 ? tc.lr_power : 1.0;
    if (!(tc.learning_rate > s.lr_end))
      return InvalidArgument(Str() << "lr_scheduler polynomial: lr_end (" << s.lr_end
                                   << ") must be smaller than learning_rate (" << tc.learning_rate << ")");
  }
  if (s.kind == LrKind::kInverseSqrt && tc.lr_timescale == 0)
    return InvalidArgument("lr_scheduler_kwargs: timescale must be positive");
  s.timescale = std::max<int64_t>(tc.lr_timescale, 0);
  return s;
}

double lr_at(const LrSchedule& s, int64_t step) {
  const double W = static_cast<double>(s.warmup_steps), T = static_cast<double>(s.total_steps);
  const double x = static_cast<double>(step);
  if (step < s.warmup_steps) return s.base_lr * (x / std::max(1.0, W));
  const double progress = (x - W) / std::max(1.0, T - W);
  switch (s.kind) {
    case LrKind::kConstant: return s.base_lr;
    case LrKind::kLinear: return s.base_lr * std::max(0.0, (T - x) / std::max(1.0, T - W));
    case LrKind::kCosine: {
      const double f = std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * s.num_cycles * 2.0 * progress)));
      return s.base_lr * ((1.0 - s.min_lr_ratio) * f + s.min_lr_ratio);  // r = 0: exactly f
    }
    case LrKind::kCosineRestarts: {
      if (progress >= 1.0) return 0.0;
      return s.base_lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * std::fmod(s.num_cycles * progress, 1.0))));
    }
    case LrKind::kPolynomial: {
      if (x > T) return s.lr_end;  // HF returns lr_end / lr as the multiplier: the same LR
      const double remaining = 1.0 - (x - W) / (T - W);
      return (s.base_lr - s.lr_end) * std::pow(remaining, s.power) + s.lr_end;
    }
    case LrKind::kInverseSqrt: {
      const double timescale = s.timescale > 0 ? static_cast<double>(s.timescale) : (W > 0 ? W : 10000.0);
      return s.base_lr / std::sqrt((x + (timescale - W)) / timescale);
    }
  }
  return s.base_lr;
}

}  // namespace st
