// Device-side measurements for `streamtune bench`: the two ceilings of the roofline (design.md §5)
// measured in the same run, device memory, and the exposed-copy probe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/speed_probe.h"
#include "model/weights.h"

namespace st {

// TFLOP/s of an n x n x n GEMM (backend/speed_probe.h measure_gemm_tflops_from) on random weights
// (fill_random_weights). dtype: bf16 on CUDA (the ceiling), the run's dtype on CPU. The link's
// ceiling: measure_h2d_gbps (backend/speed_probe.h).
StatusOr<double> measure_gemm_tflops(Backend* be, int64_t n, DType dtype, int iters);

// cudaMemGetInfo on CUDA builds with a CUDA backend; known = false otherwise.
struct DeviceMemory {
  bool known = false;
  uint64_t free = 0, total = 0;
  uint64_t used() const { return total - free; }
};
DeviceMemory device_memory(Backend* be);

// Exposed copy time (Note [exposed copy]): a LayerSource decorator that records an event on the
// compute stream just before each acquire (compute has reached the layer) and just after it
// (the wait on the slot's `ready` event is enqueued behind it). A poller thread timestamps
// when each event completes; the gap between the pair is the time the compute stream sat idle
// waiting for a copy. The Backend interface has no timing events and no native stream handle,
// so this polls Backend::event_done (a few microseconds of resolution); it perturbs the run a
// little, which is why bench runs it on separate probe steps, not the timed ones.
// Only meaningful on asynchronous backends (CUDA); on CPU the copy wait blocks the host and the
// prefetcher's compute_wait_ns is the measure.
class ExposedCopyProbe : public LayerSource {
 public:
  ExposedCopyProbe(Backend* be, LayerSource* inner, size_t max_visits_per_step);
  ~ExposedCopyProbe() override;
  ExposedCopyProbe(const ExposedCopyProbe&) = delete;
  ExposedCopyProbe& operator=(const ExposedCopyProbe&) = delete;

  void begin_step(const std::vector<int>& visits) override;
  void begin_training_step(const std::vector<int>& visits, const std::vector<bool>& backward) override;
  void lend_regions(const std::vector<LentRegion>& regions) override { inner_->lend_regions(regions); }
  LayerWeights acquire(int layer) override;
  void release(int layer) override { inner_->release(layer); }
  void end_step() override;  // waits until every pair of the step has been timed

  int64_t exposed_ns() const { return exposed_ns_.load(); }

 private:
  void poll_loop();

  Backend* be_;
  LayerSource* inner_;
  std::vector<std::unique_ptr<Event>> before_, after_;
  std::atomic<uint64_t> published_{0};  // pairs recorded (monotonic)
  std::atomic<uint64_t> consumed_{0};   // pairs timed
  std::atomic<int64_t> exposed_ns_{0};
  std::atomic<bool> stop_{false};
  std::thread poller_;
};

}  // namespace st
