// The readers accept real transformers 5 / PEFT output (tests/fixtures, made by
// tools/ref/make_goldens.py), and our RoPE frequencies equal the ones HF's model computed.
#include <gtest/gtest.h>

#include <cstring>

#include "core/file.h"
#include "core/json.h"
#include "io/hf_config.h"
#include "io/safetensors.h"

namespace st {
namespace {

std::string fixture(const std::string& name, const std::string& rel) {
  return path_join(path_join(path_join(ST_SOURCE_DIR, "tests/fixtures"), name), rel);
}

void expect_shape(const Checkpoint& ck, const std::string& name, std::vector<int64_t> shape) {
  auto t = ck.find(name);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->second->shape, shape) << name;
  EXPECT_EQ(t->second->dtype, DType::kF32) << name;
}

class Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Fixture, ModelConfigAndTensorsAgree) {
  const std::string name = GetParam();
  auto c = load_hf_config(fixture(name, "model/config.json"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto ck = Checkpoint::open(fixture(name, "model"));
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  const int64_t H = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
  EXPECT_EQ(H, 64);
  EXPECT_EQ(V, 256);
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 2);
  int64_t counted = 0;
  for (const std::string& n : ck->tensor_names()) counted += ck->find(n)->second->numel();
  EXPECT_EQ(counted, c->total_params());
  expect_shape(*ck, "model.embed_tokens.weight", {V, H});
  expect_shape(*ck, "model.norm.weight", {H});
  EXPECT_EQ(ck->has("lm_head.weight"), !c->tie_word_embeddings);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    expect_shape(*ck, p + "self_attn.q_proj.weight", {c->q_dim(), H});
    expect_shape(*ck, p + "self_attn.k_proj.weight", {c->kv_dim(), H});
    expect_shape(*ck, p + "self_attn.v_proj.weight", {c->kv_dim(), H});
    expect_shape(*ck, p + "self_attn.o_proj.weight", {H, c->q_dim()});
    expect_shape(*ck, p + "mlp.gate_proj.weight", {F, H});
    expect_shape(*ck, p + "mlp.down_proj.weight", {H, F});
    EXPECT_EQ(ck->has(p + "self_attn.q_proj.bias"), c->attention_bias);
    EXPECT_EQ(ck->has(p + "self_attn.q_norm.weight"), c->qk_norm);
    if (c->qk_norm) expect_shape(*ck, p + "self_attn.k_norm.weight", {c->head_dim});
  }
  // Through read_tensor_as with a conversion, as the loaders will use it.
  std::vector<uint16_t> bf(static_cast<size_t>(H));
  ASSERT_TRUE(read_tensor_as(*ck, "model.norm.weight", {H}, DType::kBF16, bf.data()).ok());
}

TEST_P(Fixture, RopeInvFreqMatchesHf) {
  const std::string name = GetParam();
  auto c = load_hf_config(fixture(name, "model/config.json"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto ex = Checkpoint::open(fixture(name, "expected.safetensors"));
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  std::vector<float> ours = rope_inv_freq(*c);
  std::vector<float> hf(ours.size());
  ASSERT_TRUE(read_tensor_as(*ex, "rope_inv_freq", {static_cast<int64_t>(ours.size())}, DType::kF32, hf.data()).ok());
  for (size_t i = 0; i < ours.size(); ++i) {
    int32_t a, b;
    std::memcpy(&a, &ours[i], 4);
    std::memcpy(&b, &hf[i], 4);
    EXPECT_LE(std::abs(a - b), 1) << name << " index " << i << ": " << ours[i] << " vs HF " << hf[i];
  }
}

TEST_P(Fixture, AdapterExpectedAndTraceOpen) {
  const std::string name = GetParam();
  auto ad = Checkpoint::open(fixture(name, "adapter/adapter_model.safetensors"));
  ASSERT_TRUE(ad.ok()) << ad.status().to_string();
  auto fin = Checkpoint::open(fixture(name, "final_adapter.safetensors"));
  ASSERT_TRUE(fin.ok()) << fin.status().to_string();
  auto ex = Checkpoint::open(fixture(name, "expected.safetensors"));
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  EXPECT_EQ(ad->tensor_names(), fin->tensor_names());
  for (const std::string& n : ad->tensor_names()) {
    EXPECT_EQ(n.rfind("base_model.model.model.layers.", 0), 0u) << n;
    EXPECT_TRUE(ex->has(n)) << "no gradient for " << n;  // one gradient per LoRA tensor
  }
  EXPECT_TRUE(ex->has("logits"));
  EXPECT_TRUE(ex->has("base_logits"));
  auto cfg = read_json_file(fixture(name, "adapter/adapter_config.json"));
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ((*cfg)["r"], 4);
  auto trace = read_json_file(fixture(name, "trace.json"));
  ASSERT_TRUE(trace.ok()) << trace.status().to_string();
  EXPECT_EQ((*trace)["steps"].size(), 8u);
  EXPECT_TRUE((*trace)["rope_check"].get<bool>());
  EXPECT_TRUE(file_exists(fixture(name, "data.jsonl")));
}

INSTANTIATE_TEST_SUITE_P(Io, Fixture, ::testing::Values("llama_gqa", "qwen2_tied", "qwen3_qknorm", "mistral_swa", "qwen2_swa"));

}  // namespace
}  // namespace st
