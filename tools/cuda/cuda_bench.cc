// Micro-benchmark of the CUDA backend: GEMM TFLOP/s (bf16 in, f32 accumulate) and fused attention
// forward/backward at seq 2048, 28 heads, 4 kv heads, head_dim 128 (Qwen2-7B-like).
// Timing: warm-up, then N launches between two full synchronisations (host clock); median of 5.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"

namespace {

using st::Backend;
using st::DType;
using st::Tensor;

void* dev_random(Backend& g, int64_t n, DType t, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  std::vector<uint8_t> b(static_cast<size_t>(n) * st::dtype_size(t));
  st::convert_elements(b.data(), t, v.data(), DType::kF32, v.size());
  void* p = g.alloc(b.size()).value();
  g.copy_h2d(p, b.data(), b.size(), st::StreamId::kCompute);
  g.sync_all();
  return p;
}

double time_ms(Backend& g, int iters, const std::function<void()>& f) {
  f();
  g.sync_all();
  std::vector<double> runs;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f();
    g.sync_all();
    auto t1 = std::chrono::steady_clock::now();
    runs.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count() / iters);
  }
  std::sort(runs.begin(), runs.end());
  return runs[2];
}

void bench_gemm(Backend& g, std::mt19937& rng, int64_t M, int64_t N, int64_t K, st::Trans tb) {
  void* a = dev_random(g, M * K, DType::kBF16, rng);
  void* b = dev_random(g, K * N, DType::kBF16, rng);
  void* c = dev_random(g, M * N, DType::kBF16, rng);
  Tensor ta(a, DType::kBF16, {M, K});
  Tensor tbt = tb == st::Trans::kYes ? Tensor(b, DType::kBF16, {N, K}) : Tensor(b, DType::kBF16, {K, N});
  Tensor tc(c, DType::kBF16, {M, N});
  st::GemmOpts o;
  o.trans_b = tb;
  const double ms = time_ms(g, 20, [&] { g.gemm(tc, ta, tbt, o); });
  std::printf("gemm bf16 M=%lld N=%lld K=%lld trans_b=%d: %.3f ms, %.1f TFLOP/s\n", (long long)M, (long long)N,
              (long long)K, tb == st::Trans::kYes, ms, 2.0 * M * N * K / (ms * 1e-3) / 1e12);
  g.free(a);
  g.free(b);
  g.free(c);
}

void bench_attention(Backend& g, std::mt19937& rng, DType t) {
  const int64_t B = 1, T = 2048, NH = 28, KVH = 4, D = 128;
  void* q = dev_random(g, B * T * NH * D, t, rng);
  void* k = dev_random(g, B * T * KVH * D, t, rng);
  void* v = dev_random(g, B * T * KVH * D, t, rng);
  void* o = dev_random(g, B * T * NH * D, t, rng);
  void* dout = dev_random(g, B * T * NH * D, t, rng);
  void* dq = dev_random(g, B * T * NH * D, t, rng);
  void* dk = dev_random(g, B * T * KVH * D, t, rng);
  void* dv = dev_random(g, B * T * KVH * D, t, rng);
  void* lse = dev_random(g, B * NH * T, DType::kF32, rng);
  std::vector<int32_t> pos(static_cast<size_t>(B * T));
  for (int64_t i = 0; i < B * T; ++i) pos[i] = static_cast<int32_t>(i % T);
  void* dpos = g.alloc(pos.size() * 4).value();
  g.copy_h2d(dpos, pos.data(), pos.size() * 4, st::StreamId::kCompute);
  const st::SeqLayout L{B, T, static_cast<const int32_t*>(dpos), nullptr};
  const st::AttnShape s{NH, KVH, D, 1.0f / std::sqrt(128.0f)};
  Tensor tq(q, t, {B * T, NH, D}), tk(k, t, {B * T, KVH, D}), tv(v, t, {B * T, KVH, D});
  Tensor to(o, t, {B * T, NH, D}), tdo(dout, t, {B * T, NH, D}), tdq(dq, t, {B * T, NH, D});
  Tensor tdk(dk, t, {B * T, KVH, D}), tdv(dv, t, {B * T, KVH, D}), tl(lse, DType::kF32, {B, NH, T});
  const double fwd_flops = 4.0 * B * NH * (double)T * T * D / 2.0;  // causal: half of QK^T and PV
  const double f = time_ms(g, 5, [&] { g.attention(to, tl, tq, tk, tv, L, s); });
  const double b = time_ms(g, 3, [&] { g.attention_backward(tdq, tdk, tdv, tdo, tq, tk, tv, to, tl, L, s); });
  std::printf("attention %s B=1 T=2048 NH=28 KVH=4 D=128 causal: fwd %.3f ms (%.1f TFLOP/s), bwd %.3f ms "
              "(%.1f TFLOP/s)\n", st::dtype_name(t), f, fwd_flops / (f * 1e-3) / 1e12, b,
              2.5 * fwd_flops / (b * 1e-3) / 1e12);
  for (void* p : {q, k, v, o, dout, dq, dk, dv, lse, dpos}) g.free(p);
}

}  // namespace

int main() {
  auto r = st::make_backend(st::DeviceKind::kCuda);
  if (!r.ok()) {
    std::fprintf(stderr, "cuda_bench: %s\n", r.status().to_string().c_str());
    return 1;
  }
  Backend& g = **r;
  std::printf("%s\n", g.description().c_str());
  std::mt19937 rng(1);
  bench_gemm(g, rng, 8192, 8192, 8192, st::Trans::kNo);
  bench_gemm(g, rng, 4096, 3584, 3584, st::Trans::kYes);    // tokens x hidden x hidden (q_proj-like)
  bench_gemm(g, rng, 4096, 18944, 3584, st::Trans::kYes);   // MLP up
  bench_attention(g, rng, DType::kBF16);
  bench_attention(g, rng, DType::kF32);
  return 0;
}
