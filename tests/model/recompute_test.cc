// Every Recompute mode (Note [recompute], model/layer.h) trains to the same bits on the CPU: the
// loss of each micro-batch and every LoRA gradient, with LoRA dropout on, two micro-batches and all
// targets. Covers the last layer's backward, which reuses its forward's intermediates instead of
// recomputing them (LayerCtx::forward_current).
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "model/model.h"
#include "model/resident_source.h"

namespace st {
namespace {

struct StepResult {
  std::vector<double> losses;
  std::vector<float> grads;
};

StepResult train_step(Recompute mode) {
  const std::string dir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_gqa";
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  CHECK_OK(be.status());
  auto mc = load_hf_config(dir + "/model/config.json");
  auto ck = Checkpoint::open(dir + "/model");
  CHECK_OK(mc.status());
  CHECK_OK(ck.status());
  LoraConfig lc;
  lc.r = 2;
  lc.alpha = 4;
  lc.dropout = 0.2;
  lc.targets.fill(true);
  auto m = Model::create(*mc, be->get(), lc,
                         {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 9, .recompute = mode});
  CHECK_OK(m.status());
  Model& model = **m;
  CHECK_OK(model.load_extras(*ck));
  auto src = ResidentLayerSource::from_checkpoint(be->get(), *mc, model.layer_layout(), *ck);
  CHECK_OK(src.status());
  Lora& lora = model.lora();
  lora.init(4);
  std::vector<float> p = lora.params_to_host();
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] == 0.0f) p[i] = 0.02f * static_cast<float>((i * 7919) % 13) - 0.12f;  // B != 0: dA != 0
  lora.params_from_host(p);
  Batch b1, b2;
  for (Batch* b : {&b1, &b2}) {
    b->batch = 2;
    b->seq = 8;
  }
  for (int i = 0; i < 16; ++i) {
    b1.input_ids.push_back((i * 37 + 11) % static_cast<int>(mc->vocab_size));
    b2.input_ids.push_back((i * 53 + 5) % static_cast<int>(mc->vocab_size));
  }
  b1.labels = b1.input_ids;
  b2.labels = b2.input_ids;
  lora.zero_grads();
  auto losses = model.forward_backward({&b1, &b2}, **src, {0.5f, 0.5f});
  CHECK_OK(losses.status());
  StepResult r;
  r.losses = *losses;
  r.grads.resize(static_cast<size_t>(lora.numel()));
  (*be)->copy_d2h(r.grads.data(), lora.grads().data, r.grads.size() * sizeof(float), StreamId::kCompute);
  (*be)->sync_all();
  return r;
}

TEST(Recompute, EveryModeTrainsToTheSameBits) {
  const StepResult none = train_step(Recompute::kNone);
  ASSERT_EQ(none.losses.size(), 2u);
  bool any_grad = false;
  for (float g : none.grads) any_grad = any_grad || g != 0.0f;
  ASSERT_TRUE(any_grad) << "no LoRA gradient: the comparison would prove nothing";
  for (Recompute mode : {Recompute::kFull, Recompute::kAttention}) {
    const StepResult r = train_step(mode);
    EXPECT_EQ(r.losses, none.losses) << recompute_name(mode);
    ASSERT_EQ(r.grads.size(), none.grads.size());
    EXPECT_EQ(std::memcmp(r.grads.data(), none.grads.data(), r.grads.size() * sizeof(float)), 0)
        << recompute_name(mode) << ": LoRA gradients differ from recompute none";
  }
}

}  // namespace
}  // namespace st
