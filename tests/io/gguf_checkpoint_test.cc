// GgufCheckpoint on fixtures written by gguf-py (tools/gguf/make_gguf_fixtures.py): config from
// metadata, HF names, reads vs. the generator's HF-order references (q/k un-permuted there with
// numpy, independently of our row formula), tokenizer data.
#include "io/gguf_checkpoint.h"
#include "io/hf_config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace st {
namespace {

std::string fixture(const std::string& name) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/gguf/" + name; }

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// Max |a-b| relative to max |b|: 1-ulp FMA differences only.
void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(got[i], ref[i], 1e-6f * (1 + std::fabs(ref[i]))) << what << " element " << i;
  }
}

TEST(GgufCheckpoint, TinyLlamaConfig) {
  auto ck = GgufCheckpoint::open(fixture("tiny_llama.gguf"));
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  const ModelConfig& c = ck->config();
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.intermediate_size, 96);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.vocab_size, 40);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);     // f32 in the file, decimal again here
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kLlama3);  // from rope_freqs.weight
  EXPECT_FLOAT_EQ(c.rope_factor, 8.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  auto names = ck->tensor_names();
  EXPECT_EQ(names.size(), 3u + 2u * 12u);
  EXPECT_EQ(names[0], "model.embed_tokens.weight");
  EXPECT_TRUE(ck->has("lm_head.weight"));
  EXPECT_TRUE(ck->has("model.layers.1.self_attn.v_proj.bias"));
  EXPECT_FALSE(ck->has("rope_freqs.weight"));
  EXPECT_EQ(*ck->shape("model.layers.0.mlp.down_proj.weight"), (std::vector<int64_t>{64, 96}));
  EXPECT_EQ(ck->describe(), "gguf:" + fixture("tiny_llama.gguf"));
}

TEST(GgufCheckpoint, TinyLlamaReadsUndoThePermutation) {
  auto ck = GgufCheckpoint::open(fixture("tiny_llama.gguf"));
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  for (const char* n : {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                        "model.layers.1.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                        "model.layers.1.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
                        "model.layers.0.self_attn.q_proj.bias", "model.layers.1.self_attn.k_proj.bias",
                        "model.layers.1.mlp.down_proj.weight"}) {
    std::vector<int64_t> shape = *ck->shape(n);
    std::vector<float> ref = read_f32(fixture(std::string("ref_llama_") + n + ".f32"));
    std::vector<float> got(ref.size());
    Status s = ck->read_tensor_as(n, shape, DType::kF32, got.data());
    ASSERT_TRUE(s.ok()) << s.to_string();
    expect_close(got, ref, n);
    std::vector<uint16_t> bf(ref.size());
    ASSERT_TRUE(ck->read_tensor_as(n, shape, DType::kBF16, bf.data()).ok());
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(bf[i], f32_to_bf16(got[i])) << n << " " << i;
  }
}

TEST(GgufCheckpoint, ReadErrorsNameTheTensor) {
  auto ck = GgufCheckpoint::open(fixture("tiny_llama.gguf"));
  ASSERT_TRUE(ck.ok());
  std::vector<float> buf(64 * 64);
  Status s = ck->read_tensor_as("model.layers.0.self_attn.q_proj.weight", {64, 32}, DType::kF32, buf.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q_proj"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("tiny_llama.gguf"), std::string::npos) << s.message();
  s = ck->read_tensor_as("model.layers.7.self_attn.q_proj.weight", {64, 64}, DType::kF32, buf.data());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
}

TEST(GgufCheckpoint, TinyQwen3IsTiedAndNotPermuted) {
  auto ck = GgufCheckpoint::open(fixture("tiny_qwen3.gguf"));
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  const ModelConfig& c = ck->config();
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 32);  // key_length, not H/NH
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kNone);
  EXPECT_FALSE(ck->has("lm_head.weight"));
  for (const char* n : {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                        "model.layers.0.self_attn.k_proj.weight"}) {
    std::vector<float> ref = read_f32(fixture(std::string("ref_qwen3_") + n + ".f32"));
    std::vector<float> got(ref.size());
    ASSERT_TRUE(ck->read_tensor_as(n, *ck->shape(n), DType::kF32, got.data()).ok());
    expect_close(got, ref, n);
  }
}

// yarn keys as convert_hf_to_gguf writes them (type, factor, original context): the same RoPE as the
// HF config {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 512}, whose
// frequencies hf_config_test checks against transformers itself.
TEST(GgufCheckpoint, YarnKeysGiveHfYarn) {
  auto ck = GgufCheckpoint::open(fixture("tiny_qwen3_yarn.gguf"));
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  const ModelConfig& c = ck->config();
  EXPECT_EQ(c.rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(c.rope_factor, 4.0);
  EXPECT_EQ(c.rope_original_max_pos, 512);
  auto hf = parse_json(R"({"model_type":"qwen3","vocab_size":512,"hidden_size":64,"intermediate_size":64,
      "num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":32,
      "max_position_embeddings":2048,"rope_theta":1000000.0,
      "rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":512}})", "hf");
  ASSERT_TRUE(hf.ok());
  auto want = parse_hf_config(*hf, "hf");
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  EXPECT_EQ(rope_inv_freq(c), rope_inv_freq(*want));
  EXPECT_EQ(rope_attention_scale(c), rope_attention_scale(*want));
  EXPECT_NE(rope_attention_scale(c), static_cast<float>(1.0 / std::sqrt(32.0)));
}

// A copy of a fixture with the f32 value of metadata key `key` (a type-6 scalar) set to `v`.
std::string with_f32_key(const std::string& name, const std::string& key, float v) {
  std::ifstream in(fixture(name), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find(key);
  EXPECT_NE(at, std::string::npos) << key;
  const size_t type_at = at + key.size();
  EXPECT_EQ(bytes[type_at], 6) << key << " is not an f32";
  std::memcpy(&bytes[type_at + 4], &v, 4);
  const std::string out = ::testing::TempDir() + "/patched_" + std::to_string(::getpid()) + ".gguf";
  std::ofstream(out, std::ios::binary) << bytes;
  return out;
}

// Session 22 audit: a negative rms epsilon in GGUF metadata gave NaN logits and exit code 0; the
// checks config.json gets now run on GGUF metadata too, naming the key.
TEST(GgufCheckpoint, DamagedNormAndRopeKeysAreRefusedByName) {
  for (const auto& [key, v] : std::vector<std::pair<std::string, float>>{
           {"llama.attention.layer_norm_rms_epsilon", -1e-5f},
           {"llama.attention.layer_norm_rms_epsilon", 0.0f},
           {"llama.attention.layer_norm_rms_epsilon", INFINITY},
           {"llama.rope.freq_base", -10000.0f},
           {"llama.rope.freq_base", NAN}}) {
    const std::string path = with_f32_key("tiny_llama.gguf", key, v);
    auto ck = GgufCheckpoint::open(path);
    ASSERT_FALSE(ck.ok()) << key << " = " << v;
    EXPECT_EQ(ck.status().code(), StatusCode::kInvalidArgument) << ck.status().to_string();
    EXPECT_NE(ck.status().message().find(key), std::string::npos) << ck.status().to_string();
    EXPECT_NE(ck.status().message().find(path), std::string::npos) << ck.status().to_string();
    std::remove(path.c_str());
  }
  EXPECT_TRUE(GgufCheckpoint::open(with_f32_key("tiny_llama.gguf", "llama.rope.freq_base", 500000.0f)).ok());
  // A yarn factor that is not a positive finite number (all-NaN logits before, rc 0: session 23).
  for (float v : {NAN, 0.0f, -4.0f, INFINITY}) {
    const std::string path = with_f32_key("tiny_qwen3_yarn.gguf", "qwen3.rope.scaling.factor", v);
    auto ck = GgufCheckpoint::open(path);
    ASSERT_FALSE(ck.ok()) << v;
    EXPECT_NE(ck.status().message().find("rope.scaling.factor"), std::string::npos) << ck.status().to_string();
    std::remove(path.c_str());
  }
}

TEST(GgufCheckpoint, TokenizerData) {
  auto ck = GgufCheckpoint::open(fixture("tiny_qwen3.gguf"));
  ASSERT_TRUE(ck.ok());
  auto tok = ck->tokenizer();
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->model, "gpt2");
  EXPECT_EQ(tok->pre, "smollm");
  EXPECT_EQ(tok->tokens.size(), static_cast<size_t>(ck->config().vocab_size));
  EXPECT_EQ(tok->tokens[1], "<|im_start|>");
  EXPECT_EQ(tok->token_types[1], 3);
  EXPECT_EQ(tok->token_types[100], 1);
  EXPECT_FALSE(tok->merges.empty());
  EXPECT_NE(tok->merges[0].find(' '), std::string::npos);
  EXPECT_EQ(tok->bos_id, 1);
  EXPECT_EQ(tok->eos_id, 2);
  EXPECT_EQ(tok->pad_id, 0);
  EXPECT_EQ(tok->unk_id, -1);
  EXPECT_FALSE(tok->add_bos);
  EXPECT_NE(tok->chat_template.find("<|im_start|>"), std::string::npos);
}

TEST(GgufCheckpoint, NameMappingRoundTrips) {
  for (const char* g : {"token_embd.weight", "output.weight", "output_norm.weight", "blk.12.attn_q.weight",
                        "blk.0.attn_k.bias", "blk.3.attn_output.weight", "blk.5.ffn_gate.weight",
                        "blk.5.ffn_down.weight", "blk.2.attn_q_norm.weight", "blk.9.ffn_norm.weight"}) {
    auto h = gguf_to_hf_name(g);
    ASSERT_TRUE(h.ok()) << g;
    EXPECT_EQ(*hf_to_gguf_name(*h), g);
  }
  EXPECT_EQ(*gguf_to_hf_name("blk.12.attn_q.weight"), "model.layers.12.self_attn.q_proj.weight");
  EXPECT_EQ(*gguf_to_hf_name("blk.1.ffn_norm.weight"), "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(*gguf_to_hf_name("blk.1.attn_norm.weight"), "model.layers.1.input_layernorm.weight");
  EXPECT_FALSE(gguf_to_hf_name("blk.x.attn_q.weight").ok());
  EXPECT_FALSE(gguf_to_hf_name("blk.01.attn_q.weight").ok());
  EXPECT_FALSE(gguf_to_hf_name("rope_freqs.weight").ok());
}

TEST(GgufCheckpoint, QuantsFileIsNotAModel) {
  auto ck = GgufCheckpoint::open(fixture("quants.gguf"));
  ASSERT_FALSE(ck.ok());
  EXPECT_NE(ck.status().message().find("general.architecture"), std::string::npos) << ck.status().to_string();
}

}  // namespace
}  // namespace st
