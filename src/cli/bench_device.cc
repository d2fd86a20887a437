#include "cli/bench_device.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "cli/bench_weights.h"
#include "core/check.h"

#ifdef STREAMTUNE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace st {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// Frees a list of backend allocations on scope exit.
struct DeviceBuffers {
  Backend* be;
  std::vector<void*> ptrs;
  ~DeviceBuffers() {
    be->sync_all();
    for (void* p : ptrs) be->free(p);
  }
};

}  // namespace

StatusOr<double> measure_gemm_tflops(Backend* be, int64_t n, DType dtype, int iters) {
  const size_t elems = static_cast<size_t>(n * n);
  const size_t bytes = elems * dtype_size(dtype);
  DeviceBuffers bufs{be, {}};
  for (int i = 0; i < 3; ++i) {
    ASSIGN_OR_RETURN(void* p, be->alloc(bytes), "GEMM ceiling buffer (" << bytes << " bytes)");
    bufs.ptrs.push_back(p);
  }
  std::vector<char> host(bytes);
  fill_random_weights(host.data(), dtype, elems, 7, 0);
  be->copy_h2d(bufs.ptrs[0], host.data(), bytes, StreamId::kCompute);
  be->copy_h2d(bufs.ptrs[1], host.data(), bytes, StreamId::kCompute);
  be->sync_stream(StreamId::kCompute);
  Tensor a(bufs.ptrs[0], dtype, {n, n}), b(bufs.ptrs[1], dtype, {n, n}), c(bufs.ptrs[2], dtype, {n, n});
  GemmOpts o;
  o.trans_b = Trans::kYes;  // the layer GEMMs' shape: x · Wᵀ
  for (int i = 0; i < 2; ++i) be->gemm(c, a, b, o);
  be->sync_stream(StreamId::kCompute);
  std::vector<double> s;
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    be->gemm(c, a, b, o);
    be->sync_stream(StreamId::kCompute);
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return 2.0 * static_cast<double>(n) * n * n / median(s) / 1e12;
}

StatusOr<double> measure_h2d_gbps(Backend* be, size_t bytes, int iters) {
  ASSIGN_OR_RETURN(void* host, be->alloc_host_pinned(bytes), "pinned buffer for the link probe");
  std::memset(host, 1, bytes);
  StatusOr<void*> dev = be->alloc(bytes);
  if (!dev.ok()) {
    be->free_host_pinned(host);
    return Status(dev.status().code(), "device buffer for the link probe: " + dev.status().message());
  }
  be->copy_h2d(*dev, host, bytes, StreamId::kH2D);  // warm-up
  be->sync_stream(StreamId::kH2D);
  std::vector<double> s;
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    be->copy_h2d(*dev, host, bytes, StreamId::kH2D);
    be->sync_stream(StreamId::kH2D);
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  be->free(*dev);
  be->free_host_pinned(host);
  return static_cast<double>(bytes) / median(s) / 1e9;
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

void ExposedCopyProbe::begin_step(const std::vector<int>& visits) {
  CHECK(visits.size() <= before_.size(), "probe sized for " << before_.size() << " visits, step has " << visits.size());
  inner_->begin_step(visits);
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
