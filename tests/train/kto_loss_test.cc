// KTO's loss (train/kto_loss.h Note [KTO]). Oracles: closed forms at the reference point (1/2 x
// the weight, slope -/+ beta/4 x the weight), TRL's expressions written out (1 - sigmoid), central
// differences of the loss in the policy sum for both labels, z0's clamp, stability far out, and
// the statistics' per-label means.
#include "train/kto_loss.h"

#include <cmath>

#include <gtest/gtest.h>

namespace st {
namespace {

PreferenceConfig kto(double beta, double wd = 1.0, double wu = 1.0) {
  PreferenceConfig c;
  c.loss = PreferenceLoss::kKto;
  c.beta = beta;
  c.desirable_weight = wd;
  c.undesirable_weight = wu;
  return c;
}

TEST(Kto, AtTheReferencePoint) {
  // r = z0: sigmoid(0) = 1/2 for both labels; d loss / d p = -/+ w beta / 4.
  const KtoTerms d = kto_terms({.policy = -10, .ref = -12, .desirable = true}, 2.0, kto(0.1, 1.0, 1.5));
  EXPECT_NEAR(d.loss, 0.5, 1e-15);
  EXPECT_NEAR(d.dloss_dpolicy, -0.025, 1e-15);
  EXPECT_NEAR(d.reward, 0.2, 1e-15);
  const KtoTerms u = kto_terms({.policy = -10, .ref = -12, .desirable = false}, 2.0, kto(0.1, 1.0, 1.5));
  EXPECT_NEAR(u.loss, 0.75, 1e-15);
  EXPECT_NEAR(u.dloss_dpolicy, 1.5 * 0.025, 1e-15);
}

TEST(Kto, TrlExpressionsAndFiniteDifferences) {
  const double z0 = 0.7, h = 1e-5;
  for (bool desirable : {true, false})
    for (double p : {-40.0, -12.0, -3.0, 0.0})
      for (double beta : {0.1, 0.5, 2.0}) {
        const PreferenceConfig c = kto(beta, 1.3, 0.8);
        const KtoExample e{.policy = p, .ref = -10, .desirable = desirable};
        const double r = p + 10, w = desirable ? 1.3 : 0.8;
        const double trl = w * (1 - 1 / (1 + std::exp(-beta * (desirable ? r - z0 : z0 - r))));
        const KtoTerms t = kto_terms(e, z0, c);
        EXPECT_NEAR(t.loss, trl, 1e-12);
        KtoExample lo = e, hi = e;
        lo.policy -= h;
        hi.policy += h;
        const double fd = (kto_terms(hi, z0, c).loss - kto_terms(lo, z0, c).loss) / (2 * h);
        EXPECT_NEAR(t.dloss_dpolicy, fd, 1e-8 * std::max(1.0, std::abs(fd))) << desirable << " " << p << " " << beta;
        // A desirable example's loss falls as its log p rises; an undesirable one's rises.
        EXPECT_TRUE(desirable ? t.dloss_dpolicy < 0 : t.dloss_dpolicy > 0);
      }
}

TEST(Kto, ReferencePointIsTheClampedMeanLogRatio) {
  const double pol[3] = {-10, -20, -5}, ref[3] = {-11, -19, -7};
  EXPECT_DOUBLE_EQ(kto_reference_point(pol, ref, 3), (1.0 - 1.0 + 2.0) / 3);
  const double low[3] = {-12, -25, -8};
  EXPECT_EQ(kto_reference_point(low, ref, 3), 0.0);  // a negative mean is clamped (TRL's clamp(min=0))
  EXPECT_EQ(kto_reference_point(pol, ref, 0), 0.0);
}

TEST(Kto, StableFarOut) {
  for (double p : {-1e6, 1e6})
    for (bool desirable : {true, false}) {
      const KtoTerms t = kto_terms({.policy = p, .ref = 0, .desirable = desirable}, 0.0, kto(1.0));
      EXPECT_TRUE(std::isfinite(t.loss) && std::isfinite(t.dloss_dpolicy));
      EXPECT_GE(t.loss, 0.0);
      EXPECT_LE(t.loss, 1.0);
    }
}

TEST(Kto, StatisticsPerLabel) {
  PreferenceStats s(kto(0.5));
  s.add_kto(true, -10, 0.25, 1.0);
  s.add_kto(true, -20, 0.75, 3.0);
  s.add_kto(false, -30, 0.5, -1.0);
  s.add_kl(0.2);
  s.add_kl(0.4);
  EXPECT_EQ(s.pairs(), 3);
  EXPECT_DOUBLE_EQ(s.mean_loss(), 0.5);
  std::map<std::string, double> m;
  for (const auto& [k, v] : s.metrics("eval_")) m[k] = v;
  EXPECT_DOUBLE_EQ(m.at("eval_rewards/chosen"), 2.0);
  EXPECT_DOUBLE_EQ(m.at("eval_rewards/rejected"), -1.0);
  EXPECT_DOUBLE_EQ(m.at("eval_rewards/margins"), 3.0);
  EXPECT_DOUBLE_EQ(m.at("eval_logps/chosen"), -15.0);
  EXPECT_DOUBLE_EQ(m.at("eval_logps/rejected"), -30.0);
  EXPECT_NEAR(m.at("eval_kl"), 0.3, 1e-15);
  // Only desirable examples: no rejected means and no margins (TRL logs what occurs).
  PreferenceStats only(kto(0.5));
  only.add_kto(true, -1, 0.1, 0.2);
  for (const auto& [k, v] : only.metrics()) EXPECT_TRUE(k.find("rejected") == std::string::npos && k != "rewards/margins") << k;
}

}  // namespace
}  // namespace st
