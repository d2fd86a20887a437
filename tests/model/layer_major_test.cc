// Layer-major accumulation (model/model.h Note [layer-major accumulation]): holding 2 or 3
// micro-batches at once and visiting each layer once for all of them trains to the very bits of
// micro-batch-major order -- the loss of every micro-batch and every LoRA gradient, with LoRA
// dropout on, micro-batches of different lengths, every recompute mode -- and the schedule visits
// each layer once per group.
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

StepResult train_step(const std::string& fixture, int slots, Recompute mode) {
  test::FixtureModel f = test::open_fixture_model(
      fixture, 2,
      {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 9, .recompute = mode, .micro_batch_slots = slots});
  Model& model = *f.model;
  const ModelConfig* mc = &f.config;
  std::vector<Batch> bs(5);
  for (size_t j = 0; j < bs.size(); ++j) {
    Batch& b = bs[j];
    b.batch = j % 2 == 0 ? 2 : 1;
    b.seq = j % 2 == 0 ? 8 : 11;  // different shapes in one window
    for (int i = 0; i < b.batch * b.seq; ++i)
      b.input_ids.push_back(static_cast<int>((i * 37 + 11 + 13 * j) % static_cast<size_t>(mc->vocab_size)));
    b.labels = b.input_ids;
    if (j == 1) b.labels[3] = kIgnoreIndex;
  }
  std::vector<const Batch*> ptrs;
  for (const Batch& b : bs) ptrs.push_back(&b);
  StepResult r = test::run_step(*f.be, model, *f.src, ptrs, {0.2f, 0.3f, 0.1f, 0.25f, 0.15f});
  EXPECT_EQ(model.micro_batches_run(), 5u);
  return r;
}

TEST(LayerMajor, ScheduleVisitsEachLayerOncePerGroup) {
  const StepSchedule s = StepSchedule::layer_major(3, 5, 2);  // groups {0,1} {2,3} {4}
  ASSERT_EQ(s.visits().size(), 30u);
  EXPECT_EQ(s.layers(), (std::vector<int>{0, 0, 1, 1, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 1, 1, 0, 0,
                                          0, 1, 2, 2, 1, 0}));
  EXPECT_EQ(s.visits()[1].micro_batch, 1);
  EXPECT_EQ(s.visits()[7].phase, Phase::kBackward);
  const StepSchedule m = StepSchedule::micro_batch_major(3, 2);
  EXPECT_EQ(m.layers(), (std::vector<int>{0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0}));
}

TEST(LayerMajor, TrainsToTheBitsOfMicroBatchMajor) {
  for (const char* fixture : {"llama_gqa", "qwen3_qknorm"}) {
    for (Recompute mode : {Recompute::kFull, Recompute::kNone, Recompute::kAttention}) {
      const StepResult want = train_step(fixture, 1, mode);
      ASSERT_EQ(want.losses.size(), 5u);
      bool any_grad = false;
      for (float g : want.grads) any_grad = any_grad || g != 0.0f;
      ASSERT_TRUE(any_grad) << "no LoRA gradient: the comparison would prove nothing";
      for (int slots : {2, 3, 5}) {
        const StepResult got = train_step(fixture, slots, mode);
        EXPECT_EQ(got.losses, want.losses) << fixture << " slots " << slots << " " << recompute_name(mode);
        ASSERT_EQ(got.grads.size(), want.grads.size());
        EXPECT_EQ(std::memcmp(got.grads.data(), want.grads.data(), got.grads.size() * sizeof(float)), 0)
            << fixture << " slots " << slots << " " << recompute_name(mode) << ": LoRA gradients differ";
      }
    }
  }
}

}  // namespace
}  // namespace st
