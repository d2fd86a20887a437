// Oracle: HF transformers + PEFT 8-step training traces (tools/ref/make_goldens.py: AdamW
// foreach=False, clip_grad_norm_, per-micro-batch mean loss / accumulation steps, f32).
// Our trainer starts from the fixture's saved adapter and must reproduce every step's loss
// (1e-5 rel), grad norm and the final adapter.
#include <cmath>
#include <cstdio>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/file.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "train/trainer.h"

namespace st {
namespace {

std::string fixture(const std::string& name) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/" + name; }

std::string temp_dir(const std::string& tag) {
  std::string d = Str() << "/tmp/st_train_test_" << getpid() << "_" << tag;
  EXPECT_TRUE(make_dirs(d).ok());
  return d;
}

TrainConfig golden_config(const Json& c, const std::string& dir, const std::string& out) {
  TrainConfig tc;
  tc.base_model = dir + "/model";
  tc.dtype = "float32";
  tc.learning_rate = c["learning_rate"].get<double>();
  tc.lr_scheduler = c["lr_scheduler"].get<std::string>();
  tc.warmup_steps = c["warmup_steps"].get<int64_t>();
  tc.weight_decay = c["weight_decay"].get<double>();
  tc.adam_beta1 = c["adam_beta1"].get<double>();
  tc.adam_beta2 = c["adam_beta2"].get<double>();
  tc.adam_epsilon = c["adam_epsilon"].get<double>();
  tc.max_grad_norm = c["max_grad_norm"].get<double>();
  tc.micro_batch_size = c["micro_batch_size"].get<int64_t>();
  tc.gradient_accumulation_steps = c["gradient_accumulation_steps"].get<int64_t>();
  tc.max_steps = c["max_steps"].get<int64_t>();
  tc.shuffle = c["shuffle"].get<bool>();
  tc.lora_r = c["lora_r"].get<int64_t>();
  tc.lora_alpha = c["lora_alpha"].get<double>();
  tc.lora_dropout = c["lora_dropout"].get<double>();
  tc.lora_target_modules = c["lora_target_modules"].get<std::vector<std::string>>();
  if (c.contains("use_dora")) tc.use_dora = c["use_dora"].get<bool>();
  if (c.contains("loraplus_lr_ratio")) tc.loraplus_lr_ratio = c["loraplus_lr_ratio"].get<double>();
  if (c.contains("layers_to_transform")) tc.peft_layers_to_transform = c["layers_to_transform"].get<std::vector<int64_t>>();
  tc.lora_model_dir = dir + "/adapter";
  tc.output_dir = out;
  tc.sequence_len = 256;
  tc.loss_normalization = "micro_batch";  // what make_goldens.py does
  return tc;
}

class Trace : public ::testing::TestWithParam<std::string> {};

TEST_P(Trace, EightStepsMatchHf) {
  const std::string dir = fixture(GetParam());
  auto trace = read_json_file(dir + "/trace.json");
  ASSERT_TRUE(trace.ok());
  const std::string out = temp_dir(GetParam());
  TrainConfig tc = golden_config((*trace)["config"], dir, out);
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 2});
  ASSERT_TRUE(be.ok());
  auto parts = hf_resident_parts(tc.base_model);
  ASSERT_TRUE(parts.ok()) << parts.status().to_string();
  auto trainer = Trainer::create(tc, be->get(), std::move(*parts));
  ASSERT_TRUE(trainer.ok()) << trainer.status().to_string();
  auto data = TokenizedJsonlSource::open({.paths = {dir + "/data.jsonl"}, .micro_batch_size = 1,
                                          .sequence_len = 256, .shuffle = false});
  ASSERT_TRUE(data.ok());
  std::vector<StepMetrics> got;
  (*trainer)->on_step = [&](const StepMetrics& m) { got.push_back(m); };
  Status s = (*trainer)->train(**data);
  ASSERT_TRUE(s.ok()) << s.to_string();

  const Json& steps = (*trace)["steps"];
  ASSERT_EQ(got.size(), steps.size());
  double worst_loss = 0, worst_norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = steps[i]["loss"].get<double>(), want_norm = steps[i]["grad_norm"].get<double>();
    const double el = std::fabs(got[i].loss - want) / want, en = std::fabs(got[i].grad_norm - want_norm) / want_norm;
    worst_loss = std::max(worst_loss, el);
    worst_norm = std::max(worst_norm, en);
    EXPECT_LT(el, 1e-5) << "step " << i + 1 << " loss " << got[i].loss << " want " << want;
    EXPECT_LT(en, 1e-4) << "step " << i + 1 << " grad_norm " << got[i].grad_norm << " want " << want_norm;
    EXPECT_DOUBLE_EQ(got[i].lr, steps[i]["learning_rate"].get<double>());
  }
  std::printf("%s: 8 steps, worst loss rel err %.3g, worst grad-norm rel err %.3g\n", GetParam().c_str(),
              worst_loss, worst_norm);

  // Final adapter vs PEFT's.
  auto mine = SafetensorsFile::open(out + "/adapter_model.safetensors");
  auto ref = SafetensorsFile::open(dir + "/final_adapter.safetensors");
  ASSERT_TRUE(mine.ok() && ref.ok());
  ASSERT_EQ(mine->tensors().size(), ref->tensors().size());
  double worst = 0;
  for (const TensorInfo& t : ref->tensors()) {
    const TensorInfo* m = mine->find(t.name);
    ASSERT_NE(m, nullptr) << t.name;
    ASSERT_EQ(m->shape, t.shape);
    const float* a = reinterpret_cast<const float*>(mine->data(*m));
    const float* b = reinterpret_cast<const float*>(ref->data(t));
    double num = 0, den = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      den += double(b[i]) * b[i];
    }
    const double e = std::sqrt(num / den);
    worst = std::max(worst, e);
    EXPECT_LT(e, 1e-4) << t.name;
  }
  std::printf("%s: final adapter worst rel err %.3g\n", GetParam().c_str(), worst);

  auto metrics = read_file_to_string(out + "/metrics.jsonl");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(std::count(metrics->begin(), metrics->end(), '\n'), 8);
  EXPECT_TRUE(file_exists(out + "/adapter_config.json"));
}

// Default normalisation (transformers >= 4.46, num_items_in_batch): the step loss is the token
// mean over the whole window = sum_i micro_loss_i * n_i / sum_i n_i with the golden micro losses.
TEST(TraceWindow, FirstStepLossIsWindowTokenMean) {
  const std::string dir = fixture("llama_gqa");
  auto trace = read_json_file(dir + "/trace.json");
  ASSERT_TRUE(trace.ok());
  TrainConfig tc = golden_config((*trace)["config"], dir, temp_dir("window"));
  tc.loss_normalization = "window";
  tc.max_steps = 1;
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 2});
  auto parts = hf_resident_parts(tc.base_model);
  ASSERT_TRUE(be.ok() && parts.ok());
  auto trainer = Trainer::create(tc, be->get(), std::move(*parts));
  ASSERT_TRUE(trainer.ok());
  auto data = TokenizedJsonlSource::open({.paths = {dir + "/data.jsonl"}, .micro_batch_size = 1});
  ASSERT_TRUE(data.ok());
  ASSERT_TRUE((*data)->start_epoch(0).ok());
  std::vector<Batch> window(2);
  ASSERT_TRUE(*(*data)->next(&window[0]) && *(*data)->next(&window[1]));
  auto m = (*trainer)->train_step(window);
  ASSERT_TRUE(m.ok());
  const Json& micro = (*trace)["steps"][0]["micro_losses"];
  const double n0 = static_cast<double>(window[0].num_targets), n1 = static_cast<double>(window[1].num_targets);
  const double want = (micro[0].get<double>() * n0 + micro[1].get<double>() * n1) / (n0 + n1);
  EXPECT_NEAR(m->loss, want, 1e-5 * want);
  EXPECT_NE(n0, n1);  // otherwise both normalisations agree and the test proves nothing
}

// qwen2_loraplus: DoRA trained with LoRA+ (PEFT's create_loraplus_optimizer, ratio 16): B and the
// magnitudes at 16 x lr (train/optimizer.h Note [LoRA+]).
INSTANTIATE_TEST_SUITE_P(Fixtures, Trace, ::testing::Values("llama_gqa", "qwen2_tied", "qwen3_qknorm", "mistral_swa", "qwen2_swa",
                                                            "qwen2_loraplus", "llama_layers"));

}  // namespace
}  // namespace st
