// Oracles: hand-computed values of HF get_{constant,linear,cosine}_schedule_with_warmup, and
// transformers' own schedulers (tests/fixtures/lr/hf_lr.json).
#include "train/lr_schedule.h"

#include <cmath>

#include "core/json.h"
#include "train/train_config.h"

#include <gtest/gtest.h>

namespace st {
namespace {

TEST(LrSchedule, WarmupIsLinearFromZero) {
  LrSchedule s{.kind = LrKind::kCosine, .base_lr = 1e-3, .warmup_steps = 4, .total_steps = 10};
  EXPECT_EQ(lr_at(s, 0), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 1e-3 * 0.25);
  EXPECT_DOUBLE_EQ(lr_at(s, 3), 1e-3 * 0.75);
}

TEST(LrSchedule, CosineHandValues) {
  LrSchedule s{.kind = LrKind::kCosine, .base_lr = 2.0, .warmup_steps = 2, .total_steps = 10};
  EXPECT_DOUBLE_EQ(lr_at(s, 2), 2.0);                                         // progress 0
  EXPECT_NEAR(lr_at(s, 6), 1.0, 1e-15);                                       // progress 0.5
  EXPECT_NEAR(lr_at(s, 4), 2.0 * 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-15);   // progress 0.25
  EXPECT_NEAR(lr_at(s, 10), 0.0, 1e-15);
}

TEST(LrSchedule, CosineWithAFloor) {  // axolotl's cosine_min_lr_ratio: (1 - r) * cosine + r
  LrSchedule s{.kind = LrKind::kCosine, .base_lr = 2.0, .warmup_steps = 2, .total_steps = 10, .min_lr_ratio = 0.1};
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 1.0);                  // warmup unchanged
  EXPECT_DOUBLE_EQ(lr_at(s, 2), 2.0);                  // progress 0: the peak
  EXPECT_NEAR(lr_at(s, 6), 2.0 * (0.9 * 0.5 + 0.1), 1e-15);
  EXPECT_NEAR(lr_at(s, 10), 0.2, 1e-15);               // the floor
}

TEST(LrSchedule, LinearHandValues) {
  LrSchedule s{.kind = LrKind::kLinear, .base_lr = 1.0, .warmup_steps = 0, .total_steps = 4};
  EXPECT_DOUBLE_EQ(lr_at(s, 0), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 0.75);
  EXPECT_DOUBLE_EQ(lr_at(s, 3), 0.25);
  EXPECT_DOUBLE_EQ(lr_at(s, 5), 0.0);  // clamped
  LrSchedule w{.kind = LrKind::kLinear, .base_lr = 1.0, .warmup_steps = 2, .total_steps = 6};
  EXPECT_DOUBLE_EQ(lr_at(w, 1), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(w, 2), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(w, 4), 0.5);
}

TEST(LrSchedule, ConstantWithWarmup) {
  LrSchedule s{.kind = LrKind::kConstant, .base_lr = 0.5, .warmup_steps = 2, .total_steps = 5};
  EXPECT_DOUBLE_EQ(lr_at(s, 0), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 0.25);
  EXPECT_DOUBLE_EQ(lr_at(s, 2), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(s, 100), 0.5);
}

TEST(LrSchedule, ParsesNamesAndRefusesOthers) {
  EXPECT_EQ(*parse_lr_kind("constant_with_warmup"), LrKind::kConstant);
  EXPECT_EQ(*parse_lr_kind("cosine"), LrKind::kCosine);
  EXPECT_EQ(*parse_lr_kind("polynomial"), LrKind::kPolynomial);
  auto bad = parse_lr_kind("reduce_lr_on_plateau");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("reduce_lr_on_plateau"), std::string::npos);
}

}  // namespace
}  // namespace st

namespace st {
namespace {

// Against transformers itself: the LR torch's optimizer holds at every step under
// get_scheduler(name, ..., scheduler_specific_kwargs), two steps past the end included
// (tests/fixtures/lr/hf_lr.json, written by tools/ref/lr_ref.py on the device machine).
TEST(LrSchedule, MatchesTransformers) {
  auto j = read_json_file(std::string(ST_SOURCE_DIR) + "/tests/fixtures/lr/hf_lr.json");
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  int cases = 0;
  for (const Json& c : (*j)["cases"]) {
    TrainConfig tc;
    tc.lr_scheduler = c["name"].get<std::string>();
    tc.learning_rate = c["lr"].get<double>();
    tc.warmup_steps = c["warmup"].get<int64_t>();
    tc.max_steps = c["total"].get<int64_t>();
    const Json& kw = c["kwargs"];
    if (kw.contains("num_cycles")) tc.lr_num_cycles = kw["num_cycles"].get<double>();
    if (kw.contains("lr_end")) tc.lr_end = kw["lr_end"].get<double>();
    if (kw.contains("power")) tc.lr_power = kw["power"].get<double>();
    if (kw.contains("timescale")) tc.lr_timescale = kw["timescale"].get<int64_t>();
    if (kw.contains("min_lr")) tc.min_lr = kw["min_lr"].get<double>();
    if (kw.contains("min_lr_rate")) tc.cosine_min_lr_ratio = kw["min_lr_rate"].get<double>();
    auto s = lr_schedule_from(tc);
    ASSERT_TRUE(s.ok()) << c.dump() << ": " << s.status().to_string();
    const auto lrs = c["lrs"].get<std::vector<double>>();
    for (size_t k = 0; k < lrs.size(); ++k)
      EXPECT_NEAR(lr_at(*s, static_cast<int64_t>(k)), lrs[k], 1e-12 * tc.learning_rate)
          << tc.lr_scheduler << " " << kw.dump() << " step " << k;
    ++cases;
  }
  EXPECT_EQ(cases, 14);
}

TEST(LrSchedule, KwargsThatDoNotApplyAreRefused) {
  TrainConfig tc;
  tc.lr_scheduler = "linear";
  tc.lr_num_cycles = 2;
  auto s = lr_schedule_from(tc);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("num_cycles"), std::string::npos) << s.status().to_string();
  tc = TrainConfig{};
  tc.lr_scheduler = "cosine_with_min_lr";  // HF: exactly one of min_lr, min_lr_rate
  EXPECT_FALSE(lr_schedule_from(tc).ok());
  tc.min_lr = 1e-5;
  EXPECT_TRUE(lr_schedule_from(tc).ok());
  tc.cosine_min_lr_ratio = 0.1;
  EXPECT_FALSE(lr_schedule_from(tc).ok());
  tc = TrainConfig{};
  tc.lr_scheduler = "polynomial";
  tc.lr_end = 1.0;  // above learning_rate: HF raises
  EXPECT_FALSE(lr_schedule_from(tc).ok());
  tc.lr_scheduler = "reduce_lr_on_plateau";
  EXPECT_EQ(lr_schedule_from(tc).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace st
