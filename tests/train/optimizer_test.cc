// The optimizer step over the LoRA arena: LoRA+ (train/optimizer.h Note [LoRA+]).
#include "train/optimizer.h"
#include "model/presets.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace st {
namespace {

// The tiny-llama preset (2 layers, H 64): two layers of adapters, A and B of different widths.
ModelConfig small_model() {
  auto c = model_preset("tiny-llama");
  CHECK_OK(c.status());
  return *c;
}

// Random values over the whole section (CPU backend: its memory is the host's).
void fill(const Tensor& section, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  float* p = static_cast<float*>(section.data);
  for (int64_t i = 0; i < section.numel(); ++i) p[i] = nd(rng);
}

// Oracle: plain AdamW. Two copies of one arena step without LoRA+, one at lr and one at lr x ratio;
// the LoRA+ arena must equal the first, bit for bit, on every element of every A and the second on
// every element of every B and DoRA magnitude -- found through the adapter's views, not the
// offsets the optimizer walks -- over three steps with weight decay and clipping (the global norm
// is the same in all three, so is the clip).
TEST(Optimizer, LoraPlusStepsBAndMagnitudesAtTheRatio) {
  auto be_or = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  ASSERT_TRUE(be_or.ok());
  Backend* be = be_or->get();
  for (bool dora : {false, true}) {
    LoraConfig lc;
    lc.r = 4;
    lc.alpha = 8;
    lc.dora = dora;
    for (LoraTarget t : {LoraTarget::kQ, LoraTarget::kV, LoraTarget::kDown}) lc.targets[static_cast<int>(t)] = true;
    std::unique_ptr<Lora> plus, at_lr, at_ratio;
    for (auto* l : {&plus, &at_lr, &at_ratio}) {
      auto made = Lora::create(be, small_model(), lc);
      ASSERT_TRUE(made.ok());
      *l = std::move(*made);
      fill((*l)->params(), 11);
    }
    const double lr = 1e-3, ratio = 16.0;
    AdamWConfig c{.weight_decay = 0.1, .max_grad_norm = 0.5};
    auto o_at_lr = Optimizer::create(be, at_lr.get(), c);
    auto o_at_ratio = Optimizer::create(be, at_ratio.get(), c);
    c.lr_ratio_b = ratio;
    auto o_plus = Optimizer::create(be, plus.get(), c);
    ASSERT_TRUE(o_plus.ok() && o_at_lr.ok() && o_at_ratio.ok());
    for (int step = 0; step < 3; ++step) {
      for (Lora* l : {plus.get(), at_lr.get(), at_ratio.get()}) fill(l->grads(), 100 + step);
      (*o_plus)->step(lr);
      (*o_at_lr)->step(lr);
      (*o_at_ratio)->step(lr * ratio);
    }
    int64_t a_elems = 0, b_elems = 0;
    auto same = [](const Tensor& x, const Tensor& y) { return std::memcmp(x.data, y.data, x.bytes()) == 0; };
    for (int l = 0; l < small_model().num_layers; ++l) {
      const LoraLayer p = plus->layer(l), a = at_lr->layer(l), b = at_ratio->layer(l);
      for (int t = 0; t < kNumLoraTargets; ++t) {
        if (!p.t[t].present()) continue;
        EXPECT_TRUE(same(p.t[t].a, a.t[t].a)) << "A of layer " << l << " target " << t << " (dora " << dora << ")";
        EXPECT_FALSE(same(p.t[t].a, b.t[t].a));
        EXPECT_TRUE(same(p.t[t].b, b.t[t].b)) << "B of layer " << l << " target " << t << " (dora " << dora << ")";
        EXPECT_FALSE(same(p.t[t].b, a.t[t].b));
        a_elems += p.t[t].a.numel();
        b_elems += p.t[t].b.numel();
        if (dora) {
          ASSERT_TRUE(p.t[t].dora());
          EXPECT_TRUE(same(p.t[t].mag, b.t[t].mag)) << "m of layer " << l << " target " << t;
          b_elems += p.t[t].mag.numel();
        }
      }
    }
    EXPECT_GT(a_elems, 0);
    EXPECT_GT(b_elems, 0);
  }
}

TEST(Optimizer, LoraPlusRatioMustBePositive) {
  auto be_or = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  ASSERT_TRUE(be_or.ok());
  LoraConfig lc;
  lc.targets[0] = true;
  auto lora = Lora::create(be_or->get(), small_model(), lc);
  ASSERT_TRUE(lora.ok());
  for (double bad : {0.0, -1.0, std::nan("")}) {
    auto o = Optimizer::create(be_or->get(), lora->get(), AdamWConfig{.lr_ratio_b = bad});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.status().message().find("loraplus_lr_ratio"), std::string::npos) << o.status().to_string();
  }
}

}  // namespace
}  // namespace st
