// Layer-major evaluation (model/model.h Note [layer-major evaluation]): where the source loads
// layers, several batches go through the layers together -- each layer acquired once per group --
// and every batch's loss sum and segment log-probs keep the bits of the batch evaluated alone:
// batches of different shapes, packed documents, ignored labels, segments, compact head rows; a
// source that loads nothing still evaluates one batch at a time; a training step after a group
// eval is unchanged.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "model/model.h"
#include "model_step.h"

namespace st {
namespace {

// Five batches: different shapes, an ignored label, two packed documents, explicit segments.
std::vector<Batch> eval_batches(int64_t vocab) {
  std::vector<Batch> bs(5);
  for (size_t j = 0; j < bs.size(); ++j) {
    Batch& b = bs[j];
    b.batch = j % 2 == 0 ? 2 : 1;
    b.seq = j % 2 == 0 ? 8 : 11;
    b.input_ids = test::fixture_tokens(b.batch * b.seq, vocab, 37 + 2 * static_cast<int64_t>(j), 11 + 13 * static_cast<int64_t>(j));
    b.labels = b.input_ids;
  }
  bs[1].labels[3] = kIgnoreIndex;
  Batch& docs = bs[2];  // row 0: documents of 5 and 3 tokens
  docs.doc_ids.assign(16, 0);
  for (int t = 5; t < 8; ++t) docs.doc_ids[static_cast<size_t>(t)] = 1;
  for (int t = 0; t < 16; ++t) docs.positions.push_back(static_cast<int32_t>(t < 5 || t >= 8 ? t % 8 : t - 5));
  bs[4].segments.assign(16, 0);  // row 0's second half and row 1 in segment 2, row 0's first half in 1
  for (int t = 0; t < 16; ++t) bs[4].segments[static_cast<size_t>(t)] = t < 4 ? 1 : 2;
  return bs;
}

std::vector<const Batch*> pointers(const std::vector<Batch>& bs) {
  std::vector<const Batch*> out;
  for (const Batch& b : bs) out.push_back(&b);
  return out;
}

TEST(EvalGroup, KeepsTheBitsOfOneBatchAtATime) {
  for (const char* fixture : {"llama_layers", "qwen3_qknorm"}) {
    test::FixtureModel f = test::open_fixture_model(fixture, 2, {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 9});
    Model& m = *f.model;
    const int L = static_cast<int>(f.config.num_layers);
    const std::vector<Batch> bs = eval_batches(f.config.vocab_size);
    std::vector<double> want_loss;
    std::vector<std::vector<double>> want_logps;
    for (const Batch& b : bs) {
      auto loss = m.eval_loss_sum(b, *f.src);
      auto logps = m.eval_sequence_logps(b, *f.src);
      ASSERT_TRUE(loss.ok() && logps.ok());
      want_loss.push_back(*loss);
      want_logps.push_back(*logps);
    }
    ASSERT_NE(want_loss[0], want_loss[2]);
    ASSERT_EQ(want_logps[4].size(), 3u) << "segments 0..2";

    EXPECT_EQ(m.eval_group_size(*f.src), 1) << "resident layers: one batch at a time";
    test::LoadingSource loading(f.src.get());
    const int g = m.eval_group_size(loading);
    EXPECT_EQ(g, L) << fixture << ": one batch per layer (the slot's buffers hold L + 1 hidden states)";
    auto losses = m.eval_loss_sums(pointers(bs), loading);
    ASSERT_TRUE(losses.ok()) << losses.status().to_string();
    EXPECT_EQ(*losses, want_loss) << fixture;
    const int groups = (5 + g - 1) / g;
    EXPECT_EQ(loading.steps, groups);
    EXPECT_EQ(loading.acquires, groups * L) << "each layer acquired once per group";
    auto logps = m.eval_sequence_logps(pointers(bs), loading);
    ASSERT_TRUE(logps.ok());
    EXPECT_EQ(*logps, want_logps) << fixture;
    // The one-at-a-time path on a resident source, through the same entry point.
    auto resident = m.eval_sequence_logps(pointers(bs), *f.src);
    ASSERT_TRUE(resident.ok());
    EXPECT_EQ(*resident, want_logps);
  }
}

// The grouped head (model/head.h Note [grouped head]) with compact head rows (Note [trained
// rows]: a long prompt not trained on) beside batches whose every position is trained, so each
// batch's normalized rows land in its own buffer or in the one another left.
TEST(EvalGroup, CompactHeadRowsKeepTheirBits) {
  test::FixtureModel f = test::open_fixture_model("llama_layers", 2, {.act_dtype = DType::kF32, .max_tokens = 160, .seed = 9});
  Model& m = *f.model;
  std::vector<Batch> bs(4);
  for (size_t j = 0; j < bs.size(); ++j) {
    Batch& b = bs[j];
    b.batch = 1;
    b.seq = j % 2 == 0 ? 160 : 40 + 8 * static_cast<int64_t>(j);
    b.input_ids = test::fixture_tokens(b.seq, f.config.vocab_size, 29 + static_cast<int64_t>(j), 3 + 7 * static_cast<int64_t>(j));
    b.labels = b.input_ids;
    if (j % 2 == 0)  // a 120-token prompt: 39 trained positions -> 64 compact head rows of 160
      for (int t = 0; t < 120; ++t) b.labels[static_cast<size_t>(t)] = kIgnoreIndex;
  }
  std::vector<double> want_loss;
  std::vector<std::vector<double>> want_logps;
  for (const Batch& b : bs) {
    want_loss.push_back(*m.eval_loss_sum(b, *f.src));
    want_logps.push_back(*m.eval_sequence_logps(b, *f.src));
  }
  test::LoadingSource loading(f.src.get());
  ASSERT_EQ(m.eval_group_size(loading), 3);
  auto losses = m.eval_loss_sums(pointers(bs), loading);
  ASSERT_TRUE(losses.ok());
  EXPECT_EQ(*losses, want_loss);
  auto logps = m.eval_sequence_logps(pointers(bs), loading);
  ASSERT_TRUE(logps.ok());
  EXPECT_EQ(*logps, want_logps);
}

TEST(EvalGroup, LeavesTrainingAsItWas) {
  const std::vector<Batch> train = test::two_micro_batches(256);
  auto step = [&](bool eval_first) {
    test::FixtureModel f = test::open_fixture_model("llama_layers", 2, {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 9});
    if (eval_first) {
      test::LoadingSource loading(f.src.get());
      const std::vector<Batch> bs = eval_batches(f.config.vocab_size);
      CHECK_OK(f.model->eval_loss_sums(pointers(bs), loading).status());
    }
    return test::run_step(*f.be, *f.model, *f.src, pointers(train), {0.5f, 0.5f});
  };
  const test::StepResult want = step(false), got = step(true);
  EXPECT_EQ(got.losses, want.losses);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  EXPECT_EQ(std::memcmp(got.grads.data(), want.grads.data(), got.grads.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace st
