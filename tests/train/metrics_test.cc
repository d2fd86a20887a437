// ExtraMeans (train/metrics.h): each name is averaged over the steps that logged it, in first-seen
// order -- KTO's steps log rewards/chosen or rewards/rejected only when they hold such examples.
// An eval line carries eval_runtime (HF's name) when the evaluation was timed.
#include "train/metrics.h"

#include <gtest/gtest.h>

namespace st {
namespace {

TEST(ExtraMeans, EachNameOverTheStepsThatHaveIt) {
  ExtraMeans m;
  m.add({{"rewards/chosen", 1.0}, {"kl", 0.5}});
  m.add({{"rewards/rejected", -2.0}, {"kl", 1.5}});
  m.add({{"rewards/chosen", 3.0}, {"rewards/rejected", -4.0}, {"kl", 1.0}});
  const auto out = m.take();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], (std::pair<std::string, double>{"rewards/chosen", 2.0}));
  EXPECT_EQ(out[1], (std::pair<std::string, double>{"kl", 1.0}));
  EXPECT_EQ(out[2], (std::pair<std::string, double>{"rewards/rejected", -3.0}));
  EXPECT_TRUE(m.take().empty());  // taken: the next log starts afresh
  m.add({{"kl", 4.0}});
  EXPECT_EQ(m.take(), (std::vector<std::pair<std::string, double>>{{"kl", 4.0}}));
}

TEST(EvalMetricsLine, CarriesItsRuntimeWhenTimed) {
  EXPECT_EQ(metrics_json_line(EvalMetrics{.step = 4, .loss = 2, .runtime_s = 1.5}),
            "{\"step\":4,\"eval_loss\":2,\"eval_ppl\":7.3890561,\"eval_runtime\":1.5}");
  EXPECT_EQ(metrics_json_line(EvalMetrics{.step = 4, .loss = 0.5, .extra = {{"eval_kl", 0.25}}, .runtime_s = 3}),
            "{\"step\":4,\"eval_loss\":0.5,\"eval_kl\":0.25,\"eval_runtime\":3}");
  EXPECT_EQ(metrics_json_line(EvalMetrics{.step = 4, .loss = 2}), "{\"step\":4,\"eval_loss\":2,\"eval_ppl\":7.3890561}");
}

}  // namespace
}  // namespace st
