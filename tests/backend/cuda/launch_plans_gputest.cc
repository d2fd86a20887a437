// The CUDA backend's PlanRecorder (backend.h Note [launch plans], backend/cuda/graph_recorder.h):
// a recorded sequence of layer-like ops (rmsnorm, bf16 GEMM with bias, LoRA down/up and the
// column-sum gradient that uses the backend scratch, cuDNN attention forward and backward,
// swiglu) runs nothing while recording, and each replay writes the same bits as the eager calls;
// scratch growth makes the plan stale. Also a timing line: eager vs replay of the same sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gpu_harness.h"

namespace st::test {
namespace {

constexpr int64_t B = 1, T = 256, NH = 4, KVH = 2, D = 64, H = NH * D, F = 512, R = 16;

struct Layerish {
  std::mt19937 rng{7};
  Twin x{DType::kBF16, {T, H}, rng}, w_norm{DType::kBF16, {H}, rng}, wq{DType::kBF16, {H, H}, rng, 0.05f},
      bq{DType::kBF16, {H}, rng}, wk{DType::kBF16, {KVH * D, H}, rng, 0.05f}, wv{DType::kBF16, {KVH * D, H}, rng, 0.05f},
      wg{DType::kBF16, {F, H}, rng, 0.05f}, wu{DType::kBF16, {F, H}, rng, 0.05f}, la{DType::kF32, {R, H}, rng, 0.05f},
      lb{DType::kF32, {H, R}, rng, 0.05f};
  // outputs (poisoned)
  Twin xn{DType::kBF16, {T, H}, rng, 0}, rstd{DType::kF32, {T}, rng, 0}, q{DType::kBF16, {T, NH, D}, rng, 0},
      k{DType::kBF16, {T, KVH, D}, rng, 0}, v{DType::kBF16, {T, KVH, D}, rng, 0}, t{DType::kF32, {T, R}, rng, 0},
      att{DType::kBF16, {T, NH, D}, rng, 0}, lse{DType::kF32, {B, NH, T}, rng, 0}, dq{DType::kBF16, {T, NH, D}, rng, 0},
      dk{DType::kBF16, {T, KVH, D}, rng, 0}, dv{DType::kBF16, {T, KVH, D}, rng, 0}, db{DType::kF32, {H, R}, rng, 0},
      g{DType::kBF16, {T, F}, rng, 0}, u{DType::kBF16, {T, F}, rng, 0}, m{DType::kBF16, {T, F}, rng, 0};
  SeqLayout L;
  AttnShape s{NH, KVH, D, 1.0f / std::sqrt(static_cast<float>(D))};
  TwinI32 pos{[] {
    std::vector<int32_t> p(T);
    for (int64_t i = 0; i < T; ++i) p[i] = static_cast<int32_t>(i);
    return p;
  }()};
  Twin inv_freq{DType::kF32, {D / 2}, rng};

  Layerish() {
    L.batch = B;
    L.seq = T;
    L.positions = pos.gpu();
    Backend& be = gpu_backend();
    be.set_fused_attention_allowance(be.fused_attention_workspace(B, T, s));
  }
  std::vector<Twin*> outputs() { return {&xn, &rstd, &q, &k, &v, &t, &att, &lse, &dq, &dk, &dv, &db, &g, &u, &m}; }
  void poison() {
    for (Twin* o : outputs()) o->set(std::vector<float>(static_cast<size_t>(o->numel()), NAN));
    db.set(std::vector<float>(static_cast<size_t>(db.numel()), 0.0f));  // accumulated (+=)
  }
  std::vector<std::vector<uint8_t>> bytes() {
    std::vector<std::vector<uint8_t>> out;
    for (Twin* o : outputs()) out.push_back(o->gpu_bytes());
    return out;
  }
  // side: the LoRA down-projection and weight gradient go to the side stream as model/layer.cc
  // issues them (Note [side stream]); the bits must not change.
  void ops(bool side = false) {
    Backend& be = gpu_backend();
    be.rmsnorm(xn.gpu(), rstd.gpu(), x.gpu(), w_norm.gpu(), 1e-6f);
    if (side) be.side_begin();
    be.lora_down(t.gpu(), xn.gpu(), la.gpu(), 0.0f, {});
    if (side) be.side_end();
    be.gemm(q.gpu().reshape({T, H}), xn.gpu(), wq.gpu(), {.trans_b = Trans::kYes, .bias = bq.gpu()});
    be.gemm(k.gpu().reshape({T, KVH * D}), xn.gpu(), wk.gpu(), {.trans_b = Trans::kYes});
    be.gemm(v.gpu().reshape({T, KVH * D}), xn.gpu(), wv.gpu(), {.trans_b = Trans::kYes});
    be.side_join();
    be.lora_up(q.gpu().reshape({T, H}), t.gpu(), lb.gpu(), 2.0f);
    be.rope(q.gpu(), pos.gpu(), inv_freq.gpu(), false);
    be.attention(att.gpu(), lse.gpu(), q.gpu(), k.gpu(), v.gpu(), L, s);
    be.attention_backward(dq.gpu(), dk.gpu(), dv.gpu(), att.gpu(), q.gpu(), k.gpu(), v.gpu(), att.gpu(), lse.gpu(), L,
                          s);
    if (side) be.side_begin();
    be.lora_grad_b(db.gpu(), dq.gpu().reshape({T, H}), t.gpu(), 0.5f);  // uses the (side) scratch
    if (side) be.side_end();
    be.gemm(g.gpu(), xn.gpu(), wg.gpu(), {.trans_b = Trans::kYes});
    be.gemm(u.gpu(), xn.gpu(), wu.gpu(), {.trans_b = Trans::kYes});
    be.swiglu(m.gpu(), g.gpu(), u.gpu());
    be.side_join();
  }
};

std::unique_ptr<LaunchPlan> record(Layerish& l, bool side = false) {
  PlanRecorder* rec = gpu_backend().plan_recorder();
  EXPECT_NE(rec, nullptr);
  std::string why;
  EXPECT_TRUE(rec->begin_capture(&why)) << why;
  l.ops(side);
  std::unique_ptr<LaunchPlan> p = rec->end_capture(&why);
  EXPECT_NE(p, nullptr) << why;
  return p;
}

TEST(LaunchPlans, ReplayWritesTheEagerBits) {
  Layerish l;
  l.poison();
  l.ops();
  const auto eager = l.bytes();
  for (size_t i = 0; i < eager.size(); ++i) {
    const auto f = to_f32(eager[i], l.outputs()[i]->dtype());
    for (float v : f) ASSERT_TRUE(std::isfinite(v)) << "eager output " << i << " not written";
  }
  l.poison();
  const auto poisoned = l.bytes();
  std::unique_ptr<LaunchPlan> p = record(l);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(l.bytes(), poisoned) << "ops ran while being recorded";
  for (int rep = 0; rep < 2; ++rep) {
    l.poison();
    ASSERT_TRUE(gpu_backend().plan_recorder()->replay(*p));
    const auto replayed = l.bytes();
    for (size_t i = 0; i < eager.size(); ++i) EXPECT_EQ(replayed[i], eager[i]) << "output " << i << " replay " << rep;
  }
  for (Twin* o : l.outputs()) EXPECT_TRUE(o->guards_ok());
}

// Note [side stream]: the LoRA ops moved to the side stream write the in-order bits, eagerly and
// replayed from a plan whose fork and join are graph edges.
TEST(LaunchPlans, SideStreamWritesTheInOrderBits) {
  Layerish l;
  l.poison();
  l.ops();
  const auto in_order = l.bytes();
  for (int rep = 0; rep < 3; ++rep) {
    l.poison();
    l.ops(/*side=*/true);
    const auto side = l.bytes();
    for (size_t i = 0; i < in_order.size(); ++i) EXPECT_EQ(side[i], in_order[i]) << "output " << i << " run " << rep;
  }
  l.poison();
  std::unique_ptr<LaunchPlan> p = record(l, /*side=*/true);
  ASSERT_NE(p, nullptr);
  for (int rep = 0; rep < 2; ++rep) {
    l.poison();
    ASSERT_TRUE(gpu_backend().plan_recorder()->replay(*p));
    const auto replayed = l.bytes();
    for (size_t i = 0; i < in_order.size(); ++i)
      EXPECT_EQ(replayed[i], in_order[i]) << "output " << i << " replay " << rep;
  }
  const double plain = time_ms(50, [&] { l.ops(); });
  const double side = time_ms(50, [&] { l.ops(true); });
  std::printf("layer-like sequence eager: in order %.1f us, LoRA ops on the side stream %.1f us\n", plain * 1e3,
              side * 1e3);
}

TEST(LaunchPlans, ScratchGrowthMakesAPlanStale) {
  Layerish l;
  l.ops();
  std::unique_ptr<LaunchPlan> p = record(l);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(gpu_backend().plan_recorder()->replay(*p));
  // An f32 x f32 -> bf16 GEMM stages its [M, N] f32 product in the scratch: 12288^2 floats (576
  // MiB) is more than anything before, so the scratch is replaced.
  std::mt19937 rng(3);
  const int64_t M = 12288, K = 8;
  Twin a(DType::kF32, {M, K}, rng), b(DType::kF32, {K, M}, rng), c(DType::kBF16, {M, M}, rng, 0);
  gpu_backend().gemm(c.gpu(), a.gpu(), b.gpu(), {});
  gpu_backend().sync_all();
  EXPECT_FALSE(gpu_backend().plan_recorder()->replay(*p)) << "a plan recorded before the scratch moved replayed";
  std::unique_ptr<LaunchPlan> again = record(l);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(gpu_backend().plan_recorder()->replay(*again));
}

TEST(LaunchPlans, TimingPrintout) {
  Layerish l;
  l.ops();
  std::unique_ptr<LaunchPlan> p = record(l);
  ASSERT_NE(p, nullptr);
  const double eager = time_ms(50, [&] { l.ops(); });
  const double replay = time_ms(50, [&] { gpu_backend().plan_recorder()->replay(*p); });
  std::printf("layer-like sequence (13 ops, T=%lld): eager %.1f us, replayed %.1f us\n", static_cast<long long>(T),
              eager * 1e3, replay * 1e3);
  // What a recorded plan costs in device memory (the planner does not count plans).
  uint64_t free0 = 0, free1 = 0, total = 0;
  gpu_backend().sync_all();
  ASSERT_TRUE(gpu_backend().memory_info(&free0, &total));
  std::vector<std::unique_ptr<LaunchPlan>> many;
  for (int i = 0; i < 200; ++i) {
    many.push_back(record(l));
    gpu_backend().plan_recorder()->replay(*many.back());
  }
  gpu_backend().sync_all();
  ASSERT_TRUE(gpu_backend().memory_info(&free1, &total));
  std::printf("200 recorded plans of 13 ops: %.1f KiB of device memory each\n",
              (static_cast<double>(free0) - static_cast<double>(free1)) / 200 / 1024);
}

}  // namespace
}  // namespace st::test
