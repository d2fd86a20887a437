#include "cli/bench_timeline.h"

#include <chrono>
#include <cstdio>

#include "core/file.h"

namespace st {

namespace {
int queue_of(StreamId s) { return s == StreamId::kH2D ? 1 : 0; }
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

DeviceTimeline::DeviceTimeline(Backend* be) : be_(be) {
  poller_ = std::thread([this] { poll_loop(); });
}

DeviceTimeline::~DeviceTimeline() {
  stop_.store(true);
  poller_.join();
}

void DeviceTimeline::mark(const char* what, int layer, StreamId stream) {
  if (!armed_.load()) return;
  std::unique_ptr<Event> e = be_->create_event();
  be_->record(*e, stream);
  std::lock_guard<std::mutex> lk(mu_);
  marks_[queue_of(stream)].push_back(Mark{what, layer, std::move(e)});
}

void DeviceTimeline::poll_loop() {
  while (!stop_.load()) {
    bool any = false;
    for (int q = 0; q < 2; ++q) {
      Event* e = nullptr;
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (next_[q] < marks_[q].size()) e = marks_[q][next_[q]].event.get();
      }
      if (e == nullptr || !be_->event_done(*e)) continue;
      const int64_t t = now_ns();
      std::lock_guard<std::mutex> lk(mu_);
      marks_[q][next_[q]++].ns = t;
      any = true;
    }
    if (!any) std::this_thread::yield();
  }
}

Status DeviceTimeline::write_csv(const std::string& path) {
  for (;;) {
    std::lock_guard<std::mutex> lk(mu_);
    if (next_[0] == marks_[0].size() && next_[1] == marks_[1].size()) break;
  }
  std::lock_guard<std::mutex> lk(mu_);
  int64_t t0 = INT64_MAX;
  for (const auto& q : marks_)
    for (const Mark& m : q) t0 = std::min(t0, m.ns);
  std::string out = "event,layer,us\n";
  char line[96];
  for (const auto& q : marks_)
    for (const Mark& m : q) {
      std::snprintf(line, sizeof(line), "%s,%d,%.1f\n", m.what, m.layer, (m.ns - t0) / 1e3);
      out += line;
    }
  return write_file_atomic(path, out);
}

}  // namespace st
