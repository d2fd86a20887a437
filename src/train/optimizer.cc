#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/check.h"

namespace st {

AdamWConfig adamw_config_from(const TrainConfig& tc) {
  return AdamWConfig{.beta1 = tc.adam_beta1, .beta2 = tc.adam_beta2, .eps = tc.adam_epsilon,
                     .weight_decay = tc.weight_decay, .max_grad_norm = tc.max_grad_norm,
                     .lr_ratio_b = tc.loraplus_lr_ratio > 0 ? tc.loraplus_lr_ratio : 1.0};
}

StatusOr<std::unique_ptr<Optimizer>> Optimizer::create(Backend* be, Lora* lora, const AdamWConfig& c) {
  if (!(c.lr_ratio_b > 0) || !std::isfinite(c.lr_ratio_b))
    return InvalidArgument(Str() << "loraplus_lr_ratio must be a positive number, got " << c.lr_ratio_b);
  std::unique_ptr<Optimizer> o(new Optimizer(be, lora, c));
  ASSIGN_OR_RETURN(void* p, be->alloc(256), "allocating the grad-norm accumulator");
  o->norm_ = static_cast<float*>(p);
  // Note [LoRA+]: the runs of the arena, in arena order; padding goes with the run before it.
  const int64_t n = lora->numel();
  if (c.lr_ratio_b == 1.0) {
    o->runs_.push_back({0, n, 1.0});
    return o;
  }
  std::vector<std::pair<int64_t, int64_t>> ab;  // (offset of A, offset of B) of every target present
  for (int l = 0; l < lora->model_config().num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t)
      if (lora->offset_a(l, static_cast<LoraTarget>(t)) >= 0)
        ab.emplace_back(lora->offset_a(l, static_cast<LoraTarget>(t)), lora->offset_b(l, static_cast<LoraTarget>(t)));
  std::sort(ab.begin(), ab.end());
  for (size_t i = 0; i < ab.size(); ++i) {
    const int64_t next = i + 1 < ab.size() ? ab[i + 1].first : n;
    CHECK(ab[i].first < ab[i].second && ab[i].second < next, "optimizer: LoRA arena out of order");
    o->runs_.push_back({i == 0 ? 0 : ab[i].first, ab[i].second, 1.0});  // A
    o->runs_.push_back({ab[i].second, next, c.lr_ratio_b});              // B, then DoRA's m
  }
  return o;
}

Optimizer::~Optimizer() {
  if (norm_) {
    be_->sync_all();
    be_->free(norm_);
  }
}

double Optimizer::grad_norm() {
  Tensor acc(norm_, DType::kF32, {1});
  be_->memset_zero(norm_, sizeof(float), StreamId::kCompute);
  be_->sum_squares(acc, lora_->grads());
  float ss = 0;
  be_->copy_d2h(&ss, norm_, sizeof(float), StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);
  return std::sqrt(static_cast<double>(ss));
}

double Optimizer::step(double lr) {
  const double norm = grad_norm();
  if (c_.max_grad_norm > 0) {
    // torch: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1 (in f32).
    const float coef = static_cast<float>(c_.max_grad_norm) / (static_cast<float>(norm) + 1e-6f);
    if (coef < 1.0f) be_->scale(lora_->grads(), lora_->grads(), coef);
  }
  ++t_;
  auto part = [](const Tensor& section, const Run& r) {
    return Tensor(static_cast<float*>(section.data) + r.begin, DType::kF32, {r.end - r.begin});
  };
  for (const Run& r : runs_) {
    if (r.end <= r.begin) continue;
    Backend::AdamW h{.lr = static_cast<float>(lr * r.lr_scale), .beta1 = static_cast<float>(c_.beta1),
                     .beta2 = static_cast<float>(c_.beta2), .eps = static_cast<float>(c_.eps),
                     .weight_decay = static_cast<float>(c_.weight_decay), .step = t_};
    be_->adamw(part(lora_->params(), r), part(lora_->grads(), r), part(lora_->adam_m(), r), part(lora_->adam_v(), r),
               h);
  }
  return norm;
}

}  // namespace st
