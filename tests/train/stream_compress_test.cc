// stream_compress: auto (train/base_weights.h Note [stream_compress auto]) turns the code12 base
// on exactly when it can hold the run and the dense plan streams layers; explicit values pass
// through. The decision is taken with a bfloat16 run on the CPU backend's planner (a CPU training
// run itself computes in float32 and so never codes its base).
#include <filesystem>

#include <gtest/gtest.h>

#include "model/init_model.h"
#include "model/presets.h"
#include "train/base_weights.h"
#include "train/train_config.h"

namespace st {
namespace {

// tiny-llama with 8 layers (a 2-layer model is never streamed: two buffers hold it whole).
const std::string& eight_layer_model() {
  static const std::string dir = [] {
    const std::string d = (std::filesystem::temp_directory_path() / "st_stream_compress_test").string();
    auto c = model_preset("tiny-llama");
    CHECK_OK(c.status());
    c->num_layers = 8;
    InitModelOptions io;
    io.overwrite = true;
    CHECK_OK(init_model(*c, d, io).status());
    return d;
  }();
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
  StatusOr<std::string> r = resolve_stream_compress(c, be->get(), act, why);
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

}  // namespace
}  // namespace st
