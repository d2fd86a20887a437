// Finite-difference gradient checks (oracle: central differences of a double-precision reference
// forward) for every backward of the CPU backend, plus backend-forward vs double-forward checks.
#include "cpu_test_util.h"

namespace st::test {
namespace {

constexpr double kFwdTol = 1e-5;   // f32 backend vs double reference
constexpr double kGradTol = 2e-5;  // f32 analytic backward vs FD(double reference)

TEST(CpuGrad, RmsNorm) {
  auto be = cpu_backend();
  const int64_t R = 5, N = 13;
  const float eps = 1e-5f;
  auto x = randn(R * N, 1), w = randn(N, 2), dy = randn(R * N, 3);
  std::vector<float> y(R * N), rstd(R), dx(R * N);
  be->rmsnorm(view(y, {R, N}), view(rstd, {R}), view(x, {R, N}), view(w, {N}), eps);
  const auto wd = to_double(w), dyd = to_double(dy);
  EXPECT_LT(rel_err(y, rmsnorm_ref(to_double(x), wd, N, eps)), kFwdTol);
  be->rmsnorm_backward(view(dx, {R, N}), view(dy, {R, N}), view(x, {R, N}), view(w, {N}), view(rstd, {R}));
  auto fd = fd_grad(to_double(x), [&](const std::vector<double>& xx) { return dot(rmsnorm_ref(xx, wd, N, eps), dyd); });
  EXPECT_LT(rel_err(dx, fd), kGradTol);
}

TEST(CpuGrad, RopeInverseIsTheGradient) {
  auto be = cpu_backend();
  const int64_t T = 6, H = 3, D = 8;
  std::vector<int32_t> pos = {0, 1, 2, 0, 1, 700};
  auto inv = rope_inv_freq(D);
  auto x = randn(T * H * D, 4), g = randn(T * H * D, 5);
  auto y = x;
  be->rope(view(y, {T, H, D}), pos.data(), view(inv, {D / 2}), false);
  EXPECT_LT(rel_err(y, rope_ref(to_double(x), pos, inv, H, D)), kFwdTol);
  // Linear map: d/dx sum(rope(x) * g) = rope^T(g) = rope(g, inverse).
  auto dx = g;
  be->rope(view(dx, {T, H, D}), pos.data(), view(inv, {D / 2}), true);
  const auto gd = to_double(g);
  auto fd = fd_grad(to_double(x), [&](const std::vector<double>& xx) { return dot(rope_ref(xx, pos, inv, H, D), gd); });
  EXPECT_LT(rel_err(dx, fd), kGradTol);
  // And the inverse undoes the forward.
  be->rope(view(y, {T, H, D}), pos.data(), view(inv, {D / 2}), true);
  EXPECT_LT(rel_err(y, to_double(x)), kFwdTol);
}

TEST(CpuGrad, SwiGlu) {
  auto be = cpu_backend();
  const int64_t R = 4, F = 9;
  auto gate = randn(R * F, 6, 2.0f), up = randn(R * F, 7), dh = randn(R * F, 8);
  std::vector<float> h(R * F), dgate(R * F), dup(R * F);
  auto ref = [](const std::vector<double>& g, const std::vector<double>& u) {
    std::vector<double> y(g.size());
    for (size_t i = 0; i < g.size(); ++i) y[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return y;
  };
  const auto gd = to_double(gate), ud = to_double(up), dhd = to_double(dh);
  be->swiglu(view(h, {R, F}), view(gate, {R, F}), view(up, {R, F}));
  EXPECT_LT(rel_err(h, ref(gd, ud)), kFwdTol);
  be->swiglu_backward(view(dgate, {R, F}), view(dup, {R, F}), view(dh, {R, F}), view(gate, {R, F}), view(up, {R, F}));
  EXPECT_LT(rel_err(dgate, fd_grad(gd, [&](const std::vector<double>& g) { return dot(ref(g, ud), dhd); })), kGradTol);
  EXPECT_LT(rel_err(dup, fd_grad(ud, [&](const std::vector<double>& u) { return dot(ref(gd, u), dhd); })), kGradTol);
}

TEST(CpuGrad, CrossEntropy) {
  auto be = cpu_backend();
  const int64_t R = 5, V = 11;
  const float gs = 0.25f;
  auto logits = randn(R * V, 9, 3.0f);
  std::vector<int32_t> labels = {3, -100, 0, 10, 7};
  const auto ld = to_double(logits);
  std::vector<float> grad = logits, loss = {1.5f};
  be->cross_entropy(view(grad, {R, V}), view(loss, {1}), labels.data(), gs);
  EXPECT_NEAR(loss[0], 1.5 + cross_entropy_ref(ld, labels, V), 1e-5);
  auto fd = fd_grad(ld, [&](const std::vector<double>& l) { return gs * cross_entropy_ref(l, labels, V); });
  EXPECT_LT(rel_err(grad, fd), kGradTol);
  for (int64_t i = 0; i < V; ++i) EXPECT_EQ(grad[V + i], 0.0f) << "ignored row must get zero gradient";
}

// The vocabulary-chunked head (model/head.h Note [vocab-chunked head]) on its own: logits = x Wᵀ
// walked in chunks of C columns with ce_chunk + gemm into acc, then ce_finish. Loss and dx against
// a double whole-vocabulary reference and its finite-difference gradient, for several chunk widths
// (one chunk, uneven chunks, one column per chunk).
TEST(CpuGrad, VocabChunkedCrossEntropy) {
  auto be = cpu_backend();
  const int64_t R = 5, V = 11, H = 6;
  const float gs = 0.25f;
  auto x = randn(R * H, 21, 1.5f), w = randn(V * H, 22, 1.5f);
  std::vector<int32_t> labels = {3, -100, 0, 10, 7};
  std::vector<int32_t> safe = labels;
  for (int32_t& l : safe) l = l < 0 ? 0 : l;
  std::vector<float> w_label(R * H);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < H; ++h) w_label[r * H + h] = w[safe[r] * H + h];
  const auto wd = to_double(w);
  auto ref_loss = [&](const std::vector<double>& xx) {
    std::vector<double> logits(R * V, 0.0);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t v = 0; v < V; ++v)
        for (int64_t h = 0; h < H; ++h) logits[r * V + v] += xx[r * H + h] * wd[v * H + h];
    return cross_entropy_ref(logits, labels, V);
  };
  const double want = ref_loss(to_double(x));
  auto fd = fd_grad(to_double(x), [&](const std::vector<double>& xx) { return gs * ref_loss(xx); });
  for (int64_t C : {V, int64_t{4}, int64_t{1}}) {
    std::vector<float> m(R), s(R), tgt(R), acc(R * H), dx(R * H), loss = {0.5f}, logits(R * C);
    for (int64_t col0 = 0; col0 < V; col0 += C) {
      const int64_t vc = std::min(C, V - col0);
      Tensor lg(logits.data(), DType::kF32, {R, vc});
      Tensor wc(w.data() + col0 * H, DType::kF32, {vc, H});
      be->gemm(lg, view(x, {R, H}), wc, {.trans_b = Trans::kYes});
      be->ce_chunk(lg, view(acc, {R, H}), view(m, {R}), view(s, {R}), view(tgt, {R}), labels.data(), col0);
      be->gemm(view(acc, {R, H}), lg, wc, {.accum = col0 == 0 ? Accum::kOverwrite : Accum::kAdd});
    }
    be->ce_finish(view(dx, {R, H}), view(loss, {1}), view(acc, {R, H}), view(m, {R}), view(s, {R}), view(tgt, {R}),
                  view(w_label, {R, H}), labels.data(), gs, Tensor());
    EXPECT_NEAR(loss[0], 0.5 + want, 1e-5) << "chunk " << C;
    EXPECT_LT(rel_err(dx, fd), kGradTol) << "chunk " << C;
    for (int64_t h = 0; h < H; ++h) EXPECT_EQ(dx[H + h], 0.0f) << "ignored row must get zero gradient";
    // A weight per row (a preference loss's per-sequence factor): row r's gradient is
    // row_scale[r] x the unweighted one, the loss sum unchanged.
    std::vector<float> rs = {2.0f, 5.0f, -0.5f, 0.0f, 1.0f}, dxw(R * H), lossw = {0.5f};
    be->ce_finish(view(dxw, {R, H}), view(lossw, {1}), view(acc, {R, H}), view(m, {R}), view(s, {R}), view(tgt, {R}),
                  view(w_label, {R, H}), labels.data(), gs, view(rs, {R}));
    EXPECT_EQ(lossw[0], loss[0]) << "chunk " << C;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < H; ++h)
        EXPECT_NEAR(dxw[r * H + h], rs[r] * dx[r * H + h], 1e-6 * std::fabs(dx[r * H + h]) + 1e-12)
            << "row " << r << " chunk " << C;
    // Loss only (no acc, no dx): same loss.
    std::vector<float> loss2 = {0.0f};
    for (int64_t col0 = 0; col0 < V; col0 += C) {
      const int64_t vc = std::min(C, V - col0);
      Tensor lg(logits.data(), DType::kF32, {R, vc});
      be->gemm(lg, view(x, {R, H}), Tensor(w.data() + col0 * H, DType::kF32, {vc, H}), {.trans_b = Trans::kYes});
      be->ce_chunk(lg, Tensor(), view(m, {R}), view(s, {R}), view(tgt, {R}), labels.data(), col0);
    }
    be->ce_finish(Tensor(), view(loss2, {1}), Tensor(), view(m, {R}), view(s, {R}), view(tgt, {R}), Tensor(),
                  labels.data(), 0.0f, Tensor());
    EXPECT_NEAR(loss2[0], want, 1e-5) << "chunk " << C;
  }
}

// y[M,N] = x[M,K] W[N,K]^T; dx = dy W; dW = dy^T x, all through gemm's transpose flags.
TEST(CpuGrad, LinearViaGemm) {
  auto be = cpu_backend();
  const int64_t M = 5, K = 7, N = 3;
  auto x = randn(M * K, 10), W = randn(N * K, 11), dy = randn(M * N, 12);
  std::vector<float> y(M * N), dx(M * K), dW(N * K);
  auto ref = [&](const std::vector<double>& xx, const std::vector<double>& ww) {
    std::vector<double> out(M * N, 0.0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) out[m * N + n] += xx[m * K + k] * ww[n * K + k];
    return out;
  };
  const auto xd = to_double(x), wd = to_double(W), dyd = to_double(dy);
  be->gemm(view(y, {M, N}), view(x, {M, K}), view(W, {N, K}), {.trans_b = Trans::kYes});
  EXPECT_LT(rel_err(y, ref(xd, wd)), kFwdTol);
  be->gemm(view(dx, {M, K}), view(dy, {M, N}), view(W, {N, K}), {});
  be->gemm(view(dW, {N, K}), view(dy, {M, N}), view(x, {M, K}), {.trans_a = Trans::kYes});
  EXPECT_LT(rel_err(dx, fd_grad(xd, [&](const std::vector<double>& v) { return dot(ref(v, wd), dyd); })), kGradTol);
  EXPECT_LT(rel_err(dW, fd_grad(wd, [&](const std::vector<double>& v) { return dot(ref(xd, v), dyd); })), kGradTol);
}

struct AttnCase {
  int64_t B, T, NH, KVH, D;
  std::vector<int32_t> doc;  // empty: one document per row
  int64_t window = 0;        // sliding window (0: none)
};

void check_attention_grad(const AttnCase& c, uint32_t seed) {
  auto be = cpu_backend();
  const int64_t tok = c.B * c.T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  auto q = randn(tok * c.NH * c.D, seed), k = randn(tok * c.KVH * c.D, seed + 1), v = randn(tok * c.KVH * c.D, seed + 2);
  auto dout = randn(q.size(), seed + 3);
  std::vector<float> out(q.size()), lse(c.B * c.NH * c.T), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<int32_t> pos(tok, 0);
  SeqLayout L{.batch = c.B, .seq = c.T, .positions = pos.data(), .doc_ids = c.doc.empty() ? nullptr : c.doc.data()};
  AttnShape S{.num_heads = c.NH, .num_kv_heads = c.KVH, .head_dim = c.D, .scale = scale, .window = c.window};
  Tensor tq = view(q, {tok, c.NH, c.D}), tk = view(k, {tok, c.KVH, c.D}), tv = view(v, {tok, c.KVH, c.D});
  Tensor to = view(out, {tok, c.NH, c.D}), tl = view(lse, {c.B, c.NH, c.T});
  be->attention(to, tl, tq, tk, tv, L, S);
  AttnRef ref{c.B, c.T, c.NH, c.KVH, c.D, scale, L.doc_ids, c.window};
  std::vector<double> lse_ref;
  const auto qd = to_double(q), kd = to_double(k), vd = to_double(v), gd = to_double(dout);
  EXPECT_LT(rel_err(out, ref.forward(qd, kd, vd, &lse_ref)), kFwdTol);
  EXPECT_LT(rel_err(lse, lse_ref), kFwdTol);
  be->attention_backward(view(dq, {tok, c.NH, c.D}), view(dk, {tok, c.KVH, c.D}), view(dv, {tok, c.KVH, c.D}),
                         view(dout, {tok, c.NH, c.D}), tq, tk, tv, to, tl, L, S);
  auto loss_q = [&](const std::vector<double>& x) { return dot(ref.forward(x, kd, vd), gd); };
  auto loss_k = [&](const std::vector<double>& x) { return dot(ref.forward(qd, x, vd), gd); };
  auto loss_v = [&](const std::vector<double>& x) { return dot(ref.forward(qd, kd, x), gd); };
  EXPECT_LT(rel_err(dq, fd_grad(qd, loss_q)), kGradTol);
  EXPECT_LT(rel_err(dk, fd_grad(kd, loss_k)), kGradTol);
  EXPECT_LT(rel_err(dv, fd_grad(vd, loss_v)), kGradTol);
}

TEST(CpuGrad, AttentionMha) { check_attention_grad({.B = 1, .T = 4, .NH = 2, .KVH = 2, .D = 4, .doc = {}}, 20); }
TEST(CpuGrad, AttentionGqaOddT) { check_attention_grad({.B = 2, .T = 5, .NH = 4, .KVH = 2, .D = 6, .doc = {}}, 30); }
TEST(CpuGrad, AttentionGqaOneKvHead) { check_attention_grad({.B = 1, .T = 3, .NH = 3, .KVH = 1, .D = 4, .doc = {}}, 40); }
TEST(CpuGrad, AttentionDocPacking) {
  // Row 0: docs of length 3, 2, 2; row 1: one doc of 4 then 3 padding tokens (id -1).
  check_attention_grad({.B = 2, .T = 7, .NH = 4, .KVH = 2, .D = 4, .doc = {0, 0, 0, 1, 1, 2, 2, 5, 5, 5, 5, -1, -1, -1}},
                       50);
}
// Sliding window of 3 over 7 tokens (Mistral-style), alone and with packed documents.
TEST(CpuGrad, AttentionSlidingWindow) {
  check_attention_grad({.B = 2, .T = 7, .NH = 4, .KVH = 2, .D = 4, .doc = {}, .window = 3}, 60);
  check_attention_grad({.B = 1, .T = 7, .NH = 2, .KVH = 1, .D = 4, .doc = {0, 0, 0, 0, 0, 1, 1}, .window = 2}, 70);
}

}  // namespace
}  // namespace st::test
