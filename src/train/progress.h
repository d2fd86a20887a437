// What the user sees while training. On a terminal: one status line redrawn in place
//   step 12/200 [####.......]  loss 2.3141  lr 1.9e-04  8.1k tok/s  ETA 3m05s  rss 1.2 GiB  dev 11.3/80.0 GiB
// When the output is not a terminal (a log file, CI): plain lines, one per logging_steps (and
// the last step), so logs stay greppable. Messages (checkpoints, eval) clear the bar first.
// Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "backend/backend.h"
#include "train/metrics.h"

namespace st {

enum class ProgressMode { kTty, kLines };

struct ProgressOptions {
  int64_t total_steps = 1;
  int64_t logging_steps = 1;
  int64_t first_step = 0;     // steps already done (resumed runs), for the ETA
  ProgressMode mode = ProgressMode::kLines;
  Backend* backend = nullptr; // device memory via memory_info, when it can tell
};

class ProgressDisplay {
 public:
  ProgressDisplay(std::FILE* out, const ProgressOptions& o);
  void set_first_step(int64_t s) { o_.first_step = s; }
  void on_step(const StepMetrics& m);
  void on_eval(const EvalMetrics& e);
  // Inside an eval pass (a terminal only): "eval done/total micro-batches" in place of the bar.
  void on_eval_progress(int64_t done, int64_t total);
  void message(const std::string& text);
  // Ends the in-place line (a newline on a TTY when a bar is shown).
  void finish();

 private:
  std::string status_text(const StepMetrics& m) const;
  void clear_bar();
  void draw_bar(const std::string& line);  // redraws the in-place line

  std::FILE* out_;
  ProgressOptions o_;
  std::chrono::steady_clock::time_point t0_;
  bool bar_shown_ = false;
  size_t bar_len_ = 0;
};

// Resident set size of this process (/proc/self/statm); 0 when unknown.
uint64_t host_rss_bytes();
// "eval step N  eval_loss L  eval_ppl P  (x.x s)" (rl: its eval_ figures instead of the perplexity).
std::string eval_line(const EvalMetrics& e);
std::string format_duration(double secs);   // "45s", "3m05s", "2h07m"
// ProgressMode::kTty when `f` is a terminal.
ProgressMode progress_mode_for(std::FILE* f);

}  // namespace st
