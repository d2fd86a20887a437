// The optimizer step over the LoRA arena's flat buffers (Note [lora arena] in model/lora.h):
// global grad-norm (+ clipping with torch clip_grad_norm_ semantics), then AdamW (torch).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/lora.h"
#include "train/train_config.h"

namespace st {

// Note [LoRA+]: LoRA+ (Hayou et al. 2024; PEFT's create_loraplus_optimizer, axolotl's
// loraplus_lr_ratio) trains B at lr x ratio and A at lr. PEFT puts every parameter whose name holds
// lora_B or that is one-dimensional in B's group, so DoRA's magnitude vectors take lr x ratio too;
// weight decay is the same in both groups (neither holds a bias or a norm weight). In the arena
// (Note [lora arena]) each target's A is followed by its B and then its magnitude, so the step runs
// AdamW once per run of one group: A, then B + m, target after target. Without LoRA+ the whole
// arena is one run, as before. Each element's update is the same formula with its group's lr, so
// splitting the launch changes no bits.
struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double max_grad_norm = 1.0;  // 0 = no clipping
  double lr_ratio_b = 1.0;     // LoRA+: B's (and DoRA m's) lr / A's lr; 1 = plain AdamW
};

// The AdamW settings of a training config (LoRA+'s ratio included).
AdamWConfig adamw_config_from(const TrainConfig& tc);

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
  // A run of the arena that one AdamW launch updates with lr x lr_scale (Note [LoRA+]).
  struct Run {
    int64_t begin, end;
    double lr_scale;
  };
  Backend* be_;
  Lora* lora_;
  AdamWConfig c_;
  std::vector<Run> runs_;
  float* norm_ = nullptr;
  int64_t t_ = 0;
};

}  // namespace st
