// The preference losses (train/preference_loss.h): DPO, IPO, ORPO, SimPO. Oracles: closed forms
// (DPO's ln 2 at equal rewards, IPO's 1 / (4 beta^2) at the reference, SimPO's softplus(gamma) at
// equal means, ORPO's odds ratio written out with exp and log in long double), central
// differences of every loss in the policy log-probability sums (chosen and rejected separately:
// ORPO's two factors are not each other's negatives), and finiteness far out.
#include "train/preference_loss.h"

#include <cmath>

#include <gtest/gtest.h>

namespace st {
namespace {

PreferenceConfig cfg(PreferenceLoss l, double beta, double eps = 0) {
  PreferenceConfig c;
  c.loss = l;
  c.beta = beta;
  c.label_smoothing = eps;
  return c;
}

TEST(Dpo, EqualRewardsGiveLn2) {
  const PreferenceTerms t =
      preference_terms({.policy_chosen = -12.5, .policy_rejected = -30, .ref_chosen = -12.5, .ref_rejected = -30},
                       cfg(PreferenceLoss::kDpo, 0.1));
  EXPECT_DOUBLE_EQ(t.loss, std::log(2.0));
  EXPECT_DOUBLE_EQ(t.dloss_dchosen, -0.05);  // -beta * sigmoid(0)
  EXPECT_DOUBLE_EQ(t.dloss_drejected, 0.05);
  EXPECT_EQ(t.reward_chosen, 0.0);
  EXPECT_EQ(t.reward_rejected, 0.0);
  EXPECT_EQ(t.logp_chosen, -12.5);  // DPO logs the sums
  // Smoothing mixes -log s(z) and -log s(-z): both ln 2 at z = 0; their slopes cancel at eps 0.5.
  const PreferenceTerms s = preference_terms(
      {.policy_chosen = -1, .policy_rejected = -2, .ref_chosen = -1, .ref_rejected = -2}, cfg(PreferenceLoss::kDpo, 0.3, 0.2));
  EXPECT_NEAR(s.loss, std::log(2.0), 1e-15);
  EXPECT_NEAR(s.dloss_dchosen, 0.3 * (-0.8 * 0.5 + 0.2 * 0.5), 1e-15);
}

TEST(Ipo, ClosedForm) {
  // At the reference h = 0: loss (1 / (2 beta))^2; means of 4 and 5 tokens.
  const PreferencePair p{.policy_chosen = -8, .policy_rejected = -15, .ref_chosen = -8, .ref_rejected = -15,
                         .chosen_tokens = 4, .rejected_tokens = 5};
  const PreferenceTerms t = preference_terms(p, cfg(PreferenceLoss::kIpo, 0.25));
  EXPECT_DOUBLE_EQ(t.loss, 4.0);
  EXPECT_DOUBLE_EQ(t.dloss_dchosen, 2 * -2.0 / 4);
  EXPECT_DOUBLE_EQ(t.dloss_drejected, 2 * 2.0 / 5);
  EXPECT_DOUBLE_EQ(t.logp_chosen, -2.0);  // the means
  EXPECT_DOUBLE_EQ(t.logp_rejected, -3.0);
  // h = (-6/4 + 2) - (-15/5 + 3) = 0.5: loss (0.5 - 2)^2.
  const PreferenceTerms u = preference_terms({.policy_chosen = -6, .policy_rejected = -15, .ref_chosen = -8,
                                              .ref_rejected = -15, .chosen_tokens = 4, .rejected_tokens = 5},
                                             cfg(PreferenceLoss::kIpo, 0.25));
  EXPECT_DOUBLE_EQ(u.loss, 2.25);
  EXPECT_DOUBLE_EQ(u.reward_chosen, 0.25 * 0.5);
}

TEST(Orpo, MatchesTheOddsRatioWrittenOut) {
  const PreferencePair p{.policy_chosen = -3.0, .policy_rejected = -10.0, .chosen_tokens = 6, .rejected_tokens = 4};
  const double beta = 0.2;
  const PreferenceTerms t = preference_terms(p, cfg(PreferenceLoss::kOrpo, beta));
  const long double ac = -0.5L, ar = -2.5L;
  const long double odds_c = std::exp(ac) / (1 - std::exp(ac)), odds_r = std::exp(ar) / (1 - std::exp(ar));
  const long double lo = std::log(odds_c / odds_r);
  EXPECT_NEAR(t.log_odds, static_cast<double>(lo), 1e-13);
  EXPECT_NEAR(t.log_odds_ratio, static_cast<double>(std::log(1 / (1 + std::exp(-lo)))), 1e-13);
  EXPECT_NEAR(t.loss, static_cast<double>(-beta * std::log(1 / (1 + std::exp(-lo)))), 1e-13);
  EXPECT_DOUBLE_EQ(t.reward_chosen, beta * -0.5);
  EXPECT_DOUBLE_EQ(t.logp_rejected, -2.5);
}

TEST(Simpo, ClosedForm) {
  // Equal means: z = -gamma, loss softplus(gamma).
  PreferenceConfig c = cfg(PreferenceLoss::kSimpo, 2.0);
  c.simpo_gamma = 0.7;
  const PreferenceTerms t =
      preference_terms({.policy_chosen = -6, .policy_rejected = -9, .chosen_tokens = 2, .rejected_tokens = 3}, c);
  EXPECT_NEAR(t.loss, std::log1p(std::exp(0.7)), 1e-15);
  EXPECT_DOUBLE_EQ(t.reward_chosen, 2.0 * -3);
}

const PreferenceLoss kAll[] = {PreferenceLoss::kDpo,     PreferenceLoss::kIpo,      PreferenceLoss::kOrpo,
                               PreferenceLoss::kSimpo,   PreferenceLoss::kHinge,    PreferenceLoss::kRobust,
                               PreferenceLoss::kExoPair, PreferenceLoss::kNcaPair,  PreferenceLoss::kSppoHard,
                               PreferenceLoss::kApoZero, PreferenceLoss::kApoDown, PreferenceLoss::kDiscopop,
                               PreferenceLoss::kSigmoidNorm};

bool smooths(PreferenceLoss l) {
  return l == PreferenceLoss::kDpo || l == PreferenceLoss::kSimpo || l == PreferenceLoss::kRobust ||
         l == PreferenceLoss::kExoPair;
}

TEST(PreferenceLosses, GradientsMatchFiniteDifferences) {
  for (PreferenceLoss l : kAll) {
    for (double eps : {0.0, 0.1}) {
      if (eps > 0 && !smooths(l)) continue;
      for (double beta : {0.1, 0.5, 2.0}) {
        PreferenceConfig c = cfg(l, beta, eps);
        c.simpo_gamma = 0.3;
        const PreferencePair p{.policy_chosen = -20.3, .policy_rejected = -18.1, .ref_chosen = -21.0,
                               .ref_rejected = -17.2, .chosen_tokens = 7, .rejected_tokens = 11};
        const PreferenceTerms t = preference_terms(p, c);
        const double h = 1e-5;
        PreferencePair pc = p, mc = p, pr = p, mr = p;
        pc.policy_chosen += h;
        mc.policy_chosen -= h;
        pr.policy_rejected += h;
        mr.policy_rejected -= h;
        const double d_chosen = (preference_terms(pc, c).loss - preference_terms(mc, c).loss) / (2 * h);
        const double d_rejected = (preference_terms(pr, c).loss - preference_terms(mr, c).loss) / (2 * h);
        const std::string what = std::string(preference_loss_name(l)) + " beta " + std::to_string(beta);
        EXPECT_NEAR(t.dloss_dchosen, d_chosen, 1e-8 * std::max(1.0, std::abs(d_chosen))) << what;
        EXPECT_NEAR(t.dloss_drejected, d_rejected, 1e-8 * std::max(1.0, std::abs(d_rejected))) << what;
        // (hinge is flat past its margin: at beta 2, 1 - z < 0)
        if (!(l == PreferenceLoss::kHinge && beta == 2.0)) {
          EXPECT_NE(t.dloss_dchosen, 0.0) << what;
        }
      }
    }
  }
}

// DPOTrainer's other loss_types (train/dpo_variants.h), written out at one point each: the
// expressions of TRL's dpo_loss with numbers put in.
TEST(DpoVariants, ValuesAsTrlWritesThem) {
  const PreferencePair p{.policy_chosen = -10, .policy_rejected = -14, .ref_chosen = -11, .ref_rejected = -12};
  const double cl = 1, rl = -2, beta = 0.3, z = beta * (cl - rl);  // z = 0.9
  auto s = [](double x) { return 1 / (1 + std::exp(-x)); };
  auto ls = [&](double x) { return std::log(s(x)); };
  auto loss = [&](PreferenceLoss l, double eps = 0) { return preference_terms(p, cfg(l, beta, eps)).loss; };
  EXPECT_NEAR(loss(PreferenceLoss::kHinge), 1 - z, 1e-15);
  EXPECT_NEAR(loss(PreferenceLoss::kRobust, 0.2), (-0.8 * ls(z) + 0.2 * ls(-z)) / 0.6, 1e-14);
  EXPECT_NEAR(loss(PreferenceLoss::kExoPair), s(z) * (ls(z) - std::log(1 - 1e-3)) + s(-z) * (ls(-z) - std::log(1e-3)), 1e-13);
  EXPECT_NEAR(loss(PreferenceLoss::kNcaPair), -ls(beta * cl) - 0.5 * ls(-beta * cl) - 0.5 * ls(-beta * rl), 1e-14);
  EXPECT_NEAR(loss(PreferenceLoss::kSppoHard), std::pow(cl - 0.5 / beta, 2) + std::pow(rl + 0.5 / beta, 2), 1e-13);
  EXPECT_NEAR(loss(PreferenceLoss::kApoZero), 1 - s(beta * cl) + s(beta * rl), 1e-15);
  EXPECT_NEAR(loss(PreferenceLoss::kApoDown), s(beta * cl) + 1 - s(z), 1e-15);
  const double mod = s(z / 0.05);
  EXPECT_NEAR(loss(PreferenceLoss::kDiscopop), -ls(z) * (1 - mod) + std::exp(-z) * mod, 1e-14);
  PreferencePair q = p;  // sigmoid_norm: the log-ratios over the replies' lengths
  q.chosen_tokens = 4;
  q.rejected_tokens = 5;
  EXPECT_NEAR(preference_terms(q, cfg(PreferenceLoss::kSigmoidNorm, beta)).loss, -ls(beta * (cl / 4 - rl / 5)), 1e-15);
  // DPO's rewards and summed log-probs for every variant.
  const PreferenceTerms t = preference_terms(p, cfg(PreferenceLoss::kApoDown, beta));
  EXPECT_DOUBLE_EQ(t.reward_chosen, beta * cl);
  EXPECT_DOUBLE_EQ(t.logp_chosen, -10.0);
  // The names as dpo_loss_type spells them.
  for (PreferenceLoss l : kAll) {
    PreferenceLoss back;
    ASSERT_TRUE(preference_loss_from_name(preference_loss_name(l), &back));
    EXPECT_EQ(back, l);
  }
}

TEST(PreferenceLosses, StableFarOut) {
  const PreferenceConfig c = cfg(PreferenceLoss::kDpo, 1.0);
  // z = +2000: the loss -> 0 and the factor -> 0; z = -2000: the loss ~ -z, the factor -> -beta.
  const PreferenceTerms hi =
      preference_terms({.policy_chosen = 0, .policy_rejected = -2000, .ref_chosen = 0, .ref_rejected = 0}, c);
  const PreferenceTerms lo =
      preference_terms({.policy_chosen = -2000, .policy_rejected = 0, .ref_chosen = 0, .ref_rejected = 0}, c);
  EXPECT_NEAR(hi.loss, 0.0, 1e-300);
  EXPECT_NEAR(hi.dloss_dchosen, 0.0, 1e-300);
  EXPECT_NEAR(lo.loss, 2000.0, 1e-9);
  EXPECT_NEAR(lo.dloss_dchosen, -1.0, 1e-15);
  // Every loss far out on both sides: finite values and slopes.
  for (PreferenceLoss l : kAll)
    for (double d : {-3000.0, 3000.0}) {
      const PreferenceTerms v = preference_terms({.policy_chosen = -100 + d, .policy_rejected = -100 - d,
                                                  .ref_chosen = -100, .ref_rejected = -100, .chosen_tokens = 5,
                                                  .rejected_tokens = 5}, cfg(l, 0.5));
      EXPECT_TRUE(std::isfinite(v.loss) && std::isfinite(v.dloss_dchosen) && std::isfinite(v.dloss_drejected))
          << preference_loss_name(l) << " at " << d;
    }
  // ORPO at a mean log p of exactly 0 (every token certain) and far below: finite.
  for (double pc : {0.0, -1e-300, -5000.0})
    for (double pr : {0.0, -3000.0}) {
      const PreferenceTerms o = preference_terms({.policy_chosen = pc, .policy_rejected = pr}, cfg(PreferenceLoss::kOrpo, 0.1));
      EXPECT_TRUE(std::isfinite(o.loss) && std::isfinite(o.dloss_dchosen) && std::isfinite(o.dloss_drejected))
          << pc << " " << pr;
    }
}

TEST(PreferenceStats, MeansAndNll) {
  const PreferenceConfig c = cfg(PreferenceLoss::kDpo, 0.5);
  PreferenceStats s(c);
  const PreferencePair a{.policy_chosen = -1, .policy_rejected = -3, .ref_chosen = -2, .ref_rejected = -2};  // chosen wins
  const PreferencePair b{.policy_chosen = -4, .policy_rejected = -1, .ref_chosen = -2, .ref_rejected = -2};  // rejected wins
  s.add(preference_terms(a, c));
  s.add(preference_terms(b, c));
  EXPECT_EQ(s.pairs(), 2);
  EXPECT_NEAR(s.mean_loss(), (preference_terms(a, c).loss + preference_terms(b, c).loss) / 2, 1e-15);
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
  PreferenceStats t(c);
  t.merge(s);
  EXPECT_EQ(t.metrics(), s.metrics());

  // ORPO: loss = mean pair loss + mean micro-batch NLL; its three extra metrics in TRL's names.
  const PreferenceConfig o = cfg(PreferenceLoss::kOrpo, 0.1);
  PreferenceStats os(o);
  const PreferenceTerms ot = preference_terms({.policy_chosen = -2, .policy_rejected = -6, .chosen_tokens = 2,
                                               .rejected_tokens = 3}, o);
  os.add(ot);
  os.add_nll(1.5);
  os.add_nll(2.5);
  EXPECT_NEAR(os.mean_loss(), ot.loss + 2.0, 1e-15);
  const auto om = os.metrics();
  ASSERT_EQ(om.size(), 9u);
  EXPECT_EQ(om[6].first, "nll_loss");
  EXPECT_EQ(om[6].second, 2.0);
  EXPECT_EQ(om[7].first, "log_odds_ratio");
  EXPECT_EQ(om[8].first, "log_odds_chosen");
  EXPECT_EQ(om[8].second, ot.log_odds);
  // SimPO with cpo_alpha 0: no NLL in the loss, nll_loss logged 0 (as TRL).
  PreferenceConfig sc = cfg(PreferenceLoss::kSimpo, 2.0);
  sc.cpo_alpha = 0;
  PreferenceStats ss(sc);
  ss.add(preference_terms({.policy_chosen = -2, .policy_rejected = -6}, sc));
  EXPECT_EQ(ss.metrics().back().first, "nll_loss");
  EXPECT_EQ(ss.metrics().back().second, 0.0);
}

}  // namespace
}  // namespace st
