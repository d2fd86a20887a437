// DPO's sigmoid loss (train/preference_loss.h). Oracles: closed forms (ln 2 at equal rewards; the
// conservative loss's value at z = 0 for any smoothing), central differences of the loss in the
// policy log-probabilities, and the loss and gradient factor staying finite and correctly limited
// far out on both sides.
#include "train/preference_loss.h"

#include <cmath>

#include <gtest/gtest.h>

namespace st {
namespace {

TEST(Dpo, EqualRewardsGiveLn2) {
  const DpoTerms t = dpo_terms({.policy_chosen = -12.5, .policy_rejected = -30, .ref_chosen = -12.5, .ref_rejected = -30},
                               {.beta = 0.1});
  EXPECT_DOUBLE_EQ(t.loss, std::log(2.0));
  EXPECT_DOUBLE_EQ(t.dloss_dchosen, -0.05);  // -beta * sigmoid(0)
  EXPECT_EQ(t.reward_chosen, 0.0);
  EXPECT_EQ(t.reward_rejected, 0.0);
  // Smoothing mixes -log s(z) and -log s(-z): both ln 2 at z = 0; their slopes cancel at eps 0.5.
  const DpoTerms s = dpo_terms({.policy_chosen = -1, .policy_rejected = -2, .ref_chosen = -1, .ref_rejected = -2},
                               {.beta = 0.3, .label_smoothing = 0.2});
  EXPECT_NEAR(s.loss, std::log(2.0), 1e-15);
  EXPECT_NEAR(s.dloss_dchosen, 0.3 * (-0.8 * 0.5 + 0.2 * 0.5), 1e-15);
}

TEST(Dpo, GradientMatchesFiniteDifferences) {
  for (double eps : {0.0, 0.1}) {
    for (double beta : {0.1, 0.5, 2.0}) {
      const DpoConfig c{.beta = beta, .label_smoothing = eps};
      const DpoPair p{.policy_chosen = -20.3, .policy_rejected = -18.1, .ref_chosen = -21.0, .ref_rejected = -17.2};
      const DpoTerms t = dpo_terms(p, c);
      const double h = 1e-5;
      DpoPair pc = p, mc = p, pr = p, mr = p;
      pc.policy_chosen += h;
      mc.policy_chosen -= h;
      pr.policy_rejected += h;
      mr.policy_rejected -= h;
      const double d_chosen = (dpo_terms(pc, c).loss - dpo_terms(mc, c).loss) / (2 * h);
      const double d_rejected = (dpo_terms(pr, c).loss - dpo_terms(mr, c).loss) / (2 * h);
      EXPECT_NEAR(t.dloss_dchosen, d_chosen, 1e-8) << "beta " << beta << " eps " << eps;
      EXPECT_NEAR(-t.dloss_dchosen, d_rejected, 1e-8) << "beta " << beta << " eps " << eps;
      EXPECT_NEAR(t.reward_chosen, beta * 0.7, 1e-12);
      EXPECT_NEAR(t.reward_rejected, beta * -0.9, 1e-12);
    }
  }
}

TEST(Dpo, StableFarOut) {
  const DpoConfig c{.beta = 1.0};
  // z = +2000: the loss -> 0 and the factor -> 0; z = -2000: the loss ~ -z, the factor -> -beta.
  const DpoTerms hi = dpo_terms({.policy_chosen = 0, .policy_rejected = -2000, .ref_chosen = 0, .ref_rejected = 0}, c);
  const DpoTerms lo = dpo_terms({.policy_chosen = -2000, .policy_rejected = 0, .ref_chosen = 0, .ref_rejected = 0}, c);
  EXPECT_TRUE(std::isfinite(hi.loss) && std::isfinite(lo.loss));
  EXPECT_NEAR(hi.loss, 0.0, 1e-300);
  EXPECT_NEAR(hi.dloss_dchosen, 0.0, 1e-300);
  EXPECT_NEAR(lo.loss, 2000.0, 1e-9);
  EXPECT_NEAR(lo.dloss_dchosen, -1.0, 1e-15);
}

TEST(Dpo, StatsAreMeans) {
  DpoStats s;
  const DpoConfig c{.beta = 0.5};
  const DpoPair a{.policy_chosen = -1, .policy_rejected = -3, .ref_chosen = -2, .ref_rejected = -2};  // chosen wins
  const DpoPair b{.policy_chosen = -4, .policy_rejected = -1, .ref_chosen = -2, .ref_rejected = -2};  // rejected wins
  s.add(a, dpo_terms(a, c));
  s.add(b, dpo_terms(b, c));
  EXPECT_EQ(s.pairs(), 2);
  EXPECT_NEAR(s.mean_loss(), (dpo_terms(a, c).loss + dpo_terms(b, c).loss) / 2, 1e-15);
  const auto m = s.metrics("eval_");
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].first, "eval_rewards/chosen");
  EXPECT_NEAR(m[0].second, (0.5 * 1 + 0.5 * -2) / 2, 1e-15);
  EXPECT_NEAR(m[1].second, (0.5 * -1 + 0.5 * 1) / 2, 1e-15);
  EXPECT_EQ(m[2].first, "eval_rewards/accuracies");
  EXPECT_EQ(m[2].second, 0.5);
  EXPECT_NEAR(m[3].second, m[0].second - m[1].second, 1e-15);
  EXPECT_EQ(m[4].second, -2.5);
  EXPECT_EQ(m[5].second, -2.0);
  DpoStats t;
  t.merge(s);
  EXPECT_EQ(t.metrics(), s.metrics());
}

}  // namespace
}  // namespace st
