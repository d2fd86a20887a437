// stream_compress: auto (train/base_weights.h Note [stream_compress auto]) turns the code12 base
// on exactly when it can hold the run and the dense plan streams layers, and falls back to the
// dense store when a tensor cannot be coded; explicit values pass through (true then fails). The decision is taken with a bfloat16 run on the CPU backend's planner (a CPU training
// run itself computes in float32 and so never codes its base).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "model/init_model.h"
#include "model/presets.h"
#include "core/code12.h"
#include "train/base_weights.h"
#include "train/train_config.h"

namespace st {
namespace {

// tiny-llama with 8 layers (a 2-layer model is never streamed: two buffers hold it whole), bf16,
// in the temp directory `name`.
std::string write_eight_layer_model(const char* name) {
  const std::string d = (std::filesystem::temp_directory_path() / name).string();
  auto c = model_preset("tiny-llama");
  CHECK_OK(c.status());
  c->num_layers = 8;
  InitModelOptions io;
  io.overwrite = true;
  io.dtype = DType::kBF16;
  CHECK_OK(init_model(*c, d, io).status());
  return d;
}

const std::string& eight_layer_model() {
  static const std::string dir = write_eight_layer_model("st_stream_compress_test");
  return dir;
}

TrainConfig config(const std::string& stream, const std::string& budget) {
  TrainConfig c;
  c.base_model = eight_layer_model();
  c.stream = stream;
  c.vram_budget = budget;
  c.sequence_len = 16;
  c.micro_batch_size = 1;
  return c;
}

std::string decide(const TrainConfig& c, DType act, std::string* why = nullptr) {
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  CHECK_OK(be.status());
  StatusOr<std::string> r = resolve_stream_compress(c, be->get(), act, DeviceSpeed{}, why);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : "error";
}

TEST(StreamCompress, AutoCodesTheBaseWhenThePlanStreamsLayers) {
  // Budgets from the planner's own numbers for this model (bf16, 16 tokens): 1 GiB keeps every
  // layer resident, 800 KiB streams six of eight, 600 KiB fits no dense plan (auto then tries the
  // code12 base, whose own plan reports the shortfall if it does not fit either).
  std::string why;
  const TrainConfig tight = config("ram", "800KiB");
  ASSERT_EQ(decide(tight, DType::kBF16, &why), "true");
  EXPECT_NE(why.find("stream_compress: auto -> true: the plan streams"), std::string::npos) << why;
  EXPECT_EQ(decide(config("disk", "800KiB"), DType::kBF16), "true");
  why.clear();
  EXPECT_EQ(decide(config("ram", "600KiB"), DType::kBF16, &why), "true");
  EXPECT_NE(why.find("the dense base does not fit"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(decide(config("ram", "1GiB"), DType::kBF16, &why), "false");  // nothing streams
  EXPECT_EQ(why, "");
  EXPECT_EQ(decide(config("off", ""), DType::kBF16), "false");
  EXPECT_EQ(decide(tight, DType::kF32), "false");  // code12 codes bf16 only
  TrainConfig q = tight;
  q.adapter = "qlora";
  EXPECT_EQ(decide(q, DType::kBF16), "false");  // an NF4 base is already 4-bit
  for (const char* v : {"true", "false"}) {
    TrainConfig e = config("off", "");
    e.stream_compress = v;
    EXPECT_EQ(decide(e, DType::kBF16), v);
  }
}

// The 8-layer model with layer 2's up_proj rewritten to bf16 weights over 64 binades (49 in 64
// outside any 15-entry exponent table): a tensor code12 cannot hold.
const std::string& uncodable_model() {
  static const std::string dir = [] {
    const std::string d = write_eight_layer_model("st_stream_compress_wide");
    const std::string file = d + "/model.safetensors";
    auto st = SafetensorsFile::open(file);
    CHECK_OK(st.status());
    const TensorInfo* t = st->find("model.layers.2.mlp.up_proj.weight");
    CHECK(t != nullptr && t->dtype == DType::kBF16);
    std::vector<uint16_t> wide(static_cast<size_t>(t->numel()));
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<uint16_t>((60 + i % 64) << 7);
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(st->data_start() + t->offset));
    f.write(reinterpret_cast<const char*>(wide.data()), static_cast<std::streamsize>(wide.size() * 2));
    CHECK(f.good());
    return d;
  }();
  return dir;
}

TEST(StreamCompress, AutoFallsBackToTheDenseBaseWhenATensorCannotBeCoded) {
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  ASSERT_TRUE(be.ok());
  TrainConfig c = config("ram", "800KiB");
  c.base_model = uncodable_model();
  c.cache_dir = (std::filesystem::temp_directory_path() / "st_stream_compress_cache").string();
  std::filesystem::remove_all(c.cache_dir);  // no store from an earlier run to reuse
  std::string used;
  StatusOr<ShardResult> sr = shard_base_model(c, be->get(), DType::kBF16, DeviceSpeed{}, &used);
  ASSERT_TRUE(sr.ok()) << sr.status().to_string();
  EXPECT_EQ(used, "false");
  EXPECT_EQ(sr->manifest.quant, BaseQuant::kNone);
  c.stream_compress = "true";
  sr = shard_base_model(c, be->get(), DType::kBF16, DeviceSpeed{}, &used);
  ASSERT_FALSE(sr.ok());
  EXPECT_NE(sr.status().message().find("model.layers.2.mlp.up_proj.weight"), std::string::npos) << sr.status().message();
  EXPECT_NE(sr.status().message().find(kCode12Refusal), std::string::npos) << sr.status().message();
  c.base_model = eight_layer_model();  // a codable model: auto codes it
  c.stream_compress = "auto";
  sr = shard_base_model(c, be->get(), DType::kBF16, DeviceSpeed{}, &used);
  ASSERT_TRUE(sr.ok()) << sr.status().to_string();
  EXPECT_EQ(used, "true");
  EXPECT_EQ(sr->manifest.quant, BaseQuant::kCode12);
}

}  // namespace
}  // namespace st
