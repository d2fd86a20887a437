#include "model/launch_plans.h"

#include <cstdio>
#include <string>

#include "core/check.h"

namespace st {

void LaunchPlanCache::eager(const std::function<void()>& ops) {
  ops();
  ++stats_.eager;
}

void LaunchPlanCache::forget_unrecorded() {
  for (auto it = entries_.begin(); it != entries_.end();) it = it->second ? std::next(it) : entries_.erase(it);
}

void LaunchPlanCache::fail(const std::string& why) {
  failed_ = true;
  entries_.clear();
  stats_.bytes = 0;
  std::fprintf(stderr, "streamtune: launch plans off (%s): layer ops are launched one by one\n", why.c_str());
}

void LaunchPlanCache::run(const Key& key, bool recordable, const std::function<void()>& ops) {
  if (!active() || !recordable) return eager(ops);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxKeys) forget_unrecorded();
    entries_.emplace(key, nullptr);
    return eager(ops);  // first sighting: let lazy state settle before recording
  }
  std::unique_ptr<LaunchPlan>& kept = it->second;
  if (!kept && stats_.bytes >= max_bytes_) return eager(ops);  // full: the plans kept stay, no thrashing
  if (kept) {
    if (rec_->replay(*kept)) {
      ++stats_.replayed;
      return;
    }
    stats_.bytes -= kept->device_bytes();
    kept.reset();  // stale (the backend replaced memory it recorded): record it again
  }
  std::string why;
  if (!rec_->begin_capture(&why)) {
    fail(why);
    return eager(ops);
  }
  ops();  // recorded, not run
  std::unique_ptr<LaunchPlan> plan = rec_->end_capture(&why);
  if (!plan) {
    fail(why);
    return eager(ops);  // nothing recorded ran: run it now
  }
  CHECK(rec_->replay(*plan), "LaunchPlanCache: a plan went stale as it was recorded");
  stats_.bytes += plan->device_bytes();
  kept = std::move(plan);
  ++stats_.recorded;
  ++stats_.replayed;
}

}  // namespace st
