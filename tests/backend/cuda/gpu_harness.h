// Test harness for CUDA-vs-CPU parity: twin buffers (host copy for the CPU reference, guarded
// device copy for the GPU), NMSE comparison that NaN never passes, guard-byte checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"

namespace st::test {

inline Backend& cpu_backend() {
  static std::unique_ptr<Backend> b = [] {
    auto r = make_backend(DeviceKind::kCpu);
    if (!r.ok()) { std::fprintf(stderr, "CPU backend: %s\n", r.status().to_string().c_str()); std::abort(); }
    return std::move(r).value();
  }();
  return *b;
}

// Fails (never skips) without a GPU: these binaries are only registered as tests where one exists.
inline Backend& gpu_backend() {
  static std::unique_ptr<Backend> b = [] {
    auto r = make_backend(DeviceKind::kCuda);
    if (!r.ok()) {
      std::fprintf(stderr, "FATAL: no CUDA backend (%s). GPU tests need a GPU.\n", r.status().to_string().c_str());
      std::abort();
    }
    return std::move(r).value();
  }();
  return *b;
}

constexpr size_t kGuard = 256;
constexpr uint8_t kGuardByte = 0xA5;

// A device allocation with guard regions before and after the payload.
class GuardedDev {
 public:
  explicit GuardedDev(size_t bytes) : bytes_(bytes) {
    Backend& g = gpu_backend();
    auto r = g.alloc(bytes + 2 * kGuard);
    if (!r.ok()) std::abort();
    base_ = static_cast<uint8_t*>(*r);
    std::vector<uint8_t> init(bytes + 2 * kGuard, kGuardByte);
    g.copy_h2d(base_, init.data(), init.size(), StreamId::kCompute);
    g.sync_stream(StreamId::kCompute);
  }
  ~GuardedDev() { gpu_backend().free(base_); }
  GuardedDev(const GuardedDev&) = delete;
  GuardedDev& operator=(const GuardedDev&) = delete;
  void* data() const { return base_ + kGuard; }
  void upload(const void* src) {
    gpu_backend().copy_h2d(data(), src, bytes_, StreamId::kCompute);
    gpu_backend().sync_stream(StreamId::kCompute);
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> out(bytes_);
    gpu_backend().sync_all();
    gpu_backend().copy_d2h(out.data(), data(), bytes_, StreamId::kD2H);
    gpu_backend().sync_stream(StreamId::kD2H);
    return out;
  }
  bool guards_intact() const {
    std::vector<uint8_t> all(bytes_ + 2 * kGuard);
    gpu_backend().sync_all();
    gpu_backend().copy_d2h(all.data(), base_, all.size(), StreamId::kD2H);
    gpu_backend().sync_stream(StreamId::kD2H);
    for (size_t i = 0; i < kGuard; ++i)
      if (all[i] != kGuardByte || all[kGuard + bytes_ + i] != kGuardByte) return false;
    return true;
  }

 private:
  size_t bytes_;
  uint8_t* base_ = nullptr;
};

inline std::vector<float> to_f32(const std::vector<uint8_t>& bytes, DType t) {
  const size_t n = bytes.size() / dtype_size(t);
  std::vector<float> out(n);
  convert_elements(out.data(), DType::kF32, bytes.data(), t, n);
  return out;
}

// A float tensor living twice: host bytes (the CPU backend's memory) and a guarded device copy.
class Twin {
 public:
  // Random normal values * scale (rounded to dtype), or NaN poison when scale == 0 (outputs).
  Twin(DType t, std::vector<int64_t> shape, std::mt19937& rng, float scale = 1.0f)
      : t_(t), shape_(std::move(shape)) {
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    n_ = n;
    host_.resize(static_cast<size_t>(n) * dtype_size(t));
    if (scale == 0.0f) {
      std::memset(host_.data(), 0xFF, host_.size());  // NaN in f32, bf16 and f16
    } else {
      std::normal_distribution<float> nd(0.0f, scale);
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& x : v) x = nd(rng);
      convert_elements(host_.data(), t, v.data(), DType::kF32, v.size());
    }
    dev_ = std::make_unique<GuardedDev>(host_.size());
    dev_->upload(host_.data());
  }
  void set(const std::vector<float>& v) {
    convert_elements(host_.data(), t_, v.data(), DType::kF32, v.size());
    dev_->upload(host_.data());
  }
  Tensor cpu() { return make(host_.data()); }
  Tensor gpu() { return make(dev_->data()); }
  std::vector<float> cpu_vals() const { return to_f32(host_, t_); }
  std::vector<float> gpu_vals() const { return to_f32(dev_->download(), t_); }
  std::vector<uint8_t> gpu_bytes() const { return dev_->download(); }
  bool guards_ok() const { return dev_->guards_intact(); }
  DType dtype() const { return t_; }
  int64_t numel() const { return n_; }

 private:
  Tensor make(void* p) {
    Tensor t(p, t_, {1});
    t.ndim = static_cast<int>(shape_.size());
    for (size_t i = 0; i < shape_.size(); ++i) t.shape[i] = shape_[i];
    return t;
  }
  DType t_;
  std::vector<int64_t> shape_;
  int64_t n_ = 0;
  std::vector<uint8_t> host_;
  std::unique_ptr<GuardedDev> dev_;
};

// int32 array on both sides.
class TwinI32 {
 public:
  explicit TwinI32(std::vector<int32_t> v) : host_(std::move(v)) {
    dev_ = std::make_unique<GuardedDev>(std::max<size_t>(host_.size(), 1) * sizeof(int32_t));
    if (!host_.empty()) dev_->upload(host_.data());
  }
  const int32_t* cpu() const { return host_.data(); }
  const int32_t* gpu() const { return static_cast<const int32_t*>(dev_->data()); }

 private:
  std::vector<int32_t> host_;
  std::unique_ptr<GuardedDev> dev_;
};

// NMSE = sum (got-ref)^2 / sum ref^2. Any non-finite value on either side fails.
inline ::testing::AssertionResult nmse_ok(const std::vector<float>& got, const std::vector<float>& ref, double limit) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.size();
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(ref[i]))
      return ::testing::AssertionFailure() << "non-finite at " << i << ": got " << got[i] << " ref " << ref[i];
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  const double nmse = num / std::max(den, 1e-30);
  if (nmse > limit) return ::testing::AssertionFailure() << "NMSE " << nmse << " > " << limit;
  return ::testing::AssertionSuccess();
}

// Per-dtype limits: bf16 outputs differ by output rounding (<= 1 ulp ~ 4e-3 relative); f32 by
// summation order only.
// Milliseconds per call: the median of 5 timings of `iters` calls between full synchronisations of
// the GPU backend, after a warm-up call (the timing tables; never an assertion on speed).
inline double time_ms(int iters, const std::function<void()>& f) {
  f();
  gpu_backend().sync_all();
  std::vector<double> runs;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f();
    gpu_backend().sync_all();
    runs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters);
  }
  std::sort(runs.begin(), runs.end());
  return runs[2];
}

inline double limit_for(DType t, double bf16_limit = 1e-4, double f32_limit = 1e-9) {
  return t == DType::kF32 ? f32_limit : bf16_limit;
}

// Compares the GPU copy of `t` against its CPU copy and checks the guards.
#define EXPECT_TWIN_CLOSE(twin, limit, what)                                  \
  do {                                                                        \
    EXPECT_TRUE(::st::test::nmse_ok((twin).gpu_vals(), (twin).cpu_vals(), (limit))) << (what); \
    EXPECT_TRUE((twin).guards_ok()) << (what) << ": guard bytes overwritten"; \
  } while (0)

}  // namespace st::test
