// HF config.json parsing (v4 and v5 layouts, all four families), validation, round trip through
// hf_config_to_json, parameter counts of real models, and RoPE inverse frequencies against an
// independent double-precision computation.
#include "io/hf_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/file.h"

namespace st {
namespace {

ModelConfig parse_ok(const std::string& text) {
  auto j = parse_json(text, "test");
  EXPECT_TRUE(j.ok());
  auto c = parse_hf_config(*j, "test config.json");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : ModelConfig{};
}

Status parse_err(const std::string& text) {
  auto j = parse_json(text, "test");
  EXPECT_TRUE(j.ok());
  return parse_hf_config(*j, "test config.json").status();
}

// Llama-3.1-8B, transformers v4 layout.
const char* kLlama31V4 = R"({"architectures":["LlamaForCausalLM"],"attention_bias":false,"bos_token_id":128000,
  "eos_token_id":[128001,128008,128009],"hidden_act":"silu","hidden_size":4096,"intermediate_size":14336,
  "max_position_embeddings":131072,"mlp_bias":false,"model_type":"llama","num_attention_heads":32,
  "num_hidden_layers":32,"num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_scaling":{"factor":8.0,
  "low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192,"rope_type":"llama3"},
  "rope_theta":500000.0,"tie_word_embeddings":false,"torch_dtype":"bfloat16","vocab_size":128256})";

// The same model as transformers 5 writes it.
const char* kLlama31V5 = R"({"architectures":["LlamaForCausalLM"],"attention_bias":false,"bos_token_id":128000,
  "eos_token_id":128001,"hidden_act":"silu","hidden_size":4096,"intermediate_size":14336,
  "max_position_embeddings":131072,"model_type":"llama","num_attention_heads":32,"num_hidden_layers":32,
  "num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_parameters":{"factor":8.0,"high_freq_factor":4.0,
  "low_freq_factor":1.0,"original_max_position_embeddings":8192,"rope_theta":500000.0,"rope_type":"llama3"},
  "tie_word_embeddings":false,"dtype":"bfloat16","vocab_size":128256})";

void expect_llama31(const ModelConfig& c) {
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(c.rope_factor, 8.0);
  EXPECT_EQ(c.rope_low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_original_max_pos, 8192);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.total_params(), 8030261248);  // the published Llama-3.1-8B parameter count
}

TEST(HfConfig, Llama31BothLayouts) {
  ModelConfig v4 = parse_ok(kLlama31V4);
  expect_llama31(v4);
  EXPECT_EQ(v4.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  ModelConfig v5 = parse_ok(kLlama31V5);
  expect_llama31(v5);
  EXPECT_EQ(v5.eos_token_ids, (std::vector<int64_t>{128001}));
  EXPECT_EQ(rope_inv_freq(v4), rope_inv_freq(v5));
}

TEST(HfConfig, Qwen2HasBiasesAlways) {
  // Qwen2.5-0.5B.
  ModelConfig c = parse_ok(R"({"architectures":["Qwen2ForCausalLM"],"bos_token_id":151643,"eos_token_id":151643,
    "hidden_act":"silu","hidden_size":896,"intermediate_size":4864,"max_position_embeddings":32768,
    "max_window_layers":24,"model_type":"qwen2","num_attention_heads":14,"num_hidden_layers":24,
    "num_key_value_heads":2,"rms_norm_eps":1e-06,"rope_theta":1000000.0,"sliding_window":32768,
    "tie_word_embeddings":true,"torch_dtype":"bfloat16","use_sliding_window":false,"vocab_size":151936})");
  EXPECT_EQ(c.arch, Arch::kQwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.sliding_window, 0);  // use_sliding_window false
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kNone);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.total_params(), 494032768);
  // attention_bias: false is ignored for Qwen2 (its modules always have q/k/v biases).
  EXPECT_TRUE(parse_ok(R"({"model_type":"qwen2","vocab_size":8,"hidden_size":8,"intermediate_size":8,
    "num_hidden_layers":1,"num_attention_heads":2,"attention_bias":false})").attention_bias);
}

TEST(HfConfig, Qwen3QkNormAndExplicitHeadDim) {
  // Qwen3-0.6B, v5 layout.
  ModelConfig c = parse_ok(R"({"architectures":["Qwen3ForCausalLM"],"attention_bias":false,"bos_token_id":151643,
    "eos_token_id":151645,"head_dim":128,"hidden_act":"silu","hidden_size":1024,"intermediate_size":3072,
    "max_position_embeddings":40960,"model_type":"qwen3","num_attention_heads":16,"num_hidden_layers":28,
    "num_key_value_heads":8,"rms_norm_eps":1e-06,"rope_parameters":{"rope_theta":1000000,"rope_type":"default"},
    "sliding_window":null,"tie_word_embeddings":true,"dtype":"bfloat16","use_sliding_window":false,
    "vocab_size":151936})");
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_dim(), 2048);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.total_params(), 596049920);
}

TEST(HfConfig, MistralDefaultsAndSlidingWindow) {
  // Mistral-7B-v0.1 (no head_dim, no num_key_value_heads default needed).
  ModelConfig c = parse_ok(R"({"architectures":["MistralForCausalLM"],"bos_token_id":1,"eos_token_id":2,
    "hidden_act":"silu","hidden_size":4096,"intermediate_size":14336,"max_position_embeddings":32768,
    "model_type":"mistral","num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,
    "rms_norm_eps":1e-05,"rope_theta":10000.0,"sliding_window":4096,"tie_word_embeddings":false,
    "torch_dtype":"bfloat16","vocab_size":32000})");
  EXPECT_EQ(c.arch, Arch::kMistral);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.total_params(), 7241732096);  // published Mistral-7B count
  // Defaults: KVH = NH, head_dim = H / NH, theta 10000, untied, no bias.
  ModelConfig d = parse_ok(R"({"model_type":"llama","vocab_size":10,"hidden_size":12,"intermediate_size":7,
    "num_hidden_layers":1,"num_attention_heads":3})");
  EXPECT_EQ(d.num_kv_heads, 3);
  EXPECT_EQ(d.head_dim, 4);
  EXPECT_EQ(d.rope_theta, 10000.0);
  EXPECT_FALSE(d.tie_word_embeddings);
  EXPECT_FALSE(d.attention_bias);
  EXPECT_TRUE(d.eos_token_ids.empty());
}

// Sliding windows as transformers resolves them: Mistral's key absent = the class default 4096,
// null = none; Qwen2/Qwen3 only with use_sliding_window, on layers >= max_window_layers (default
// 28); an explicit layer_types list names the layers; the writer keeps all of it.
TEST(HfConfig, SlidingWindowPerFamilyAndLayer) {
  const std::string sizes = R"("vocab_size":10,"hidden_size":8,"intermediate_size":4,"num_hidden_layers":4,
    "num_attention_heads":2,)";
  ModelConfig m = parse_ok("{\"model_type\":\"mistral\"," + sizes + "\"rope_theta\":1e4}");
  EXPECT_EQ(m.sliding_window, 4096);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(m.attention_window(l), 4096);
  ModelConfig mn = parse_ok("{\"model_type\":\"mistral\"," + sizes + "\"sliding_window\":null}");
  EXPECT_EQ(mn.attention_window(0), 0);
  ModelConfig l = parse_ok("{\"model_type\":\"llama\"," + sizes + "\"sliding_window\":16}");
  EXPECT_EQ(l.attention_window(0), 0);  // LlamaConfig has no sliding window
  ModelConfig q = parse_ok("{\"model_type\":\"qwen2\"," + sizes +
                           "\"use_sliding_window\":true,\"sliding_window\":16,\"max_window_layers\":2}");
  EXPECT_EQ(q.attention_window(0), 0);
  EXPECT_EQ(q.attention_window(1), 0);
  EXPECT_EQ(q.attention_window(2), 16);
  EXPECT_EQ(q.attention_window(3), 16);
  ModelConfig qd = parse_ok("{\"model_type\":\"qwen3\"," + sizes + "\"use_sliding_window\":true,\"sliding_window\":16}");
  EXPECT_EQ(qd.attention_window(3), 0);  // max_window_layers 28 > 4 layers
  ModelConfig qoff = parse_ok("{\"model_type\":\"qwen2\"," + sizes + "\"use_sliding_window\":false,\"sliding_window\":16}");
  EXPECT_EQ(qoff.attention_window(3), 0);
  ModelConfig lt = parse_ok("{\"model_type\":\"mistral\"," + sizes + "\"sliding_window\":8,\"layer_types\":"
                            "[\"sliding_attention\",\"full_attention\",\"sliding_attention\",\"full_attention\"]}");
  EXPECT_EQ(lt.attention_window(0), 8);
  EXPECT_EQ(lt.attention_window(1), 0);
  EXPECT_EQ(lt.attention_window(2), 8);
  EXPECT_NE(parse_err("{\"model_type\":\"mistral\"," + sizes + "\"sliding_window\":8,\"layer_types\":[\"full_attention\"]}")
                .message()
                .find("layer_types"),
            std::string::npos);
  EXPECT_NE(parse_err("{\"model_type\":\"mistral\"," + sizes + "\"sliding_window\":8,\"layer_types\":"
                      "[\"chunked_attention\",\"full_attention\",\"full_attention\",\"full_attention\"]}")
                .message()
                .find("chunked_attention"),
            std::string::npos);
  EXPECT_FALSE(parse_err("{\"model_type\":\"mistral\"," + sizes + "\"sliding_window\":-1}").ok());
  // Round trips keep every layer's window, and a windowless Mistral says so explicitly.
  for (const ModelConfig& c : {m, mn, q, lt}) {
    Json j = hf_config_to_json(c);
    auto back = parse_hf_config(j, "round trip");
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(back->attention_window(i), c.attention_window(i)) << j.dump();
  }
  EXPECT_TRUE(hf_config_to_json(mn).contains("sliding_window"));
  EXPECT_EQ(hf_config_to_json(q)["max_window_layers"], 2);
}

TEST(HfConfig, LlamaAttentionBiasCoversOProj) {
  ModelConfig c = parse_ok(R"({"model_type":"llama","vocab_size":10,"hidden_size":8,"intermediate_size":4,
    "num_hidden_layers":1,"num_attention_heads":2,"attention_bias":true})");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.o_proj_bias);
  // 2 layers' worth of norms etc. checked by hand: q,k,v,o 4*64 + biases 3*8 + o bias 8 + mlp 3*32 + norms 16.
  EXPECT_EQ(c.layer_params(), 256 + 24 + 8 + 96 + 16);
}

TEST(HfConfig, Errors) {
  const std::string base = R"("vocab_size":10,"hidden_size":8,"intermediate_size":4,"num_hidden_layers":1,)";
  Status s = parse_err(R"({"model_type":"gemma2",)" + base + R"("num_attention_heads":2})");
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("gemma2"), std::string::npos);
  EXPECT_NE(s.message().find("test config.json"), std::string::npos);
  s = parse_err(R"({"model_type":"llama",)" + base + R"("num_attention_heads":4,"num_key_value_heads":3})");
  EXPECT_NE(s.message().find("num_key_value_heads"), std::string::npos) << s.to_string();
  s = parse_err(R"({"model_type":"llama",)" + base + R"("num_attention_heads":2,"head_dim":5})");
  EXPECT_NE(s.message().find("even"), std::string::npos) << s.to_string();
  s = parse_err(R"({"model_type":"llama","vocab_size":-1,"hidden_size":8,"intermediate_size":4,
    "num_hidden_layers":1,"num_attention_heads":2})");
  EXPECT_NE(s.message().find("vocab_size"), std::string::npos) << s.to_string();
  s = parse_err(R"({"model_type":"llama","hidden_size":8,"intermediate_size":4,"num_hidden_layers":1,
    "num_attention_heads":2})");
  EXPECT_NE(s.message().find("vocab_size"), std::string::npos) << s.to_string();
  s = parse_err(R"({"model_type":"llama",)" + base + R"("num_attention_heads":2,"rope_scaling":{"rope_type":"longrope","factor":4}})");
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("longrope"), std::string::npos);
  s = parse_err(R"({"model_type":"llama",)" + base + R"("num_attention_heads":2,"rope_scaling":{"type":"llama3","factor":8}})");
  EXPECT_NE(s.message().find("low_freq_factor"), std::string::npos) << s.to_string();
  s = parse_err(R"({"model_type":"llama",)" + base + R"("num_attention_heads":2,"hidden_act":"gelu"})");
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  s = parse_err(R"({"model_type":"llama",)" + base + R"("num_attention_heads":2,"eos_token_id":"x"})");
  EXPECT_NE(s.message().find("eos_token_id"), std::string::npos);
  s = parse_err(R"({)" + base + R"("num_attention_heads":2})");
  EXPECT_NE(s.message().find("model_type"), std::string::npos);
  // Sizes past any real model (a damaged file) are refused by key before anything is sized.
  s = parse_err(R"({"model_type":"llama","vocab_size":10,"hidden_size":1099511627776,"intermediate_size":4,
    "num_hidden_layers":1,"num_attention_heads":2})");
  EXPECT_NE(s.message().find("'hidden_size' = 1099511627776 is beyond"), std::string::npos) << s.to_string();
  s = parse_err(R"({"model_type":"llama","vocab_size":10,"hidden_size":8,"intermediate_size":4,
    "num_hidden_layers":2147483647,"num_attention_heads":2})");
  EXPECT_NE(s.message().find("num_hidden_layers"), std::string::npos) << s.to_string();
}

TEST(HfConfig, LegacyTypeKeyAndLinearScaling) {
  ModelConfig c = parse_ok(R"({"model_type":"llama","vocab_size":10,"hidden_size":64,"intermediate_size":4,
    "num_hidden_layers":1,"num_attention_heads":4,"rope_theta":10000,"rope_scaling":{"type":"linear","factor":2.0}})");
  EXPECT_EQ(c.rope_scaling, RopeScaling::kLinear);
  ModelConfig plain = c;
  plain.rope_scaling = RopeScaling::kNone;
  auto a = rope_inv_freq(c), b = rope_inv_freq(plain);
  ASSERT_EQ(a.size(), 8u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i] / 2.0f);
}

TEST(HfConfig, JsonRoundTrip) {
  for (const char* text : {kLlama31V4, kLlama31V5}) {
    ModelConfig c = parse_ok(text);
    Json j = hf_config_to_json(c);
    EXPECT_EQ(j["architectures"][0], "LlamaForCausalLM");
    EXPECT_EQ(j["rope_parameters"]["rope_type"], "llama3");
    EXPECT_EQ(j["rope_scaling"]["rope_type"], "llama3");
    auto back = parse_hf_config(j, "round trip");
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    expect_llama31(*back);
    EXPECT_EQ(back->eos_token_ids, c.eos_token_ids);
  }
  ModelConfig q;
  q.arch = Arch::kQwen3;
  q.vocab_size = 100; q.hidden_size = 64; q.intermediate_size = 32; q.num_layers = 2;
  q.num_heads = 4; q.num_kv_heads = 2; q.head_dim = 32; q.qk_norm = true; q.rope_theta = 1e6;
  q.max_position_embeddings = 128; q.tie_word_embeddings = true;
  Json j = hf_config_to_json(q);
  EXPECT_EQ(j["model_type"], "qwen3");
  EXPECT_TRUE(j["rope_scaling"].is_null());
  auto back = parse_hf_config(j, "round trip");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->head_dim, 32);
  EXPECT_TRUE(back->qk_norm);
  EXPECT_TRUE(back->tie_word_embeddings);
  EXPECT_EQ(back->total_params(), q.total_params());
}

int ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(ia - ib);
}

TEST(HfConfig, RopeInvFreqDefaultMatchesDoubleFormula) {
  ModelConfig c = parse_ok(R"({"model_type":"qwen2","vocab_size":8,"hidden_size":1024,"intermediate_size":8,
    "num_hidden_layers":1,"num_attention_heads":8,"rope_theta":1000000.0})");
  auto inv = rope_inv_freq(c);
  ASSERT_EQ(inv.size(), 64u);
  EXPECT_EQ(inv[0], 1.0f);
  for (size_t i = 0; i < inv.size(); ++i) {
    const float want = static_cast<float>(1.0 / std::pow(1e6, 2.0 * static_cast<double>(i) / 128.0));
    EXPECT_LE(ulp_distance(inv[i], want), 2) << i << ": " << inv[i] << " vs " << want;
  }
}

TEST(HfConfig, RopeInvFreqLlama3MatchesIndependentComputation) {
  ModelConfig c = parse_ok(kLlama31V4);
  auto inv = rope_inv_freq(c);
  ASSERT_EQ(inv.size(), 64u);
  int high = 0, low = 0, mid = 0;
  for (size_t i = 0; i < inv.size(); ++i) {
    const double base = 1.0 / std::pow(500000.0, 2.0 * static_cast<double>(i) / 128.0);
    const double wl = 2.0 * M_PI / base;
    double want;
    if (wl < 8192.0 / 4.0) {
      want = base;
      ++high;
    } else if (wl > 8192.0) {
      want = base / 8.0;
      ++low;
    } else {
      const double s = (8192.0 / wl - 1.0) / 3.0;
      want = (1.0 - s) * base / 8.0 + s * base;
      ++mid;
    }
    EXPECT_NEAR(inv[i], want, 4e-7 * want) << "index " << i;
  }
  // Llama-3.1-8B: wavelengths split 2048 / 8192 into these band sizes.
  EXPECT_EQ(high, 29);
  EXPECT_EQ(mid, 6);
  EXPECT_EQ(low, 29);
  EXPECT_EQ(inv[0], 1.0f);
  EXPECT_NEAR(inv[63], 1.0 / std::pow(500000.0, 126.0 / 128.0) / 8.0, 1e-12);
}

// yarn against transformers' own _compute_yarn_parameters (tools/ref/yarn_ref.py wrote the fixture
// with transformers 5.24 on a numpy float32 stand-in for torch): v4 and v5 layouts, betas and
// truncate, mscale / mscale_all_dim, a null factor, an explicit attention_factor. inv_freq within
// 1 ulp (numpy's float32 pow against the double pow rounded to float used here and for the
// default rope, which matches torch: RopeInvFreqDefaultMatchesDoubleFormula); the attention scale
// is 1/sqrt(D) times the factor squared; the JSON round trip keeps every yarn field.
TEST(HfConfig, YarnMatchesTransformers) {
  const std::string path = std::string(ST_SOURCE_DIR) + "/tests/fixtures/rope/yarn_ref.json";
  auto text = read_file_to_string(path);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  auto ref = parse_json(*text, path);
  ASSERT_TRUE(ref.ok());
  ASSERT_GE((*ref)["cases"].size(), 6u);
  for (const Json& cs : (*ref)["cases"]) {
    const std::string name = cs["name"].get<std::string>();
    Json cfg = cs["config"];
    // Sizes our parser requires and the reference does not read.
    cfg["vocab_size"] = 512;
    cfg["intermediate_size"] = 64;
    cfg["num_hidden_layers"] = 1;
    if (!cfg.contains("num_key_value_heads")) cfg["num_key_value_heads"] = cfg["num_attention_heads"];
    auto c = parse_hf_config(cfg, name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().to_string();
    EXPECT_EQ(c->rope_scaling, RopeScaling::kYarn) << name;
    const double want_attn = cs["attention_factor"].get<double>();
    EXPECT_NEAR(c->rope_attention_factor, want_attn, 1e-12 * want_attn) << name;
    const std::vector<float> inv = rope_inv_freq(*c);
    const Json& bits = cs["inv_freq_bits"];
    ASSERT_EQ(inv.size(), bits.size()) << name;
    int64_t worst = 0;
    for (size_t i = 0; i < inv.size(); ++i) {
      uint32_t u;
      std::memcpy(&u, &inv[i], 4);
      const int64_t d = std::llabs(static_cast<int64_t>(u) - bits[i].get<int64_t>());
      worst = std::max(worst, d);
      EXPECT_LE(d, 1) << name << " inv_freq[" << i << "]";
    }
    std::printf("%-28s attention_factor %.6f  inv_freq max %lld ulp\n", name.c_str(), want_attn,
                static_cast<long long>(worst));
    const double D = static_cast<double>(c->head_dim);
    EXPECT_FLOAT_EQ(rope_attention_scale(*c), static_cast<float>(want_attn * want_attn / std::sqrt(D))) << name;
    // merge writes the config back: the yarn fields survive.
    auto back = parse_hf_config(hf_config_to_json(*c), name + " written");
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(rope_inv_freq(*back), inv) << name;
    EXPECT_EQ(back->rope_attention_factor, c->rope_attention_factor) << name;
  }
  // Without yarn the scale is exactly the plain 1/sqrt(D).
  ModelConfig plain;
  plain.head_dim = 128;
  EXPECT_EQ(rope_attention_scale(plain), static_cast<float>(1.0 / std::sqrt(128.0)));
  // Hostile yarn fields are refused by name.
  const std::string base = R"({"model_type":"llama","vocab_size":512,"hidden_size":64,"intermediate_size":64,)"
                           R"("num_hidden_layers":1,"num_attention_heads":4,"max_position_embeddings":4096,)";
  EXPECT_NE(parse_err(base + R"("rope_scaling":{"rope_type":"yarn","factor":4,"truncate":"yes"}})").message().find("'truncate'"),
            std::string::npos);
  EXPECT_NE(parse_err(base + R"("rope_scaling":{"rope_type":"yarn","factor":4,"beta_fast":-1}})").message().find("beta_fast"),
            std::string::npos);
  EXPECT_NE(parse_err(base + R"("rope_scaling":{"rope_type":"yarn","factor":-4}})").message().find("factor"),
            std::string::npos);
  EXPECT_NE(parse_err(base + R"("rope_scaling":{"rope_type":"dynamic"}})").message().find("factor"), std::string::npos);
}

// Dynamic NTK: transformers keeps the default frequencies up to max_position_embeddings and rescales
// the base past it; we run the first exactly and refuse the second by name.
TEST(HfConfig, DynamicNtkRope) {
  ModelConfig c = parse_ok(R"({"model_type":"llama","vocab_size":10,"hidden_size":64,"intermediate_size":4,
    "num_hidden_layers":1,"num_attention_heads":4,"rope_theta":10000,"max_position_embeddings":2048,
    "rope_scaling":{"type":"dynamic","factor":2.0}})");
  EXPECT_EQ(c.rope_scaling, RopeScaling::kDynamic);
  EXPECT_EQ(c.rope_factor, 2.0);
  ModelConfig plain = c;
  plain.rope_scaling = RopeScaling::kNone;
  EXPECT_EQ(rope_inv_freq(c), rope_inv_freq(plain));
  EXPECT_TRUE(check_rope_positions(c, 2048, "a sample").ok());
  Status past = check_rope_positions(c, 2049, "a sample");
  EXPECT_EQ(past.code(), StatusCode::kUnimplemented);
  EXPECT_NE(past.message().find("a sample reaches position 2049"), std::string::npos) << past.to_string();
  EXPECT_TRUE(check_rope_positions(plain, 100000, "a sample").ok());  // other RoPE kinds extrapolate
  ModelConfig back = parse_ok(hf_config_to_json(c).dump());
  EXPECT_EQ(back.rope_scaling, RopeScaling::kDynamic);
  EXPECT_EQ(back.rope_factor, 2.0);
}

}  // namespace
}  // namespace st
