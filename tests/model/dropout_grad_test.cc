// Oracle: central finite differences (f32 model, f64 accumulation of the difference) of the
// training loss with LoRA dropout on. The masks depend only on (seed, micro-batch counter,
// layer, target), so rewinding the counter replays the same masks for every evaluation.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "model/model.h"
#include "model/resident_source.h"

namespace st {
namespace {

TEST(LoraDropout, GradientsMatchFiniteDifferences) {
  const std::string dir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/qwen2_tied";
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  ASSERT_TRUE(be.ok());
  auto mc = load_hf_config(dir + "/model/config.json");
  auto ck = Checkpoint::open(dir + "/model");
  ASSERT_TRUE(mc.ok() && ck.ok());
  LoraConfig lc;
  lc.r = 2;
  lc.alpha = 4;
  lc.dropout = 0.3;
  lc.targets.fill(true);
  auto m = Model::create(*mc, be->get(), lc, {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 5});
  ASSERT_TRUE(m.ok());
  Model& model = **m;
  ASSERT_TRUE(model.load_extras(*ck).ok());
  auto src = ResidentLayerSource::from_checkpoint(be->get(), *mc, model.layer_layout(), *ck);
  ASSERT_TRUE(src.ok());
  Lora& lora = model.lora();
  lora.init(3);
  std::vector<float> p = lora.params_to_host();
  // Give B non-zero values so dA is non-zero too.
  for (int l = 0; l < mc->num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto tt = static_cast<LoraTarget>(t);
      const int64_t off = lora.offset_b(l, tt), n = lora_target_dims(*mc, tt).second * 2;
      for (int64_t i = 0; i < n; ++i) p[off + i] = 0.05f * std::sin(static_cast<float>(off + i));
    }
  lora.params_from_host(p);

  Batch b;
  b.batch = 2;
  b.seq = 8;
  for (int i = 0; i < 16; ++i) b.input_ids.push_back((i * 37 + 11) % static_cast<int>(mc->vocab_size));
  b.labels = b.input_ids;
  auto loss_at = [&](const std::vector<float>& params, bool keep_grads) {
    lora.params_from_host(params);
    lora.zero_grads();
    model.set_micro_batches_run(0);
    auto l = model.forward_backward({&b}, **src, {1.0f});
    CHECK_OK(l.status());
    if (!keep_grads) lora.zero_grads();
    return (*l)[0];
  };
  loss_at(p, true);
  std::vector<float> g(static_cast<size_t>(lora.numel()));
  (*be)->copy_d2h(g.data(), lora.grads().data, g.size() * sizeof(float), StreamId::kCompute);
  (*be)->sync_all();
  // A few entries of A and B in both layers and several targets.
  int checked = 0;
  double worst = 0;
  for (int l = 0; l < mc->num_layers; ++l)
    for (LoraTarget tt : {LoraTarget::kQ, LoraTarget::kV, LoraTarget::kO, LoraTarget::kUp, LoraTarget::kDown})
      for (int64_t off : {lora.offset_a(l, tt) + 1, lora.offset_b(l, tt) + 2}) {
        const float h = 0.1f;  // the f32 loss sum (~80) resolves ~1e-5: a larger step keeps FD noise ~1%
        std::vector<float> pp = p, pm = p;
        pp[off] += h;
        pm[off] -= h;
        const double fd = (loss_at(pp, false) - loss_at(pm, false)) / (2.0 * h);
        const double err = std::fabs(fd - g[off]) / std::max(1e-2, std::fabs(fd));
        worst = std::max(worst, err);
        EXPECT_LT(err, 3e-2) << "layer " << l << " " << lora_target_name(tt) << " off " << off << " fd " << fd
                             << " analytic " << g[off];
        ++checked;
      }
  std::printf("dropout FD: %d entries, worst rel err %.3g\n", checked, worst);
  // Dropout is really on: a different micro-batch counter gives a different loss.
  lora.params_from_host(p);
  model.set_micro_batches_run(1);
  auto l1 = model.forward_backward({&b}, **src, {1.0f});
  ASSERT_TRUE(l1.ok());
  EXPECT_NE((*l1)[0], loss_at(p, false));
}

// DoRA with dropout (model/layer.cc Note [DoRA with dropout]): the magnitudes' gradients against
// finite differences. Only m: the row norm is held constant in the backward (PEFT's detach), so
// the A and B gradients are not the loss's derivative (the golden test checks those against PEFT);
// m's are exact, and layer 0's see layer 1's input gradient, so the dropped base products of the
// forward and their input gradient are exercised too.
TEST(LoraDropout, DoraMagnitudeGradientsMatchFiniteDifferences) {
  const std::string dir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/qwen2_tied";
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  ASSERT_TRUE(be.ok());
  auto mc = load_hf_config(dir + "/model/config.json");
  auto ck = Checkpoint::open(dir + "/model");
  ASSERT_TRUE(mc.ok() && ck.ok());
  LoraConfig lc;
  lc.r = 2;
  lc.alpha = 4;
  lc.dropout = 0.3;
  lc.dora = true;
  lc.targets.fill(true);
  auto m = Model::create(*mc, be->get(), lc, {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 5});
  ASSERT_TRUE(m.ok());
  Model& model = **m;
  ASSERT_TRUE(model.load_extras(*ck).ok());
  auto src = ResidentLayerSource::from_checkpoint(be->get(), *mc, model.layer_layout(), *ck);
  ASSERT_TRUE(src.ok());
  Lora& lora = model.lora();
  lora.init(3);
  ASSERT_TRUE(model.init_dora_magnitudes(**src).ok());
  std::vector<float> p = lora.params_to_host();
  for (int l = 0; l < mc->num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto tt = static_cast<LoraTarget>(t);
      const int64_t out = lora_target_dims(*mc, tt).second;
      for (int64_t i = 0; i < out * 2; ++i) p[lora.offset_b(l, tt) + i] = 0.05f * std::sin(static_cast<float>(i + 7 * t));
      for (int64_t i = 0; i < out; ++i) p[lora.offset_mag(l, tt) + i] *= 1.0f + 0.2f * std::cos(static_cast<float>(i + t));
    }
  lora.params_from_host(p);
  Batch b;
  b.batch = 2;
  b.seq = 8;
  for (int i = 0; i < 16; ++i) b.input_ids.push_back((i * 37 + 11) % static_cast<int>(mc->vocab_size));
  b.labels = b.input_ids;
  auto loss_at = [&](const std::vector<float>& params, bool keep_grads) {
    lora.params_from_host(params);
    lora.zero_grads();
    model.set_micro_batches_run(0);
    auto l = model.forward_backward({&b}, **src, {1.0f});
    CHECK_OK(l.status());
    if (!keep_grads) lora.zero_grads();
    return (*l)[0];
  };
  loss_at(p, true);
  std::vector<float> g(static_cast<size_t>(lora.numel()));
  (*be)->copy_d2h(g.data(), lora.grads().data, g.size() * sizeof(float), StreamId::kCompute);
  (*be)->sync_all();
  int checked = 0;
  double worst = 0;
  for (int l = 0; l < mc->num_layers; ++l)
    for (LoraTarget tt : {LoraTarget::kQ, LoraTarget::kV, LoraTarget::kO, LoraTarget::kGate, LoraTarget::kDown})
      for (int64_t off : {lora.offset_mag(l, tt) + 1, lora.offset_mag(l, tt) + 5}) {
        const float h = 0.05f;
        std::vector<float> pp = p, pm = p;
        pp[off] += h;
        pm[off] -= h;
        const double fd = (loss_at(pp, false) - loss_at(pm, false)) / (2.0 * h);
        const double err = std::fabs(fd - g[off]) / std::max(1e-2, std::fabs(fd));
        worst = std::max(worst, err);
        EXPECT_LT(err, 3e-2) << "layer " << l << " " << lora_target_name(tt) << " m off " << off << " fd " << fd
                             << " analytic " << g[off];
        ++checked;
      }
  std::printf("DoRA dropout FD: %d magnitudes, worst rel err %.3g\n", checked, worst);
  // The dropout is real: another micro-batch counter, other masks, another loss.
  lora.params_from_host(p);
  model.set_micro_batches_run(1);
  auto l1 = model.forward_backward({&b}, **src, {1.0f});
  ASSERT_TRUE(l1.ok());
  EXPECT_NE((*l1)[0], loss_at(p, false));
}

}  // namespace
}  // namespace st
