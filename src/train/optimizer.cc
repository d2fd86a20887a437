#include "train/optimizer.h"

#include <cmath>

namespace st {

StatusOr<std::unique_ptr<Optimizer>> Optimizer::create(Backend* be, Lora* lora, const AdamWConfig& c) {
  std::unique_ptr<Optimizer> o(new Optimizer(be, lora, c));
  ASSIGN_OR_RETURN(void* p, be->alloc(256), "allocating the grad-norm accumulator");
  o->norm_ = static_cast<float*>(p);
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
  Backend::AdamW h{.lr = static_cast<float>(lr), .beta1 = static_cast<float>(c_.beta1),
                   .beta2 = static_cast<float>(c_.beta2), .eps = static_cast<float>(c_.eps),
                   .weight_decay = static_cast<float>(c_.weight_decay), .step = t_};
  be_->adamw(lora_->params(), lora_->grads(), lora_->adam_m(), lora_->adam_v(), h);
  return norm;
}

}  // namespace st
