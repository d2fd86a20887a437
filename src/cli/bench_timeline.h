// Note [device timeline]: `STREAMTUNE_TIMELINE=FILE streamtune bench ...` (CUDA, layers streamed)
// runs one more step after the probe steps and writes when, on the device, every layer copy
// started and ended (events on the copy stream around the store's load) and every visit's compute
// reached its acquire, got its layer, and released it (events on the compute stream) -- as CSV
// lines `event,layer,us` from the step's first event. The streaming schedule's own timeline,
// to set beside tests/stream/timeline_sim.h's model of it: where the copy stream idles, which
// visit waits for which copy. The Backend has no timing events, so a poller thread timestamps each
// event when it fires (host clock, a few microseconds of resolution), one queue per stream.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "model/weights.h"
#include "store/layer_store.h"

namespace st {

class DeviceTimeline {
 public:
  explicit DeviceTimeline(Backend* be);
  ~DeviceTimeline();
  DeviceTimeline(const DeviceTimeline&) = delete;
  DeviceTimeline& operator=(const DeviceTimeline&) = delete;

  void arm(bool on) { armed_.store(on); }
  // Records an event on `stream` now (in that stream's order); no-op unless armed. Thread-safe.
  void mark(const char* what, int layer, StreamId stream);
  // Waits until every recorded event has been timestamped, then writes the CSV. Errors name FILE.
  Status write_csv(const std::string& path);

 private:
  struct Mark {
    const char* what;
    int layer;
    std::unique_ptr<Event> event;
    int64_t ns = -1;
  };
  void poll_loop();

  Backend* be_;
  std::atomic<bool> armed_{false}, stop_{false};
  std::mutex mu_;
  std::vector<Mark> marks_[2];  // per stream: kCompute, kH2D, in record order
  size_t next_[2] = {0, 0};     // the first not yet timestamped (guarded by mu_)
  std::thread poller_;
};

// The store with a timeline mark on the copy stream before and after each layer's load.
class TimedStore : public LayerStore {
 public:
  TimedStore(LayerStore* inner, DeviceTimeline* t) : inner_(inner), t_(t) {}
  const StoreManifest& manifest() const override { return inner_->manifest(); }
  const std::string& dir() const override { return inner_->dir(); }
  const char* tier() const override { return inner_->tier(); }
  size_t host_bytes() const override { return inner_->host_bytes(); }
  Status load_layer(int layer, void* dst) override {
    t_->mark("copy_start", layer, StreamId::kH2D);
    Status s = inner_->load_layer(layer, dst);
    t_->mark("copy_end", layer, StreamId::kH2D);
    return s;
  }
  Status load_extras(void* dst) override { return inner_->load_extras(dst); }

 private:
  LayerStore* inner_;
  DeviceTimeline* t_;
};

// The layer source with timeline marks on the compute stream: a visit reached its acquire, got its
// layer (behind the wait for its copy), and released it.
class TimelineSource : public LayerSource {
 public:
  TimelineSource(LayerSource* inner, DeviceTimeline* t) : inner_(inner), t_(t) {}
  void begin_step(const std::vector<int>& visits) override { inner_->begin_step(visits); }
  void begin_training_step(const std::vector<int>& visits, const std::vector<bool>& backward) override {
    inner_->begin_training_step(visits, backward);
  }
  void lend_regions(const std::vector<LentRegion>& regions) override { inner_->lend_regions(regions); }
  LayerWeights acquire(int layer) override {
    t_->mark("acquire", layer, StreamId::kCompute);
    LayerWeights w = inner_->acquire(layer);
    t_->mark("ready", layer, StreamId::kCompute);
    return w;
  }
  void release(int layer) override {
    t_->mark("release", layer, StreamId::kCompute);
    inner_->release(layer);
  }
  void end_step() override { inner_->end_step(); }

 private:
  LayerSource* inner_;
  DeviceTimeline* t_;
};

}  // namespace st
