// Oracles: the generator formula (hf_init_values) for every byte written, the published
// parameter counts of the real models for the presets, and invariance of the bytes under
// sharding / thread count.
#include "model/init_model.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "core/file.h"
#include "io/safetensors.h"
#include "model/presets.h"

namespace st {
namespace {

class InitModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/st_init_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string dir(const std::string& name) { return root_ + "/" + name; }
  std::string root_;
};

int64_t preset_params(const std::string& name) {
  auto c = model_preset(name);
  EXPECT_TRUE(c.ok()) << name;
  int64_t n = 0;
  for (const HfTensorSpec& s : hf_tensor_list(*c)) n += s.numel();
  return n;
}

TEST(Presets, ParameterCountsMatchThePublishedModels) {
  EXPECT_EQ(preset_params("smollm2-135m"), 134515008);
  EXPECT_EQ(preset_params("qwen2.5-0.5b"), 494032768);
  EXPECT_EQ(preset_params("qwen2.5-1.5b"), 1543714304);
  EXPECT_EQ(preset_params("qwen2.5-3b"), 3085938688);
  EXPECT_EQ(preset_params("qwen2.5-7b"), 7615616512);
  EXPECT_EQ(preset_params("qwen2.5-14b"), 14770033664);
  EXPECT_EQ(preset_params("llama3-8b"), 8030261248);
  EXPECT_EQ(preset_params("llama3.1-8b"), 8030261248);
  EXPECT_EQ(preset_params("llama3-70b"), 70553706496);
  EXPECT_EQ(preset_params("mistral-7b"), 7241732096);  // published Mistral-7B count
  EXPECT_EQ(model_preset("mistral-7b")->attention_window(31), 4096);
}

TEST(Presets, LookupAndShapes) {
  auto c = model_preset("Tiny-Qwen3");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->q_dim(), 128);
  EXPECT_TRUE(c->qk_norm);
  auto l31 = model_preset("llama3.1-8b");
  ASSERT_TRUE(l31.ok());
  EXPECT_EQ(l31->rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(model_preset("llama3-8b")->rope_scaling, RopeScaling::kNone);
  auto bad = model_preset("gpt-5");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("tiny-llama"), std::string::npos);
  for (const ModelPresetInfo& p : model_preset_list()) EXPECT_TRUE(model_preset(p.name).ok()) << p.name;
}

// Every tensor of the checkpoint equals the generator formula rounded to `dtype`.
void expect_checkpoint_matches(const std::string& d, const ModelConfig& c, const InitModelOptions& o) {
  auto ck = Checkpoint::open(d);
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  const auto specs = hf_tensor_list(c);
  EXPECT_EQ(ck->tensor_names().size(), specs.size());
  for (const HfTensorSpec& s : specs) {
    std::vector<float> got(s.numel()), want(s.numel());
    ASSERT_TRUE(read_tensor_as(*ck, s.name, s.shape, DType::kF32, got.data()).ok()) << s.name;
    hf_init_values(s, o.seed, o.std, 0, want.size(), want.data());
    std::vector<float> rounded(want.size());
    std::vector<uint16_t> tmp(want.size());
    if (o.dtype == DType::kF32) {
      rounded = want;
    } else {
      convert_elements(tmp.data(), o.dtype, want.data(), DType::kF32, want.size());
      convert_elements(rounded.data(), DType::kF32, tmp.data(), o.dtype, want.size());
    }
    ASSERT_EQ(got, rounded) << s.name;
    if (s.init == HfTensorSpec::Init::kOnes) {
      EXPECT_EQ(got[0], 1.0f) << s.name;
    }
  }
}

TEST_F(InitModelTest, TinyPresetsReadBackExactly) {
  for (const char* name : {"tiny-llama", "tiny-qwen2", "tiny-qwen3"}) {
    auto c = model_preset(name);
    ASSERT_TRUE(c.ok());
    InitModelOptions o;
    o.seed = 7;
    auto r = init_model(*c, dir(name), o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->files, std::vector<std::string>{"model.safetensors"});
    expect_checkpoint_matches(dir(name), *c, o);
    auto back = load_hf_config(dir(name) + "/config.json");
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->arch, c->arch);
    EXPECT_EQ(back->head_dim, c->head_dim);
    EXPECT_EQ(back->tie_word_embeddings, c->tie_word_embeddings);
    EXPECT_EQ(back->attention_bias, c->attention_bias);
    EXPECT_EQ(back->qk_norm, c->qk_norm);
    auto st = SafetensorsFile::open(dir(name) + "/model.safetensors");
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->metadata().at("format"), "pt");
    EXPECT_EQ(st->find("lm_head.weight") != nullptr, !c->tie_word_embeddings);
  }
}

TEST_F(InitModelTest, ShardsThreadsAndDtypesGiveTheSameValues) {
  auto c = model_preset("tiny-llama");
  ASSERT_TRUE(c.ok());
  InitModelOptions o;
  o.seed = 3;
  o.max_shard_bytes = 40000;  // forces several shards; the 64 KiB embedding gets one of its own
  o.threads = 3;
  auto r = init_model(*c, dir("sharded"), o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_GT(r->files.size(), 2u);
  EXPECT_TRUE(file_exists(dir("sharded") + "/model.safetensors.index.json"));
  expect_checkpoint_matches(dir("sharded"), *c, o);

  o.dtype = DType::kF32;
  o.threads = 1;
  o.max_shard_bytes = 2000000000;
  ASSERT_TRUE(init_model(*c, dir("f32"), o).ok());
  expect_checkpoint_matches(dir("f32"), *c, o);
}

TEST_F(InitModelTest, SeedDeterminesBytes) {
  auto c = model_preset("tiny-qwen2");
  ASSERT_TRUE(c.ok());
  InitModelOptions o;
  ASSERT_TRUE(init_model(*c, dir("a"), o).ok());
  o.threads = 1;
  ASSERT_TRUE(init_model(*c, dir("b"), o).ok());
  o.seed = 1;
  ASSERT_TRUE(init_model(*c, dir("c"), o).ok());
  auto a = read_file_to_string(dir("a") + "/model.safetensors");
  auto b = read_file_to_string(dir("b") + "/model.safetensors");
  auto cc = read_file_to_string(dir("c") + "/model.safetensors");
  ASSERT_TRUE(a.ok() && b.ok() && cc.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *cc);
  EXPECT_EQ(a->size(), cc->size());
}

TEST_F(InitModelTest, RefusesExistingCheckpointUnlessOverwrite) {
  auto c = model_preset("tiny-llama");
  InitModelOptions o;
  ASSERT_TRUE(init_model(*c, dir("x"), o).ok());
  auto again = init_model(*c, dir("x"), o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  // Overwriting a single-file checkpoint with a sharded one leaves no stale model.safetensors.
  o.overwrite = true;
  o.max_shard_bytes = 40000;
  ASSERT_TRUE(init_model(*c, dir("x"), o).ok());
  EXPECT_FALSE(file_exists(dir("x") + "/model.safetensors"));
  expect_checkpoint_matches(dir("x"), *c, o);
}

// The partial files of a killed run (its pid gone) are removed; a live process's temp and a
// user's file of the same shape but another name are not.
TEST_F(InitModelTest, RemovesTheTempsOfAKilledRun) {
  auto c = model_preset("tiny-llama");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // `child` names no process now
  const std::string d = dir("killed"), dead = std::to_string(child), live = std::to_string(::getppid());  // alive, and not ours (our own temp names are ours to write)
  ASSERT_TRUE(make_dirs(d).ok());
  for (const std::string& f : {"model-00001-of-00002.safetensors.tmp." + dead, "config.json.tmp." + dead,
                               "model.safetensors.tmp." + live, "notes.txt.tmp." + dead, std::string("model.safetensors.tmp.x")})
    ASSERT_TRUE(write_file_atomic(d + "/" + f, "partial").ok());
  auto r = init_model(*c, d, InitModelOptions{});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->stale_temps_removed, 2);
  EXPECT_FALSE(file_exists(d + "/model-00001-of-00002.safetensors.tmp." + dead));
  EXPECT_FALSE(file_exists(d + "/config.json.tmp." + dead));
  EXPECT_TRUE(file_exists(d + "/model.safetensors.tmp." + live));
  EXPECT_TRUE(file_exists(d + "/notes.txt.tmp." + dead));
  EXPECT_TRUE(file_exists(d + "/model.safetensors.tmp.x"));
}

TEST(InitValues, NormalWithRequestedStd) {
  HfTensorSpec s{"w", {1 << 18}};
  std::vector<float> v(s.numel());
  hf_init_values(s, 5, 0.02, 0, v.size(), v.data());
  double sum = 0, sq = 0, mx = 0;
  int beyond2 = 0;
  for (float x : v) {
    sum += x;
    sq += double(x) * x;
    mx = std::max(mx, std::fabs(double(x)));
    beyond2 += std::fabs(x) > 0.04;
  }
  const double n = v.size(), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_LT(std::fabs(mean), 3e-4);
  EXPECT_NEAR(sd, 0.02, 0.0004);
  EXPECT_LT(mx, 0.02 * 6.5);
  EXPECT_NEAR(beyond2 / n, 0.0455, 0.003);  // P(|z| > 2) for a normal
  // Any window of the stream equals the same slice of the whole (odd start included).
  std::vector<float> part(1001);
  hf_init_values(s, 5, 0.02, 12345, part.size(), part.data());
  for (size_t i = 0; i < part.size(); ++i) ASSERT_EQ(part[i], v[12345 + i]);
}

}  // namespace
}  // namespace st
