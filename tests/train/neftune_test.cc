// NEFTune (model/model.cc Note [NEFTune]) in training: the noise changes the trained losses (its
// magnitude, alpha / sqrt(T x hidden), is a real perturbation on the llama_gqa golden), the same
// config gives the same bits twice, and alpha 0 is the plain run (the HF trace's first loss).
#include <cmath>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/file.h"
#include "core/json.h"
#include "train/trainer.h"

namespace st {
namespace {

std::vector<double> train_losses(double alpha, const std::string& tag) {
  const std::string dir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_gqa";
  TrainConfig tc;
  tc.base_model = dir + "/model";
  tc.lora_model_dir = dir + "/adapter";
  tc.dtype = "float32";
  tc.learning_rate = 1e-3;
  tc.lr_scheduler = "constant";
  tc.lora_r = 4;
  tc.lora_alpha = 8;
  tc.lora_target_modules = {"all-linear"};
  tc.gradient_accumulation_steps = 2;
  tc.max_steps = 3;
  tc.shuffle = false;
  tc.sequence_len = 256;
  tc.loss_normalization = "micro_batch";
  tc.neftune_noise_alpha = alpha;
  tc.output_dir = Str() << "/tmp/st_neftune_test_" << getpid() << "_" << tag;
  EXPECT_TRUE(make_dirs(tc.output_dir).ok());
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 2});
  auto parts = hf_resident_parts(tc.base_model);
  EXPECT_TRUE(be.ok() && parts.ok());
  auto trainer = Trainer::create(tc, be->get(), std::move(*parts));
  EXPECT_TRUE(trainer.ok()) << trainer.status().to_string();
  auto data = TokenizedJsonlSource::open({.paths = {dir + "/data.jsonl"}, .micro_batch_size = 1,
                                          .sequence_len = 256, .shuffle = false});
  EXPECT_TRUE(data.ok());
  std::vector<double> losses;
  (*trainer)->on_step = [&](const StepMetrics& m) { losses.push_back(m.loss); };
  EXPECT_TRUE((*trainer)->train(**data).ok());
  return losses;
}

TEST(Neftune, NoiseChangesTheLossesRepeatably) {
  const std::vector<double> plain = train_losses(0.0, "plain"), a = train_losses(5.0, "a"), b = train_losses(5.0, "b");
  ASSERT_EQ(plain.size(), 3u);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a, b);  // the same seed and micro-batch counter: the same noise
  auto trace = read_json_file(std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_gqa/trace.json");
  ASSERT_TRUE(trace.ok());
  const double hf = (*trace)["steps"][0]["loss"].get<double>();
  EXPECT_LT(std::fabs(plain[0] - hf) / hf, 1e-5);  // alpha 0: no noise at all
  for (size_t i = 0; i < a.size(); ++i) EXPECT_GT(std::fabs(a[i] - plain[i]) / plain[i], 1e-4) << "step " << i + 1;
}

}  // namespace
}  // namespace st
