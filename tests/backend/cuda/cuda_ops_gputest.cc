// CUDA backend vs the CPU reference backend: GEMM, elementwise ops, RMSNorm, RoPE, SwiGLU,
// cross-entropy (whole and vocabulary-chunked), dropout, AdamW, sum of squares; plus
// memory/stream/event behaviour.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "core/code12.h"
#include "gpu_harness.h"

namespace st::test {
namespace {

Backend& G() { return gpu_backend(); }
Backend& C() { return cpu_backend(); }

std::string tag(const char* op, DType t, int64_t a, int64_t b = 0, int64_t c = 0) {
  return std::string(op) + " " + dtype_name(t) + " " + std::to_string(a) + "x" + std::to_string(b) + "x" +
         std::to_string(c);
}

TEST(CudaOps, GemmMatchesCpu) {
  std::mt19937 rng(1);
  struct Shape { int64_t M, N, K; };
  const Shape shapes[] = {{1, 1, 1}, {17, 33, 65}, {129, 64, 200}, {256, 512, 384}, {3, 1000, 17}};
  struct Types { DType ab, c; };
  const Types types[] = {{DType::kF32, DType::kF32}, {DType::kBF16, DType::kBF16},
                         {DType::kBF16, DType::kF32}, {DType::kF32, DType::kBF16}};
  for (const auto& s : shapes)
    for (const auto& ty : types)
      for (int tr = 0; tr < 4; ++tr)
        for (int acc = 0; acc < 2; ++acc) {
          GemmOpts o;
          o.trans_a = (tr & 1) ? Trans::kYes : Trans::kNo;
          o.trans_b = (tr & 2) ? Trans::kYes : Trans::kNo;
          o.alpha = acc ? 0.5f : 1.0f;
          o.accum = acc ? Accum::kAdd : Accum::kOverwrite;
          Twin a(ty.ab, o.trans_a == Trans::kYes ? std::vector<int64_t>{s.K, s.M} : std::vector<int64_t>{s.M, s.K}, rng);
          Twin b(ty.ab, o.trans_b == Trans::kYes ? std::vector<int64_t>{s.N, s.K} : std::vector<int64_t>{s.K, s.N}, rng);
          Twin c(ty.c, {s.M, s.N}, rng, acc ? 1.0f : 0.0f);
          C().gemm(c.cpu(), a.cpu(), b.cpu(), o);
          G().gemm(c.gpu(), a.gpu(), b.gpu(), o);
          const double lim = ty.c == DType::kF32 && ty.ab == DType::kF32 ? 1e-10 : 1e-4;
          EXPECT_TWIN_CLOSE(c, lim, tag("gemm", ty.ab, s.M, s.N, s.K) + " tr=" + std::to_string(tr) +
                                        " acc=" + std::to_string(acc) + " c=" + dtype_name(ty.c));
        }
}

// The bias epilogue (GemmOpts::bias): cuBLASLt's when bias and C share a dtype, else a separate
// add; every A/B/C/bias dtype mix the model uses, transposes, accumulate.
TEST(CudaOps, GemmBiasMatchesCpu) {
  std::mt19937 rng(11);
  struct Shape { int64_t M, N, K; };
  const Shape shapes[] = {{1, 8, 16}, {37, 96, 64}, {512, 1536, 896}, {3, 1000, 17}};
  struct Types { DType ab, c, bias; };
  const Types types[] = {{DType::kBF16, DType::kBF16, DType::kBF16}, {DType::kF32, DType::kF32, DType::kF32},
                         {DType::kBF16, DType::kF32, DType::kBF16}, {DType::kF32, DType::kBF16, DType::kBF16}};
  for (const auto& s : shapes)
    for (const auto& ty : types)
      for (int acc = 0; acc < 2; ++acc) {
        GemmOpts o;
        o.trans_b = Trans::kYes;
        o.accum = acc ? Accum::kAdd : Accum::kOverwrite;
        Twin a(ty.ab, {s.M, s.K}, rng), b(ty.ab, {s.N, s.K}, rng), bias(ty.bias, {s.N}, rng);
        Twin c(ty.c, {s.M, s.N}, rng, acc ? 1.0f : 0.0f);
        GemmOpts oc = o, og = o;
        oc.bias = bias.cpu();
        og.bias = bias.gpu();
        C().gemm(c.cpu(), a.cpu(), b.cpu(), oc);
        G().gemm(c.gpu(), a.gpu(), b.gpu(), og);
        const double lim = ty.c == DType::kF32 && ty.ab == DType::kF32 ? 1e-10 : 1e-4;
        EXPECT_TWIN_CLOSE(c, lim, tag("gemm+bias", ty.ab, s.M, s.N, s.K) + " acc=" + std::to_string(acc) +
                                      " c=" + dtype_name(ty.c) + " bias=" + dtype_name(ty.bias));
      }
}

// GemmOpts::residual (Lt's C != D; in place; the f32 x f32 -> bf16 path; with a bias).
TEST(CudaOps, GemmResidualMatchesCpu) {
  std::mt19937 rng(12);
  struct Types { DType ab, c; };
  const Types types[] = {{DType::kBF16, DType::kBF16}, {DType::kF32, DType::kF32}, {DType::kF32, DType::kBF16},
                         {DType::kBF16, DType::kF32}};
  for (const auto& ty : types)
    for (int64_t M : {1, 37, 512})
      for (int inplace = 0; inplace < 2; ++inplace)
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          const int64_t N = 96, K = 64;
          Twin a(ty.ab, {M, K}, rng), b(ty.ab, {N, K}, rng), res(ty.c, {M, N}, rng), bias(ty.c, {N}, rng);
          Twin c(ty.c, {M, N}, rng);
          Twin& dst = inplace ? res : c;
          GemmOpts oc{.trans_b = Trans::kYes}, og{.trans_b = Trans::kYes};
          oc.residual = res.cpu();
          og.residual = res.gpu();
          if (with_bias) {
            oc.bias = bias.cpu();
            og.bias = bias.gpu();
          }
          C().gemm(dst.cpu(), a.cpu(), b.cpu(), oc);
          G().gemm(dst.gpu(), a.gpu(), b.gpu(), og);
          const double lim = ty.c == DType::kF32 && ty.ab == DType::kF32 ? 1e-10 : 1e-4;
          EXPECT_TWIN_CLOSE(dst, lim, tag("gemm+residual", ty.ab, M, N, K) + " c=" + dtype_name(ty.c) +
                                          " inplace=" + std::to_string(inplace) + " bias=" + std::to_string(with_bias));
        }
}

TEST(CudaOps, ElementwiseMatchCpu) {
  std::mt19937 rng(2);
  for (DType t : {DType::kF32, DType::kBF16})
    for (int64_t rows : {1, 17, 129})
      for (int64_t cols : {1, 33, 896}) {
        const std::string w = tag("elementwise", t, rows, cols);
        Twin y(t, {rows, cols}, rng), bias(DType::kBF16, {cols}, rng);
        C().add_bias(y.cpu(), bias.cpu());
        G().add_bias(y.gpu(), bias.gpu());
        EXPECT_TWIN_CLOSE(y, limit_for(t, 1e-5, 1e-14), "add_bias " + w);
        Twin a(t, {rows, cols}, rng), b(DType::kF32, {rows, cols}, rng), s(t, {rows, cols}, rng, 0.0f);
        C().add(s.cpu(), a.cpu(), b.cpu());
        G().add(s.gpu(), a.gpu(), b.gpu());
        EXPECT_TWIN_CLOSE(s, limit_for(t, 1e-5, 1e-14), "add " + w);
        C().add(a.cpu(), a.cpu(), b.cpu());  // in place
        G().add(a.gpu(), a.gpu(), b.gpu());
        EXPECT_TWIN_CLOSE(a, limit_for(t, 1e-5, 1e-14), "add in place " + w);
        C().scale(a.cpu(), a.cpu(), -0.37f);
        G().scale(a.gpu(), a.gpu(), -0.37f);
        EXPECT_TWIN_CLOSE(a, limit_for(t, 1e-5, 1e-14), "scale " + w);
        for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
          Twin d(dt, {rows, cols}, rng, 0.0f);
          C().convert(d.cpu(), a.cpu());
          G().convert(d.gpu(), a.gpu());
          EXPECT_TWIN_CLOSE(d, 0.0, std::string("convert to ") + dtype_name(dt) + " " + w);
        }
        Twin gate(t, {rows, cols}, rng, 2.0f), up(t, {rows, cols}, rng), h(t, {rows, cols}, rng, 0.0f);
        C().swiglu(h.cpu(), gate.cpu(), up.cpu());
        G().swiglu(h.gpu(), gate.gpu(), up.gpu());
        EXPECT_TWIN_CLOSE(h, limit_for(t, 1e-4, 1e-12), "swiglu " + w);
        Twin dh(t, {rows, cols}, rng), dg(t, {rows, cols}, rng, 0.0f), du(t, {rows, cols}, rng, 0.0f);
        C().swiglu_backward(dg.cpu(), du.cpu(), dh.cpu(), gate.cpu(), up.cpu());
        G().swiglu_backward(dg.gpu(), du.gpu(), dh.gpu(), gate.gpu(), up.gpu());
        EXPECT_TWIN_CLOSE(dg, limit_for(t, 1e-4, 1e-12), "swiglu dgate " + w);
        EXPECT_TWIN_CLOSE(du, limit_for(t, 1e-4, 1e-12), "swiglu dup " + w);
        for (float p : {0.0f, 0.1f, 0.5f, 1.0f}) {
          Twin x(t, {rows, cols}, rng), yd(t, {rows, cols}, rng, 0.0f);
          C().dropout(yd.cpu(), x.cpu(), p, 1234567ull + rows);
          G().dropout(yd.gpu(), x.gpu(), p, 1234567ull + rows);
          EXPECT_TWIN_CLOSE(yd, limit_for(t, 1e-5, 1e-14), "dropout p=" + std::to_string(p) + " " + w);
        }
        // NEFTune's noise (model/model.cc Note [NEFTune]): the CPU's bits exactly.
        Twin nx(t, {rows, cols}, rng);
        C().add_uniform_noise(nx.cpu(), 0.17f, 99ull + cols);
        G().add_uniform_noise(nx.gpu(), 0.17f, 99ull + cols);
        EXPECT_TWIN_CLOSE(nx, 0.0, "add_uniform_noise " + w);
      }
}

// NF4 dequantization (backend.h dequant_nf4): the CUDA kernel gives the CPU reference's bits, for
// random codes and block scales (one block all-zero), f32 and bf16 outputs, small and MLP shapes.
TEST(CudaOps, DequantNf4MatchesCpuBits) {
  std::mt19937 rng(7);
  const std::pair<int64_t, int64_t> shapes[] = {{1, 64}, {96, 160}, {2048, 2048}, {11008, 2048}};
  for (auto [out, in] : shapes) {
    const int64_t n = out * in;
    std::vector<uint8_t> codes(static_cast<size_t>(n / 2));
    for (auto& c : codes) c = static_cast<uint8_t>(rng());
    std::vector<float> absmax(static_cast<size_t>(n / 64));
    std::normal_distribution<float> nd(0.0f, 0.05f);
    for (auto& a : absmax) a = std::fabs(nd(rng));
    absmax[absmax.size() / 2] = 0.0f;
    GuardedDev dc(codes.size()), da(absmax.size() * 4);
    dc.upload(codes.data());
    da.upload(absmax.data());
    const Tensor hc(codes.data(), DType::kU8, {out, in / 2}), ha(absmax.data(), DType::kF32, {n / 64});
    const Tensor gc(dc.data(), DType::kU8, {out, in / 2}), ga(da.data(), DType::kF32, {n / 64});
    for (DType t : {DType::kF32, DType::kBF16}) {
      Twin w(t, {out, in}, rng, 0.0f);  // NaN poison
      C().dequant_nf4(w.cpu(), hc, ha);
      G().dequant_nf4(w.gpu(), gc, ga);
      const std::vector<uint8_t> got = w.gpu_bytes();
      ASSERT_EQ(got.size(), static_cast<size_t>(n) * dtype_size(t));
      EXPECT_EQ(std::memcmp(got.data(), w.cpu().data, got.size()), 0) << tag("dequant_nf4", t, out, in);
      EXPECT_TRUE(w.guards_ok()) << tag("dequant_nf4", t, out, in);
    }
  }
}

// code12 decoding (backend.h decode_code12): the CUDA kernels give the reference's bits -- weights
// with escapes at both ends and inside (NaN, inf, zero, a denormal), sizes that take the vector
// path and odd ones that take the scalar path -- and the time of an MLP-sized decode.
TEST(CudaOps, DecodeCode12MatchesTheReferenceBits) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {1, 7}, {3, 333}, {96, 160}, {2048, 2048}, {11008, 2048}};
  for (auto [out, in] : shapes) {
    const int64_t n = out * in;
    std::vector<uint16_t> w(static_cast<size_t>(n));
    for (auto& x : w) x = f32_to_bf16(nd(rng));
    const uint16_t specials[] = {0x7FC0, 0xFF80, 0x0000, 0x0001, 0x3F80};
    for (size_t k = 0; k < std::size(specials) && static_cast<int64_t>(k) < code12_capacity(n); ++k)
      w[static_cast<size_t>((static_cast<int64_t>(k) * (n / 5 + 1) + (k == 1 ? n - 1 : 0)) % n)] = specials[k];
    std::vector<uint8_t> body(static_cast<size_t>(n)), aux(static_cast<size_t>(code12_aux_bytes(n)));
    ASSERT_TRUE(code12_encode(w.data(), n, body.data(), aux.data(), "w").ok()) << out << "x" << in;
    GuardedDev db(body.size()), dx(aux.size()), dw(static_cast<size_t>(n) * 2);
    db.upload(body.data());
    dx.upload(aux.data());
    const Tensor gw(dw.data(), DType::kBF16, {out, in}), gb(db.data(), DType::kU8, {out, in}),
        ga(dx.data(), DType::kU8, {static_cast<int64_t>(aux.size())});
    G().decode_code12(gw, gb, ga);
    const std::vector<uint8_t> bytes = dw.download();
    std::vector<uint16_t> got(static_cast<size_t>(n));
    std::memcpy(got.data(), bytes.data(), bytes.size());
    EXPECT_EQ(got, w) << "decode_code12 " << out << "x" << in;
    EXPECT_TRUE(dw.guards_intact() && db.guards_intact() && dx.guards_intact()) << out << "x" << in;
    if (n == 11008 * 2048) {
      for (int r = 0; r < 5; ++r) G().decode_code12(gw, gb, ga);  // clocks up
      G().sync_all();
      const int reps = 50;
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) G().decode_code12(gw, gb, ga);
      G().sync_all();
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
      std::printf("decode_code12 %lldx%lld: %.1f us (%.0f GB/s of bf16 out, %.0f GB/s moved)\n",
                  static_cast<long long>(out), static_cast<long long>(in), us, 2.0 * n / us / 1e3,
                  (2.0 * n + n + static_cast<double>(aux.size())) / us / 1e3);
    }
  }
}

TEST(CudaOps, EmbeddingMatchesCpu) {
  std::mt19937 rng(3);
  for (DType t : {DType::kF32, DType::kBF16}) {
    const int64_t V = 1001, H = 65, T = 129;
    Twin table(DType::kBF16, {V, H}, rng), out(t, {T, H}, rng, 0.0f);
    std::vector<int32_t> ids(T);
    for (auto& i : ids) i = static_cast<int32_t>(rng() % V);
    TwinI32 tid(ids);
    C().embedding(out.cpu(), table.cpu(), tid.cpu());
    G().embedding(out.gpu(), table.gpu(), tid.gpu());
    EXPECT_TWIN_CLOSE(out, 0.0, std::string("embedding ") + dtype_name(t));
  }
}

TEST(CudaOps, RmsNormMatchesCpu) {
  std::mt19937 rng(4);
  for (DType t : {DType::kF32, DType::kBF16})
    for (int64_t R : {1, 17, 129})
      for (int64_t N : {64, 896, 4099}) {
        const std::string w = tag("rmsnorm", t, R, N);
        Twin x(t, {R, N}, rng, 3.0f), wt(DType::kBF16, {N}, rng), y(t, {R, N}, rng, 0.0f);
        Twin rstd(DType::kF32, {R}, rng, 0.0f);
        C().rmsnorm(y.cpu(), rstd.cpu(), x.cpu(), wt.cpu(), 1e-6f);
        G().rmsnorm(y.gpu(), rstd.gpu(), x.gpu(), wt.gpu(), 1e-6f);
        EXPECT_TWIN_CLOSE(y, limit_for(t, 1e-4, 1e-12), w);
        EXPECT_TWIN_CLOSE(rstd, 1e-12, w + " rstd");
        Twin dy(t, {R, N}, rng), dx(t, {R, N}, rng, 0.0f);
        C().rmsnorm_backward(dx.cpu(), dy.cpu(), x.cpu(), wt.cpu(), rstd.cpu());
        G().rmsnorm_backward(dx.gpu(), dy.gpu(), x.gpu(), wt.gpu(), rstd.gpu());
        EXPECT_TWIN_CLOSE(dx, limit_for(t, 1e-4, 1e-11), w + " backward");
        // rmsnorm_backward_add: the bits of the backward followed by add (vector and generic
        // kernels: N = 4099 is not a multiple of 8), and the CPU's (which runs the two).
        Twin res(t, {R, N}, rng), fused(t, {R, N}, rng, 0.0f);
        G().add(dx.gpu(), dx.gpu(), res.gpu());
        G().rmsnorm_backward_add(fused.gpu(), dy.gpu(), x.gpu(), wt.gpu(), rstd.gpu(), res.gpu());
        EXPECT_EQ(fused.gpu_bytes(), dx.gpu_bytes()) << w << " backward + add";
        C().rmsnorm_backward_add(fused.cpu(), dy.cpu(), x.cpu(), wt.cpu(), rstd.cpu(), res.cpu());
        EXPECT_TWIN_CLOSE(fused, limit_for(t, 1e-4, 1e-11), w + " backward + add vs CPU");
      }
}

TEST(CudaOps, RopeMatchesCpu) {
  std::mt19937 rng(5);
  for (DType t : {DType::kF32, DType::kBF16})
    for (int64_t D : {20, 32, 36, 64, 128})  // half % 8 != 0 (20, 36): the scalar kernel
      for (bool inverse : {false, true}) {
        const int64_t T = 17, H = 3;
        Twin x(t, {T, H, D}, rng), inv(DType::kF32, {D / 2}, rng);
        std::vector<float> f(D / 2);
        for (int64_t i = 0; i < D / 2; ++i) f[i] = std::pow(10000.0f, -2.0f * i / D);
        inv.set(f);
        std::vector<int32_t> pos(T);
        for (auto& p : pos) p = static_cast<int32_t>(rng() % 4096);
        TwinI32 tp(pos);
        C().rope(x.cpu(), tp.cpu(), inv.cpu(), inverse);
        G().rope(x.gpu(), tp.gpu(), inv.gpu(), inverse);
        EXPECT_TWIN_CLOSE(x, limit_for(t, 1e-4, 1e-11), tag("rope", t, D, inverse));
        // rope_qk (q and k with their own head counts, one launch where it can): the bits of rope on each.
        Twin q(t, {T, 4, D}, rng), k(t, {T, 2, D}, rng), q2(t, {T, 4, D}, rng, 0.0f), k2(t, {T, 2, D}, rng, 0.0f);
        q2.set(q.cpu_vals());  // the same starting values (exact: the host bytes are already rounded)
        k2.set(k.cpu_vals());
        G().rope_qk(q.gpu(), k.gpu(), tp.gpu(), inv.gpu(), inverse);
        G().rope(q2.gpu(), tp.gpu(), inv.gpu(), inverse);
        G().rope(k2.gpu(), tp.gpu(), inv.gpu(), inverse);
        EXPECT_EQ(q.gpu_bytes(), q2.gpu_bytes()) << tag("rope_qk q", t, D, inverse);
        EXPECT_EQ(k.gpu_bytes(), k2.gpu_bytes()) << tag("rope_qk k", t, D, inverse);
      }
}

TEST(CudaOps, CrossEntropyMatchesCpu) {
  std::mt19937 rng(6);
  for (DType t : {DType::kF32, DType::kBF16})
    for (int64_t R : {1, 17, 129})
      for (int64_t V : {1000, 32001}) {
        const std::string w = tag("cross_entropy", t, R, V);
        Twin logits(t, {R, V}, rng, 4.0f), loss(DType::kF32, {1}, rng);
        loss.set({2.0f});
        std::vector<int32_t> labels(R);
        for (int64_t r = 0; r < R; ++r) labels[r] = (r % 5 == 3) ? -100 : static_cast<int32_t>(rng() % V);
        TwinI32 tl(labels);
        C().cross_entropy(logits.cpu(), loss.cpu(), tl.cpu(), 1.0f / 7.0f);
        G().cross_entropy(logits.gpu(), loss.gpu(), tl.gpu(), 1.0f / 7.0f);
        EXPECT_TWIN_CLOSE(logits, limit_for(t, 1e-4, 1e-10), w + " grad");
        EXPECT_TWIN_CLOSE(loss, 1e-11, w + " loss");
      }
}

// ---- vocabulary-chunked cross-entropy (ce_chunk / ce_finish) ----------------------------------

struct CeCase {
  int64_t R, H;
  std::vector<int64_t> widths;  // the vocabulary split: chunk k covers [sum widths[<k], + widths[k])
};

std::vector<int32_t> ce_labels(int64_t R, int64_t V, std::mt19937& rng) {
  std::vector<int32_t> labels(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) labels[r] = (r % 5 == 3) ? -100 : static_cast<int32_t>(rng() % V);
  return labels;
}

// Walks one vocabulary split on both backends, comparing the state after every chunk, then
// ce_finish. The acc update between chunks (p · W_chunk in the model) is stood in for by fresh
// values after the first chunk and a shared f32 add after the others. The state starts as NaN
// poison: the first chunk must not read it. The loss is also checked against the monolithic CPU
// cross_entropy over the concatenated logits (an oracle independent of the chunked code).
void check_chunked_ce(DType t, DType wt, const CeCase& c, bool train, std::mt19937& rng) {
  int64_t V = 0;
  for (int64_t w : c.widths) V += w;
  const int64_t R = c.R, H = c.H;
  const std::string what = tag("ce_chunked", t, R, V, H) + (train ? " train" : " infer");
  const std::vector<int32_t> labels = ce_labels(R, V, rng);
  TwinI32 tl(labels);
  Twin m(DType::kF32, {R}, rng, 0.0f), s(DType::kF32, {R}, rng, 0.0f), tgt(DType::kF32, {R}, rng, 0.0f);
  Twin acc(DType::kF32, {R, H}, rng, 0.0f);
  const std::vector<uint8_t> poison = acc.gpu_bytes();
  std::vector<float> full(static_cast<size_t>(R * V));  // the whole logits row, for the oracle
  int64_t col0 = 0;
  for (size_t k = 0; k < c.widths.size(); ++k) {
    const int64_t cw = c.widths[k];
    const std::string w = what + " chunk " + std::to_string(k) + " (C=" + std::to_string(cw) + ")";
    // Growing scale: later chunks often raise the row max (rescale path), sometimes not (skip path).
    Twin logits(t, {R, cw}, rng, 2.0f + 2.0f * static_cast<float>(k));
    const std::vector<float> lv = logits.cpu_vals();
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < cw; ++j) full[r * V + col0 + j] = lv[r * cw + j];
    C().ce_chunk(logits.cpu(), train ? acc.cpu() : Tensor(), m.cpu(), s.cpu(), tgt.cpu(), tl.cpu(), col0);
    G().ce_chunk(logits.gpu(), train ? acc.gpu() : Tensor(), m.gpu(), s.gpu(), tgt.gpu(), tl.gpu(), col0);
    EXPECT_TWIN_CLOSE(logits, train ? limit_for(t, 1e-4, 1e-10) : 0.0, w + " p");
    EXPECT_TWIN_CLOSE(m, 0.0, w + " m");
    EXPECT_TWIN_CLOSE(s, 1e-10, w + " s");
    EXPECT_TWIN_CLOSE(tgt, 0.0, w + " target");
    if (!train) {
      EXPECT_TRUE(acc.gpu_bytes() == poison) << w << ": inference touched acc";
    } else if (k == 0) {
      EXPECT_TRUE(acc.gpu_bytes() == poison) << w << ": the first chunk touched acc";
    } else {
      EXPECT_TWIN_CLOSE(acc, 1e-10, w + " acc");
    }
    if (train) {
      Twin delta(DType::kF32, {R, H}, rng);
      if (k == 0) {
        acc.set(delta.cpu_vals());
      } else {
        C().add(acc.cpu(), acc.cpu(), delta.cpu());
        G().add(acc.gpu(), acc.gpu(), delta.gpu());
      }
    }
    col0 += cw;
  }
  Twin loss(DType::kF32, {1}, rng);
  loss.set({2.0f});
  const float gs = 1.0f / 7.0f;
  if (train) {
    Twin wl(wt, {R, H}, rng), dx(t, {R, H}, rng, 0.0f);
    // Every other row weighted (a preference loss's per-sequence factors, negative ones too).
    Twin rs(DType::kF32, {R}, rng), dxw(t, {R, H}, rng, 0.0f), lossw(DType::kF32, {1}, rng);
    std::vector<float> rsv(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) rsv[static_cast<size_t>(r)] = r % 2 ? -0.75f : 1.5f;
    rs.set(rsv);
    lossw.set({2.0f});
    C().ce_finish(dxw.cpu(), lossw.cpu(), acc.cpu(), m.cpu(), s.cpu(), tgt.cpu(), wl.cpu(), tl.cpu(), gs, rs.cpu());
    G().ce_finish(dxw.gpu(), lossw.gpu(), acc.gpu(), m.gpu(), s.gpu(), tgt.gpu(), wl.gpu(), tl.gpu(), gs, rs.gpu());
    EXPECT_TWIN_CLOSE(dxw, limit_for(t, 1e-4, 1e-9), what + " dx with row_scale");
    C().ce_finish(dx.cpu(), loss.cpu(), acc.cpu(), m.cpu(), s.cpu(), tgt.cpu(), wl.cpu(), tl.cpu(), gs, Tensor());
    G().ce_finish(dx.gpu(), loss.gpu(), acc.gpu(), m.gpu(), s.gpu(), tgt.gpu(), wl.gpu(), tl.gpu(), gs, Tensor());
    EXPECT_TWIN_CLOSE(dx, limit_for(t, 1e-4, 1e-9), what + " dx (w_label " + dtype_name(wt) + ")");
  } else {
    C().ce_finish(Tensor(), loss.cpu(), Tensor(), m.cpu(), s.cpu(), tgt.cpu(), Tensor(), tl.cpu(), gs, Tensor());
    G().ce_finish(Tensor(), loss.gpu(), Tensor(), m.gpu(), s.gpu(), tgt.gpu(), Tensor(), tl.gpu(), gs, Tensor());
  }
  EXPECT_TWIN_CLOSE(loss, 1e-10, what + " loss");
  Twin ref_logits(DType::kF32, {R, V}, rng), ref_loss(DType::kF32, {1}, rng);
  ref_logits.set(full);
  ref_loss.set({2.0f});
  C().cross_entropy(ref_logits.cpu(), ref_loss.cpu(), tl.cpu(), 1.0f);
  EXPECT_TRUE(nmse_ok(loss.gpu_vals(), ref_loss.cpu_vals(), 1e-10)) << what << " loss vs monolithic cross_entropy";
}

TEST(CudaOps, ChunkedCrossEntropyMatchesCpu) {
  std::mt19937 rng(9);
  const CeCase cases[] = {
      {1, 8, {1, 1, 1}},                  // one-column chunks
      {3, 13, {7, 7, 3}},                 // odd widths: generic kernels; H % 4 != 0: scalar acc / dx
      {64, 96, {1000, 1000, 1001}},       // 8-wide path, then an odd last chunk
      {300, 576, {16384, 4480}},          // a real vocab split (ragged last chunk)
      {64, 8, {16384, 16384, 16384}},
      {300, 96, {1000}},                  // a single chunk
      {17, 64, {20000, 20000}},           // wider than the register-cached kernel: the two-read path
  };
  int i = 0;
  for (DType t : {DType::kF32, DType::kBF16})
    for (const CeCase& c : cases)
      for (bool train : {true, false}) {
        const DType wt = (i++ % 2) ? DType::kBF16 : DType::kF32;
        check_chunked_ce(t, wt, c, train, rng);
      }
}

// Two GPU runs of the same split on the same inputs give the same bytes everywhere.
TEST(CudaOps, ChunkedCrossEntropyDeterministic) {
  std::mt19937 rng(10);
  const int64_t R = 300, H = 576;
  const std::vector<int64_t> widths = {16384, 16384, 1000};
  for (DType t : {DType::kBF16, DType::kF32}) {
    const std::vector<int32_t> labels = ce_labels(R, 16384 * 2 + 1000, rng);
    TwinI32 tl(labels);
    std::vector<std::vector<float>> chunk_vals, deltas;
    for (size_t k = 0; k < widths.size(); ++k) {
      chunk_vals.push_back(Twin(t, {R, widths[k]}, rng, 2.0f + 2.0f * static_cast<float>(k)).cpu_vals());
      deltas.push_back(Twin(DType::kF32, {R, H}, rng).cpu_vals());
    }
    Twin wl(DType::kBF16, {R, H}, rng);
    std::vector<std::vector<uint8_t>> out[2];
    for (int run = 0; run < 2; ++run) {
      Twin m(DType::kF32, {R}, rng, 0.0f), s(DType::kF32, {R}, rng, 0.0f), tgt(DType::kF32, {R}, rng, 0.0f);
      Twin acc(DType::kF32, {R, H}, rng, 0.0f), dx(t, {R, H}, rng, 0.0f), loss(DType::kF32, {1}, rng);
      loss.set({0.0f});
      int64_t col0 = 0;
      for (size_t k = 0; k < widths.size(); ++k) {
        Twin logits(t, {R, widths[k]}, rng);
        logits.set(chunk_vals[k]);
        G().ce_chunk(logits.gpu(), acc.gpu(), m.gpu(), s.gpu(), tgt.gpu(), tl.gpu(), col0);
        out[run].push_back(logits.gpu_bytes());
        out[run].push_back(acc.gpu_bytes());
        Twin delta(DType::kF32, {R, H}, rng);
        delta.set(deltas[k]);
        if (k == 0) {
          acc.set(deltas[k]);
        } else {
          G().add(acc.gpu(), acc.gpu(), delta.gpu());
        }
        col0 += widths[k];
      }
      G().ce_finish(dx.gpu(), loss.gpu(), acc.gpu(), m.gpu(), s.gpu(), tgt.gpu(), wl.gpu(), tl.gpu(), 0.5f, Tensor());
      for (const Twin* x : {&m, &s, &tgt, &acc, &dx, &loss}) out[run].push_back(x->gpu_bytes());
      EXPECT_TRUE(nmse_ok(loss.gpu_vals(), {1.0f}, 1e30)) << "loss must be finite";
    }
    ASSERT_EQ(out[0].size(), out[1].size());
    for (size_t i = 0; i < out[0].size(); ++i)
      EXPECT_TRUE(out[0][i] == out[1][i]) << "ce_chunked " << dtype_name(t) << " output #" << i << " differs";
  }
}

TEST(CudaOps, AdamWAndSumSquaresMatchCpu) {
  std::mt19937 rng(7);
  for (int64_t n : {1, 1000, (1 << 20) + 3}) {
    Twin p(DType::kF32, {n}, rng), m(DType::kF32, {n}, rng, 0.1f), v(DType::kF32, {n}, rng, 0.1f);
    std::vector<float> vv = v.cpu_vals();
    for (auto& x : vv) x = x * x;
    v.set(vv);
    for (int64_t step = 1; step <= 3; ++step) {
      Twin g(DType::kF32, {n}, rng);
      const Backend::AdamW h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step};
      C().adamw(p.cpu(), g.cpu(), m.cpu(), v.cpu(), h);
      G().adamw(p.gpu(), g.gpu(), m.gpu(), v.gpu(), h);
    }
    EXPECT_TWIN_CLOSE(p, 1e-12, "adamw p n=" + std::to_string(n));
    EXPECT_TWIN_CLOSE(m, 1e-12, "adamw m n=" + std::to_string(n));
    EXPECT_TWIN_CLOSE(v, 1e-12, "adamw v n=" + std::to_string(n));
    Twin out(DType::kF32, {1}, rng);
    out.set({1.5f});
    C().sum_squares(out.cpu(), p.cpu());
    G().sum_squares(out.gpu(), p.gpu());
    EXPECT_TWIN_CLOSE(out, 1e-11, "sum_squares n=" + std::to_string(n));
  }
}

TEST(CudaOps, DeterministicBits) {
  std::mt19937 rng(8);
  Twin a(DType::kBF16, {512, 768}, rng), b(DType::kBF16, {768, 1024}, rng);
  Twin c1(DType::kF32, {512, 1024}, rng, 0.0f), c2(DType::kF32, {512, 1024}, rng, 0.0f);
  G().gemm(c1.gpu(), a.gpu(), b.gpu(), {});
  G().gemm(c2.gpu(), a.gpu(), b.gpu(), {});
  EXPECT_EQ(c1.gpu_bytes(), c2.gpu_bytes()) << "gemm";
  Twin x(DType::kF32, {3 << 20}, rng), s1(DType::kF32, {1}, rng), s2(DType::kF32, {1}, rng);
  s1.set({0.0f});
  s2.set({0.0f});
  G().sum_squares(s1.gpu(), x.gpu());
  G().sum_squares(s2.gpu(), x.gpu());
  EXPECT_EQ(s1.gpu_bytes(), s2.gpu_bytes()) << "sum_squares";
  std::vector<int32_t> labels(64);
  for (auto& l : labels) l = static_cast<int32_t>(rng() % 5000);
  TwinI32 tl(labels);
  Twin l1(DType::kBF16, {64, 5000}, rng), l2(DType::kBF16, {64, 5000}, rng);
  l2.set(l1.cpu_vals());
  Twin ls1(DType::kF32, {1}, rng), ls2(DType::kF32, {1}, rng);
  ls1.set({0.0f});
  ls2.set({0.0f});
  G().cross_entropy(l1.gpu(), ls1.gpu(), tl.gpu(), 1.0f);
  G().cross_entropy(l2.gpu(), ls2.gpu(), tl.gpu(), 1.0f);
  EXPECT_EQ(l1.gpu_bytes(), l2.gpu_bytes()) << "cross_entropy grad";
  EXPECT_EQ(ls1.gpu_bytes(), ls2.gpu_bytes()) << "cross_entropy loss";
}

TEST(CudaMemory, OomIsResourceExhaustedAndRecoverable) {
  auto r = G().alloc(size_t{1} << 50);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  auto ok = G().alloc(1 << 20);  // the sticky error was cleared
  ASSERT_TRUE(ok.ok());
  G().free(*ok);
}

TEST(CudaMemory, PinnedStreamsAndEvents) {
  const size_t n = 1 << 22;
  auto pin = G().alloc_host_pinned(n);
  ASSERT_TRUE(pin.ok());
  auto* hp = static_cast<uint8_t*>(*pin);
  for (size_t i = 0; i < n; ++i) hp[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint8_t> reg(n, 0);
  ASSERT_TRUE(G().register_host(reg.data(), n).ok());
  auto d1 = G().alloc(n), d2 = G().alloc(n);
  ASSERT_TRUE(d1.ok() && d2.ok());
  auto e1 = G().create_event(), e2 = G().create_event();
  G().copy_h2d(*d1, hp, n, StreamId::kH2D);
  G().record(*e1, StreamId::kH2D);
  G().wait(StreamId::kCompute, *e1);
  G().copy_d2d(*d2, *d1, n, StreamId::kCompute);
  G().record(*e2, StreamId::kCompute);
  G().wait(StreamId::kD2H, *e2);
  G().copy_d2h(reg.data(), *d2, n, StreamId::kD2H);
  G().sync_stream(StreamId::kD2H);
  EXPECT_TRUE(G().event_done(*e1));
  G().sync_event(*e2);
  EXPECT_TRUE(G().event_done(*e2));
  EXPECT_EQ(std::memcmp(reg.data(), hp, n), 0);
  G().memset_zero(*d2, n, StreamId::kCompute);
  G().sync_all();
  G().copy_d2h(reg.data(), *d2, n, StreamId::kD2H);
  G().sync_all();
  EXPECT_EQ(reg[12345], 0);
  G().unregister_host(reg.data());
  G().free(*d1);
  G().free(*d2);
  G().free_host_pinned(hp);
  EXPECT_NE(G().description().find("cuda:0"), std::string::npos);
}

}  // namespace
}  // namespace st::test
