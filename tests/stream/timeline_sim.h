// Test helper: a training step's timeline under the real Prefetcher's decisions.
//
// The prefetcher decides on the compute thread, which on CUDA runs ahead of the device, so its
// load sequence is a pure function of the visits (Note [prefetch rule]). This replays those
// decisions (inline copies into a recording store) and times them as the device would run them:
// one copy stream, each load starting when the stream is free and its slot is (the slot's last
// reader finished; a lent slot, the backward that freed its regions); each visit starting when the
// previous one ended and its layer's load landed. Compute per visit: f (forward), b (backward),
// plus h (the head) before the first backward; c per load.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "stream/layer_buffer_pool.h"
#include "stream/prefetcher.h"
#include "store/layer_store.h"

namespace st::testing_util {

struct TimelineCosts {
  double f = 1, b = 2, c = 1, h = 0;  // ms
};

struct TimelineStep {
  double step_ms = 0;
  int loads = 0;
  double copy_busy_ms = 0;  // loads x c
};

// `steps` training steps (forward 0..L-1, backward L-1..0) of L streamed layers through `own` pool
// slots, with lent slots over spans of k adjacent regions (k = 0: none); the last step's figures.
inline TimelineStep simulate_training_steps(int L, int own, int k, const TimelineCosts& t, int steps = 4) {
  struct RecStore : LayerStore {
    StoreManifest m;
    std::string d = "/sim";
    std::vector<void*> dst;
    const StoreManifest& manifest() const override { return m; }
    const std::string& dir() const override { return d; }
    const char* tier() const override { return "sim"; }
    size_t host_bytes() const override { return 0; }
    Status load_layer(int, void* p) override {
      dst.push_back(p);
      return Status::OK();
    }
    Status load_extras(void*) override { return Status::OK(); }
  };
  constexpr size_t kBlob = 64;
  auto be = make_backend(DeviceKind::kCpu).value();
  RecStore store;
  store.m.num_layers = L;
  store.m.layer_bytes = kBlob;
  std::vector<uint8_t> regions(static_cast<size_t>(L) * kBlob);
  auto pool = LayerBufferPool::create(be.get(), own, kBlob).value();
  Prefetcher pf(pool.get(), &store, CopyMode::kInline);
  std::map<void*, int> slot_of;
  for (int s = 0; s < own; ++s) slot_of[pool->data(s)] = s;
  std::vector<int> span_first, span_count;
  span_first.assign(static_cast<size_t>(own), -1);
  span_count.assign(static_cast<size_t>(own), 0);
  for (int l = 0; k > 0 && l + k <= L; l += k) {
    // Each region is a blob here; a span of k covers k of them (only the first blob's bytes used).
    const int s = pool->add_lent_slot(regions.data() + static_cast<size_t>(l) * kBlob);
    slot_of[pool->data(s)] = s;
    span_first.push_back(l);
    span_count.push_back(k);
    pf.lend_slot(s, l, k);
  }
  std::vector<int> visits;
  std::vector<bool> backward;
  for (int l = 0; l < L; ++l) visits.push_back(l), backward.push_back(false);
  for (int l = L - 1; l >= 0; --l) visits.push_back(l), backward.push_back(true);
  const size_t S = static_cast<size_t>(pool->num_slots());
  std::vector<double> slot_free(S, 0), slot_ready(S, 0), region_dead(static_cast<size_t>(L), 0);
  double copy_free = 0, now = 0;
  TimelineStep out;
  for (int step = 0; step < steps; ++step) {
    const double t0 = now;
    store.dst.clear();
    size_t timed = 0;
    auto time_new_loads = [&] {
      for (; timed < store.dst.size(); ++timed) {
        const size_t s = static_cast<size_t>(slot_of.at(store.dst[timed]));
        double ready = slot_free[s];
        for (int l = span_first[s]; span_count[s] > 0 && l < span_first[s] + span_count[s]; ++l)
          ready = std::max(ready, region_dead[static_cast<size_t>(l)]);
        copy_free = std::max(copy_free, ready) + t.c;
        slot_ready[s] = copy_free;
      }
    };
    pf.begin_step(visits, backward);
    time_new_loads();
    for (size_t i = 0; i < visits.size(); ++i) {
      const int l = visits[i];
      (void)pf.acquire(l).value();
      const size_t s = static_cast<size_t>(pf.held_slot());
      double start = std::max(now, slot_ready[s]);
      if (i == static_cast<size_t>(L)) start += t.h;
      now = start + (backward[i] ? t.b : t.f);
      slot_free[s] = now;
      if (backward[i]) region_dead[static_cast<size_t>(l)] = now;
      pf.release(l);
      time_new_loads();
    }
    (void)pf.end_step();
    out.step_ms = now - t0;
    out.loads = static_cast<int>(store.dst.size());
    out.copy_busy_ms = out.loads * t.c;
  }
  return out;
}

}  // namespace st::testing_util
