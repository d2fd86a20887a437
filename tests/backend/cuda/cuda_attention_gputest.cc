// CUDA fused attention vs the CPU reference: forward (out, lse) and backward (dq, dk, dv) on odd
// sequence lengths, head dims and GQA groups, with and without packed documents; determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "backend/cuda/attention_cudnn.h"
#include "gpu_harness.h"

namespace st::test {
namespace {

// These tests pin the backend's own kernels: keep the cuDNN SDPA path (attention_cudnn_gputest) out.
[[maybe_unused]] const bool kOwnKernelsOnly = (cuda::cudnn_attention_enabled() = false, true);

struct Case {
  int64_t B, T, NH, KVH, D;
  bool docs;
  int64_t window = 0;  // sliding window (0: none)
};

std::string name(const Case& c, DType t) {
  return std::string(dtype_name(t)) + " B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " NH" +
         std::to_string(c.NH) + " KVH" + std::to_string(c.KVH) + " D" + std::to_string(c.D) +
         (c.docs ? " docs" : "") + (c.window ? " W" + std::to_string(c.window) : "");
}

// Packed documents: lengths drawn at random, ids restart per row.
std::vector<int32_t> make_docs(const Case& c, std::mt19937& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(c.B * c.T));
  for (int64_t b = 0; b < c.B; ++b) {
    int32_t id = 0;
    int64_t left = 1 + rng() % 40;
    for (int64_t t = 0; t < c.T; ++t) {
      if (left-- == 0) {
        ++id;
        left = rng() % 40;
      }
      ids[b * c.T + t] = id;
    }
  }
  return ids;
}

struct AttnRun {
  Twin q, k, v, out, lse, dout, dq, dk, dv;
  AttnRun(const Case& c, DType t, std::mt19937& rng)
      : q(t, {c.B * c.T, c.NH, c.D}, rng), k(t, {c.B * c.T, c.KVH, c.D}, rng), v(t, {c.B * c.T, c.KVH, c.D}, rng),
        out(t, {c.B * c.T, c.NH, c.D}, rng, 0.0f), lse(DType::kF32, {c.B, c.NH, c.T}, rng, 0.0f),
        dout(t, {c.B * c.T, c.NH, c.D}, rng), dq(t, {c.B * c.T, c.NH, c.D}, rng, 0.0f),
        dk(t, {c.B * c.T, c.KVH, c.D}, rng, 0.0f), dv(t, {c.B * c.T, c.KVH, c.D}, rng, 0.0f) {}
};

void run_case(const Case& c, DType t, std::mt19937& rng) {
  const std::string w = name(c, t);
  AttnRun r(c, t, rng);
  TwinI32 docs(c.docs ? make_docs(c, rng) : std::vector<int32_t>{});
  SeqLayout Lc{c.B, c.T, nullptr, c.docs ? docs.cpu() : nullptr};
  SeqLayout Lg{c.B, c.T, nullptr, c.docs ? docs.gpu() : nullptr};
  const AttnShape s{c.NH, c.KVH, c.D, 1.0f / std::sqrt(static_cast<float>(c.D)), c.window};
  cpu_backend().attention(r.out.cpu(), r.lse.cpu(), r.q.cpu(), r.k.cpu(), r.v.cpu(), Lc, s);
  gpu_backend().attention(r.out.gpu(), r.lse.gpu(), r.q.gpu(), r.k.gpu(), r.v.gpu(), Lg, s);
  EXPECT_TWIN_CLOSE(r.out, limit_for(t, 1e-4, 1e-10), "out " + w);
  EXPECT_TWIN_CLOSE(r.lse, 1e-10, "lse " + w);
  // Backward from the CPU's forward results on both sides, so only backward differences count.
  r.out.set(r.out.cpu_vals());
  r.lse.set(r.lse.cpu_vals());
  cpu_backend().attention_backward(r.dq.cpu(), r.dk.cpu(), r.dv.cpu(), r.dout.cpu(), r.q.cpu(), r.k.cpu(),
                                   r.v.cpu(), r.out.cpu(), r.lse.cpu(), Lc, s);
  gpu_backend().attention_backward(r.dq.gpu(), r.dk.gpu(), r.dv.gpu(), r.dout.gpu(), r.q.gpu(), r.k.gpu(),
                                   r.v.gpu(), r.out.gpu(), r.lse.gpu(), Lg, s);
  if (c.T == 1) {
    // One key: softmax is constant, so dq = dk = 0 in exact arithmetic and both sides hold only
    // rounding noise (relative NMSE is meaningless). Check the noise is small instead.
    for (Twin* g : {&r.dq, &r.dk}) {
      for (const auto& vals : {g->gpu_vals(), g->cpu_vals()})
        for (float x : vals) ASSERT_TRUE(std::fabs(x) <= (t == DType::kF32 ? 1e-4f : 5e-2f)) << x << " " << w;
      EXPECT_TRUE(g->guards_ok()) << w;
    }
  } else {
    EXPECT_TWIN_CLOSE(r.dq, limit_for(t, 2e-4, 1e-9), "dq " + w);
    EXPECT_TWIN_CLOSE(r.dk, limit_for(t, 2e-4, 1e-9), "dk " + w);
  }
  EXPECT_TWIN_CLOSE(r.dv, limit_for(t, 2e-4, 1e-9), "dv " + w);
}

TEST(CudaAttention, MatchesCpu) {
  std::mt19937 rng(11);
  const Case cases[] = {
      {1, 1, 2, 2, 64, false},  {2, 17, 4, 2, 32, false},  {1, 129, 7, 1, 128, false},
      {2, 129, 4, 4, 80, true}, {1, 64, 14, 2, 96, true},  {1, 45, 2, 1, 17, false},
      {1, 100, 6, 3, 128, true}, {2, 33, 2, 1, 64, true},   {1, 70, 3, 3, 200, false},
      {2, 129, 4, 4, 80, true, 30}, {1, 100, 6, 3, 128, false, 7}, {1, 70, 3, 3, 200, false, 40},
  };
  for (const Case& c : cases)
    for (DType t : {DType::kF32, DType::kBF16}) run_case(c, t, rng);
}

// The own kernels at 50,000 tokens (attention_cudnn_gputest.cc Note [long sequences]): dense and
// with a 4096-token sliding window, against the CPU reference.
TEST(CudaAttention, LongSequenceMatchesCpu) {
  std::mt19937 rng(13);
  for (const Case& c : {Case{1, 50000, 2, 1, 64, false}, Case{1, 50000, 2, 1, 64, false, 4096}}) run_case(c, DType::kBF16, rng);
}

TEST(CudaAttention, KvCacheMatchesCpu) {
  std::mt19937 rng(13);
  struct KvCase { int64_t Tq, Tk, q_start, NH, KVH, D, window = 0; };
  const KvCase cases[] = {{1, 20, 12, 4, 2, 64},       {5, 40, 12, 7, 1, 128},    {33, 33, 0, 2, 2, 80},
                          {3, 70, 60, 4, 1, 17},       {5, 40, 12, 7, 1, 128, 8}, {33, 33, 0, 2, 2, 80, 5},
                          {1, 300, 290, 4, 1, 64, 200}};
  for (const KvCase& c : cases)
    for (DType t : {DType::kF32, DType::kBF16}) {
      Twin q(t, {c.Tq, c.NH, c.D}, rng), k(t, {c.Tk, c.KVH, c.D}, rng), v(t, {c.Tk, c.KVH, c.D}, rng);
      Twin out(t, {c.Tq, c.NH, c.D}, rng, 0.0f);
      const AttnShape s{c.NH, c.KVH, c.D, 1.0f / std::sqrt(static_cast<float>(c.D)), c.window};
      cpu_backend().attention_kv(out.cpu(), q.cpu(), k.cpu(), v.cpu(), c.q_start, s);
      gpu_backend().attention_kv(out.gpu(), q.gpu(), k.gpu(), v.gpu(), c.q_start, s);
      EXPECT_TWIN_CLOSE(out, limit_for(t, 1e-4, 1e-10),
                        std::string("attention_kv ") + dtype_name(t) + " Tq" + std::to_string(c.Tq) + " D" +
                            std::to_string(c.D) + " W" + std::to_string(c.window));
    }
}

TEST(CudaAttention, DeterministicBits) {
  std::mt19937 rng(12);
  const Case c{2, 200, 8, 2, 128, true};
  AttnRun r(c, DType::kBF16, rng);
  TwinI32 docs(make_docs(c, rng));
  const SeqLayout L{c.B, c.T, nullptr, docs.gpu()};
  const AttnShape s{c.NH, c.KVH, c.D, 0.088f};
  std::vector<std::vector<uint8_t>> first;
  for (int rep = 0; rep < 2; ++rep) {
    gpu_backend().attention(r.out.gpu(), r.lse.gpu(), r.q.gpu(), r.k.gpu(), r.v.gpu(), L, s);
    gpu_backend().attention_backward(r.dq.gpu(), r.dk.gpu(), r.dv.gpu(), r.dout.gpu(), r.q.gpu(), r.k.gpu(),
                                     r.v.gpu(), r.out.gpu(), r.lse.gpu(), L, s);
    std::vector<std::vector<uint8_t>> now{r.out.gpu_bytes(), r.lse.gpu_bytes(), r.dq.gpu_bytes(),
                                          r.dk.gpu_bytes(), r.dv.gpu_bytes()};
    if (rep == 0) first = now;
    else for (size_t i = 0; i < now.size(); ++i) EXPECT_EQ(now[i], first[i]) << "output " << i << " differs";
  }
}

}  // namespace
}  // namespace st::test
