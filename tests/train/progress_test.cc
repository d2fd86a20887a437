// Progress output: plain lines (one per logging_steps and the last step) when not a terminal,
// an in-place bar (\r, no newline per step) on a terminal; messages clear the bar first.
#include <algorithm>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "train/progress.h"

namespace st {
namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

int count(const std::string& s, char c) { return static_cast<int>(std::count(s.begin(), s.end(), c)); }

StepMetrics step(int64_t s) { return {.step = s, .loss = 2.5, .lr = 1e-4, .grad_norm = 0.5, .tokens = 64 * s, .tok_s = 12345}; }

TEST(Progress, PlainLinesEveryLoggingStepsWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ProgressDisplay p(f, {.total_steps = 10, .logging_steps = 4, .mode = ProgressMode::kLines});
  for (int s = 1; s <= 10; ++s) p.on_step(step(s));
  p.on_eval({.step = 10, .loss = 2.0});
  p.finish();
  const std::string out = contents(f);
  std::fclose(f);
  EXPECT_EQ(count(out, '\r'), 0) << out;
  EXPECT_EQ(count(out, '\n'), 4) << out;  // steps 4, 8, 10 + the eval line
  EXPECT_NE(out.find("step 4/10  loss 2.5000  lr 1.00e-04"), std::string::npos) << out;
  EXPECT_NE(out.find("step 10/10"), std::string::npos) << out;
  EXPECT_NE(out.find("12.3k tok/s"), std::string::npos) << out;
  EXPECT_NE(out.find("ETA "), std::string::npos) << out;
  EXPECT_NE(out.find("rss "), std::string::npos) << out;
  EXPECT_NE(out.find("eval step 10  eval_loss 2.0000  eval_ppl 7.389"), std::string::npos) << out;
}

TEST(Progress, RedrawsInPlaceOnATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ProgressDisplay p(f, {.total_steps = 4, .logging_steps = 1, .mode = ProgressMode::kTty});
  p.on_step(step(1));
  p.on_step(step(2));
  p.message("checkpoint saved: out/checkpoint-2");
  p.on_step(step(3));
  p.on_step(step(4));
  p.finish();
  const std::string out = contents(f);
  std::fclose(f);
  EXPECT_EQ(count(out, '\n'), 2) << out;  // the message and the final newline
  EXPECT_GE(count(out, '\r'), 5) << out;
  EXPECT_NE(out.find("step 2/4 [##########..........]"), std::string::npos) << out;
  EXPECT_NE(out.find("step 4/4 [####################]"), std::string::npos) << out;
}

TEST(Progress, Formatting) {
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(7620), "2h07m");
  EXPECT_GT(host_rss_bytes(), 1u << 20);
}

// Inside an eval pass a terminal shows the pass's progress in place of the bar; a log gets nothing
// until the eval line.
TEST(Progress, EvalPassProgressOnATerminalOnly) {
  for (ProgressMode mode : {ProgressMode::kTty, ProgressMode::kLines}) {
    std::FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    ProgressDisplay p(f, {.total_steps = 10, .logging_steps = 10, .mode = mode});
    p.on_step(step(5));
    p.on_eval_progress(28, 48);
    p.on_eval_progress(48, 48);
    p.on_eval({.step = 5, .loss = 2.0});
    p.finish();
    const std::string out = contents(f);
    std::fclose(f);
    if (mode == ProgressMode::kTty) {
      EXPECT_NE(out.find("\reval 28/48 micro-batches"), std::string::npos) << out;
      EXPECT_NE(out.find("\reval 48/48 micro-batches"), std::string::npos) << out;
      EXPECT_LT(out.find("eval 48/48"), out.find("eval step 5")) << out;
    } else {
      EXPECT_EQ(out.find("micro-batches"), std::string::npos) << out;
    }
  }
}

}  // namespace
}  // namespace st
