#include "backend/speed_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/dtype.h"

namespace st {
namespace {

using Clock = std::chrono::steady_clock;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Seconds a call of `f` takes with the stream drained, median of `iters` after one warm-up.
template <class F>
double time_s(Backend* be, StreamId st, int iters, F f) {
  f();
  be->sync_stream(st);
  std::vector<double> s;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    f();
    be->sync_stream(st);
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median_of(s);
}

double link_gbps(Backend* be) {
  constexpr size_t kBytes = size_t{64} << 20;
  StatusOr<void*> host = be->alloc_host_pinned(kBytes);
  if (!host.ok()) return 0;
  std::memset(*host, 1, kBytes);
  StatusOr<void*> dev = be->alloc(kBytes);
  double gbps = 0;
  if (dev.ok()) {
    const double s = time_s(be, StreamId::kH2D, 5, [&] { be->copy_h2d(*dev, *host, kBytes, StreamId::kH2D); });
    gbps = s > 0 ? static_cast<double>(kBytes) / s / 1e9 : 0;
    be->free(*dev);
  }
  be->free_host_pinned(*host);
  return gbps;
}

double gemm_tflops(Backend* be) {
  constexpr int64_t n = 4096;
  const size_t elems = static_cast<size_t>(n * n), bytes = elems * 2;
  std::vector<uint16_t> host(elems);
  uint64_t x = 0x9E3779B97F4A7C15ull;  // xorshift: values in [-1, 1) (random data: a GEMM's
  for (uint16_t& h : host) {           // power draw, hence its clock, depends on it)
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    h = f32_to_bf16(static_cast<float>(static_cast<int64_t>(x >> 40) - (int64_t{1} << 23)) / static_cast<float>(1 << 23));
  }
  void* p[3] = {nullptr, nullptr, nullptr};
  double tflops = 0;
  bool ok = true;
  for (void*& q : p) {
    StatusOr<void*> a = be->alloc(bytes);
    if (!a.ok()) {
      ok = false;
      break;
    }
    q = *a;
  }
  if (ok) {
    be->copy_h2d(p[0], host.data(), bytes, StreamId::kCompute);
    be->copy_h2d(p[1], host.data(), bytes, StreamId::kCompute);
    Tensor a(p[0], DType::kBF16, {n, n}), b(p[1], DType::kBF16, {n, n}), c(p[2], DType::kBF16, {n, n});
    GemmOpts o;
    o.trans_b = Trans::kYes;  // x W^T, as the layers
    const double s = time_s(be, StreamId::kCompute, 5, [&] { be->gemm(c, a, b, o); });
    tflops = s > 0 ? 2.0 * static_cast<double>(n) * n * n / s / 1e12 : 0;
  }
  for (void* q : p)
    if (q) be->free(q);
  return tflops;
}

}  // namespace

DeviceSpeed probe_device_speed(Backend* be) {
  DeviceSpeed d;
  if (be->kind() != DeviceKind::kCuda) return d;
  d.link_gbps = link_gbps(be);
  d.gemm_tflops = gemm_tflops(be);
  if (d.link_gbps <= 0 || d.gemm_tflops <= 0) d = DeviceSpeed{};
  return d;
}

}  // namespace st
