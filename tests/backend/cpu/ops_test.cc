// CPU backend op tests. Oracles: naive loops (gemm, attention with an explicit mask), textbook
// AdamW in double, the dropout RNG definition, bit equality across thread counts.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/dropout_rng.h"
#include "cpu_test_util.h"

namespace st::test {
namespace {

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = f32_to_bf16(v[i]);
  return o;
}
std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = bf16_to_f32(v[i]);
  return o;
}
Tensor bview(std::vector<uint16_t>& v, std::initializer_list<int64_t> dims) { return Tensor(v.data(), DType::kBF16, dims); }

// C (=|+=) alpha op(A) op(B), naive double loops.
std::vector<double> gemm_ref(const std::vector<float>& a, const std::vector<float>& b, std::vector<double> c, int64_t M,
                             int64_t N, int64_t K, bool ta, bool tb, float alpha, bool add) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(ta ? a[k * M + m] : a[m * K + k]) * (tb ? b[n * K + k] : b[k * N + n]);
      c[m * N + n] = (add ? c[m * N + n] : 0.0) + alpha * s;
    }
  return c;
}

TEST(CpuOps, GemmAllTransposesAndAccumulate) {
  auto be = cpu_backend();
  const int64_t M = 7, N = 5, K = 9;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool add : {false, true}) {
        auto a = randn(M * K, 1), b = randn(K * N, 2), c = randn(M * N, 3);
        auto expect = gemm_ref(a, b, to_double(c), M, N, K, ta, tb, 0.5f, add);
        GemmOpts o{.trans_a = ta ? Trans::kYes : Trans::kNo, .trans_b = tb ? Trans::kYes : Trans::kNo, .alpha = 0.5f,
                   .accum = add ? Accum::kAdd : Accum::kOverwrite};
        Tensor ta_t = ta ? view(a, {K, M}) : view(a, {M, K}), tb_t = tb ? view(b, {N, K}) : view(b, {K, N});
        be->gemm(view(c, {M, N}), ta_t, tb_t, o);
        EXPECT_LT(rel_err(c, expect), 1e-5) << "ta " << ta << " tb " << tb << " add " << add;
        // bf16 operands and bf16 C: inputs rounded first, one rounding of the f32 result on store.
        auto ab = to_bf16(a), bb = to_bf16(b);
        auto cb = to_bf16(randn(M * N, 4));
        auto expect_b = gemm_ref(from_bf16(ab), from_bf16(bb), to_double(from_bf16(cb)), M, N, K, ta, tb, 0.5f, add);
        be->gemm(bview(cb, {M, N}), ta ? bview(ab, {K, M}) : bview(ab, {M, K}), tb ? bview(bb, {N, K}) : bview(bb, {K, N}), o);
        EXPECT_LT(rel_err(from_bf16(cb), expect_b), 8e-3);
      }
}

TEST(CpuOps, Bf16StorageRoundTrip) {
  auto be = cpu_backend();
  const int64_t R = 3, N = 16;
  auto x = randn(R * N, 5), w = randn(N, 6);
  auto xb = to_bf16(x), wb = to_bf16(w);
  std::vector<uint16_t> yb(R * N);
  std::vector<float> rstd(R);
  be->rmsnorm(bview(yb, {R, N}), view(rstd, {R}), bview(xb, {R, N}), bview(wb, {N}), 1e-6f);
  auto ref = rmsnorm_ref(to_double(from_bf16(xb)), to_double(from_bf16(wb)), N, 1e-6);
  EXPECT_LT(rel_err(from_bf16(yb), ref), 4e-3);
  // convert f32 -> bf16 -> f32 is RNE rounding; add/scale on bf16 store once.
  std::vector<uint16_t> cb(R * N);
  std::vector<float> back(R * N);
  be->convert(bview(cb, {R, N}), view(x, {R, N}));
  be->convert(view(back, {R, N}), bview(cb, {R, N}));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(back[i], round_to_bf16(x[i]));
  be->add(bview(cb, {R, N}), bview(cb, {R, N}), view(x, {R, N}));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(bf16_to_f32(cb[i]), round_to_bf16(round_to_bf16(x[i]) + x[i]));
  be->scale(view(back, {R, N}), view(x, {R, N}), 3.0f);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(back[i], x[i] * 3.0f);
}

// GemmOpts::bias == gemm then add_bias (f32: the same additions in the same order).
TEST(CpuOps, GemmBiasEqualsGemmThenAddBias) {
  auto be = cpu_backend();
  const int64_t M = 5, N = 7, K = 9;
  auto a = randn(M * K, 31), b = randn(N * K, 32), bias = randn(N, 33);
  std::vector<float> fused(M * N), split(M * N);
  GemmOpts o{.trans_b = Trans::kYes};
  be->gemm(view(split, {M, N}), view(a, {M, K}), view(b, {N, K}), o);
  be->add_bias(view(split, {M, N}), view(bias, {N}));
  o.bias = view(bias, {N});
  be->gemm(view(fused, {M, N}), view(a, {M, K}), view(b, {N, K}), o);
  EXPECT_EQ(fused, split);
}

// GemmOpts::residual: C = A·Bᵀ + residual (+ bias), into a separate C or in place.
TEST(CpuOps, GemmResidual) {
  auto be = cpu_backend();
  const int64_t M = 5, N = 7, K = 9;
  auto a = randn(M * K, 41), b = randn(N * K, 42), res = randn(M * N, 43), bias = randn(N, 44);
  std::vector<float> want(M * N), out(M * N);
  be->gemm(view(want, {M, N}), view(a, {M, K}), view(b, {N, K}), {.trans_b = Trans::kYes});
  for (int64_t i = 0; i < M * N; ++i) want[i] += res[i] + bias[i % N];
  be->gemm(view(out, {M, N}), view(a, {M, K}), view(b, {N, K}),
           {.trans_b = Trans::kYes, .bias = view(bias, {N}), .residual = view(res, {M, N})});
  for (int64_t i = 0; i < M * N; ++i) EXPECT_NEAR(out[i], want[i], 1e-5) << i;
  auto inplace = res;  // residual == C
  be->gemm(view(inplace, {M, N}), view(a, {M, K}), view(b, {N, K}),
           {.trans_b = Trans::kYes, .bias = view(bias, {N}), .residual = view(inplace, {M, N})});
  for (int64_t i = 0; i < M * N; ++i) EXPECT_NEAR(inplace[i], want[i], 1e-5) << i;
}

TEST(CpuOps, AddBiasAndEmbedding) {
  auto be = cpu_backend();
  auto y = randn(6, 7), bias = randn(3, 8);
  auto y0 = y;
  be->add_bias(view(y, {2, 3}), view(bias, {3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], y0[i] + bias[i % 3]);
  auto table = randn(4 * 3, 9);
  std::vector<int32_t> ids = {3, 0, 3};
  std::vector<float> out(9);
  be->embedding(view(out, {3, 3}), view(table, {4, 3}), ids.data());
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(out[t * 3 + i], table[ids[t] * 3 + i]);
}

TEST(CpuOps, AttentionMatchesExplicitMaskReference) {
  auto be = cpu_backend();
  const int64_t B = 2, T = 33, NH = 6, KVH = 2, D = 16, tok = B * T;
  std::vector<int32_t> doc(tok), pos(tok);
  for (int64_t i = 0; i < tok; ++i) doc[i] = static_cast<int32_t>((i % T) / 10 + 100 * (i / T));
  auto q = randn(tok * NH * D, 11), k = randn(tok * KVH * D, 12), v = randn(tok * KVH * D, 13);
  std::vector<float> out(q.size()), lse(B * NH * T);
  const float scale = 0.25f;
  SeqLayout L{.batch = B, .seq = T, .positions = pos.data(), .doc_ids = doc.data()};
  be->attention(view(out, {tok, NH, D}), view(lse, {B, NH, T}), view(q, {tok, NH, D}), view(k, {tok, KVH, D}),
                view(v, {tok, KVH, D}), L, {.num_heads = NH, .num_kv_heads = KVH, .head_dim = D, .scale = scale});
  AttnRef ref{B, T, NH, KVH, D, scale, doc.data()};
  std::vector<double> lse_ref;
  EXPECT_LT(rel_err(out, ref.forward(to_double(q), to_double(k), to_double(v), &lse_ref)), 1e-5);
  EXPECT_LT(rel_err(lse, lse_ref), 1e-5);
  // The first token of each document attends only to itself: out == its v row.
  for (int64_t e = 0; e < D; ++e) EXPECT_FLOAT_EQ(out[(10 * NH + 5) * D + e], v[(10 * KVH + 2 - 1) * D + e]);
}

TEST(CpuOps, AdamWThreeStepsByHand) {
  auto be = cpu_backend();
  Backend::AdamW h{.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 0};
  std::vector<float> p = {1.0f, -2.0f, 0.5f, 0.0f}, m(4, 0.0f), v(4, 0.0f);
  std::vector<std::vector<float>> grads = {{0.1f, -0.2f, 0.0f, 3.0f}, {0.3f, 0.1f, -1e-3f, -3.0f}, {-0.2f, 0.4f, 0.5f, 1.0f}};
  std::vector<double> pr = to_double(p), mr(4, 0.0), vr(4, 0.0);
  for (int s = 1; s <= 3; ++s) {
    h.step = s;
    auto g = grads[s - 1];
    be->adamw(view(p, {4}), view(g, {4}), view(m, {4}), view(v, {4}), h);
    for (int i = 0; i < 4; ++i) {  // textbook form, in double
      const double gi = g[i];
      pr[i] -= double(h.lr) * h.weight_decay * pr[i];
      mr[i] = double(h.beta1) * mr[i] + (1 - double(h.beta1)) * gi;
      vr[i] = double(h.beta2) * vr[i] + (1 - double(h.beta2)) * gi * gi;
      const double mh = mr[i] / (1 - std::pow(double(h.beta1), s)), vh = vr[i] / (1 - std::pow(double(h.beta2), s));
      pr[i] -= h.lr * mh / (std::sqrt(vh) + h.eps);
    }
    if (s == 1) {  // step 1: m_hat = g, v_hat = g^2, so the update is lr * sign(g).
      EXPECT_NEAR(p[0], 1.0 * (1 - 0.001) - 0.01, 1e-6);
    }
    EXPECT_LT(rel_err(p, pr), 1e-6) << "step " << s;
    EXPECT_LT(rel_err(m, mr), 1e-6) << "step " << s;
    EXPECT_LT(rel_err(v, vr), 1e-6) << "step " << s;
  }
}

TEST(CpuOps, DropoutMaskFractionScaleAndRepeatability) {
  auto be = cpu_backend();
  const int64_t n = 200000;
  const float p = 0.3f;
  std::vector<float> x(n, 2.0f), y1(n), y2(n);
  be->dropout(view(y1, {n}), view(x, {n}), p, 1234);
  be->dropout(view(y2, {n}), view(x, {n}), p, 1234);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), n * 4), 0);
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (y1[i] == 0.0f) {
      ++dropped;
    } else {
      EXPECT_EQ(y1[i], 2.0f * (1.0f / (1.0f - p)));
    }
    EXPECT_EQ(y1[i] == 0.0f, !dropout_keep(1234, i, p));
  }
  EXPECT_NEAR(double(dropped) / n, p, 0.005);
  // Another seed gives another mask; the RNG definition is pinned by a known value.
  be->dropout(view(y2, {n}), view(x, {n}), p, 1235);
  EXPECT_NE(std::memcmp(y1.data(), y2.data(), n * 4), 0);
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);  // first output of SplitMix64 seeded with 0
  // A seed read from memory when the op runs (DropoutSeed base: launch plans) is *base ^ value.
  const uint64_t stored = 1234 ^ 0xFEEDull;
  be->dropout(view(y2, {n}), view(x, {n}), p, DropoutSeed(0xFEEDull, &stored));
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), n * 4), 0);
}

// NEFTune's noise (model/model.cc Note [NEFTune]): x + v*m with v = 2u - 1 from the dropout RNG,
// so |noise| <= m, mean ~0, a quarter of the values in each quarter of [-m, m); repeatable per seed.
TEST(CpuOps, UniformNoiseBoundedCenteredAndRepeatable) {
  auto be = cpu_backend();
  const int64_t n = 200000;
  const float m = 0.25f;
  std::vector<float> x(n, 1.0f), y(n, 1.0f);
  be->add_uniform_noise(view(x, {n}), m, 77);
  be->add_uniform_noise(view(y, {n}), m, 77);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), n * 4), 0);
  double sum = 0;
  int64_t quarter[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - 1.0f;
    ASSERT_LE(std::fabs(d), m * (1 + 1e-6f)) << i;
    EXPECT_EQ(x[i], 1.0f + uniform_noise_unit(77, static_cast<uint64_t>(i)) * m);
    sum += d;
    ++quarter[std::min(3, static_cast<int>((d + m) / (0.5f * m)))];
  }
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  for (int64_t q : quarter) EXPECT_NEAR(double(q) / n, 0.25, 0.005);
  be->add_uniform_noise(view(y, {n}), m, 78);  // another seed, other noise
  EXPECT_NE(std::memcmp(x.data(), y.data(), n * 4), 0);
  std::vector<uint16_t> b(n, f32_to_bf16(1.0f));  // bf16: rounded once, after the f32 sum
  be->add_uniform_noise(bview(b, {n}), m, 77);
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(b[i], f32_to_bf16(x[i])) << i;
}

// Same inputs, 1 vs 2 OpenMP threads: identical bits.
TEST(CpuOps, DeterministicAcrossThreadCounts) {
  auto be = cpu_backend();
  const int64_t B = 2, T = 40, NH = 4, KVH = 2, D = 8, tok = B * T, V = 300;
  auto q = randn(tok * NH * D, 21), k = randn(tok * KVH * D, 22), v = randn(tok * KVH * D, 23);
  auto dout = randn(q.size(), 24), logits0 = randn(tok * V, 25, 4.0f);
  std::vector<int32_t> pos(tok), labels(tok);
  for (int64_t i = 0; i < tok; ++i) labels[i] = (i % 7 == 0) ? -100 : static_cast<int32_t>((i * 37) % V);
  SeqLayout L{.batch = B, .seq = T, .positions = pos.data(), .doc_ids = nullptr};
  AttnShape S{.num_heads = NH, .num_kv_heads = KVH, .head_dim = D, .scale = 0.3f};
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> out(q.size()), lse(B * NH * T), dq(q.size()), dk(k.size()), dv(v.size());
    std::vector<float> logits = logits0, loss = {0.0f}, ss = {0.0f};
    Tensor tq = view(q, {tok, NH, D}), tk = view(k, {tok, KVH, D}), tv = view(v, {tok, KVH, D});
    be->attention(view(out, {tok, NH, D}), view(lse, {B, NH, T}), tq, tk, tv, L, S);
    be->attention_backward(view(dq, {tok, NH, D}), view(dk, {tok, KVH, D}), view(dv, {tok, KVH, D}),
                           view(dout, {tok, NH, D}), tq, tk, tv, view(out, {tok, NH, D}), view(lse, {B, NH, T}), L, S);
    be->cross_entropy(view(logits, {tok, V}), view(loss, {1}), labels.data(), 0.01f);
    be->sum_squares(view(ss, {1}), view(logits0, {tok * V}));
    std::vector<float> all;
    for (auto* vec : {&out, &lse, &dq, &dk, &dv, &logits, &loss, &ss}) all.insert(all.end(), vec->begin(), vec->end());
    return all;
  };
  const int saved = omp_get_max_threads();
  // 8 threads > B*KVH groups also switches attention_backward from its fused to its two-pass path.
  auto a = run(1), b = run(2), c = run(2), d = run(8);
  omp_set_num_threads(saved);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  EXPECT_EQ(std::memcmp(b.data(), c.data(), b.size() * 4), 0);
  EXPECT_EQ(std::memcmp(a.data(), d.data(), a.size() * 4), 0);
}

TEST(CpuOps, SumSquaresAccumulates) {
  auto be = cpu_backend();
  const int64_t n = 40000;  // spans several fixed chunks
  auto x = randn(n, 31);
  double ref = 0;
  for (float e : x) ref += double(e) * e;
  std::vector<float> out = {2.0f};
  be->sum_squares(view(out, {1}), view(x, {n}));
  EXPECT_NEAR(out[0], 2.0 + ref, 1e-6 * ref);
}

TEST(CpuOps, MemoryAndEvents) {
  auto be = cpu_backend();
  auto p = be->alloc(100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 64, 0u);
  EXPECT_EQ(be->alloc(SIZE_MAX - 10).status().code(), StatusCode::kResourceExhausted);  // size overflow
#ifndef __SANITIZE_ADDRESS__  // ASan aborts on absurd sizes instead of returning null
  EXPECT_EQ(be->alloc(size_t{1} << 62).status().code(), StatusCode::kResourceExhausted);
#endif
  std::vector<char> src(100, 7), dst(100, 0);
  be->copy_h2d(*p, src.data(), 100, StreamId::kH2D);
  be->copy_d2h(dst.data(), *p, 100, StreamId::kD2H);
  EXPECT_EQ(dst, src);
  auto e = be->create_event();
  be->record(*e, StreamId::kH2D);
  EXPECT_TRUE(be->event_done(*e));
  be->free(*p);
}

}  // namespace
}  // namespace st::test
