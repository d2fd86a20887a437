#include "cli/bench_device.h"

#include <chrono>
#include <vector>

#include "backend/speed_probe.h"
#include "cli/bench_weights.h"
#include "core/check.h"

#ifdef STREAMTUNE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace st {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

StatusOr<double> measure_gemm_tflops(Backend* be, int64_t n, DType dtype, int iters) {
  const size_t elems = static_cast<size_t>(n * n);
  std::vector<char> host(elems * dtype_size(dtype));
  fill_random_weights(host.data(), dtype, elems, 7, 0);
  return measure_gemm_tflops_from(be, host.data(), dtype, n, iters);
}

DeviceMemory device_memory(Backend* be) {
  DeviceMemory m;
#ifdef STREAMTUNE_HAVE_CUDA
  if (be->kind() == DeviceKind::kCuda) {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) == cudaSuccess) {
      m.known = true;
      m.free = f;
      m.total = t;
    }
  }
#else
  (void)be;
#endif
  return m;
}

// ---- exposed-copy probe ----------------------------------------------------------------------

ExposedCopyProbe::ExposedCopyProbe(Backend* be, LayerSource* inner, size_t max_visits)
    : be_(be), inner_(inner) {
  for (size_t i = 0; i < std::max<size_t>(1, max_visits); ++i) {
    before_.push_back(be->create_event());
    after_.push_back(be->create_event());
  }
  poller_ = std::thread([this] { poll_loop(); });
}

ExposedCopyProbe::~ExposedCopyProbe() {
  stop_.store(true);
  poller_.join();
}

void ExposedCopyProbe::begin_step(const std::vector<int>& visits) { begin_training_step(visits, {}); }

void ExposedCopyProbe::begin_training_step(const std::vector<int>& visits, const std::vector<bool>& backward) {
  CHECK(visits.size() <= before_.size(), "probe sized for " << before_.size() << " visits, step has " << visits.size());
  inner_->begin_training_step(visits, backward);
}

LayerWeights ExposedCopyProbe::acquire(int layer) {
  const uint64_t i = published_.load();
  const size_t k = static_cast<size_t>(i % before_.size());
  be_->record(*before_[k], StreamId::kCompute);
  LayerWeights w = inner_->acquire(layer);
  be_->record(*after_[k], StreamId::kCompute);
  published_.store(i + 1);
  return w;
}

void ExposedCopyProbe::end_step() {
  inner_->end_step();
  while (consumed_.load() < published_.load()) std::this_thread::yield();
}

void ExposedCopyProbe::poll_loop() {
  auto wait_done = [this](Event& e) {
    while (!be_->event_done(e)) {
      if (stop_.load()) return false;
    }
    return true;
  };
  while (!stop_.load()) {
    const uint64_t i = consumed_.load();
    if (i >= published_.load()) {
      std::this_thread::yield();
      continue;
    }
    const size_t k = static_cast<size_t>(i % before_.size());
    if (!wait_done(*before_[k])) return;
    auto t0 = Clock::now();
    if (!wait_done(*after_[k])) return;
    exposed_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    consumed_.store(i + 1);
  }
}

}  // namespace st
