// bf16 activations + weights (the CUDA training dtype) run on the CPU reference backend: the
// LoRA path converts to f32 as PEFT does. Oracle: the HF f32 goldens with bf16-sized tolerances
// (logits 2e-2, grads 1e-1 relative norm), which still catch a missing or doubled LoRA term.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "core/json.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/resident_source.h"

namespace st {
namespace {

double rel(const float* got, const float* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

class Bf16 : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16, LogitsAndGradsCloseToHf) {
  const std::string dir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/" + GetParam();
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  auto mc = load_hf_config(dir + "/model/config.json");
  auto ck = Checkpoint::open(dir + "/model");
  auto lc = read_peft_config(dir + "/adapter");
  auto ex = SafetensorsFile::open(dir + "/expected.safetensors");
  ASSERT_TRUE(be.ok() && mc.ok() && ck.ok() && lc.ok() && ex.ok());
  auto m = Model::create(*mc, be->get(), *lc, {.act_dtype = DType::kBF16, .max_tokens = 64});
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->load_extras(*ck).ok());
  auto src = ResidentLayerSource::from_checkpoint(be->get(), *mc, (*m)->layer_layout(), *ck);
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE((*m)->lora().load_peft(dir + "/adapter").ok());
  auto text = read_file_to_string(dir + "/data.jsonl");
  auto row = parse_json(text->substr(0, text->find('\n')), "row 0");
  ASSERT_TRUE(row.ok());
  Batch b;
  b.input_ids = (*row)["input_ids"].get<std::vector<int32_t>>();
  b.labels = b.input_ids;
  b.batch = 1;
  b.seq = static_cast<int64_t>(b.input_ids.size());
  auto logits = (*m)->forward_logits(b, **src);
  ASSERT_TRUE(logits.ok());
  const TensorInfo* lt = ex->find("logits");
  const double el = rel(logits->data(), reinterpret_cast<const float*>(ex->data(*lt)), lt->numel());
  EXPECT_LT(el, 2e-2);

  Lora& lora = (*m)->lora();
  lora.zero_grads();
  auto losses = (*m)->forward_backward({&b}, **src, {1.0f / static_cast<float>(b.seq - 1)});
  ASSERT_TRUE(losses.ok());
  std::vector<float> g(static_cast<size_t>(lora.numel()));
  (*be)->copy_d2h(g.data(), lora.grads().data, g.size() * sizeof(float), StreamId::kCompute);
  (*be)->sync_all();
  double worst = 0;
  for (int l = 0; l < mc->num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto tt = static_cast<LoraTarget>(t);
      if (!lc->has(tt)) continue;
      for (int is_b = 0; is_b < 2; ++is_b) {
        const TensorInfo* ti = ex->find(peft_tensor_name(l, tt, is_b));
        ASSERT_NE(ti, nullptr);
        const int64_t off = is_b ? lora.offset_b(l, tt) : lora.offset_a(l, tt);
        const double e = rel(g.data() + off, reinterpret_cast<const float*>(ex->data(*ti)), ti->numel());
        worst = std::max(worst, e);
        EXPECT_LT(e, 1e-1) << ti->name;
      }
    }
  std::printf("%s bf16: logits rel err %.3g, worst grad rel err %.3g\n", GetParam().c_str(), el, worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Bf16, ::testing::Values("llama_gqa", "qwen2_tied", "qwen3_qknorm", "mistral_swa", "qwen2_swa"));

}  // namespace
}  // namespace st
