// LaunchPlanCache policy (model/launch_plans.h Note [layer launch plans]) against a fake recorder
// that, like stream capture, holds ops back while recording and runs them on replay. The CUDA
// recorder itself is exercised on the GPU (tools/gpu/validate.sh: bit identity with and without
// plans).
#include "model/launch_plans.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace st {
namespace {

class FakeRecorder final : public PlanRecorder {
 public:
  struct Plan final : LaunchPlan {
    std::vector<int> ops;
    int epoch = 0;
    uint64_t device_bytes() const override { return 100; }
  };
  bool begin_capture(std::string* why) override {
    if (fail_begin) {
      *why = "begin refused";
      return false;
    }
    recording = true;
    held.clear();
    return true;
  }
  std::unique_ptr<LaunchPlan> end_capture(std::string* why) override {
    recording = false;
    if (fail_end) {
      *why = "end refused";
      return nullptr;
    }
    auto p = std::make_unique<Plan>();
    p->ops = held;
    p->epoch = epoch;
    return p;
  }
  bool replay(LaunchPlan& lp) override {
    auto& p = static_cast<Plan&>(lp);
    if (p.epoch != epoch) return false;
    ++replays;
    ran.insert(ran.end(), p.ops.begin(), p.ops.end());
    return true;
  }
  // What an op does: runs now, or is held while recording.
  void op(int id) { (recording ? held : ran).push_back(id); }

  bool recording = false, fail_begin = false, fail_end = false;
  int epoch = 0, replays = 0;
  std::vector<int> held, ran;
};

// A "visit": two ops.
std::function<void()> visit(FakeRecorder& r, int a) {
  return [&r, a] {
    r.op(a);
    r.op(a + 1);
  };
}

TEST(LaunchPlanCache, EagerFirstThenRecordedThenReplayed) {
  FakeRecorder r;
  LaunchPlanCache c(&r, 1 << 20);
  for (int i = 0; i < 4; ++i) c.run({7, 1}, true, visit(r, 10));
  EXPECT_EQ(r.ran, (std::vector<int>{10, 11, 10, 11, 10, 11, 10, 11}));  // each visit ran exactly once
  EXPECT_EQ(c.stats().eager, 1);
  EXPECT_EQ(c.stats().recorded, 1);
  EXPECT_EQ(c.stats().replayed, 3);
  EXPECT_EQ(r.replays, 3);
}

TEST(LaunchPlanCache, NoRecorderOrNotRecordableRunsEagerly) {
  LaunchPlanCache none(nullptr, 1 << 20);
  int runs = 0;
  for (int i = 0; i < 3; ++i) none.run({1}, true, [&] { ++runs; });
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(none.stats().eager, 3);
  EXPECT_FALSE(none.active());

  FakeRecorder r;
  LaunchPlanCache c(&r, 1 << 20);
  for (int i = 0; i < 3; ++i) c.run({1}, /*recordable=*/false, visit(r, 0));
  EXPECT_EQ(r.ran.size(), 6u);
  EXPECT_EQ(c.stats().eager, 3);
  EXPECT_EQ(r.replays, 0);
}

TEST(LaunchPlanCache, KeysAreIndependent) {
  FakeRecorder r;
  LaunchPlanCache c(&r, 1 << 20);
  for (int step = 0; step < 3; ++step) {
    c.run({0, 5}, true, visit(r, 100));
    c.run({1, 5}, true, visit(r, 200));
  }
  EXPECT_EQ(r.ran, (std::vector<int>{100, 101, 200, 201, 100, 101, 200, 201, 100, 101, 200, 201}));
  EXPECT_EQ(c.stats().recorded, 2);
  EXPECT_EQ(c.stats().replayed, 4);
}

TEST(LaunchPlanCache, StalePlanIsRecordedAgain) {
  FakeRecorder r;
  LaunchPlanCache c(&r, 1 << 20);
  c.run({3}, true, visit(r, 1));
  c.run({3}, true, visit(r, 1));
  r.epoch = 1;  // the backend replaced memory the plan points at
  c.run({3}, true, visit(r, 1));
  EXPECT_EQ(r.ran, (std::vector<int>{1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(c.stats().recorded, 2);
  EXPECT_TRUE(c.active());
}

TEST(LaunchPlanCache, FailedRecordingRunsTheOpsOnceAndSwitchesPlansOff) {
  for (bool at_begin : {true, false}) {
    FakeRecorder r;
    LaunchPlanCache c(&r, 1 << 20);
    c.run({9}, true, visit(r, 4));
    (at_begin ? r.fail_begin : r.fail_end) = true;
    c.run({9}, true, visit(r, 4));  // not lost (end failed: the held ops never ran) and not doubled
    EXPECT_EQ(r.ran, (std::vector<int>{4, 5, 4, 5})) << "at_begin " << at_begin;
    EXPECT_FALSE(c.active());
    r.fail_begin = r.fail_end = false;
    c.run({9}, true, visit(r, 4));  // off for good: eager
    EXPECT_EQ(r.ran.size(), 6u);
    EXPECT_EQ(c.stats().eager, 3);
    EXPECT_EQ(r.replays, 0);
  }
}

TEST(LaunchPlanCache, BoundedNumberOfPlans) {
  FakeRecorder r;
  LaunchPlanCache c(&r, /*max_bytes=*/200);  // two plans of 100 bytes
  for (int step = 0; step < 4; ++step)
    for (uint64_t k = 0; k < 3; ++k) c.run({k}, true, visit(r, 0));
  EXPECT_EQ(r.ran.size(), 24u);  // every visit ran once, whatever the cache kept
  EXPECT_EQ(c.stats().recorded, 2);   // keys 0 and 1; key 2 found the cache full
  EXPECT_EQ(c.stats().replayed, 6);   // keys 0 and 1 in steps 2-4
  EXPECT_EQ(c.stats().eager, 6);      // first sightings of 0 and 1, all four of key 2
  EXPECT_EQ(c.stats().bytes, 200u);
  // Many keys seen once do not grow the map without bound, and the kept plans stay.
  for (uint64_t k = 100; k < 100 + 64; ++k) c.run({k}, true, visit(r, 0));
  c.run({0}, true, visit(r, 0));
  EXPECT_EQ(c.stats().replayed, 7);
}

}  // namespace
}  // namespace st
