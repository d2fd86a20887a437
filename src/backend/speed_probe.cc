#include "backend/speed_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/dtype.h"

namespace st {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// Median seconds of `iters` calls of `f`, each with stream `st` drained, after `warmups` untimed
// and then more untimed until `warmup_s` has passed (a GPU left idle runs its first milliseconds
// at a lower clock).
template <class F>
double time_s(Backend* be, StreamId st, int warmups, int iters, F f, double warmup_s = 0) {
  for (int i = 0; i < warmups; ++i) f();
  be->sync_stream(st);
  for (const auto w0 = Clock::now(); std::chrono::duration<double>(Clock::now() - w0).count() < warmup_s;) {
    f();
    be->sync_stream(st);
  }
  std::vector<double> s;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    f();
    be->sync_stream(st);
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(s);
}

}  // namespace

StatusOr<double> measure_h2d_gbps(Backend* be, size_t bytes, int iters) {
  ASSIGN_OR_RETURN(void* host, be->alloc_host_pinned(bytes), "pinned buffer for the link probe");
  std::memset(host, 1, bytes);
  StatusOr<void*> dev = be->alloc(bytes);
  if (!dev.ok()) {
    be->free_host_pinned(host);
    return Status(dev.status().code(), "device buffer for the link probe: " + dev.status().message());
  }
  const double s = time_s(be, StreamId::kH2D, 1, iters, [&] { be->copy_h2d(*dev, host, bytes, StreamId::kH2D); });
  be->free(*dev);
  be->free_host_pinned(host);
  return static_cast<double>(bytes) / s / 1e9;
}

StatusOr<double> measure_gemm_tflops_from(Backend* be, const void* host, DType dtype, int64_t n, int iters,
                                          double warmup_s) {
  const size_t bytes = static_cast<size_t>(n * n) * dtype_size(dtype);
  void* p[3] = {nullptr, nullptr, nullptr};
  Status st;
  for (void*& q : p) {
    StatusOr<void*> a = be->alloc(bytes);
    if (!a.ok()) {
      st = Status(a.status().code(), "GEMM probe buffer (" + std::to_string(bytes) + " bytes): " + a.status().message());
      break;
    }
    q = *a;
  }
  double s = 0;
  if (st.ok()) {
    be->copy_h2d(p[0], host, bytes, StreamId::kCompute);
    be->copy_h2d(p[1], host, bytes, StreamId::kCompute);
    Tensor a(p[0], dtype, {n, n}), b(p[1], dtype, {n, n}), c(p[2], dtype, {n, n});
    GemmOpts o;
    o.trans_b = Trans::kYes;  // the layer GEMMs' shape: x W^T
    s = time_s(be, StreamId::kCompute, 2, iters, [&] { be->gemm(c, a, b, o); }, warmup_s);
  }
  be->sync_all();
  for (void* q : p)
    if (q) be->free(q);
  RETURN_IF_ERROR(st);
  return 2.0 * static_cast<double>(n) * n * n / s / 1e12;
}

DeviceSpeed probe_device_speed(Backend* be) {
  DeviceSpeed d;
  if (be->kind() != DeviceKind::kCuda) return d;
  constexpr int64_t n = 4096;
  std::vector<uint16_t> host(static_cast<size_t>(n * n));
  uint64_t x = 0x9E3779B97F4A7C15ull;  // xorshift: values in [-1, 1) (random data: a GEMM's
  for (uint16_t& h : host) {           // power draw, hence its clock, depends on it)
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    h = f32_to_bf16(static_cast<float>(static_cast<int64_t>(x >> 40) - (int64_t{1} << 23)) / static_cast<float>(1 << 23));
  }
  StatusOr<double> link = measure_h2d_gbps(be, size_t{64} << 20, 5);
  // Session 22: with two warm-up GEMMs (~0.4 ms) the probe read up to ~5% apart between runs
  // of one plan on the H200, as much as the planner's recompute margin; 20 ms of warm-up first.
  StatusOr<double> gemm = measure_gemm_tflops_from(be, host.data(), DType::kBF16, n, 9, 0.02);
  if (link.ok() && gemm.ok() && *link > 0 && *gemm > 0) d = DeviceSpeed{*link, *gemm};
  return d;
}

}  // namespace st
