// Model::forward_backward with SequenceWeights (model/model.h Note [sequence weights]) and
// Lora::disable_adapter (model/lora.h Note [adapter disabled]), the two parts DPO is built on.
// Oracles: central finite differences of sum_rows c_row * (-log p_row) (and over segments that
// split rows: Batch::segments), the sums taken from
// eval_sequence_logps (f32 model, every target, f64 accumulation); the head's per-row sums equal
// the eval forward's; a disabled adapter gives the bits of one whose B are zero, and enabling it
// restores every parameter bit for bit.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model_step.h"

namespace st {
namespace {

using test::FixtureModel;

LoraConfig no_dropout_lora() {
  LoraConfig lc = test::all_targets_lora();
  lc.dropout = 0.0;
  return lc;
}

// Two rows of 8 tokens; row 0 trains positions 3..7, row 1 positions 2..5 (the rest ignored), as a
// pair's prompt and response would.
Batch masked_batch(int64_t vocab) {
  Batch b;
  b.batch = 2;
  b.seq = 8;
  b.input_ids = test::fixture_tokens(16, vocab);
  b.labels.assign(16, kIgnoreIndex);
  for (int t = 3; t < 8; ++t) b.labels[t] = b.input_ids[t];
  for (int t = 2; t < 6; ++t) b.labels[8 + t] = b.input_ids[8 + t];
  return b;
}

std::vector<double> seq_logps(FixtureModel& f, const Batch& b) {
  auto r = f.model->eval_sequence_logps(b, *f.src);
  CHECK_OK(r.status());
  return *r;
}

// The loss sum_segments c_s * (-log p_s) that weights c stand for, its central differences at a
// few A and B entries of every layer against the gradient g that forward_backward left.
void expect_weighted_gradient(FixtureModel& f, const Batch& b, const std::vector<float>& c, const std::vector<float>& p0,
                              const std::vector<float>& g, const std::string& what) {
  Lora& lora = f.model->lora();
  auto objective = [&](const std::vector<float>& p) {
    lora.params_from_host(p);
    const std::vector<double> s = seq_logps(f, b);
    double sum = 0;
    for (size_t i = 0; i < c.size(); ++i) sum -= c[i] * s[i];
    return sum;
  };
  const float h = 1e-2f;
  int checked = 0;
  for (int layer = 0; layer < f.config.num_layers; ++layer)
    for (LoraTarget t : {LoraTarget::kQ, LoraTarget::kV, LoraTarget::kDown}) {
      for (int64_t off : {lora.offset_a(layer, t) + 1, lora.offset_b(layer, t) + 3}) {
        std::vector<float> pp = p0, pm = p0;
        pp[static_cast<size_t>(off)] += h;
        pm[static_cast<size_t>(off)] -= h;
        const double fd = (objective(pp) - objective(pm)) / (2.0 * h);
        const double an = g[static_cast<size_t>(off)];
        EXPECT_NEAR(an, fd, 2e-3 * std::max(1.0, std::fabs(fd)))
            << "layer " << layer << " " << lora_target_name(t) << " offset " << off << what;
        ++checked;
      }
    }
  EXPECT_GE(checked, 6);
  lora.params_from_host(p0);
}

std::vector<float> grads_of(FixtureModel& f) {
  std::vector<float> g(static_cast<size_t>(f.model->lora().numel()));
  f.be->copy_d2h(g.data(), f.model->lora().grads().data, g.size() * sizeof(float), StreamId::kCompute);
  f.be->sync_all();
  return g;
}

TEST(SequenceWeights, GradientMatchesFiniteDifferences) {
  for (bool compact : {true, false}) {  // head.h Note [trained rows]: compact rows, and every position
    FixtureModel f = test::open_fixture_model(
        "qwen2_tied", 1, {.act_dtype = DType::kF32, .max_tokens = 16, .head_trained_rows = compact}, no_dropout_lora());
    const Batch b = masked_batch(f.config.vocab_size);
    const std::vector<float> c = {0.7f, -1.3f};
    Lora& lora = f.model->lora();
    const std::vector<float> p0 = lora.params_to_host();
    std::vector<double> seen;
    Model::SequenceWeights weigh = [&](int mb, const std::vector<double>& logp) {
      EXPECT_EQ(mb, 0);
      seen = logp;
      return c;
    };
    lora.zero_grads();
    auto l = f.model->forward_backward({&b}, *f.src, {1.0f}, &weigh);
    ASSERT_TRUE(l.ok()) << l.status().message();
    const std::vector<float> g = grads_of(f);
    // The head's per-row sums are the eval forward's (no dropout: the same math).
    const std::vector<double> ev = seq_logps(f, b);
    ASSERT_EQ(seen.size(), 2u);
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_NEAR(seen[r], ev[r], 1e-5 * std::fabs(ev[r])) << "row " << r;
      EXPECT_LT(ev[r], 0.0) << "a sum of log p";
    }
    expect_weighted_gradient(f, b, c, p0, g, compact ? " compact" : "");
    // The weights matter: a row weighted 0 contributes nothing, so the gradient changes.
    lora.params_from_host(p0);
    Model::SequenceWeights half = [&](int, const std::vector<double>&) { return std::vector<float>{0.7f, 0.0f}; };
    lora.zero_grads();
    ASSERT_TRUE(f.model->forward_backward({&b}, *f.src, {1.0f}, &half).ok());
    const std::vector<float> g2 = grads_of(f);
    EXPECT_NE(std::memcmp(g.data(), g2.data(), g.size() * sizeof(float)), 0);
  }
}

// Batch::segments (Note [sequence weights]): row 0's targets split over segments 0 and 2, one of
// its targets in none (-1), row 1 in segment 1. The per-segment sums add up to the rows' sums,
// the target in no segment counts in no sum, and the gradient of sum c_s (-log p_s) is right.
TEST(SequenceWeights, SegmentsSplitRows) {
  FixtureModel f = test::open_fixture_model(
      "qwen2_tied", 1, {.act_dtype = DType::kF32, .max_tokens = 16, .head_trained_rows = true}, no_dropout_lora());
  const Batch rows = masked_batch(f.config.vocab_size);
  Batch b = rows;
  b.segments.assign(16, -1);
  for (int t = 3; t < 6; ++t) b.segments[t] = 0;
  for (int t = 6; t < 7; ++t) b.segments[t] = 2;  // position 7: in no segment
  for (int t = 2; t < 6; ++t) b.segments[8 + t] = 1;
  const std::vector<double> by_row = seq_logps(f, rows), by_seg = seq_logps(f, b);
  ASSERT_EQ(by_seg.size(), 3u);
  Batch last = rows;  // row 0's target at position 7 alone
  std::fill(last.labels.begin(), last.labels.begin() + 7, kIgnoreIndex);
  std::fill(last.labels.begin() + 8, last.labels.end(), kIgnoreIndex);
  const double lone = seq_logps(f, last)[0];
  EXPECT_NEAR(by_seg[0] + by_seg[2] + lone, by_row[0], 1e-9 * std::fabs(by_row[0]));
  EXPECT_EQ(by_seg[1], by_row[1]);
  EXPECT_LT(by_seg[2], 0.0);
  const std::vector<float> c = {0.7f, -1.3f, 2.1f};
  Lora& lora = f.model->lora();
  const std::vector<float> p0 = lora.params_to_host();
  std::vector<double> seen;
  Model::SequenceWeights weigh = [&](int, const std::vector<double>& logp) {
    seen = logp;
    return c;
  };
  lora.zero_grads();
  ASSERT_TRUE(f.model->forward_backward({&b}, *f.src, {1.0f}, &weigh).ok());
  ASSERT_EQ(seen.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(seen[i], by_seg[i], 1e-5 * std::fabs(by_seg[i])) << "segment " << i;
  expect_weighted_gradient(f, b, c, p0, grads_of(f), " segments");
}

TEST(SequenceWeights, DisabledAdapterIsTheBase) {
  FixtureModel f =
      test::open_fixture_model("qwen2_tied", 1, {.act_dtype = DType::kF32, .max_tokens = 16}, no_dropout_lora());
  const Batch b = masked_batch(f.config.vocab_size);
  Lora& lora = f.model->lora();
  const std::vector<float> p = lora.params_to_host();
  const std::vector<double> adapted = seq_logps(f, b);
  lora.disable_adapter();
  const std::vector<double> disabled = seq_logps(f, b);
  lora.enable_adapter();
  const std::vector<float> back = lora.params_to_host();
  ASSERT_EQ(back.size(), p.size());
  EXPECT_EQ(std::memcmp(back.data(), p.data(), p.size() * sizeof(float)), 0) << "parameters restored bit for bit";
  EXPECT_EQ(seq_logps(f, b), adapted);
  // The same parameters with every B zeroed by hand.
  std::vector<float> zb = p;
  for (int layer = 0; layer < f.config.num_layers; ++layer)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const LoraTarget tt = static_cast<LoraTarget>(t);
      const int64_t ob = lora.offset_b(layer, tt);
      if (ob < 0) continue;
      const int64_t n = lora_target_dims(f.config, tt).second * lora.config().r;
      std::fill(zb.begin() + ob, zb.begin() + ob + n, 0.0f);
    }
  lora.params_from_host(zb);
  EXPECT_EQ(seq_logps(f, b), disabled);
  EXPECT_NE(disabled, adapted) << "init_lora_nonzero's adapter changes the outputs";
}

}  // namespace
}  // namespace st
