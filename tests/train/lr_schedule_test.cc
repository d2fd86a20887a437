// Oracle: hand-computed values of HF get_{constant,linear,cosine}_schedule_with_warmup.
#include "train/lr_schedule.h"

#include <cmath>

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
  auto bad = parse_lr_kind("polynomial");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("polynomial"), std::string::npos);
}

}  // namespace
}  // namespace st
