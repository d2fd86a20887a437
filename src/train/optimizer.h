// The optimizer step over the LoRA arena's flat buffers (Note [lora arena] in model/lora.h):
// global grad-norm (+ clipping with torch clip_grad_norm_ semantics), then AdamW (torch).
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "model/lora.h"

namespace st {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double max_grad_norm = 1.0;  // 0 = no clipping
};

class Optimizer {
 public:
  // Allocates a small device scratch (the norm accumulator). `lora` must outlive this object.
  static StatusOr<std::unique_ptr<Optimizer>> create(Backend* be, Lora* lora, const AdamWConfig& c);
  ~Optimizer();

  // L2 norm of all LoRA grads (f32 sum of squares, fixed order). Blocks to read it.
  double grad_norm();
  // grad_norm(), clip (coef = max/(norm+1e-6), applied when < 1), AdamW with `lr` at step t
  // (1-based; advances the internal step). Returns the pre-clip norm (what HF logs).
  double step(double lr);
  int64_t steps_taken() const { return t_; }
  void set_steps_taken(int64_t t) { t_ = t; }

 private:
  Optimizer(Backend* be, Lora* lora, const AdamWConfig& c) : be_(be), lora_(lora), c_(c) {}
  Backend* be_;
  Lora* lora_;
  AdamWConfig c_;
  float* norm_ = nullptr;
  int64_t t_ = 0;
};

}  // namespace st
