#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "core/byte_size.h"

namespace st {

uint64_t host_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

std::string format_duration(double secs) {
  if (!std::isfinite(secs) || secs < 0) return "?";
  const long long s = std::llround(secs);
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%llds", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  return buf;
}

ProgressMode progress_mode_for(std::FILE* f) {
  return isatty(fileno(f)) ? ProgressMode::kTty : ProgressMode::kLines;
}

ProgressDisplay::ProgressDisplay(std::FILE* out, const ProgressOptions& o)
    : out_(out), o_(o), t0_(std::chrono::steady_clock::now()) {}

std::string ProgressDisplay::status_text(const StepMetrics& m) const {
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const int64_t done_here = m.step - o_.first_step;
  const double eta = done_here > 0 ? wall / static_cast<double>(done_here) * static_cast<double>(o_.total_steps - m.step)
                                   : NAN;
  char tok[32];
  if (m.tok_s >= 1e4) std::snprintf(tok, sizeof tok, "%.1fk", m.tok_s / 1e3);
  else std::snprintf(tok, sizeof tok, "%.0f", m.tok_s);
  char buf[256];
  std::snprintf(buf, sizeof buf, "loss %.4f  lr %.2e  grad_norm %.3f  %s tok/s  ETA %s  rss %s", m.loss, m.lr,
                m.grad_norm, tok, format_duration(eta).c_str(), format_bytes(host_rss_bytes()).c_str());
  std::string s = buf;
  for (const auto& [k, v] : m.extra)  // DPO: how often the chosen reply wins
    if (k == "rewards/accuracies") {
      std::snprintf(buf, sizeof buf, "  acc %.2f", v);
      s += buf;
    }
  uint64_t free_b = 0, total_b = 0;
  if (o_.backend && o_.backend->memory_info(&free_b, &total_b) && total_b > 0)
    s += "  dev " + format_bytes(total_b - free_b) + "/" + format_bytes(total_b);
  return s;
}

void ProgressDisplay::clear_bar() {
  if (!bar_shown_) return;
  std::fprintf(out_, "\r%*s\r", static_cast<int>(bar_len_), "");
  bar_shown_ = false;
}

void ProgressDisplay::on_step(const StepMetrics& m) {
  const int64_t total = std::max<int64_t>(o_.total_steps, 1);
  if (o_.mode == ProgressMode::kLines) {
    if (m.step % std::max<int64_t>(o_.logging_steps, 1) != 0 && m.step != total) return;
    std::fprintf(out_, "step %lld/%lld  %s  %.1fs\n", static_cast<long long>(m.step), static_cast<long long>(total),
                 status_text(m).c_str(), m.elapsed_s);
    std::fflush(out_);
    return;
  }
  constexpr int kWidth = 20;
  const int filled = static_cast<int>(std::min<int64_t>(kWidth, m.step * kWidth / total));
  char head[64];
  std::snprintf(head, sizeof head, "step %lld/%lld [", static_cast<long long>(m.step), static_cast<long long>(total));
  std::string line = head;
  line.append(static_cast<size_t>(filled), '#');
  line.append(static_cast<size_t>(kWidth - filled), '.');
  line += "]  ";
  line += status_text(m);
  draw_bar(line);
}

void ProgressDisplay::draw_bar(const std::string& line) {
  // Pad over a longer previous line instead of clearing first: no flicker.
  std::fprintf(out_, "\r%s%*s", line.c_str(), static_cast<int>(bar_len_ > line.size() ? bar_len_ - line.size() : 0),
               "");
  std::fflush(out_);
  bar_len_ = std::max(bar_len_, line.size());
  bar_shown_ = true;
}

void ProgressDisplay::on_eval_progress(int64_t done, int64_t total) {
  if (o_.mode != ProgressMode::kTty) return;
  char buf[96];
  std::snprintf(buf, sizeof buf, "eval %lld/%lld micro-batches", static_cast<long long>(done), static_cast<long long>(total));
  draw_bar(buf);
}

std::string eval_line(const EvalMetrics& e) {
  char buf[128];
  const double ppl = e.ppl();
  std::snprintf(buf, sizeof buf, "eval step %lld  eval_loss %.4f  eval_ppl %.4g", static_cast<long long>(e.step),
                e.loss, ppl);
  std::string line = buf;
  if (!e.extra.empty()) {  // not a token cross-entropy (DPO): its own figures instead of a perplexity
    line = line.substr(0, line.find("  eval_ppl"));
    for (const auto& [k, v] : e.extra) {
      std::snprintf(buf, sizeof buf, "  %s %.4f", k.c_str(), v);
      line += buf;
    }
  }
  if (e.runtime_s >= 0) {
    std::snprintf(buf, sizeof buf, "  (%.1f s)", e.runtime_s);
    line += buf;
  }
  return line;
}

void ProgressDisplay::on_eval(const EvalMetrics& e) { message(eval_line(e)); }

void ProgressDisplay::message(const std::string& text) {
  clear_bar();
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

void ProgressDisplay::finish() {
  if (bar_shown_) std::fprintf(out_, "\n");
  bar_shown_ = false;
  bar_len_ = 0;
  std::fflush(out_);
}

}  // namespace st
