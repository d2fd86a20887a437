// CUDA fused LoRA ops (backend.h "LoRA") vs the CPU reference: every op over odd and typical
// shapes, f32 and bf16 activations, every rank path (padded, exact, split into groups; bf16 with
// r % 8 == 0 takes the tensor-core kernels where the widths allow, lora_tc.cu, with their K splits
// and lora_dt's transposed B); lora_dx with
// dropout (same zero pattern as the CPU); lora_down / lora_grad_a reading a dropped-out input (the
// bits of staging it); determinism (twice -> identical bytes); guard bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu_harness.h"

namespace st::test {
namespace {

Backend& G() { return gpu_backend(); }
Backend& C() { return cpu_backend(); }

struct Shape { int64_t N, in, out, r; };

// Odd sizes hit the scalar paths, multiples of 8 the vector ones; r 1/4 pad to 8, 64 is its own
// template (and two groups of 32 in the row-dot kernels), 80 takes the split / plain fallbacks.
std::vector<Shape> shapes() {
  std::vector<Shape> v;
  for (int64_t N : {1, 3, 37, 512})
    for (int64_t r : {1, 4, 16, 64}) {
      v.push_back({N, 8, 96, r});
      v.push_back({N, 1000, 3584, r});
      v.push_back({N, 3584, 8, r});
    }
  v.push_back({37, 96, 1000, 80});
  v.push_back({512, 896, 896, 16});
  // The tensor-core kernels' other rank templates (r 8 and 32), tails of 16-row tiles.
  v.push_back({37, 256, 512, 8});
  v.push_back({515, 1024, 256, 32});
  // lora_dt on N x out >= 2^23 reads a transposed copy of B; the row dots split K over blocks.
  v.push_back({2048, 64, 4096, 16});
  v.push_back({300, 4096, 512, 8});
  return v;
}

std::string tag(const char* op, const Shape& s, DType t) {
  return std::string(op) + " " + dtype_name(t) + " N=" + std::to_string(s.N) + " in=" + std::to_string(s.in) +
         " out=" + std::to_string(s.out) + " r=" + std::to_string(s.r);
}

// The GPU result must be bit-identical when the op runs again from the same inputs.
void expect_same_bytes(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, const std::string& what) {
  EXPECT_TRUE(a == b) << what << ": not deterministic";
}

TEST(LoraOps, ForwardMatchesCpu) {
  std::mt19937 rng(11);
  for (const Shape& s : shapes())
    for (DType t : {DType::kF32, DType::kBF16}) {
      Twin x(t, {s.N, s.in}, rng), a(DType::kF32, {s.r, s.in}, rng, 0.1f), b(DType::kF32, {s.out, s.r}, rng);
      Twin tt(DType::kF32, {s.N, s.r}, rng, 0.0f), y(t, {s.N, s.out}, rng);
      C().lora_down(tt.cpu(), x.cpu(), a.cpu(), 0.0f, {});
      G().lora_down(tt.gpu(), x.gpu(), a.gpu(), 0.0f, {});
      EXPECT_TWIN_CLOSE(tt, 1e-9, tag("lora_down", s, t));
      const auto t1 = tt.gpu_bytes();
      G().lora_down(tt.gpu(), x.gpu(), a.gpu(), 0.0f, {});
      expect_same_bytes(t1, tt.gpu_bytes(), tag("lora_down", s, t));
      // lora_up from the CPU's t on both sides, so only lora_up's own error is measured.
      tt.set(tt.cpu_vals());
      Twin y2(t, {s.N, s.out}, rng);
      y2.set(y.cpu_vals());
      C().lora_up(y.cpu(), tt.cpu(), b.cpu(), 0.5f);
      G().lora_up(y.gpu(), tt.gpu(), b.gpu(), 0.5f);
      EXPECT_TWIN_CLOSE(y, limit_for(t, 1e-4, 1e-9), tag("lora_up", s, t));
      G().lora_up(y2.gpu(), tt.gpu(), b.gpu(), 0.5f);
      expect_same_bytes(y.gpu_bytes(), y2.gpu_bytes(), tag("lora_up", s, t));
    }
}

TEST(LoraOps, BackwardMatchesCpu) {
  std::mt19937 rng(12);
  for (const Shape& s : shapes())
    for (DType t : {DType::kF32, DType::kBF16}) {
      Twin x(t, {s.N, s.in}, rng), dy(t, {s.N, s.out}, rng), tt(DType::kF32, {s.N, s.r}, rng);
      Twin a(DType::kF32, {s.r, s.in}, rng, 0.1f), b(DType::kF32, {s.out, s.r}, rng, 0.1f);
      Twin db(DType::kF32, {s.out, s.r}, rng), da(DType::kF32, {s.r, s.in}, rng), dt(DType::kF32, {s.N, s.r}, rng, 0.0f);
      Twin db2(DType::kF32, {s.out, s.r}, rng), da2(DType::kF32, {s.r, s.in}, rng);
      db2.set(db.cpu_vals());
      da2.set(da.cpu_vals());
      C().lora_grad_b(db.cpu(), dy.cpu(), tt.cpu(), -0.75f);
      G().lora_grad_b(db.gpu(), dy.gpu(), tt.gpu(), -0.75f);
      EXPECT_TWIN_CLOSE(db, 1e-9, tag("lora_grad_b", s, t));
      G().lora_grad_b(db2.gpu(), dy.gpu(), tt.gpu(), -0.75f);
      expect_same_bytes(db.gpu_bytes(), db2.gpu_bytes(), tag("lora_grad_b", s, t));

      C().lora_dt(dt.cpu(), dy.cpu(), b.cpu(), -0.75f);
      G().lora_dt(dt.gpu(), dy.gpu(), b.gpu(), -0.75f);
      EXPECT_TWIN_CLOSE(dt, 1e-9, tag("lora_dt", s, t));
      const auto dt1 = dt.gpu_bytes();
      G().lora_dt(dt.gpu(), dy.gpu(), b.gpu(), -0.75f);
      expect_same_bytes(dt1, dt.gpu_bytes(), tag("lora_dt", s, t));
      dt.set(dt.cpu_vals());  // both sides continue from the CPU's dt

      C().lora_grad_a(da.cpu(), dt.cpu(), x.cpu(), 0.0f, {});
      G().lora_grad_a(da.gpu(), dt.gpu(), x.gpu(), 0.0f, {});
      EXPECT_TWIN_CLOSE(da, 1e-9, tag("lora_grad_a", s, t));
      G().lora_grad_a(da2.gpu(), dt.gpu(), x.gpu(), 0.0f, {});
      expect_same_bytes(da.gpu_bytes(), da2.gpu_bytes(), tag("lora_grad_a", s, t));

      Twin dx(t, {s.N, s.in}, rng), dx2(t, {s.N, s.in}, rng);
      dx2.set(dx.cpu_vals());
      C().lora_dx(dx.cpu(), dt.cpu(), a.cpu(), 0.0f, 7);
      G().lora_dx(dx.gpu(), dt.gpu(), a.gpu(), 0.0f, 7);
      EXPECT_TWIN_CLOSE(dx, limit_for(t, 1e-4, 1e-9), tag("lora_dx", s, t));
      G().lora_dx(dx2.gpu(), dt.gpu(), a.gpu(), 0.0f, 7);
      expect_same_bytes(dx.gpu_bytes(), dx2.gpu_bytes(), tag("lora_dx", s, t));
    }
}

// With dropout the kept/dropped pattern is a function of (seed, element index, p) only: dx must
// be unchanged at exactly the same positions on both backends, and the values close elsewhere.
TEST(LoraOps, DxDropoutMaskMatchesCpu) {
  std::mt19937 rng(13);
  for (const Shape& s : {Shape{37, 1000, 0, 16}, Shape{3, 96, 0, 4}, Shape{512, 896, 0, 16}, Shape{1, 3584, 0, 64}})
    for (DType t : {DType::kF32, DType::kBF16})
      for (float p : {0.1f, 0.5f}) {
        Twin dt(DType::kF32, {s.N, s.r}, rng), a(DType::kF32, {s.r, s.in}, rng);
        // dx starts at zero so a dropped element stays exactly 0 and a kept one (almost surely) not.
        Twin dx(t, {s.N, s.in}, rng);
        dx.set(std::vector<float>(static_cast<size_t>(s.N * s.in), 0.0f));
        const uint64_t seed = 0x5EEDull * (s.N + 1) + static_cast<uint64_t>(p * 100);
        C().lora_dx(dx.cpu(), dt.cpu(), a.cpu(), p, seed);
        G().lora_dx(dx.gpu(), dt.gpu(), a.gpu(), p, seed);
        const std::string w = tag("lora_dx drop", s, t) + " p=" + std::to_string(p);
        EXPECT_TWIN_CLOSE(dx, limit_for(t, 1e-4, 1e-9), w);
        const auto gv = dx.gpu_vals(), cv = dx.cpu_vals();
        int64_t mismatched = 0, zeros = 0;
        for (size_t i = 0; i < gv.size(); ++i) {
          mismatched += (gv[i] == 0.0f) != (cv[i] == 0.0f);
          zeros += cv[i] == 0.0f;
        }
        EXPECT_EQ(mismatched, 0) << w << ": zero patterns differ";
        EXPECT_GT(zeros, 0) << w;
        EXPECT_LT(zeros, static_cast<int64_t>(gv.size())) << w;
        const auto b1 = dx.gpu_bytes();
        dx.set(std::vector<float>(static_cast<size_t>(s.N * s.in), 0.0f));
        G().lora_dx(dx.gpu(), dt.gpu(), a.gpu(), p, seed);
        expect_same_bytes(b1, dx.gpu_bytes(), w);
        // The same mask with the seed read when the op runs (DropoutSeed base, as launch plans do):
        // *base ^ value == seed. On the CPU the base is host memory.
        const uint64_t salt = 0x0123456789ABCDEFull, stored = seed ^ salt;
        GuardedDev slot(sizeof(uint64_t));
        slot.upload(&stored);
        dx.set(std::vector<float>(static_cast<size_t>(s.N * s.in), 0.0f));
        G().lora_dx(dx.gpu(), dt.gpu(), a.gpu(), p, DropoutSeed(salt, static_cast<const uint64_t*>(slot.data())));
        expect_same_bytes(b1, dx.gpu_bytes(), w + " (seed in device memory)");
        C().lora_dx(dx.cpu(), dt.cpu(), a.cpu(), p, DropoutSeed(salt, &stored));
        EXPECT_EQ(dx.cpu_vals(), cv) << w << " (CPU, seed in memory)";
      }
}

// lora_down / lora_grad_a with dropout read exactly Backend::dropout's output in x's dtype (the
// fused mask, dropped_input.cuh): bit-identical to staging it with dropout and running the op
// without, on the tensor-core kernels (bf16, r % 8 == 0, in % 32 == 0) and the SIMT ones (f32, odd
// widths, r 4 / 80); the seed may live in device memory (launch plans); close to the CPU's.
TEST(LoraOps, DroppedInputIsDropouts) {
  std::mt19937 rng(15);
  const Shape cases[] = {{37, 1000, 0, 16}, {512, 896, 0, 16}, {2048, 2048, 0, 16}, {515, 1024, 0, 32},
                         {3, 96, 0, 4},     {37, 100, 0, 8},   {37, 96, 0, 80},     {2048, 11008, 0, 16}};
  for (const Shape& s : cases)
    for (DType t : {DType::kF32, DType::kBF16})
      for (float p : {0.1f, 0.5f}) {
        const std::string w = tag("dropped input", s, t) + " p=" + std::to_string(p);
        const uint64_t seed = 0xD0D0ull * (s.N + 3) + static_cast<uint64_t>(p * 100);
        Twin x(t, {s.N, s.in}, rng), xd(t, {s.N, s.in}, rng), a(DType::kF32, {s.r, s.in}, rng, 0.1f);
        Twin dt(DType::kF32, {s.N, s.r}, rng);
        G().dropout(xd.gpu(), x.gpu(), p, seed);
        Twin t_f(DType::kF32, {s.N, s.r}, rng, 0.0f), t_s(DType::kF32, {s.N, s.r}, rng, 0.0f);
        G().lora_down(t_f.gpu(), x.gpu(), a.gpu(), p, seed);
        G().lora_down(t_s.gpu(), xd.gpu(), a.gpu(), 0.0f, {});
        expect_same_bytes(t_f.gpu_bytes(), t_s.gpu_bytes(), w + " lora_down fused vs staged");
        C().lora_down(t_f.cpu(), x.cpu(), a.cpu(), p, seed);
        EXPECT_TWIN_CLOSE(t_f, 1e-9, w + " lora_down");
        Twin da_f(DType::kF32, {s.r, s.in}, rng), da_s(DType::kF32, {s.r, s.in}, rng);
        da_s.set(da_f.cpu_vals());
        G().lora_grad_a(da_f.gpu(), dt.gpu(), x.gpu(), p, seed);
        G().lora_grad_a(da_s.gpu(), dt.gpu(), xd.gpu(), 0.0f, {});
        expect_same_bytes(da_f.gpu_bytes(), da_s.gpu_bytes(), w + " lora_grad_a fused vs staged");
        C().lora_grad_a(da_f.cpu(), dt.cpu(), x.cpu(), p, seed);
        EXPECT_TWIN_CLOSE(da_f, 1e-9, w + " lora_grad_a");
        // The seed read when the op runs: *base ^ value == seed.
        const uint64_t salt = 0x0F1E2D3C4B5A6978ull, stored = seed ^ salt;
        GuardedDev slot(sizeof(uint64_t));
        slot.upload(&stored);
        const DropoutSeed in_mem(salt, static_cast<const uint64_t*>(slot.data()));
        Twin t_m(DType::kF32, {s.N, s.r}, rng, 0.0f);
        G().lora_down(t_m.gpu(), x.gpu(), a.gpu(), p, in_mem);
        expect_same_bytes(t_m.gpu_bytes(), t_s.gpu_bytes(), w + " lora_down (seed in device memory)");
        EXPECT_TRUE(t_f.guards_ok() && da_f.guards_ok() && t_m.guards_ok()) << w;
      }
}

// A NaN in the input must reach the output (the comparison itself rejects non-finite values, so
// this checks the kernels do not skip or mask elements).
TEST(LoraOps, NanPropagates) {
  std::mt19937 rng(14);
  const Shape s{37, 1000, 96, 16};
  Twin x(DType::kBF16, {s.N, s.in}, rng), a(DType::kF32, {s.r, s.in}, rng), tt(DType::kF32, {s.N, s.r}, rng, 0.0f);
  std::vector<float> xv = x.cpu_vals();
  xv[5 * s.in + 999] = NAN;
  x.set(xv);
  G().lora_down(tt.gpu(), x.gpu(), a.gpu(), 0.0f, {});
  const auto tv = tt.gpu_vals();
  for (int64_t k = 0; k < s.r; ++k) EXPECT_TRUE(std::isnan(tv[5 * s.r + k])) << "k=" << k;
  EXPECT_TRUE(std::isfinite(tv[4 * s.r])) << "row 4 should be untouched by row 5's NaN";
  EXPECT_TRUE(tt.guards_ok());
}

// Model shapes (bf16 activations, r 16): microseconds per op and the activation bytes it must
// move per microsecond (GB/s): these ops are memory-bound, the H200 streams ~4,000 GB/s.
TEST(LoraOps, TimingTable) {
  std::mt19937 rng(31);
  const Shape model_shapes[] = {{512, 1536, 1536, 16}, {512, 1536, 256, 16}, {2048, 2048, 2048, 16},
                                {2048, 2048, 256, 16},  {4096, 4096, 4096, 16}, {4096, 4096, 1024, 16},
                                {2048, 2048, 11008, 16}, {2048, 11008, 2048, 16}, {512, 896, 4864, 16}};
  std::printf("%-28s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "shape (N in out r)", "down", "up", "grad_b", "dt",
              "grad_a", "dx", "down p", "grad_a p", "dropout");
  for (const Shape& s : model_shapes) {
    const DType t = DType::kBF16;
    Twin x(t, {s.N, s.in}, rng), y(t, {s.N, s.out}, rng), dy(t, {s.N, s.out}, rng), dx(t, {s.N, s.in}, rng);
    Twin a(DType::kF32, {s.r, s.in}, rng, 0.1f), b(DType::kF32, {s.out, s.r}, rng, 0.1f);
    Twin tt(DType::kF32, {s.N, s.r}, rng), dt(DType::kF32, {s.N, s.r}, rng);
    Twin da(DType::kF32, {s.r, s.in}, rng), db(DType::kF32, {s.out, s.r}, rng);
    Twin xd(t, {s.N, s.in}, rng);
    const int it = 50;
    const double us[9] = {
        1e3 * time_ms(it, [&] { G().lora_down(tt.gpu(), x.gpu(), a.gpu(), 0.0f, {}); }),
        1e3 * time_ms(it, [&] { G().lora_up(y.gpu(), tt.gpu(), b.gpu(), 0.5f); }),
        1e3 * time_ms(it, [&] { G().lora_grad_b(db.gpu(), dy.gpu(), tt.gpu(), 0.5f); }),
        1e3 * time_ms(it, [&] { G().lora_dt(dt.gpu(), dy.gpu(), b.gpu(), 0.5f); }),
        1e3 * time_ms(it, [&] { G().lora_grad_a(da.gpu(), dt.gpu(), x.gpu(), 0.0f, {}); }),
        1e3 * time_ms(it, [&] { G().lora_dx(dx.gpu(), dt.gpu(), a.gpu(), 0.0f, 7); }),
        // With LoRA dropout 0.1 (the mask formed as x is read), and the staging pass it replaced.
        1e3 * time_ms(it, [&] { G().lora_down(tt.gpu(), x.gpu(), a.gpu(), 0.1f, 7); }),
        1e3 * time_ms(it, [&] { G().lora_grad_a(da.gpu(), dt.gpu(), x.gpu(), 0.1f, 7); }),
        1e3 * time_ms(it, [&] { G().dropout(xd.gpu(), x.gpu(), 0.1f, 7); })};
    // Activation bytes each op must move: read x / read+write y / read dy / read dy / read x / r+w dx
    // / read x / read x / read x + write xd.
    const double in_b = 2.0 * s.N * s.in, out_b = 2.0 * s.N * s.out;
    const double bytes[9] = {in_b, 2 * out_b, out_b, out_b, in_b, 2 * in_b, in_b, in_b, 2 * in_b};
    char name[64];
    std::snprintf(name, sizeof name, "%lld %lld %lld %lld", static_cast<long long>(s.N), static_cast<long long>(s.in),
                  static_cast<long long>(s.out), static_cast<long long>(s.r));
    std::printf("%-28s", name);
    for (int i = 0; i < 9; ++i) std::printf(" %5.1f/%-4.0f", us[i], bytes[i] / (us[i] * 1e3));
    std::printf("   (us / GB/s)\n");
    for (double u : us) EXPECT_TRUE(u > 0 && u < 1e6);
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace st::test
