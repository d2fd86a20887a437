// What a step's copies and compute add up to under the prefetcher's own decisions
// (timeline_sim.h), held against the bounds stream/prefetcher.h's Notes state: a change that
// issues the same loads later -- which the load-count tests would not see -- fails here.
// Costs (ms a layer): link-bound like Qwen2.5-3B@2048 streamed on the H200 (f 0.45, b 0.95,
// c 2.78, head 2.5), like 0.5B@512 (0.07, 0.16, 0.54, 0.5), compute-bound (c 0.2 under f 1, b 2),
// and balanced like 7B@2048x4 (4.7, 9.6, 8.1, 10).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "timeline_sim.h"

namespace st {
namespace {

using testing_util::simulate_training_steps;
using testing_util::TimelineCosts;
using testing_util::TimelineStep;

const std::vector<TimelineCosts> kCosts = {
    {0.45, 0.95, 2.78, 2.5}, {0.07, 0.16, 0.54, 0.5}, {1, 2, 0.2, 1}, {4.7, 9.6, 8.1, 10}};

std::string row(int L, int own, int k, const TimelineCosts& t) {
  return "L " + std::to_string(L) + " own " + std::to_string(own) + " k " + std::to_string(k) + " f " +
         std::to_string(t.f) + " b " + std::to_string(t.b) + " c " + std::to_string(t.c);
}

// Note [lent activation memory]: with a lent slot per layer, a step is bounded by
// L x f + head + max(L x b, (L-2) x c) -- here within two copies (the turn and the step boundary).
TEST(Timeline, LentRegionsMeetTheNotesBound) {
  for (int L : {12, 36})
    for (const TimelineCosts& t : kCosts) {
      const TimelineStep s = simulate_training_steps(L, 2, 1, t);
      const double bound = L * t.f + t.h + std::max(L * t.b, (L - 2) * t.c);
      EXPECT_LE(s.step_ms, bound + 2 * t.c + 1e-9) << row(L, 2, 1, t);
      EXPECT_EQ(s.loads, L - 1) << row(L, 2, 1, t);
    }
}

// Lending never makes a step longer, for one region a slot or spans of two; and a step never beats
// its compute or its copies.
TEST(Timeline, LendingNeverSlowsAStep) {
  for (int L : {12, 36})
    for (int own : {2, 3})
      for (const TimelineCosts& t : kCosts) {
        const TimelineStep none = simulate_training_steps(L, own, 0, t);
        for (int k : {1, 2}) {
          const TimelineStep lent = simulate_training_steps(L, own, k, t);
          EXPECT_LE(lent.step_ms, none.step_ms + 1e-9) << row(L, own, k, t);
          EXPECT_LT(lent.loads, none.loads) << row(L, own, k, t);
        }
        for (int k : {0, 1, 2}) {
          const TimelineStep s = simulate_training_steps(L, own, k, t);
          EXPECT_GE(s.step_ms, std::max(L * (t.f + t.b) + t.h, s.copy_busy_ms) - 1e-9) << row(L, own, k, t);
        }
      }
}

// Where copies are shorter than either pass's compute they hide entirely: the resident step.
TEST(Timeline, ShortCopiesHideBehindCompute) {
  const TimelineCosts t{1, 2, 0.2, 1};
  for (int L : {12, 36})
    for (int own : {2, 3})
      for (int k : {0, 1, 2})
        EXPECT_NEAR(simulate_training_steps(L, own, k, t).step_ms, L * (t.f + t.b) + t.h, 1e-9) << row(L, own, k, t);
}

// Where copies are longer than the compute, the copy stream idles only around the turn (the head
// and the layers both slots hold there) and the step boundary: no more than head + f + b + 2 c.
TEST(Timeline, LinkBoundStepsKeepTheCopyStreamBusy) {
  for (int L : {12, 36})
    for (int own : {2, 3})
      for (int k : {0, 2})
        for (const TimelineCosts& t : {kCosts[0], kCosts[1]}) {
          const TimelineStep s = simulate_training_steps(L, own, k, t);
          EXPECT_LE(s.step_ms - s.copy_busy_ms, t.h + t.f + t.b + 2 * t.c + 1e-9) << row(L, own, k, t);
        }
}

}  // namespace
}  // namespace st
