// The CPU backend's fused LoRA ops (backend.h "LoRA") against double-precision references built
// from their definitions, for f32 and bf16 activations; lora_dx's mask against Backend::dropout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "cpu_test_util.h"

namespace st::test {
namespace {

// A host activation tensor of dtype `t` whose values are exactly representable in it.
struct Act {
  DType t;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  Act(DType dt, int64_t r, int64_t c, uint32_t seed) : t(dt), rows(r), cols(c) {
    std::vector<float> v = randn(static_cast<size_t>(r * c), seed);
    bytes.resize(v.size() * dtype_size(t));
    convert_elements(bytes.data(), t, v.data(), DType::kF32, v.size());
  }
  Tensor view() { return Tensor(bytes.data(), t, {rows, cols}); }
  std::vector<double> vals() const {
    std::vector<float> f(static_cast<size_t>(rows * cols));
    convert_elements(f.data(), DType::kF32, bytes.data(), t, f.size());
    return to_double(f);
  }
  std::vector<float> valsf() const {
    std::vector<float> f(static_cast<size_t>(rows * cols));
    convert_elements(f.data(), DType::kF32, bytes.data(), t, f.size());
    return f;
  }
};

// Tolerance of a stored result: f32 differs from the double reference by summation rounding,
// bf16 by one output rounding (2^-8 relative).
double tol(DType t) { return t == DType::kF32 ? 2e-6 : 1e-2; }

struct Shape { int64_t N, in, out, r; };
const Shape kShapes[] = {{1, 8, 8, 1}, {3, 96, 37, 4}, {37, 100, 64, 16}, {64, 33, 129, 8}};

class LoraOps : public ::testing::TestWithParam<DType> {};

TEST_P(LoraOps, ForwardMatchesDefinition) {
  auto be = cpu_backend();
  const DType at = GetParam();
  for (const Shape& s : kShapes) {
    Act x(at, s.N, s.in, 1), y(at, s.N, s.out, 2);
    std::vector<float> a = randn(s.r * s.in, 3), b = randn(s.out * s.r, 4), t(s.N * s.r, NAN);
    const float sc = 0.75f;
    be->lora_down(view(t, {s.N, s.r}), x.view(), view(a, {s.r, s.in}), 0.0f, {});
    const auto xv = x.vals(), y0 = y.vals();
    std::vector<double> tref(s.N * s.r), yref(s.N * s.out);
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t k = 0; k < s.r; ++k) {
        double acc = 0;
        for (int64_t j = 0; j < s.in; ++j) acc += xv[n * s.in + j] * a[k * s.in + j];
        tref[n * s.r + k] = acc;
      }
    EXPECT_LT(rel_err(t, tref), 2e-6) << "lora_down N=" << s.N << " in=" << s.in << " r=" << s.r;
    be->lora_up(y.view(), view(t, {s.N, s.r}), view(b, {s.out, s.r}), sc);
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t o = 0; o < s.out; ++o) {
        double acc = 0;
        for (int64_t k = 0; k < s.r; ++k) acc += static_cast<double>(t[n * s.r + k]) * b[o * s.r + k];
        yref[n * s.out + o] = y0[n * s.out + o] + sc * acc;
      }
    EXPECT_LT(rel_err(y.valsf(), yref), tol(at)) << "lora_up N=" << s.N << " out=" << s.out << " r=" << s.r;
  }
}

TEST_P(LoraOps, BackwardMatchesDefinition) {
  auto be = cpu_backend();
  const DType at = GetParam();
  for (const Shape& s : kShapes) {
    Act x(at, s.N, s.in, 11), dy(at, s.N, s.out, 12), dx(at, s.N, s.in, 13);
    std::vector<float> a = randn(s.r * s.in, 14), b = randn(s.out * s.r, 15), t = randn(s.N * s.r, 16);
    std::vector<float> da = randn(s.r * s.in, 17), db = randn(s.out * s.r, 18), dt(s.N * s.r, NAN);
    const std::vector<float> da0 = da, db0 = db;
    const float sc = -1.5f;
    be->lora_grad_b(view(db, {s.out, s.r}), dy.view(), view(t, {s.N, s.r}), sc);
    be->lora_dt(view(dt, {s.N, s.r}), dy.view(), view(b, {s.out, s.r}), sc);
    be->lora_grad_a(view(da, {s.r, s.in}), view(dt, {s.N, s.r}), x.view(), 0.0f, {});
    const auto xv = x.vals(), dyv = dy.vals(), dx0 = dx.vals();
    be->lora_dx(dx.view(), view(dt, {s.N, s.r}), view(a, {s.r, s.in}), 0.0f, 99);
    std::vector<double> dbref(db.size()), dtref(dt.size()), daref(da.size()), dxref(dx0.size());
    for (int64_t o = 0; o < s.out; ++o)
      for (int64_t k = 0; k < s.r; ++k) {
        double acc = 0;
        for (int64_t n = 0; n < s.N; ++n) acc += dyv[n * s.out + o] * t[n * s.r + k];
        dbref[o * s.r + k] = db0[o * s.r + k] + sc * acc;
      }
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t k = 0; k < s.r; ++k) {
        double acc = 0;
        for (int64_t o = 0; o < s.out; ++o) acc += dyv[n * s.out + o] * b[o * s.r + k];
        dtref[n * s.r + k] = sc * acc;
      }
    for (int64_t k = 0; k < s.r; ++k)
      for (int64_t j = 0; j < s.in; ++j) {
        double acc = 0;
        for (int64_t n = 0; n < s.N; ++n) acc += static_cast<double>(dt[n * s.r + k]) * xv[n * s.in + j];
        daref[k * s.in + j] = da0[k * s.in + j] + acc;
      }
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t j = 0; j < s.in; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < s.r; ++k) acc += static_cast<double>(dt[n * s.r + k]) * a[k * s.in + j];
        dxref[n * s.in + j] = dx0[n * s.in + j] + acc;
      }
    const std::string w = "N=" + std::to_string(s.N) + " in=" + std::to_string(s.in) +
                          " out=" + std::to_string(s.out) + " r=" + std::to_string(s.r);
    EXPECT_LT(rel_err(db, dbref), 2e-6) << "lora_grad_b " << w;
    EXPECT_LT(rel_err(dt, dtref), 2e-6) << "lora_dt " << w;
    EXPECT_LT(rel_err(da, daref), 2e-6) << "lora_grad_a " << w;
    EXPECT_LT(rel_err(dx.valsf(), dxref), tol(at)) << "lora_dx " << w;
  }
}

// dx += mask(dt·A) must equal dx + dropout(dt·A) with Backend::dropout on the f32 product.
TEST_P(LoraOps, DxMaskIsDropouts) {
  auto be = cpu_backend();
  const DType at = GetParam();
  const int64_t N = 37, in = 100, r = 4;
  std::vector<float> a = randn(r * in, 21), dt = randn(N * r, 22), prod(N * in, NAN);
  be->gemm(view(prod, {N, in}), view(dt, {N, r}), view(a, {r, in}), {});
  for (float p : {0.1f, 0.5f}) {
    const uint64_t seed = 0xC0FFEEull + static_cast<uint64_t>(p * 10);
    std::vector<float> dropped(prod.size());
    be->dropout(view(dropped, {N, in}), view(prod, {N, in}), p, seed);
    Act dx(at, N, in, 23);
    const auto dx0 = dx.vals();
    be->lora_dx(dx.view(), view(dt, {N, r}), view(a, {r, in}), p, seed);
    const auto got = dx.valsf();
    std::vector<double> ref(got.size());
    int64_t zeros = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ref[i] = dx0[i] + dropped[i];
      if (dropped[i] == 0.0f) {
        ++zeros;
        // A dropped element leaves dx exactly as it was.
        EXPECT_EQ(got[i], static_cast<float>(dx0[i])) << "p=" << p << " i=" << i;
      }
    }
    EXPECT_GT(zeros, 0) << "p=" << p;
    EXPECT_LT(zeros, static_cast<int64_t>(got.size())) << "p=" << p;
    EXPECT_LT(rel_err(got, ref), tol(at)) << "lora_dx p=" << p;
  }
}

// lora_down / lora_grad_a with dropout read exactly Backend::dropout's output in x's dtype: the
// same bits as staging it and running the op without dropout; and the mask is real.
TEST_P(LoraOps, DroppedInputIsDropouts) {
  auto be = cpu_backend();
  const DType at = GetParam();
  const int64_t N = 37, in = 100, r = 8;
  Act x(at, N, in, 31);
  std::vector<float> a = randn(r * in, 32), dt = randn(N * r, 33);
  for (float p : {0.1f, 0.5f}) {
    const uint64_t seed = 0xD00Dull + static_cast<uint64_t>(p * 10);
    Act xd(at, N, in, 34);
    be->dropout(xd.view(), x.view(), p, seed);
    std::vector<float> t_fused(N * r, NAN), t_staged(N * r, NAN), t_plain(N * r, NAN);
    be->lora_down(view(t_fused, {N, r}), x.view(), view(a, {r, in}), p, seed);
    be->lora_down(view(t_staged, {N, r}), xd.view(), view(a, {r, in}), 0.0f, {});
    be->lora_down(view(t_plain, {N, r}), x.view(), view(a, {r, in}), 0.0f, {});
    EXPECT_EQ(t_fused, t_staged) << "lora_down p=" << p;
    EXPECT_NE(t_fused, t_plain) << "lora_down p=" << p << ": no element dropped";
    std::vector<float> da_fused = randn(r * in, 35), da_staged = da_fused;
    be->lora_grad_a(view(da_fused, {r, in}), view(dt, {N, r}), x.view(), p, seed);
    be->lora_grad_a(view(da_staged, {r, in}), view(dt, {N, r}), xd.view(), 0.0f, {});
    EXPECT_EQ(da_fused, da_staged) << "lora_grad_a p=" << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LoraOps, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace st::test
