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
  const std::string dir = test::fixture_model_dir("llama_gqa");
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  CHECK_OK(be.status());
  auto mc = load_hf_config(dir + "/config.json");
  auto ck = Checkpoint::open(dir);
  CHECK_OK(mc.status());
  CHECK_OK(ck.status());
  auto m = Model::create(*mc, be->get(), test::all_targets_lora(),
                         {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 9, .recompute = mode});
  CHECK_OK(m.status());
  Model& model = **m;
  CHECK_OK(model.load_extras(*ck));
  auto src = ResidentLayerSource::from_checkpoint(be->get(), *mc, model.layer_layout(), *ck);
  CHECK_OK(src.status());
  test::init_lora_nonzero(model.lora());
  const std::vector<Batch> bs = test::two_micro_batches(mc->vocab_size);
  return test::run_step(**be, model, **src, {&bs[0], &bs[1]}, {0.5f, 0.5f});
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
