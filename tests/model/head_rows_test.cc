// model/head.h Note [trained rows]: the head runs on the trained positions only, gathered into
// compact rows, and gathers its input gradient back with a zero row for every other position.
// Checked: the row plan itself (counts, rounding, gather/scatter inverse, padding), and training
// steps and eval losses on the CPU that must match the head run on every position.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "data/batch.h"
#include "model/head.h"
#include "model/model.h"
#include "model_step.h"

namespace st {
namespace {

using test::StepResult;

TEST(HeadRowPlan, EveryPositionTrainedKeepsTheWholeHead) {
  // A benchmark batch: every label but each row's last (the shift) -- no fewer rows to gain.
  std::vector<int32_t> labels(256, 7);
  labels[127] = labels[255] = kIgnoreIndex;
  EXPECT_FALSE(plan_head_rows(labels).compact);
}

TEST(HeadRowPlan, CompactRowsInvertTheScatter) {
  std::vector<int32_t> labels(300, kIgnoreIndex);
  for (int i = 0; i < 300; i += 3) labels[i] = i % 11;  // 100 trained
  const HeadRowPlan p = plan_head_rows(labels);
  ASSERT_TRUE(p.compact);
  EXPECT_EQ(p.trained, 100);
  EXPECT_EQ(p.rows, 128);  // 100 + the zero row, rounded up to 64
  ASSERT_EQ(p.gather.size(), 128u);
  ASSERT_EQ(p.labels.size(), 128u);
  ASSERT_EQ(p.scatter.size(), 300u);
  for (int r = 0; r < 100; ++r) {
    EXPECT_EQ(p.gather[r], 3 * r);
    EXPECT_EQ(p.labels[r], labels[3 * r]);
  }
  for (int r = 100; r < 128; ++r) {
    EXPECT_EQ(p.labels[r], kIgnoreIndex);
    EXPECT_EQ(labels[p.gather[r]], kIgnoreIndex) << "padding rows read an untrained position";
  }
  for (int i = 0; i < 300; ++i) EXPECT_EQ(p.scatter[i], i % 3 == 0 ? i / 3 : 100) << i;
}

TEST(HeadRowPlan, ZeroRowAlwaysExists) {
  std::vector<int32_t> labels(256, kIgnoreIndex);
  for (int i = 0; i < 64; ++i) labels[i] = 1;  // 64 trained: 65 rows -> 128, not 64
  const HeadRowPlan p = plan_head_rows(labels);
  ASSERT_TRUE(p.compact);
  EXPECT_EQ(p.rows, 128);
  EXPECT_EQ(p.labels[64], kIgnoreIndex);
}

TEST(HeadRowPlan, NothingTrained) {
  const HeadRowPlan p = plan_head_rows(std::vector<int32_t>(100, kIgnoreIndex));
  ASSERT_TRUE(p.compact);
  EXPECT_EQ(p.rows, 0);
  EXPECT_EQ(p.scatter, std::vector<int32_t>(100, 0));
}

// Two rows of 128 tokens whose first `prompt` positions are not trained (a prompt with
// train_on_inputs false).
Batch prompt_batch(int prompt) {
  Batch b;
  b.batch = 2;
  b.seq = 128;
  b.input_ids = test::fixture_tokens(256, 200);
  b.labels = b.input_ids;
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < prompt; ++t) b.labels[r * 128 + t] = kIgnoreIndex;
  return b;
}

struct HeadRun {
  StepResult step;
  double eval = 0;
};

HeadRun train_and_eval(const Batch& b, bool trained_rows) {
  test::FixtureModel f = test::open_fixture_model(
      "llama_gqa", 1, {.act_dtype = DType::kF32, .max_tokens = 256, .seed = 9, .head_trained_rows = trained_rows});
  HeadRun r;
  r.step = test::run_step(*f.be, *f.model, *f.src, {&b}, {0.01f});
  auto e = f.model->eval_loss_sum(b, *f.src);
  CHECK_OK(e.status());
  r.eval = *e;
  return r;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

TEST(HeadRows, PromptMaskedStepMatchesTheWholeHead) {
  const Batch b = prompt_batch(90);  // 2 x 38 trained of 256 positions: 128 compact rows
  std::vector<int32_t> shifted = shift_labels(b.labels, b.batch, b.seq);
  ASSERT_TRUE(plan_head_rows(shifted).compact);
  const HeadRun compact = train_and_eval(b, true), whole = train_and_eval(b, false);
  ASSERT_EQ(compact.step.grads.size(), whole.step.grads.size());
  bool any = false;
  for (float g : whole.step.grads) any = any || g != 0.0f;
  ASSERT_TRUE(any);
  EXPECT_NEAR(compact.step.losses[0], whole.step.losses[0], 1e-6 * whole.step.losses[0]);
  EXPECT_LT(max_rel(compact.step.grads, whole.step.grads), 1e-5);
  EXPECT_NEAR(compact.eval, whole.eval, 1e-6 * whole.eval);
}

TEST(HeadRows, NothingTrainedGivesZeroLossAndGradient) {
  const Batch b = prompt_batch(128);
  const HeadRun compact = train_and_eval(b, true);
  EXPECT_EQ(compact.step.losses[0], 0.0);
  EXPECT_EQ(compact.eval, 0.0);
  for (float g : compact.step.grads) ASSERT_EQ(g, 0.0f);
}

}  // namespace
}  // namespace st
