// Every Recompute mode (Note [recompute], model/layer.h) trains to the same bits on the CPU: the
// loss of each micro-batch and every LoRA gradient, with LoRA dropout on, two micro-batches and all
// targets. Covers the last layer's backward, which reuses its forward's intermediates instead of
// recomputing them (LayerCtx::forward_current).
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "model/model.h"
#include "model/resident_source.h"
#include "model_step.h"

namespace st {
namespace {

using test::StepResult;

StepResult train_step(Recompute mode) {
  test::FixtureModel f = test::open_fixture_model(
      "llama_gqa", 1, {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 9, .recompute = mode});
  const std::vector<Batch> bs = test::two_micro_batches(f.config.vocab_size);
  return test::run_step(*f.be, *f.model, *f.src, {&bs[0], &bs[1]}, {0.5f, 0.5f});
}

TEST(Recompute, EveryModeTrainsToTheSameBits) {
  const StepResult none = train_step(Recompute::kNone);
  ASSERT_EQ(none.losses.size(), 2u);
  bool any_grad = false;
  for (float g : none.grads) any_grad = any_grad || g != 0.0f;
  ASSERT_TRUE(any_grad) << "no LoRA gradient: the comparison would prove nothing";
  for (Recompute mode : {Recompute::kFull, Recompute::kAttention}) {
    const StepResult r = train_step(mode);
    EXPECT_EQ(r.losses, none.losses) << recompute_name(mode);
    ASSERT_EQ(r.grads.size(), none.grads.size());
    EXPECT_EQ(std::memcmp(r.grads.data(), none.grads.data(), r.grads.size() * sizeof(float)), 0)
        << recompute_name(mode) << ": LoRA gradients differ from recompute none";
  }
}

}  // namespace
}  // namespace st
