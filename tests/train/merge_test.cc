// merge_lora (train/merge.h). Oracle: the training forward (Model::forward_logits) of the merged
// checkpoint with no adapter equals the base checkpoint's with the adapter applied (f32, 1e-5
// relative); the sharded output is the same model; side files are copied; out dirs are not
// clobbered without overwrite.
#include "train/merge.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/file.h"
#include "data/batch.h"
#include "io/safetensors.h"
#include "model/init_model.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/resident_source.h"
#include "merge_test_util.h"

namespace st {
namespace {
namespace fs = std::filesystem;

std::vector<float> logits(const std::string& dir, const std::string& adapter, const std::vector<int32_t>& ids) {
  auto be = cpu();
  auto cfg = load_hf_config(dir + "/config.json");
  CHECK(cfg.ok());
  auto ck = Checkpoint::open(dir);
  CHECK(ck.ok(), ck.status().message());
  LoraConfig lc;
  if (!adapter.empty()) {
    auto r = read_peft_config(adapter);
    CHECK(r.ok());
    lc = *r;
  }
  ModelOptions mo;
  mo.act_dtype = DType::kF32;
  mo.max_tokens = static_cast<int64_t>(ids.size());
  auto m = Model::create(*cfg, be.get(), lc, mo);
  CHECK(m.ok(), m.status().message());
  if (!adapter.empty()) CHECK((*m)->lora().load_peft(adapter).ok());
  CHECK((*m)->load_extras(*ck).ok());
  auto src = ResidentLayerSource::from_checkpoint(be.get(), *cfg, (*m)->layer_layout(), *ck);
  CHECK(src.ok());
  Batch b;
  b.batch = 1;
  b.seq = static_cast<int64_t>(ids.size());
  b.input_ids = ids;
  b.labels.assign(ids.size(), kIgnoreIndex);
  for (size_t i = 0; i < ids.size(); ++i) b.positions.push_back(static_cast<int32_t>(i));
  b.doc_ids.assign(ids.size(), 0);
  auto r = (*m)->forward_logits(b, **src);
  CHECK(r.ok(), r.status().message());
  return std::move(r).value();
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(b[i])));
  }
  return num / den;
}

class MergeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MergeTest, MergedLogitsEqualBasePlusAdapter) {
  const std::string base = tmp("base"), adapter = tmp("adapter"), out = tmp("out"), out2 = tmp("out2");
  auto c = model_preset(GetParam());
  ASSERT_TRUE(c.ok());
  InitModelOptions io;
  io.seed = 3;
  io.dtype = DType::kF32;
  io.std = 0.08;
  io.overwrite = true;
  ASSERT_TRUE(init_model(*c, base, io).ok());
  ASSERT_TRUE(write_file_atomic(base + "/tokenizer.json", "{\"fake\": true}\n").ok());
  const LoraConfig lc = some_targets();
  write_adapter(*c, lc, adapter);

  auto r = merge_lora(base, adapter, out, {});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->merged, 4 * c->num_layers);
  EXPECT_EQ(r->files, std::vector<std::string>{"model.safetensors"});
  EXPECT_TRUE(fs::exists(out + "/config.json"));
  auto tj = read_file_to_string(out + "/tokenizer.json");
  ASSERT_TRUE(tj.ok());
  EXPECT_EQ(*tj, "{\"fake\": true}\n");
  auto sf = SafetensorsFile::open(out + "/model.safetensors");
  ASSERT_TRUE(sf.ok());
  EXPECT_EQ(sf->tensors().front().dtype, DType::kF32);  // the base's dtype

  const std::vector<int32_t> ids = {1, 200, 33, 7, 450, 12, 9, 300};
  const std::vector<float> want = logits(base, adapter, ids), got = logits(out, "", ids),
                           plain = logits(base, "", ids);
  EXPECT_LT(rel_err(got, want), 1e-5);
  EXPECT_GT(rel_err(plain, want), 1e-3);  // the adapter changes the model

  // Refuses to clobber; --force replaces. Sharded output is the same model.
  EXPECT_FALSE(merge_lora(base, adapter, out, {}).ok());
  MergeOptions sharded;
  sharded.max_shard_bytes = 100000;
  sharded.overwrite = true;
  auto r2 = merge_lora(base, adapter, out2, sharded);
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_GT(r2->files.size(), 1u);
  EXPECT_TRUE(fs::exists(out2 + "/model.safetensors.index.json"));
  EXPECT_EQ(logits(out2, "", ids), got);
  // bf16 output on request.
  MergeOptions bf;
  bf.dtype = DType::kBF16;
  bf.overwrite = true;
  ASSERT_TRUE(merge_lora(base, adapter, out2, bf).ok());
  auto sb = SafetensorsFile::open(out2 + "/model.safetensors");
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->tensors().front().dtype, DType::kBF16);
  for (const auto& d : {base, adapter, out, out2}) fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(Presets, MergeTest, ::testing::Values("tiny-llama", "tiny-qwen3"));

// PEFT's layers_to_transform (the llama_layers golden: all seven linears on layers 0 and 2 of
// three): only those 14 projections change, and the merged model is the base + adapter.
TEST(Merge, AdapterOnSomeLayers) {
  const std::string fx = std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_layers", out = tmp("layers");
  auto r = merge_lora(fx + "/model", fx + "/adapter", out, {});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->merged, 14);
  const std::vector<int32_t> ids = {1, 200, 33, 7, 45, 12, 9, 30};
  const std::vector<float> want = logits(fx + "/model", fx + "/adapter", ids), got = logits(out, "", ids);
  EXPECT_LT(rel_err(got, want), 1e-5);
  EXPECT_GT(rel_err(logits(fx + "/model", "", ids), want), 1e-3);
  auto merged = SafetensorsFile::open(out + "/model.safetensors");
  auto base = SafetensorsFile::open(fx + "/model/model.safetensors");
  ASSERT_TRUE(merged.ok() && base.ok());
  for (const char* name : {"model.layers.1.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight"}) {
    const TensorInfo *a = merged->find(name), *b = base->find(name);
    ASSERT_TRUE(a && b) << name;
    EXPECT_EQ(std::memcmp(merged->data(*a), base->data(*b), b->nbytes), 0) << name << " (layer 1 has no adapter)";
  }
  fs::remove_all(out);
}

// Session 22 audit: --force replaced an --out equal to --model or --adapter (deleting the input the
// merge had just read) and turned a plain file into a directory. All refused, inputs intact.
TEST(Merge, ForceNeverReplacesAnInputOrAFile) {
  const std::string fx = std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_layers";
  const std::string base = tmp("inputs_base"), adapter = tmp("inputs_adapter"), file = tmp("inputs_file");
  fs::remove_all(base), fs::remove_all(adapter);
  fs::copy(fx + "/model", base, fs::copy_options::recursive);
  fs::copy(fx + "/adapter", adapter, fs::copy_options::recursive);
  ASSERT_TRUE(write_file_atomic(file, "not a model").ok());
  MergeOptions force;
  force.overwrite = true;
  for (const auto& [out, says] : std::vector<std::pair<std::string, std::string>>{
           {base, "would replace the base model"},
           {base + "/", "would replace the base model"},
           {adapter, "would overwrite the adapter"},
           {adapter + "/merged", "would overwrite the adapter"},
           {file, "exists and is a file"}}) {
    auto r = merge_lora(base, adapter, out, force);
    ASSERT_FALSE(r.ok()) << out;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(*read_file_to_string(file), "not a model");
  EXPECT_FALSE(fs::exists(adapter + "/merged"));
  // The inputs still merge.
  const std::string out = tmp("inputs_out");
  fs::remove_all(out);
  ASSERT_TRUE(merge_lora(base, adapter, out, force).ok());
  ASSERT_TRUE(merge_lora(base, adapter, out, force).ok());  // and replace an earlier merge
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))
    EXPECT_NE(e.path().filename().string().rfind(fs::path(out).filename().string() + ".old", 0), 0u) << e.path();
  for (const auto& d : {base, adapter, file, out}) fs::remove_all(d);
}

// Session 23 audit: an adapter holding NaN merged into a model whose projection was all NaN, exit
// 0. A non-finite adapter value is refused naming the tensor.
TEST(Merge, NonFiniteAdapterIsRefusedByTensor) {
  const std::string fx = std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_layers";
  const std::string adapter = tmp("nan_adapter"), out = tmp("nan_out");
  fs::remove_all(adapter);
  fs::copy(fx + "/adapter", adapter, fs::copy_options::recursive);
  const std::string st = adapter + "/adapter_model.safetensors";
  std::string bytes = *read_file_to_string(st);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  auto f = SafetensorsFile::open(st);
  ASSERT_TRUE(f.ok());
  const TensorInfo* t = f->find("base_model.model.model.layers.0.mlp.down_proj.lora_A.weight");
  ASSERT_TRUE(t != nullptr);
  ASSERT_EQ(t->dtype, DType::kF32);
  const float nan = std::nanf("");
  std::memcpy(&bytes[8 + header + t->offset + 4 * 5], &nan, 4);  // element 5
  ASSERT_TRUE(write_file_atomic(st, bytes).ok());
  auto r = merge_lora(fx + "/model", adapter, out, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().to_string();
  EXPECT_NE(r.status().message().find("layers.0.mlp.down_proj.lora_A.weight' holds nan at element 5"), std::string::npos)
      << r.status().to_string();
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(adapter);
}

TEST(Merge, MissingAdapterIsAnError) {
  auto r = merge_lora("/nonexistent/model", "/nonexistent/adapter", tmp("never"), {});
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(fs::exists(tmp("never")));
}

}  // namespace
}  // namespace st
