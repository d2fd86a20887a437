// CUDA DoRA ops (backend.h "DoRA", dora_ops.cu) vs the CPU reference (cpu/detail/dora_ops.cc):
// f32 and bf16 activations, odd shapes (rows not a multiple of the block, N = 1 and 37, widths
// that are not a multiple of 8, in = 2048 + 8), ranks 1 to 100 (padded, exact and chunked rank
// tiles); bias / residual absent or present; g aliasing v or dy; dmag accumulating into non-zero
// values; misaligned views (the scalar kernels) giving the vector kernels' bits; determinism (the
// same inputs twice -> identical bytes); guard bytes. Tolerances: f32 math outputs (norm, scale,
// dmag) relative 1e-5 of the sum of magnitudes behind them (the CPU sums in double, the GPU in
// f32); rounded outputs (y, g) within 1 ulp of their dtype (both sides round the same f32 math
// once, so they are expected bit-equal: the mismatches are counted and printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_harness.h"

namespace st::test {
namespace {

Backend& G() { return gpu_backend(); }
Backend& C() { return cpu_backend(); }

// [rows, cols] at element offset `off` of a twin's host or device memory.
Tensor view(const Tensor& base, int64_t off, int64_t rows, int64_t cols) {
  return Tensor(static_cast<char*>(base.data) + off * static_cast<int64_t>(dtype_size(base.dtype)), base.dtype,
                {rows, cols});
}

// |got - ref| <= tol * mag[i] (mag: the size of the terms behind ref[i]); non-finite fails.
::testing::AssertionResult rel_ok(const std::vector<float>& got, const std::vector<float>& ref,
                                  const std::vector<double>& mag, double tol) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.size();
  double worst = 0.0;
  size_t wi = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(ref[i]))
      return ::testing::AssertionFailure() << "non-finite at " << i << ": got " << got[i] << " ref " << ref[i];
    const double e = std::fabs(static_cast<double>(got[i]) - ref[i]) / std::max(mag[i], 1e-30);
    if (e > worst) worst = e, wi = i;
  }
  if (worst > tol)
    return ::testing::AssertionFailure() << "relative error " << worst << " > " << tol << " at " << wi << ": got "
                                         << got[wi] << " ref " << ref[wi];
  return ::testing::AssertionSuccess();
}

std::vector<double> abs_of(const std::vector<float>& v) {
  std::vector<double> m(v.size());
  for (size_t i = 0; i < v.size(); ++i) m[i] = std::fabs(static_cast<double>(v[i]));
  return m;
}

// Distance in units in the last place of dtype t (values exactly representable in t).
int64_t ulps(float a, float b, DType t) {
  auto ordered = [t](float f) -> int64_t {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (t == DType::kBF16) u >>= 16;
    const int64_t sign_bit = t == DType::kBF16 ? (1 << 15) : (int64_t{1} << 31);
    const int64_t mag = static_cast<int64_t>(u) & (sign_bit - 1);
    return (static_cast<int64_t>(u) & sign_bit) ? -mag : mag;
  };
  return std::llabs(ordered(a) - ordered(b));
}

// Every element within max_ulp; *inexact counts the elements that are not bit-equal.
::testing::AssertionResult ulp_ok(const std::vector<float>& got, const std::vector<float>& ref, DType t, int max_ulp,
                                  int64_t* inexact) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.size();
  *inexact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(ref[i]))
      return ::testing::AssertionFailure() << "non-finite at " << i << ": got " << got[i] << " ref " << ref[i];
    const int64_t d = ulps(got[i], ref[i], t);
    *inexact += d != 0;
    if (d > max_ulp)
      return ::testing::AssertionFailure() << d << " ulp at " << i << ": got " << got[i] << " ref " << ref[i];
  }
  return ::testing::AssertionSuccess();
}

void report_inexact(int64_t inexact, int64_t n, const std::string& what) {
  if (inexact > 0) std::printf("  note: %s: %lld of %lld elements 1 ulp off the CPU\n", what.c_str(),
                               static_cast<long long>(inexact), static_cast<long long>(n));
}

// Positive values around 1 (norms, magnitudes).
std::vector<float> positive(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// ---- dora_norm ------------------------------------------------------------------------------
struct NormShape { int64_t out, in, r; };

std::string norm_tag(const NormShape& s, DType t, bool with_scale) {
  return std::string("dora_norm ") + dtype_name(t) + " out=" + std::to_string(s.out) + " in=" +
         std::to_string(s.in) + " r=" + std::to_string(s.r) + (with_scale ? " +scale" : "");
}

TEST(DoraOps, NormMatchesCpu) {
  std::mt19937 rng(21);
  // 1000 / 37 / 1: rows not a multiple of the 32-row block; 2056 and 2047: in = 2048 + 8 and odd
  // (scalar W loads); r 1/3/8 pad to the 8 tile, 16 exact, 64 two chunks of 32, 100 four (padded);
  // 2048 x 2048 splits the columns over blocks; 11008 x 2048 is the timed shape.
  const NormShape shapes[] = {{1, 2056, 8},    {37, 2056, 16},  {1000, 2048, 16}, {37, 2047, 16}, {33, 5, 3},
                              {100, 96, 64},   {70, 300, 100},  {64, 1024, 1},    {2048, 2048, 16},
                              {1000, 2056, 64}, {11008, 2048, 16}};
  for (const NormShape& s : shapes)
    for (DType t : {DType::kF32, DType::kBF16})
      for (bool with_scale : {false, true}) {
        const std::string what = norm_tag(s, t, with_scale);
        Twin w(t, {s.out, s.in}, rng, 0.05f), a(DType::kF32, {s.r, s.in}, rng, 0.1f),
            b(DType::kF32, {s.out, s.r}, rng, 0.1f);
        Twin mag(DType::kF32, {s.out}, rng), norm(DType::kF32, {s.out}, rng, 0.0f),
            scale(DType::kF32, {s.out}, rng, 0.0f);
        mag.set(positive(s.out, rng));
        const float sc = 2.0f;
        C().dora_norm(norm.cpu(), with_scale ? scale.cpu() : Tensor(), w.cpu(), a.cpu(), b.cpu(),
                      with_scale ? mag.cpu() : Tensor(), sc);
        G().dora_norm(norm.gpu(), with_scale ? scale.gpu() : Tensor(), w.gpu(), a.gpu(), b.gpu(),
                      with_scale ? mag.gpu() : Tensor(), sc);
        const auto nref = norm.cpu_vals();
        EXPECT_TRUE(rel_ok(norm.gpu_vals(), nref, abs_of(nref), 1e-5)) << what;
        EXPECT_TRUE(norm.guards_ok()) << what << ": norm guards";
        if (with_scale) {
          const auto sref = scale.cpu_vals();
          EXPECT_TRUE(rel_ok(scale.gpu_vals(), sref, abs_of(sref), 1e-5)) << what << " (scale)";
          EXPECT_TRUE(scale.guards_ok()) << what << ": scale guards";
        } else {
          // Not written: still the NaN poison.
          const auto sv = scale.gpu_vals();
          EXPECT_TRUE(std::all_of(sv.begin(), sv.end(), [](float x) { return std::isnan(x); })) << what;
        }
        const auto n1 = norm.gpu_bytes(), s1 = scale.gpu_bytes();
        G().dora_norm(norm.gpu(), with_scale ? scale.gpu() : Tensor(), w.gpu(), a.gpu(), b.gpu(),
                      with_scale ? mag.gpu() : Tensor(), sc);
        EXPECT_TRUE(n1 == norm.gpu_bytes() && s1 == scale.gpu_bytes()) << what << ": not deterministic";
      }
}

// The scalar W path (a view one element off 16-byte alignment) gives the vector path's bits.
TEST(DoraOps, NormMisalignedGivesSameBits) {
  std::mt19937 rng(22);
  for (DType t : {DType::kF32, DType::kBF16}) {
    const NormShape s{300, 1024, 16};
    Twin wa(t, {s.out, s.in}, rng, 0.05f), wb(t, {s.out * s.in + 1}, rng);
    std::vector<float> vals = wa.cpu_vals();
    vals.insert(vals.begin(), 0.0f);
    wb.set(vals);
    Twin a(DType::kF32, {s.r, s.in}, rng, 0.1f), b(DType::kF32, {s.out, s.r}, rng, 0.1f);
    Twin n0(DType::kF32, {s.out}, rng, 0.0f), n1(DType::kF32, {s.out}, rng, 0.0f);
    G().dora_norm(n0.gpu(), Tensor(), wa.gpu(), a.gpu(), b.gpu(), Tensor(), 0.5f);
    G().dora_norm(n1.gpu(), Tensor(), view(wb.gpu(), 1, s.out, s.in), a.gpu(), b.gpu(), Tensor(), 0.5f);
    EXPECT_TRUE(n0.gpu_bytes() == n1.gpu_bytes()) << "dora_norm " << dtype_name(t) << ": misaligned W changed bits";
    C().dora_norm(n1.cpu(), Tensor(), wa.cpu(), a.cpu(), b.cpu(), Tensor(), 0.5f);
    const auto ref = n1.cpu_vals();
    EXPECT_TRUE(rel_ok(n1.gpu_vals(), ref, abs_of(ref), 1e-5)) << dtype_name(t);
  }
}

// ---- dora_combine ---------------------------------------------------------------------------
enum class Extra { kNone, kSameDtype, kF32 };

TEST(DoraOps, CombineMatchesCpu) {
  std::mt19937 rng(23);
  struct S { int64_t N, out; };
  // 1001 and 5: widths that are not a multiple of 8 (the scalar kernel).
  for (const S& s : {S{1, 11008}, S{37, 1000}, S{37, 1001}, S{3, 8}, S{2, 5}, S{512, 4864}})
    for (DType t : {DType::kF32, DType::kBF16})
      for (Extra bias : {Extra::kNone, Extra::kSameDtype, Extra::kF32})
        for (Extra res : {Extra::kNone, Extra::kSameDtype}) {
          if (bias == Extra::kF32 && t == DType::kF32) continue;
          const std::string what = std::string("dora_combine ") + dtype_name(t) + " N=" + std::to_string(s.N) +
                                   " out=" + std::to_string(s.out) + (bias == Extra::kNone ? "" : " +bias") +
                                   (bias == Extra::kF32 ? "(f32)" : "") + (res == Extra::kNone ? "" : " +res");
          Twin y(t, {s.N, s.out}, rng), y2(t, {s.N, s.out}, rng), scale(DType::kF32, {s.out}, rng);
          Twin bt(bias == Extra::kF32 ? DType::kF32 : t, {s.out}, rng), rt(t, {s.N, s.out}, rng);
          y2.set(y.cpu_vals());
          const Tensor bc = bias == Extra::kNone ? Tensor() : bt.cpu(), bg = bias == Extra::kNone ? Tensor() : bt.gpu();
          const Tensor rc = res == Extra::kNone ? Tensor() : rt.cpu(), rg = res == Extra::kNone ? Tensor() : rt.gpu();
          C().dora_combine(y.cpu(), scale.cpu(), bc, rc);
          G().dora_combine(y.gpu(), scale.gpu(), bg, rg);
          int64_t inexact = 0;
          EXPECT_TRUE(ulp_ok(y.gpu_vals(), y.cpu_vals(), t, 1, &inexact)) << what;
          report_inexact(inexact, y.numel(), what);
          EXPECT_TRUE(y.guards_ok()) << what << ": guards";
          G().dora_combine(y2.gpu(), scale.gpu(), bg, rg);
          EXPECT_TRUE(y.gpu_bytes() == y2.gpu_bytes()) << what << ": not deterministic";
        }
}

TEST(DoraOps, CombineMisalignedGivesSameBits) {
  std::mt19937 rng(24);
  const int64_t N = 37, out = 1000;
  for (DType t : {DType::kF32, DType::kBF16}) {
    Twin y(t, {N, out}, rng), yb(t, {N * out + 1}, rng), res(t, {N, out}, rng), scale(DType::kF32, {out}, rng);
    Twin bias(t, {out}, rng);
    std::vector<float> vals = y.cpu_vals();
    vals.insert(vals.begin(), 0.0f);
    yb.set(vals);
    G().dora_combine(y.gpu(), scale.gpu(), bias.gpu(), res.gpu());
    G().dora_combine(view(yb.gpu(), 1, N, out), scale.gpu(), bias.gpu(), res.gpu());
    const auto a = y.gpu_bytes(), b = yb.gpu_bytes();
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin() + static_cast<ptrdiff_t>(dtype_size(t))))
        << "dora_combine " << dtype_name(t) << ": misaligned y changed bits";
    EXPECT_TRUE(yb.guards_ok());
  }
}

// ---- dora_backward --------------------------------------------------------------------------
enum class Alias { kNone, kV, kDy };

const char* alias_name(Alias a) { return a == Alias::kNone ? "" : a == Alias::kV ? " g=v" : " g=dy"; }

// Σ_n |dy·v| / norm + |dmag0| per column: the size of what dmag's error is measured against.
std::vector<double> dmag_magnitude(const std::vector<float>& dy, const std::vector<float>& v,
                                   const std::vector<float>& norm, const std::vector<float>& dmag0, int64_t N,
                                   int64_t out) {
  std::vector<double> m(static_cast<size_t>(out), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) m[o] += std::fabs(static_cast<double>(dy[n * out + o]) * v[n * out + o]);
  for (int64_t o = 0; o < out; ++o) m[o] = m[o] / norm[o] + std::fabs(static_cast<double>(dmag0[o]));
  return m;
}

struct BwdShape { int64_t N, out; };

TEST(DoraOps, BackwardMatchesCpu) {
  std::mt19937 rng(25);
  // N 0 (dmag += 0 / norm), 1, 37; width 1001 / 5 (scalar kernel); 3000 x 64 and 20000 x 8 split N
  // over many blocks; 512 x 11008 and 4096 x 11008 the layer shapes.
  const BwdShape shapes[] = {{0, 40},   {1, 96},      {37, 1000},   {37, 1001},  {3, 5},
                             {3000, 64}, {20000, 8}, {512, 11008}, {4096, 11008}};
  for (const BwdShape& s : shapes)
    for (DType t : {DType::kF32, DType::kBF16})
      for (Alias al : {Alias::kNone, Alias::kV, Alias::kDy}) {
        if (s.N == 4096 && (t == DType::kF32 || al == Alias::kDy)) continue;  // time, memory
        const std::string what = std::string("dora_backward ") + dtype_name(t) + " N=" + std::to_string(s.N) +
                                 " out=" + std::to_string(s.out) + alias_name(al);
        Twin dy(t, {s.N, s.out}, rng), v(t, {s.N, s.out}, rng), gs(t, {al == Alias::kNone ? s.N : 0, s.out}, rng, 0.0f);
        Twin dmag(DType::kF32, {s.out}, rng), scale(DType::kF32, {s.out}, rng), norm(DType::kF32, {s.out}, rng);
        norm.set(positive(s.out, rng));
        Twin& g = al == Alias::kNone ? gs : al == Alias::kV ? v : dy;
        const auto dy0 = dy.cpu_vals(), v0 = v.cpu_vals(), dmag0 = dmag.cpu_vals();
        C().dora_backward(g.cpu(), dmag.cpu(), dy.cpu(), v.cpu(), scale.cpu(), norm.cpu());
        G().dora_backward(g.gpu(), dmag.gpu(), dy.gpu(), v.gpu(), scale.gpu(), norm.gpu());
        const auto mag = dmag_magnitude(dy0, v0, norm.cpu_vals(), dmag0, s.N, s.out);
        EXPECT_TRUE(rel_ok(dmag.gpu_vals(), dmag.cpu_vals(), mag, 1e-5)) << what << " (dmag)";
        EXPECT_TRUE(dmag.guards_ok()) << what << ": dmag guards";
        int64_t inexact = 0;
        EXPECT_TRUE(ulp_ok(g.gpu_vals(), g.cpu_vals(), t, 1, &inexact)) << what << " (g)";
        report_inexact(inexact, g.numel(), what + " g");
        EXPECT_TRUE(g.guards_ok()) << what << ": g guards";
        // The same inputs again (restored where g overwrote them): identical bytes.
        const auto g1 = g.gpu_bytes(), m1 = dmag.gpu_bytes();
        dy.set(dy0);
        v.set(v0);
        dmag.set(dmag0);
        G().dora_backward(g.gpu(), dmag.gpu(), dy.gpu(), v.gpu(), scale.gpu(), norm.gpu());
        EXPECT_TRUE(g1 == g.gpu_bytes() && m1 == dmag.gpu_bytes()) << what << ": not deterministic";
      }
}

// The scalar kernel (misaligned views) sums every column in the vector kernel's order.
TEST(DoraOps, BackwardMisalignedGivesSameBits) {
  std::mt19937 rng(26);
  const int64_t N = 3000, out = 96;
  for (DType t : {DType::kF32, DType::kBF16}) {
    Twin dy(t, {N, out}, rng), v(t, {N, out}, rng), g(t, {N, out}, rng, 0.0f);
    Twin dyb(t, {N * out + 1}, rng), vb(t, {N * out + 1}, rng), gb(t, {N * out + 1}, rng, 0.0f);
    Twin dmag(DType::kF32, {out}, rng), dmagb(DType::kF32, {out}, rng), scale(DType::kF32, {out}, rng),
        norm(DType::kF32, {out}, rng);
    norm.set(positive(out, rng));
    dmagb.set(dmag.cpu_vals());
    auto shifted = [](const Twin& x) {
      std::vector<float> s = x.cpu_vals();
      s.insert(s.begin(), 0.0f);
      return s;
    };
    dyb.set(shifted(dy));
    vb.set(shifted(v));
    G().dora_backward(g.gpu(), dmag.gpu(), dy.gpu(), v.gpu(), scale.gpu(), norm.gpu());
    G().dora_backward(view(gb.gpu(), 1, N, out), dmagb.gpu(), view(dyb.gpu(), 1, N, out),
                      view(vb.gpu(), 1, N, out), scale.gpu(), norm.gpu());
    EXPECT_TRUE(dmag.gpu_bytes() == dmagb.gpu_bytes()) << dtype_name(t) << ": misaligned dmag changed bits";
    const auto a = g.gpu_bytes(), b = gb.gpu_bytes();
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin() + static_cast<ptrdiff_t>(dtype_size(t))))
        << dtype_name(t) << ": misaligned g changed bits";
    EXPECT_TRUE(gb.guards_ok());
  }
}

// ---- timing ---------------------------------------------------------------------------------
// Layer shapes, bf16 activations: microseconds per op and the bytes it must move per microsecond
// (GB/s; the H200 streams ~4,000 GB/s). Printed, never asserted beyond sanity.
TEST(DoraOps, TimingTable) {
  std::mt19937 rng(31);
  const DType t = DType::kBF16;
  std::printf("%-40s %10s %10s\n", "op / shape", "us", "GB/s");
  auto row = [](const std::string& name, double us, double bytes) {
    std::printf("%-40s %10.1f %10.0f\n", name.c_str(), us, bytes / (us * 1e3));
    EXPECT_TRUE(us > 0 && us < 1e6) << name;
  };
  for (const NormShape& s : {NormShape{11008, 2048, 16}, NormShape{2048, 2048, 16}, NormShape{2048, 11008, 16},
                             NormShape{11008, 2048, 64}}) {
    Twin w(t, {s.out, s.in}, rng, 0.05f), a(DType::kF32, {s.r, s.in}, rng, 0.1f),
        b(DType::kF32, {s.out, s.r}, rng, 0.1f), mag(DType::kF32, {s.out}, rng), norm(DType::kF32, {s.out}, rng),
        scale(DType::kF32, {s.out}, rng);
    const double us =
        1e3 * time_ms(20, [&] { G().dora_norm(norm.gpu(), scale.gpu(), w.gpu(), a.gpu(), b.gpu(), mag.gpu(), 2.0f); });
    row("norm W[" + std::to_string(s.out) + "," + std::to_string(s.in) + "] r" + std::to_string(s.r), us,
        2.0 * s.out * s.in);
  }
  const int64_t N = 4096, out = 11008;
  Twin y(t, {N, out}, rng), res(t, {N, out}, rng), bias(t, {out}, rng), scale(DType::kF32, {out}, rng);
  Twin dy(t, {N, out}, rng), v(t, {N, out}, rng), g(t, {N, out}, rng), dmag(DType::kF32, {out}, rng),
      norm(DType::kF32, {out}, rng);
  norm.set(positive(out, rng));
  const double act = 2.0 * N * out;
  row("combine [4096,11008]", 1e3 * time_ms(20, [&] { G().dora_combine(y.gpu(), scale.gpu(), Tensor(), Tensor()); }),
      2 * act);
  row("combine [4096,11008] +bias +res",
      1e3 * time_ms(20, [&] { G().dora_combine(y.gpu(), scale.gpu(), bias.gpu(), res.gpu()); }), 3 * act);
  row("backward [4096,11008]",
      1e3 * time_ms(20, [&] { G().dora_backward(g.gpu(), dmag.gpu(), dy.gpu(), v.gpu(), scale.gpu(), norm.gpu()); }),
      3 * act);
  row("backward [4096,11008] g=dy",
      1e3 * time_ms(20, [&] { G().dora_backward(dy.gpu(), dmag.gpu(), dy.gpu(), v.gpu(), scale.gpu(), norm.gpu()); }),
      3 * act);
  std::fflush(stdout);
}

}  // namespace
}  // namespace st::test
