// Tensor-core (bf16 mma.sync) attention vs the CPU reference and vs the scalar CUDA kernel:
// forward (out, lse) and backward (dq, dk, dv) on odd sequence lengths, GQA groups 1/2/7, head
// dims 32..128, packed documents; bit-reproducibility; and a timing table at model shapes (which
// also fails if the tensor-core path is not clearly faster than the scalar one).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/attention_tc.h"
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

std::string name(const Case& c) {
  return std::string("B") + std::to_string(c.B) + " T" + std::to_string(c.T) + " NH" + std::to_string(c.NH) + " KVH" +
         std::to_string(c.KVH) + " D" + std::to_string(c.D) + (c.docs ? " docs" : "") +
         (c.window ? " W" + std::to_string(c.window) : "");
}

// Packed documents: random lengths (1..60), ids restart per row.
std::vector<int32_t> make_docs(const Case& c, std::mt19937& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(c.B * c.T));
  for (int64_t b = 0; b < c.B; ++b) {
    int32_t id = 0;
    int64_t left = 1 + rng() % 60;
    for (int64_t t = 0; t < c.T; ++t) {
      if (left-- == 0) {
        ++id;
        left = rng() % 60;
      }
      ids[b * c.T + t] = id;
    }
  }
  return ids;
}

struct AttnRun {
  Twin q, k, v, out, lse, dout, dq, dk, dv;
  AttnRun(const Case& c, std::mt19937& rng, DType t = DType::kBF16)
      : q(t, {c.B * c.T, c.NH, c.D}, rng), k(t, {c.B * c.T, c.KVH, c.D}, rng), v(t, {c.B * c.T, c.KVH, c.D}, rng),
        out(t, {c.B * c.T, c.NH, c.D}, rng, 0.0f), lse(DType::kF32, {c.B, c.NH, c.T}, rng, 0.0f),
        dout(t, {c.B * c.T, c.NH, c.D}, rng), dq(t, {c.B * c.T, c.NH, c.D}, rng, 0.0f),
        dk(t, {c.B * c.T, c.KVH, c.D}, rng, 0.0f), dv(t, {c.B * c.T, c.KVH, c.D}, rng, 0.0f) {}
  void fwd(Backend& be, bool gpu, const SeqLayout& L, const AttnShape& s) {
    if (gpu) be.attention(out.gpu(), lse.gpu(), q.gpu(), k.gpu(), v.gpu(), L, s);
    else be.attention(out.cpu(), lse.cpu(), q.cpu(), k.cpu(), v.cpu(), L, s);
  }
  void bwd(Backend& be, bool gpu, const SeqLayout& L, const AttnShape& s) {
    if (gpu)
      be.attention_backward(dq.gpu(), dk.gpu(), dv.gpu(), dout.gpu(), q.gpu(), k.gpu(), v.gpu(), out.gpu(), lse.gpu(),
                            L, s);
    else
      be.attention_backward(dq.cpu(), dk.cpu(), dv.cpu(), dout.cpu(), q.cpu(), k.cpu(), v.cpu(), out.cpu(), lse.cpu(),
                            L, s);
  }
};

AttnShape shape_of(const Case& c) {
  return AttnShape{c.NH, c.KVH, c.D, 1.0f / std::sqrt(static_cast<float>(c.D)), c.window};
}

// Runs the GPU forward and backward once, checking that the call took the tensor-core path (or
// the scalar one when tc == false).
void gpu_pass(AttnRun& r, const SeqLayout& L, const AttnShape& s, bool tc) {
  cuda::attention_tc_enabled() = tc;
  const int64_t before = cuda::attention_tc_calls();
  r.fwd(gpu_backend(), true, L, s);
  r.bwd(gpu_backend(), true, L, s);
  cuda::attention_tc_enabled() = true;
  EXPECT_EQ(cuda::attention_tc_calls() - before, tc ? 2 : 0) << "wrong attention path";
}

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double limit, const std::string& w) {
  EXPECT_TRUE(nmse_ok(got, ref, limit)) << w;
}

void run_case(const Case& c, std::mt19937& rng) {
  const std::string w = name(c);
  SCOPED_TRACE(w);
  AttnRun r(c, rng);
  TwinI32 docs(c.docs ? make_docs(c, rng) : std::vector<int32_t>{});
  const SeqLayout Lc{c.B, c.T, nullptr, c.docs ? docs.cpu() : nullptr};
  const SeqLayout Lg{c.B, c.T, nullptr, c.docs ? docs.gpu() : nullptr};
  const AttnShape s = shape_of(c);

  // Forward vs CPU.
  r.fwd(cpu_backend(), false, Lc, s);
  cuda::attention_tc_enabled() = true;
  const int64_t before = cuda::attention_tc_calls();
  r.fwd(gpu_backend(), true, Lg, s);
  EXPECT_EQ(cuda::attention_tc_calls() - before, 1) << "forward did not take the tensor-core path";
  EXPECT_TWIN_CLOSE(r.out, 1e-4, "out " + w);
  EXPECT_TWIN_CLOSE(r.lse, 1e-10, "lse " + w);

  // Backward from the CPU's forward results on both sides, so only backward differences count.
  r.out.set(r.out.cpu_vals());
  r.lse.set(r.lse.cpu_vals());
  r.bwd(cpu_backend(), false, Lc, s);
  const int64_t before_b = cuda::attention_tc_calls();
  r.bwd(gpu_backend(), true, Lg, s);
  EXPECT_EQ(cuda::attention_tc_calls() - before_b, 1) << "backward did not take the tensor-core path";
  if (c.T == 1 || c.window == 1) {
    // One key per query (T 1, or a window of 1): dq = dk = 0 exactly; both sides hold rounding
    // noise only.
    for (Twin* g : {&r.dq, &r.dk}) {
      for (float x : g->gpu_vals()) ASSERT_TRUE(std::fabs(x) <= 5e-2f) << x;
      EXPECT_TRUE(g->guards_ok());
    }
  } else {
    EXPECT_TWIN_CLOSE(r.dq, 2e-4, "dq " + w);
    EXPECT_TWIN_CLOSE(r.dk, 2e-4, "dk " + w);
  }
  EXPECT_TWIN_CLOSE(r.dv, 2e-4, "dv " + w);

  // Against the scalar CUDA kernels on the same inputs (all GPU): both bf16-close to each other.
  const auto tc_dq = r.dq.gpu_vals(), tc_dk = r.dk.gpu_vals(), tc_dv = r.dv.gpu_vals();
  r.out.set(r.out.cpu_vals());
  r.lse.set(r.lse.cpu_vals());
  gpu_pass(r, Lg, s, false);  // scalar forward overwrites out/lse, then its backward uses them
  const auto sc_out = r.out.gpu_vals(), sc_lse = r.lse.gpu_vals();
  expect_close(sc_out, r.out.cpu_vals(), 1e-4, "scalar out " + w);
  expect_close(sc_lse, r.lse.cpu_vals(), 1e-10, "scalar lse " + w);
  if (c.T > 1 && c.window != 1) {
    expect_close(tc_dq, r.dq.gpu_vals(), 4e-4, "tc vs scalar dq " + w);
    expect_close(tc_dk, r.dk.gpu_vals(), 4e-4, "tc vs scalar dk " + w);
  }
  expect_close(tc_dv, r.dv.gpu_vals(), 4e-4, "tc vs scalar dv " + w);
}

TEST(AttentionTc, MatchesCpuAndScalar) {
  std::mt19937 rng(21);
  const Case cases[] = {
      {1, 1, 2, 2, 64, false},    {2, 17, 4, 2, 64, false},   {1, 129, 7, 1, 128, false},
      {2, 129, 4, 4, 128, true},  {1, 1000, 2, 1, 64, true},  {1, 1000, 4, 2, 128, false},
      {1, 200, 14, 2, 64, true},  {1, 65, 4, 2, 32, true},    {2, 100, 4, 2, 80, true},
      {1, 70, 6, 3, 96, false},   {1, 300, 7, 1, 128, true},  {1, 128, 2, 2, 64, false},
      {3, 63, 4, 1, 128, true},   {1, 64, 2, 1, 32, false},   {1, 257, 8, 8, 96, false},
      // Sliding windows: shorter than a tile, across tiles, with documents, one key (W 1).
      {1, 1000, 4, 2, 128, false, 100}, {2, 129, 4, 4, 128, true, 40}, {1, 300, 7, 1, 128, true, 64},
      {1, 65, 4, 2, 32, false, 7},      {1, 200, 2, 1, 64, false, 1},  {1, 129, 4, 2, 64, false, 128},
  };
  for (const Case& c : cases) run_case(c, rng);
}

// Head dims that are not a multiple of 8 and f32 tensors stay on the scalar kernels.
TEST(AttentionTc, FallbackRoutes) {
  std::mt19937 rng(22);
  for (const auto& [c, t] : {std::pair{Case{1, 40, 2, 1, 17, false}, DType::kBF16},
                             std::pair{Case{1, 40, 2, 1, 200, false}, DType::kBF16},
                             std::pair{Case{1, 40, 2, 1, 64, false}, DType::kF32}}) {
    AttnRun r(c, rng, t);
    const SeqLayout L{c.B, c.T, nullptr, nullptr};
    const int64_t before = cuda::attention_tc_calls();
    r.fwd(gpu_backend(), true, L, shape_of(c));
    r.bwd(gpu_backend(), true, L, shape_of(c));
    EXPECT_EQ(cuda::attention_tc_calls(), before) << name(c);
  }
}

TEST(AttentionTc, DeterministicBits) {
  std::mt19937 rng(23);
  const Case c{2, 333, 14, 2, 64, true};
  AttnRun r(c, rng);
  TwinI32 docs(make_docs(c, rng));
  const SeqLayout L{c.B, c.T, nullptr, docs.gpu()};
  std::vector<std::vector<uint8_t>> first;
  for (int rep = 0; rep < 3; ++rep) {
    gpu_pass(r, L, shape_of(c), true);
    std::vector<std::vector<uint8_t>> now{r.out.gpu_bytes(), r.lse.gpu_bytes(), r.dq.gpu_bytes(),
                                          r.dk.gpu_bytes(), r.dv.gpu_bytes()};
    if (rep == 0) first = now;
    else
      for (size_t i = 0; i < now.size(); ++i) EXPECT_EQ(now[i], first[i]) << "output " << i << " differs";
  }
}

// Note [tile skipping]: listing only the tiles that hold a valid pair changes no bit of out, lse,
// dq, dk, dv (packed documents, a sliding window, both; GQA and MHA; several head dims).
TEST(AttentionTc, TileSkippingKeepsBits) {
  std::mt19937 rng(25);
  const Case cases[] = {{2, 1000, 4, 2, 128, true}, {1, 700, 8, 8, 64, false, 96}, {1, 517, 6, 3, 96, true, 50},
                        {3, 129, 4, 1, 32, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c));
    AttnRun r(c, rng);
    TwinI32 docs(c.docs ? make_docs(c, rng) : std::vector<int32_t>{});
    const SeqLayout L{c.B, c.T, nullptr, c.docs ? docs.gpu() : nullptr};
    std::vector<std::vector<uint8_t>> runs[2];
    for (int skip = 0; skip < 2; ++skip) {
      cuda::attention_tile_skipping() = skip == 1;
      gpu_pass(r, L, shape_of(c), true);
      runs[skip] = {r.out.gpu_bytes(), r.lse.gpu_bytes(), r.dq.gpu_bytes(), r.dk.gpu_bytes(), r.dv.gpu_bytes()};
    }
    cuda::attention_tile_skipping() = true;
    for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_EQ(runs[0][i], runs[1][i]) << "output " << i << " differs";
  }
}

// Packed rows (documents of 128 / 512 tokens, 3B and 8B head shapes, T 2048 / 4096): fwd and bwd
// time with tile skipping on and off. A printout for bench/RESULTS.md, not a timed assertion.
TEST(AttentionTc, TileSkippingTimingTable) {
  std::mt19937 rng(26);
  struct Row { int64_t T, NH, KVH, D, doc; };
  const Row rows[] = {{2048, 16, 2, 128, 128}, {2048, 16, 2, 128, 512}, {4096, 32, 8, 128, 512}};
  std::printf("%6s %4s %4s %5s %5s %12s %12s %12s %12s\n", "T", "NH", "KVH", "D", "doc", "fwd all ms", "fwd skip ms",
              "bwd all ms", "bwd skip ms");
  for (const Row& w : rows) {
    const Case c{1, w.T, w.NH, w.KVH, w.D, true};
    AttnRun r(c, rng);
    std::vector<int32_t> ids(static_cast<size_t>(w.T));
    for (int64_t t = 0; t < w.T; ++t) ids[t] = static_cast<int32_t>(t / w.doc);
    TwinI32 docs(ids);
    const SeqLayout L{1, w.T, nullptr, docs.gpu()};
    const AttnShape s = shape_of(c);
    double ms[2][2];
    for (int skip = 0; skip < 2; ++skip) {
      cuda::attention_tile_skipping() = skip == 1;
      ms[skip][0] = time_ms(20, [&] { r.fwd(gpu_backend(), true, L, s); });
      ms[skip][1] = time_ms(20, [&] { r.bwd(gpu_backend(), true, L, s); });
    }
    cuda::attention_tile_skipping() = true;
    std::printf("%6lld %4lld %4lld %5lld %5lld %12.3f %12.3f %12.3f %12.3f\n", (long long)w.T, (long long)w.NH,
                (long long)w.KVH, (long long)w.D, (long long)w.doc, ms[0][0], ms[1][0], ms[0][1], ms[1][1]);
  }
  std::fflush(stdout);
}

// Model shapes (B=1): prints fwd/bwd time and TFLOP/s (causal count: fwd 2·NH·T²·D, bwd 2.5x fwd)
// and, at T=2048 for the 7B shape, the scalar kernels' times; fails unless tensor cores win by 3x.
TEST(AttentionTc, TimingTable) {
  std::mt19937 rng(24);
  struct Shape { int64_t NH, KVH, D; const char* what; };
  const Shape shapes[] = {{14, 2, 64, "Qwen2.5-0.5B"}, {28, 4, 128, "Qwen2.5-7B"}, {32, 8, 128, "Llama-3-8B"}};
  std::printf("%-13s %5s %9s %9s %9s %9s\n", "shape", "T", "fwd ms", "fwd TF/s", "bwd ms", "bwd TF/s");
  for (const Shape& sh : shapes)
    for (int64_t T : {512, 2048, 4096}) {
      const Case c{1, T, sh.NH, sh.KVH, sh.D, false};
      AttnRun r(c, rng);
      const SeqLayout L{1, T, nullptr, nullptr};
      const AttnShape s = shape_of(c);
      const double flops = 2.0 * sh.NH * static_cast<double>(T) * T * sh.D;
      const int it = T <= 512 ? 50 : 10;
      const double f = time_ms(it, [&] { r.fwd(gpu_backend(), true, L, s); });
      const double b = time_ms(it, [&] { r.bwd(gpu_backend(), true, L, s); });
      std::printf("%-13s %5lld %9.3f %9.1f %9.3f %9.1f\n", sh.what, static_cast<long long>(T), f,
                  flops / (f * 1e9), b, 2.5 * flops / (b * 1e9));
      EXPECT_TRUE(std::isfinite(f) && std::isfinite(b));
      if (T == 2048 && sh.D == 128 && sh.NH == 28) {
        cuda::attention_tc_enabled() = false;
        const double fs = time_ms(2, [&] { r.fwd(gpu_backend(), true, L, s); });
        const double bs = time_ms(2, [&] { r.bwd(gpu_backend(), true, L, s); });
        cuda::attention_tc_enabled() = true;
        std::printf("%-13s %5lld %9.3f %9.1f %9.3f %9.1f  (scalar kernels)\n", sh.what, static_cast<long long>(T), fs,
                    flops / (fs * 1e9), bs, 2.5 * flops / (bs * 1e9));
        EXPECT_LT(3.0 * f, fs) << "tensor-core forward not faster than scalar";
        EXPECT_LT(3.0 * b, bs) << "tensor-core backward not faster than scalar";
      }
    }
  std::fflush(stdout);
}

}  // namespace
}  // namespace st::test
