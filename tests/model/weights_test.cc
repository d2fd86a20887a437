// Layout invariants: aligned, non-overlapping, HF shapes, optional tensors only when configured.
#include "model/weights.h"

#include <gtest/gtest.h>

namespace st {
namespace {

ModelConfig tiny(Arch a) {
  ModelConfig c;
  c.arch = a;
  c.vocab_size = 100;
  c.hidden_size = 24;
  c.intermediate_size = 40;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;  // != H/NH on purpose
  c.attention_bias = a == Arch::kQwen2;
  c.qk_norm = a == Arch::kQwen3;
  return c;
}

TEST(LayerLayout, AlignedDisjointAndShaped) {
  for (Arch a : {Arch::kLlama, Arch::kQwen2, Arch::kQwen3}) {
    ModelConfig c = tiny(a);
    LayerLayout l = make_layer_layout(c, DType::kBF16);
    size_t end = 0;
    for (const auto& t : l.tensors) {
      EXPECT_EQ(t.offset % kLayerAlign, 0u) << t.hf_suffix;
      EXPECT_GE(t.offset, end) << t.hf_suffix;
      end = t.offset + t.nbytes;
    }
    EXPECT_GE(l.bytes, end);
    EXPECT_EQ(l.bytes % kLayerAlign, 0u);
    EXPECT_EQ(l.find(LayerTensor::kQ)->shape, (std::vector<int64_t>{32, 24}));
    EXPECT_EQ(l.find(LayerTensor::kO)->shape, (std::vector<int64_t>{24, 32}));
    EXPECT_EQ(l.find(LayerTensor::kK)->nbytes, 16u * 24 * 2);
    EXPECT_EQ(l.find(LayerTensor::kDown)->shape, (std::vector<int64_t>{24, 40}));
    EXPECT_EQ(l.find(LayerTensor::kQBias) != nullptr, a == Arch::kQwen2);
    EXPECT_EQ(l.find(LayerTensor::kQNorm) != nullptr, a == Arch::kQwen3);
    std::vector<char> blob(l.bytes);
    LayerWeights w = layer_weights_view(l, blob.data());
    EXPECT_EQ(w.gate.data, blob.data() + l.find(LayerTensor::kGate)->offset);
    EXPECT_EQ(w.gate.shape_str(), "[40,24]");
    EXPECT_EQ(w.q_norm.empty(), a != Arch::kQwen3);
    EXPECT_EQ(w.v_bias.empty(), a != Arch::kQwen2);
  }
}

TEST(ExtrasLayout, TiedSharesEmbedding) {
  ModelConfig c = tiny(Arch::kLlama);
  c.tie_word_embeddings = true;
  ExtrasLayout l = make_extras_layout(c, DType::kF32);
  EXPECT_EQ(l.tensors.size(), 2u);
  std::vector<char> blob(l.bytes);
  ExtrasWeights w = extras_weights_view(l, blob.data(), true);
  EXPECT_EQ(w.lm_head.data, w.embed.data);
  c.tie_word_embeddings = false;
  ExtrasLayout u = make_extras_layout(c, DType::kF32);
  ASSERT_EQ(u.tensors.size(), 3u);
  EXPECT_EQ(u.tensors[2].hf_suffix, "lm_head.weight");
  std::vector<char> blob2(u.bytes);
  ExtrasWeights w2 = extras_weights_view(u, blob2.data(), false);
  EXPECT_NE(w2.lm_head.data, w2.embed.data);
  EXPECT_EQ(w2.final_norm.shape_str(), "[24]");
}

}  // namespace
}  // namespace st
