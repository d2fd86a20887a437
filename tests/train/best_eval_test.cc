// BestEval: HF's two rules (train/best_eval.h Note [best eval and early stopping]) -- the best is
// any strictly lower eval_loss, early stopping counts evals that did not beat the previous best by
// more than the threshold -- checked on sequences where they differ.
#include "train/best_eval.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace st {
namespace {

struct Seen {
  bool new_best, stop;
  int64_t count;
};

std::vector<Seen> feed(const std::vector<double>& losses, int64_t patience, double threshold, BestEval* b) {
  std::vector<Seen> out;
  for (size_t i = 0; i < losses.size(); ++i) {
    BestEval::Verdict v = b->observe(losses[i], static_cast<int64_t>(i + 1) * 10, patience, threshold);
    out.push_back({v.new_best, v.stop, b->evals_not_improved});
  }
  return out;
}

TEST(BestEval, FirstEvalIsTheBestAndNeverCounts) {
  BestEval b;
  auto s = feed({3.0}, 1, 0.0, &b);
  EXPECT_TRUE(s[0].new_best);
  EXPECT_FALSE(s[0].stop);
  EXPECT_EQ(b.step, 10);
}

TEST(BestEval, StopsAfterPatienceEvalsWithoutImprovement) {
  BestEval b;
  auto s = feed({3.0, 2.0, 2.5, 2.0, 2.1}, 3, 0.0, &b);
  // 2.0 again is not lower (strict): it counts, and the best stays at step 20.
  EXPECT_EQ(s[2].count, 1);
  EXPECT_EQ(s[3].count, 2);
  EXPECT_FALSE(s[3].new_best);
  EXPECT_EQ(s[4].count, 3);
  EXPECT_TRUE(s[4].stop);
  EXPECT_FALSE(s[3].stop);
  EXPECT_EQ(b.step, 20);
  EXPECT_EQ(*b.loss, 2.0);
}

TEST(BestEval, AnImprovementResetsTheCount) {
  BestEval b;
  auto s = feed({3.0, 3.5, 3.6, 2.9, 3.0}, 3, 0.0, &b);
  EXPECT_EQ(s[2].count, 2);
  EXPECT_EQ(s[3].count, 0);
  EXPECT_TRUE(s[3].new_best);
  EXPECT_EQ(s[4].count, 1);
  EXPECT_FALSE(s[4].stop);
}

// With a threshold a small improvement becomes the best but still counts as not improved.
TEST(BestEval, ThresholdCountsASmallImprovementYetItIsTheBest) {
  BestEval b;
  auto s = feed({3.0, 2.95, 2.5}, 2, 0.1, &b);
  EXPECT_TRUE(s[1].new_best);
  EXPECT_EQ(s[1].count, 1);
  EXPECT_TRUE(s[2].new_best);  // beats 2.95 by 0.45
  EXPECT_EQ(s[2].count, 0);
  EXPECT_EQ(b.step, 30);
}

TEST(BestEval, NaNNeverBecomesTheBestAndAlwaysCounts) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  BestEval b;
  auto s = feed({nan, 4.0, nan}, 2, 0.0, &b);
  EXPECT_FALSE(s[0].new_best);
  EXPECT_EQ(s[0].count, 0);  // no best yet: as HF, the first eval resets
  EXPECT_TRUE(s[1].new_best);
  EXPECT_EQ(s[2].count, 1);
  EXPECT_EQ(*b.loss, 4.0);
}

TEST(BestEval, PatienceZeroNeverStops) {
  BestEval b;
  auto s = feed({1.0, 2.0, 3.0, 4.0, 5.0}, 0, 0.0, &b);
  for (const Seen& x : s) EXPECT_FALSE(x.stop);
  EXPECT_EQ(b.evals_not_improved, 4);
}

}  // namespace
}  // namespace st
