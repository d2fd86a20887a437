// GemmRunner's algorithm tuning (gemm_tune.h Note [bit-preserving GEMM tuning]) never changes a
// bit: a tuning runner and one that keeps cuBLASLt's first choice give identical outputs for the
// layer GEMM forms (y = x W^T, dx = dy W, accumulate, residual, bias, the gate/up pair), and the
// tuning probe leaves C (the accumulation's addend) untouched. Prints each shape's candidates
// (STREAMTUNE_GEMM_TUNE=log is set here) and the time of both runners.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/gemm.h"
#include "core/dtype.h"

namespace st::cuda {
namespace {

struct Dev {
  void* p = nullptr;
  size_t bytes = 0;
  explicit Dev(size_t b) : bytes(b) { EXPECT_EQ(cudaMalloc(&p, b), cudaSuccess); }
  ~Dev() { cudaFree(p); }
  void upload(const std::vector<uint16_t>& h) { cudaMemcpy(p, h.data(), bytes, cudaMemcpyHostToDevice); }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> h(bytes);
    cudaDeviceSynchronize();
    cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost);
    return h;
  }
};

std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f32_to_bf16(d(rng));
  return v;
}

struct Case {
  const char* name;
  int64_t M, N, K;
  bool trans_b, accum, residual, bias, pair;
};

float time_ms(GemmRunner& g, Tensor c, Tensor a, Tensor b, const GemmOpts& o, cudaStream_t s) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  g.run(c, a, b, o, s, nullptr, 0);  // warm (and tune)
  cudaEventRecord(e0, s);
  for (int i = 0; i < 10; ++i) g.run(c, a, b, o, s, nullptr, 0);
  cudaEventRecord(e1, s);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms / 10;
}

TEST(GemmTune, TunedRunnerGivesTheFirstChoiceBits) {
  setenv("STREAMTUNE_GEMM_TUNE", "log", 1);
  const Case cases[] = {
      {"3B q fwd", 2048, 2048, 2048, true, false, false, true, false},
      {"3B gate/up fwd pair", 2048, 11008, 2048, true, false, false, false, true},
      {"3B down fwd +residual", 2048, 2048, 11008, true, false, true, false, false},
      {"3B down dx", 2048, 11008, 2048, false, false, false, false, false},
      {"3B gate dx accumulate", 2048, 2048, 11008, false, true, false, false, false},
      {"8B gate/up fwd pair", 4096, 14336, 4096, true, false, false, false, true},
      {"8B down dx", 4096, 14336, 4096, false, false, false, false, false},
      {"8B up dx accumulate", 4096, 4096, 14336, false, true, false, false, false},
      {"8B lm_head chunk", 4096, 16032, 4096, true, false, false, false, false},
  };
  std::mt19937 rng(7);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  GemmRunner tuned(true), plain(false);
  for (const Case& k : cases) {
    const int64_t nb = k.pair ? 2 : 1;
    Dev a(k.M * k.K * 2), b(nb * k.N * k.K * 2), c0(nb * k.M * k.N * 2), c1(nb * k.M * k.N * 2),
        r(k.M * k.N * 2), bias(nb * k.N * 2);
    a.upload(random_bf16(k.M * k.K, rng, 1.0f));
    b.upload(random_bf16(nb * k.N * k.K, rng, 0.02f));
    const auto c_init = random_bf16(nb * k.M * k.N, rng, 1.0f);
    r.upload(random_bf16(k.M * k.N, rng, 1.0f));
    bias.upload(random_bf16(nb * k.N, rng, 0.1f));
    const DType bf = DType::kBF16;
    Tensor ta(a.p, bf, {k.M, k.K});
    Tensor tb = k.trans_b ? Tensor(b.p, bf, {k.N, k.K}) : Tensor(b.p, bf, {k.K, k.N});
    GemmOpts o;
    o.trans_b = k.trans_b ? Trans::kYes : Trans::kNo;
    o.accum = k.accum ? Accum::kAdd : Accum::kOverwrite;
    if (k.residual) o.residual = Tensor(r.p, bf, {k.M, k.N});
    if (k.bias) o.bias = Tensor(bias.p, bf, {k.N});
    for (auto [runner, dev] : {std::pair{&tuned, &c0}, std::pair{&plain, &c1}}) {
      dev->upload(c_init);
      Tensor tc(dev->p, bf, {k.M, k.N});
      if (k.pair)
        runner->run_pair(tc, ta, tb, k.bias ? o.bias : Tensor(), k.N * k.K, k.M * k.N, k.N, s);
      else
        runner->run(tc, ta, tb, o, s, nullptr, 0);
    }
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_TRUE(c0.download() == c1.download()) << k.name << ": the tuned runner changed the bits";
    if (!k.pair && !k.accum) {
      Tensor tc0(c0.p, bf, {k.M, k.N}), tc1(c1.p, bf, {k.M, k.N});
      const float tt = time_ms(tuned, tc0, ta, tb, o, s), tp = time_ms(plain, tc1, ta, tb, o, s);
      std::printf("%-26s first choice %8.1f us, tuned %8.1f us (%+.1f%%)\n", k.name, tp * 1e3, tt * 1e3,
                  100.0 * (tp - tt) / tp);
    }
  }
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace st::cuda
