// Oracle: central finite differences (f32 model, f64 accumulation of the difference) of the
// training loss with LoRA dropout on. The masks depend only on (seed, micro-batch counter,
// layer, target), so rewinding the counter replays the same masks for every evaluation.
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "model/model.h"
#include "model/resident_source.h"

namespace st {
namespace {

// The qwen2_tied fixture's base with a fresh adapter of `lc` (r 2, dropout 0.3, every target), one
// 2 x 8 batch, and the loss as a function of the parameters at micro-batch counter 0.
struct FdRig {
  std::unique_ptr<Backend> be;
  ModelConfig mc;
  std::unique_ptr<Model> model;
  std::unique_ptr<ResidentLayerSource> src;
  Batch b;

  explicit FdRig(bool dora) {
    const std::string dir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/qwen2_tied";
    be = std::move(make_backend(DeviceKind::kCpu, {.num_threads = 1})).value();
    mc = load_hf_config(dir + "/model/config.json").value();
    auto ck = Checkpoint::open(dir + "/model");
    CHECK_OK(ck.status());
    LoraConfig lc;
    lc.r = 2;
    lc.alpha = 4;
    lc.dropout = 0.3;
    lc.dora = dora;
    lc.targets.fill(true);
    model = std::move(Model::create(mc, be.get(), lc, {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 5})).value();
    CHECK_OK(model->load_extras(*ck));
    src = std::move(ResidentLayerSource::from_checkpoint(be.get(), mc, model->layer_layout(), *ck)).value();
    model->lora().init(3);
    CHECK_OK(model->init_dora_magnitudes(*src));
    b.batch = 2;
    b.seq = 8;
    for (int i = 0; i < 16; ++i) b.input_ids.push_back((i * 37 + 11) % static_cast<int>(mc.vocab_size));
    b.labels = b.input_ids;
  }

  double loss_at(const std::vector<float>& params, bool keep_grads, uint64_t micro = 0) {
    Lora& lora = model->lora();
    lora.params_from_host(params);
    lora.zero_grads();
    model->set_micro_batches_run(micro);
    auto l = model->forward_backward({&b}, *src, {1.0f});
    CHECK_OK(l.status());
    if (!keep_grads) lora.zero_grads();
    return (*l)[0];
  }

  // Analytic gradients at p against central differences with step h at the offsets `pick` gives
  // per (layer, target); then the dropout must matter (another counter, another loss).
  void check(const std::vector<float>& p, float h, const char* what,
             const std::function<std::vector<int64_t>(int, LoraTarget)>& pick) {
    loss_at(p, true);
    Lora& lora = model->lora();
    std::vector<float> g(static_cast<size_t>(lora.numel()));
    be->copy_d2h(g.data(), lora.grads().data, g.size() * sizeof(float), StreamId::kCompute);
    be->sync_all();
    int checked = 0;
    double worst = 0;
    for (int l = 0; l < mc.num_layers; ++l)
      for (LoraTarget tt : {LoraTarget::kQ, LoraTarget::kV, LoraTarget::kO, LoraTarget::kGate, LoraTarget::kUp,
                            LoraTarget::kDown})
        for (int64_t off : pick(l, tt)) {
          std::vector<float> pp = p, pm = p;
          pp[off] += h;
          pm[off] -= h;
          const double fd = (loss_at(pp, false) - loss_at(pm, false)) / (2.0 * h);
          const double err = std::fabs(fd - g[off]) / std::max(1e-2, std::fabs(fd));
          worst = std::max(worst, err);
          EXPECT_LT(err, 3e-2) << what << ": layer " << l << " " << lora_target_name(tt) << " off " << off << " fd "
                               << fd << " analytic " << g[off];
          ++checked;
        }
    std::printf("%s FD: %d entries, worst rel err %.3g\n", what, checked, worst);
    EXPECT_NE(loss_at(p, false, /*micro=*/1), loss_at(p, false));
  }
};

TEST(LoraDropout, GradientsMatchFiniteDifferences) {
  FdRig r(/*dora=*/false);
  Lora& lora = r.model->lora();
  std::vector<float> p = lora.params_to_host();
  // Give B non-zero values so dA is non-zero too.
  for (int l = 0; l < r.mc.num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto tt = static_cast<LoraTarget>(t);
      const int64_t off = lora.offset_b(l, tt), n = lora_target_dims(r.mc, tt).second * 2;
      for (int64_t i = 0; i < n; ++i) p[off + i] = 0.05f * std::sin(static_cast<float>(off + i));
    }
  // h 0.05: the f32 loss sum (~80) resolves ~1e-5, so the step cannot be small; at 0.1 the
  // central difference's own truncation error reached 4.8% on one small entry (1.4% at 0.05).
  r.check(p, 0.05f, "dropout", [&](int l, LoraTarget tt) {
    return std::vector<int64_t>{lora.offset_a(l, tt) + 1, lora.offset_b(l, tt) + 2};
  });
}

// DoRA with dropout (model/layer.cc Note [DoRA with dropout]): the magnitudes' gradients against
// finite differences. Only m: the row norm is held constant in the backward (PEFT's detach), so
// the A and B gradients are not the loss's derivative (the golden test checks those against PEFT);
// m's are exact, and layer 0's see layer 1's input gradient, so the dropped base products of the
// forward and their input gradient are exercised too.
TEST(LoraDropout, DoraMagnitudeGradientsMatchFiniteDifferences) {
  FdRig r(/*dora=*/true);
  Lora& lora = r.model->lora();
  std::vector<float> p = lora.params_to_host();
  for (int l = 0; l < r.mc.num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto tt = static_cast<LoraTarget>(t);
      const int64_t out = lora_target_dims(r.mc, tt).second;
      for (int64_t i = 0; i < out * 2; ++i) p[lora.offset_b(l, tt) + i] = 0.05f * std::sin(static_cast<float>(i + 7 * t));
      for (int64_t i = 0; i < out; ++i) p[lora.offset_mag(l, tt) + i] *= 1.0f + 0.2f * std::cos(static_cast<float>(i + t));
    }
  r.check(p, 0.05f, "DoRA dropout, magnitudes", [&](int l, LoraTarget tt) {
    return std::vector<int64_t>{lora.offset_mag(l, tt) + 1, lora.offset_mag(l, tt) + 5};
  });
}

}  // namespace
}  // namespace st
