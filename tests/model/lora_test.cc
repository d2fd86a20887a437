// LoRA arena layout, PEFT init, PEFT adapter save/load round trip and refusals.
#include "model/lora.h"

#include <algorithm>
#include <cmath>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/file.h"
#include "core/json.h"

namespace st {
namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.vocab_size = 50;
  c.hidden_size = 24;
  c.intermediate_size = 40;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  return c;
}

LoraConfig all_targets(int64_t r) {
  LoraConfig lc;
  lc.r = r;
  lc.alpha = 2 * r;
  lc.targets.fill(true);
  return lc;
}

std::unique_ptr<Backend> cpu() {
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  CHECK_OK(be.status());
  return std::move(*be);
}

std::string temp_dir(const std::string& tag) {
  std::string d = Str() << "/tmp/st_lora_test_" << getpid() << "_" << tag;
  CHECK_OK(make_dirs(d));
  return d;
}

TEST(Lora, ArenaOffsetsAlignedAndDisjoint) {
  auto be = cpu();
  auto lora = Lora::create(be.get(), tiny(), all_targets(3));
  ASSERT_TRUE(lora.ok());
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int l = 0; l < 2; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto tt = static_cast<LoraTarget>(t);
      auto [in, out] = lora_target_dims(tiny(), tt);
      EXPECT_EQ((*lora)->offset_a(l, tt) % kLoraAlignFloats, 0);
      EXPECT_EQ((*lora)->offset_b(l, tt) % kLoraAlignFloats, 0);
      ranges.push_back({(*lora)->offset_a(l, tt), (*lora)->offset_a(l, tt) + 3 * in});
      ranges.push_back({(*lora)->offset_b(l, tt), (*lora)->offset_b(l, tt) + out * 3});
      LoraLayer ll = (*lora)->layer(l);
      EXPECT_EQ(ll[tt].a.shape_str(), (Str() << "[3," << in << "]").str());
      EXPECT_EQ(ll[tt].db.shape_str(), (Str() << "[" << out << ",3]").str());
      EXPECT_EQ(static_cast<float*>(ll[tt].da.data) - static_cast<float*>(ll[tt].a.data), (*lora)->numel());
    }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first);
  EXPECT_LE(ranges.back().second, (*lora)->numel());
  EXPECT_EQ((*lora)->bytes(), 4 * (*lora)->numel() * sizeof(float));
}

TEST(Lora, PeftInitBoundsZeroBAndDeterminism) {
  auto be = cpu();
  auto lora = Lora::create(be.get(), tiny(), all_targets(4));
  ASSERT_TRUE(lora.ok());
  (*lora)->init(7);
  std::vector<float> p = (*lora)->params_to_host();
  const auto tt = LoraTarget::kDown;
  const int64_t in = lora_target_dims(tiny(), tt).first, out = lora_target_dims(tiny(), tt).second;
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  double sumsq = 0;
  for (int64_t i = 0; i < 4 * in; ++i) {
    float v = p[(*lora)->offset_a(1, tt) + i];
    EXPECT_LE(std::fabs(v), bound);
    sumsq += v * v;
  }
  EXPECT_NEAR(sumsq / (4 * in), bound * bound / 3, 0.35 * bound * bound / 3);  // U(-b,b) variance
  for (int64_t i = 0; i < out * 4; ++i) EXPECT_EQ(p[(*lora)->offset_b(1, tt) + i], 0.0f);
  (*lora)->init(7);
  EXPECT_EQ((*lora)->params_to_host(), p);
  (*lora)->init(8);
  EXPECT_NE((*lora)->params_to_host(), p);
}

TEST(Lora, SaveLoadSaveIsByteIdentical) {
  auto be = cpu();
  auto a = Lora::create(be.get(), tiny(), all_targets(2));
  ASSERT_TRUE(a.ok());
  (*a)->init(1);
  std::vector<float> p = (*a)->params_to_host();
  for (int l = 0; l < 2; ++l)  // B != 0 (padding floats stay zero: they are not saved)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto tt = static_cast<LoraTarget>(t);
      const int64_t off = (*a)->offset_b(l, tt), n = lora_target_dims(tiny(), tt).second * 2;
      for (int64_t i = 0; i < n; ++i) p[off + i] = 0.001f * static_cast<float>((off + i) % 17);
    }
  (*a)->params_from_host(p);
  const std::string d1 = temp_dir("rt1"), d2 = temp_dir("rt2");
  ASSERT_TRUE((*a)->save_peft(d1, "org/base").ok());
  auto b = Lora::create(be.get(), tiny(), all_targets(2));
  ASSERT_TRUE(b.ok());
  Status s = (*b)->load_peft(d1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ((*b)->params_to_host(), (*a)->params_to_host());
  ASSERT_TRUE((*b)->save_peft(d2, "org/base").ok());
  for (const char* f : {"adapter_model.safetensors", "adapter_config.json"})
    EXPECT_EQ(*read_file_to_string(d1 + "/" + f), *read_file_to_string(d2 + "/" + f)) << f;
  auto j = read_json_file(d1 + "/adapter_config.json");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["peft_type"], "LORA");
  EXPECT_EQ((*j)["r"], 2);
  EXPECT_EQ((*j)["lora_alpha"], 4);
  EXPECT_EQ((*j)["target_modules"].size(), 7u);
}

TEST(Lora, LoadsRealPeftAdapter) {
  const std::string dir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_gqa/adapter";
  auto lc = read_peft_config(dir);
  ASSERT_TRUE(lc.ok()) << lc.status().to_string();
  EXPECT_EQ(lc->r, 4);
  EXPECT_FLOAT_EQ(lc->scaling(), 2.0f);
  auto mc = load_hf_config(std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_gqa/model/config.json");
  ASSERT_TRUE(mc.ok());
  auto be = cpu();
  auto lora = Lora::create(be.get(), *mc, *lc);
  ASSERT_TRUE(lora.ok());
  EXPECT_TRUE((*lora)->load_peft(dir).ok());
  LoraConfig wrong = *lc;
  wrong.r = 8;
  auto l8 = Lora::create(be.get(), *mc, wrong);
  Status s = (*l8)->load_peft(dir);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
}

// Writes a valid adapter, then edits one adapter_config.json key and expects a refusal naming it.
void expect_refused(const std::string& key, const Json& value, const std::string& needle) {
  auto be = cpu();
  auto lora = Lora::create(be.get(), tiny(), all_targets(2));
  const std::string d = temp_dir("refuse_" + key);
  ASSERT_TRUE((*lora)->save_peft(d, "x").ok());
  auto j = read_json_file(d + "/adapter_config.json");
  (*j)[key] = value;
  ASSERT_TRUE(write_file_atomic(d + "/adapter_config.json", j->dump()).ok());
  Status s = (*lora)->load_peft(d);
  EXPECT_FALSE(s.ok()) << key;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
}

TEST(Lora, RefusesUnsupportedVariantsByName) {
  expect_refused("use_dora", true, "use_dora");
  expect_refused("use_rslora", "yes", "use_rslora must be true or false");
  expect_refused("peft_type", "VERA", "VERA");
  expect_refused("init_lora_weights", "pissa_niter_4", "pissa");
  expect_refused("init_lora_weights", "olora", "olora");
  expect_refused("bias", "all", "bias");
  expect_refused("target_modules", Json::array({"q_proj", "lm_head"}), "lm_head");
  expect_refused("r", 3, "rank");
}

// PEFT's layers_to_transform: only the listed layers get A and B (the others' pairs are absent), the
// list round-trips through adapter_config.json (tensors of those layers only), PEFT's int form reads
// as one layer, and mismatches, a layer past the model, an unknown layers_pattern and a tensor of
// a layer without the adapter are refused by name.
TEST(Lora, LayersToTransform) {
  auto be = cpu();
  LoraConfig lc = all_targets(2);
  lc.layers = {1};
  auto lora = Lora::create(be.get(), tiny(), lc);
  ASSERT_TRUE(lora.ok()) << lora.status().to_string();
  EXPECT_FALSE((*lora)->layer(0)[LoraTarget::kQ].present());
  EXPECT_TRUE((*lora)->layer(1)[LoraTarget::kQ].present());
  EXPECT_EQ((*lora)->offset_a(0, LoraTarget::kDown), -1);
  (*lora)->init(3);
  const std::string d = temp_dir("layers");
  ASSERT_TRUE((*lora)->save_peft(d, "x").ok());
  auto j = read_json_file(d + "/adapter_config.json");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["layers_to_transform"], Json::array({1}));
  auto back = read_peft_config(d);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->layers, std::vector<int64_t>{1});
  auto again = Lora::create(be.get(), tiny(), *back);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->load_peft(d).ok());
  EXPECT_EQ((*again)->params_to_host(), (*lora)->params_to_host());

  auto every = Lora::create(be.get(), tiny(), all_targets(2));  // a run over every layer
  Status s = (*every)->load_peft(d);
  EXPECT_NE(s.message().find("layers_to_transform (1) differs from the run's (every layer)"), std::string::npos)
      << s.to_string();
  (*j)["layers_to_transform"] = 1;  // PEFT's int form
  ASSERT_TRUE(write_file_atomic(d + "/adapter_config.json", j->dump()).ok());
  EXPECT_TRUE((*again)->load_peft(d).ok());
  (*j)["layers_pattern"] = "h";
  ASSERT_TRUE(write_file_atomic(d + "/adapter_config.json", j->dump()).ok());
  s = (*again)->load_peft(d);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.to_string();
  EXPECT_NE(s.message().find("layers_pattern"), std::string::npos);
  (*j)["layers_pattern"] = Json::array({"layers"});
  (*j)["layers_to_transform"] = Json::array();
  ASSERT_TRUE(write_file_atomic(d + "/adapter_config.json", j->dump()).ok());
  EXPECT_NE((*again)->load_peft(d).message().find("empty list"), std::string::npos);
  (*j)["layers_to_transform"] = Json::array({-1});
  ASSERT_TRUE(write_file_atomic(d + "/adapter_config.json", j->dump()).ok());
  EXPECT_NE((*again)->load_peft(d).message().find("layer indices >= 0"), std::string::npos);
  // An adapter over every layer loaded as one over layer 1: layer 0's tensors are not its own.
  const std::string all_dir = temp_dir("layers_all");
  ASSERT_TRUE((*every)->save_peft(all_dir, "x").ok());
  auto cfg = read_json_file(all_dir + "/adapter_config.json");
  (*cfg)["layers_to_transform"] = Json::array({1});
  ASSERT_TRUE(write_file_atomic(all_dir + "/adapter_config.json", cfg->dump()).ok());
  s = (*again)->load_peft(all_dir);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.to_string();
  EXPECT_NE(s.message().find("unexpected tensor 'base_model.model.model.layers.0."), std::string::npos) << s.to_string();

  LoraConfig past = all_targets(2);
  past.layers = {0, 2};  // tiny() has 2 layers
  auto bad = Lora::create(be.get(), tiny(), past);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layer 2 is not one of the model's 2 layers"), std::string::npos);
}

// rsLoRA: scaling alpha / sqrt(r) (PEFT's use_rslora); the flag round-trips through
// adapter_config.json, and an adapter saved with it does not load into a plain-LoRA run.
TEST(Lora, RsLoraScalesBySqrtRankAndRoundTrips) {
  LoraConfig lc = all_targets(4);
  lc.alpha = 8;
  EXPECT_FLOAT_EQ(lc.scaling(), 2.0f);
  lc.rslora = true;
  EXPECT_FLOAT_EQ(lc.scaling(), 4.0f);  // 8 / sqrt(4)
  auto be = cpu();
  auto lora = Lora::create(be.get(), tiny(), lc);
  ASSERT_TRUE(lora.ok());
  (*lora)->init(7);
  const std::string d = temp_dir("rslora");
  ASSERT_TRUE((*lora)->save_peft(d, "x").ok());
  auto j = read_json_file(d + "/adapter_config.json");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["use_rslora"], true);
  auto back = read_peft_config(d);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(back->rslora);
  EXPECT_FLOAT_EQ(back->scaling(), 4.0f);
  EXPECT_TRUE((*lora)->load_peft(d).ok());
  LoraConfig plain = lc;
  plain.rslora = false;
  auto other = Lora::create(be.get(), tiny(), plain);
  Status s = (*other)->load_peft(d);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("use_rslora=true"), std::string::npos) << s.to_string();
}

// A rank past any adapter (a damaged adapter_config.json) is refused before anything is sized
// from it (r = 2^31-1 used to request 77 TB for the parameters).
TEST(Lora, ImplausibleRankInAdapterConfigIsRefused) {
  auto be = cpu();
  auto lora = Lora::create(be.get(), tiny(), all_targets(2));
  const std::string d = temp_dir("huge_r");
  ASSERT_TRUE((*lora)->save_peft(d, "x").ok());
  auto j = read_json_file(d + "/adapter_config.json");
  (*j)["r"] = int64_t{2147483647};
  ASSERT_TRUE(write_file_atomic(d + "/adapter_config.json", j->dump()).ok());
  auto lc = read_peft_config(d);
  ASSERT_FALSE(lc.ok());
  EXPECT_NE(lc.status().message().find("r = 2147483647 is beyond any adapter"), std::string::npos)
      << lc.status().to_string();
  LoraConfig big = all_targets(2);
  big.r = kMaxLoraRank + 1;
  EXPECT_EQ(Lora::create(be.get(), tiny(), big).status().code(), StatusCode::kInvalidArgument);
}

TEST(Lora, MissingTensorIsNotFound) {
  auto be = cpu();
  LoraConfig lc = all_targets(2);
  auto lora = Lora::create(be.get(), tiny(), lc);
  const std::string d = temp_dir("missing");
  ASSERT_TRUE((*lora)->save_peft(d, "x").ok());
  ModelConfig bigger = tiny();
  bigger.num_layers = 3;  // expects layer 2 too
  auto l3 = Lora::create(be.get(), bigger, lc);
  Status s = (*l3)->load_peft(d);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("layers.2."), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace st
