// model.cc Note [documents that matter]: a batch's document ids are dropped when no trained token
// follows a document border of its row (a sample plus padding), and kept when one does (packed
// samples). Checked through training steps on the CPU: a padded batch trains to the same bits with
// and without ids; a packed batch whose second document is trained must differ from the same tokens
// without ids (its mask is kept: were it dropped, both runs would match). Also the spans a batch's
// document ids make for backends (backend.h Note [document spans]).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "data/batch.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/resident_source.h"
#include "model_step.h"

namespace st {
namespace {

using test::StepResult;

StepResult train_on(const Batch& b) {
  test::FixtureModel f = test::open_fixture_model("llama_gqa", 1, {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 9});
  return test::run_step(*f.be, *f.model, *f.src, {&b}, {1.0f});
}

// Two rows of 8: row 0 is a 5-token document then `tail` (3 tokens, document 1); row 1 one document.
Batch rows(bool tail_trained) {
  Batch b;
  b.batch = 2;
  b.seq = 8;
  b.input_ids = test::fixture_tokens(16, 200);
  b.labels = b.input_ids;
  b.doc_ids.assign(16, 0);
  for (int t = 5; t < 8; ++t) {
    b.doc_ids[t] = 1;
    if (!tail_trained) b.labels[t] = kIgnoreIndex;  // padding: never a target
  }
  for (int t = 0; t < 16; ++t) b.positions.push_back(static_cast<int32_t>(t < 5 || t >= 8 ? t % 8 : t - 5));
  return b;
}

bool same(const StepResult& a, const StepResult& b) {
  return a.losses == b.losses && a.grads.size() == b.grads.size() &&
         std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)) == 0;
}

TEST(Documents, PaddingNeedsNoMask) {
  Batch with = rows(false), without = rows(false);
  without.doc_ids.clear();
  const StepResult a = train_on(with), b = train_on(without);
  bool any = false;
  for (float g : a.grads) any = any || g != 0.0f;
  ASSERT_TRUE(any);
  EXPECT_TRUE(same(a, b)) << "a padded batch must train alike with and without document ids";
}

TEST(Documents, TrainedSecondDocumentKeepsItsMask) {
  Batch with = rows(true), without = rows(true);
  without.doc_ids.clear();
  EXPECT_FALSE(same(train_on(with), train_on(without)))
      << "the second document's tokens attended across the border: its mask was dropped";
}

// data/data_loader.h Note [padding-free batches]: two rows (a 5- and an 8-token sample, padded to
// 8) and the same samples back to back in one row of 16 train alike: same loss and gradients up
// to rounding (LoRA dropout off: its masks follow token positions).
TEST(Documents, PaddingFreeTrainsLikePaddedRows) {
  const std::vector<int32_t> a = test::fixture_tokens(5, 200), bb = test::fixture_tokens(8, 200, 53, 5);
  Batch padded;
  padded.batch = 2;
  padded.seq = 8;
  for (int i = 0; i < 8; ++i) {
    padded.input_ids.push_back(i < 5 ? a[i] : 0);
    padded.labels.push_back(i < 5 ? a[i] : kIgnoreIndex);
    padded.doc_ids.push_back(i < 5 ? 0 : 1);
    padded.positions.push_back(i < 5 ? i : i - 5);
  }
  for (int i = 0; i < 8; ++i) {
    padded.input_ids.push_back(bb[i]);
    padded.labels.push_back(i == 0 ? kIgnoreIndex : bb[i]);  // a sample's first label, as datasets.cc sets it
    padded.doc_ids.push_back(0);
    padded.positions.push_back(i);
  }
  Batch flat;
  flat.batch = 1;
  flat.seq = 16;
  for (int i = 0; i < 16; ++i) {
    const bool first = i < 5, second = i >= 5 && i < 13;
    flat.input_ids.push_back(first ? a[i] : second ? bb[i - 5] : 0);
    flat.labels.push_back(first ? a[i] : second && i > 5 ? bb[i - 5] : kIgnoreIndex);
    flat.doc_ids.push_back(first ? 0 : second ? 1 : 2);
    flat.positions.push_back(first ? i : second ? i - 5 : i - 13);
  }
  LoraConfig lc = test::all_targets_lora();
  lc.dropout = 0;
  const auto run = [&](const Batch& b) {
    test::FixtureModel f =
        test::open_fixture_model("llama_gqa", 1, {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 9}, lc);
    return test::run_step(*f.be, *f.model, *f.src, {&b}, {1.0f});
  };
  const StepResult p = run(padded), q = run(flat);
  EXPECT_NEAR(p.losses[0], q.losses[0], 1e-5 * std::fabs(p.losses[0]));
  ASSERT_EQ(p.grads.size(), q.grads.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < p.grads.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(p.grads[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(p.grads[i]) - q.grads[i]));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LT(diff, 1e-4 * scale) << "padding-free gradients differ from the padded rows'";
}

// backend.h Note [document spans]: a run of equal ids within a row is one span; rows always cut.
TEST(DocumentSpans, RunsWithinRows) {
  // Two rows of 6: [0 0 1 1 1 2] [2 2 2 2 5 5] -- id 2 continues across the row border: two spans.
  const DocumentSpans d = document_spans({0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 5, 5}, 6);
  EXPECT_EQ(d.spans, 5);
  EXPECT_EQ(d.slots, 6);
  EXPECT_EQ(d.max_len, 4);
  EXPECT_EQ(d.starts, (std::vector<int32_t>{0, 2, 5, 6, 10, 12, 12}));
  EXPECT_EQ(d.lens, (std::vector<int32_t>{2, 3, 1, 4, 2, 0}));
  const DocumentSpans one = document_spans(std::vector<int32_t>(7, 3), 7);
  EXPECT_EQ(one.spans, 1);
  EXPECT_EQ(one.slots, 1);
  EXPECT_EQ(one.starts, (std::vector<int32_t>{0, 7}));
  EXPECT_EQ(one.lens, (std::vector<int32_t>{7}));
}

}  // namespace
}  // namespace st
