// Oracle: HF transformers + PEFT (tools/ref/make_goldens.py, f32, TF32 off). For each tiny model
// fixture: logits of row 0 with the saved adapter and without it (B = 0), and the LoRA gradients
// of the first micro-batch's mean loss.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/file.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/resident_source.h"

namespace st {
namespace {

std::string fixture(const std::string& name) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/" + name; }

std::vector<float> read_f32(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* ti = f.find(name);
  EXPECT_NE(ti, nullptr) << name;
  if (!ti) return {};
  std::vector<float> out(static_cast<size_t>(ti->numel()));
  convert_elements(out.data(), DType::kF32, f.data(*ti), ti->dtype, out.size());
  return out;
}

double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

Batch row_batch(const Json& row) {
  Batch b;
  b.input_ids = row["input_ids"].get<std::vector<int32_t>>();
  b.labels = row.contains("labels") ? row["labels"].get<std::vector<int32_t>>() : b.input_ids;
  b.batch = 1;
  b.seq = static_cast<int64_t>(b.input_ids.size());
  for (int64_t t = 0; t + 1 < b.seq; ++t) b.num_targets += b.labels[t + 1] != kIgnoreIndex;
  return b;
}

struct Rig {
  std::unique_ptr<Backend> be;
  ModelConfig cfg;
  std::unique_ptr<Model> model;
  std::unique_ptr<ResidentLayerSource> src;
  std::vector<Batch> rows;
};

// dropout >= 0: overrides the adapter's lora_dropout (training-mode passes only).
void make_rig(const std::string& name, Rig* r, double dropout = -1) {
  const std::string dir = fixture(name);
  auto be = make_backend(DeviceKind::kCpu, {.num_threads = 2});
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  r->be = std::move(*be);
  auto cfg = load_hf_config(dir + "/model/config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  r->cfg = *cfg;
  auto text = read_file_to_string(dir + "/data.jsonl");
  ASSERT_TRUE(text.ok());
  int64_t max_len = 0;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    if (end > start) {
      auto j = parse_json(text->substr(start, end - start), "data.jsonl");
      ASSERT_TRUE(j.ok());
      r->rows.push_back(row_batch(*j));
      max_len = std::max(max_len, r->rows.back().seq);
    }
    start = end + 1;
  }
  auto lc = read_peft_config(dir + "/adapter");
  ASSERT_TRUE(lc.ok()) << lc.status().to_string();
  if (dropout >= 0) lc->dropout = dropout;
  auto ck = Checkpoint::open(dir + "/model");
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  auto m = Model::create(r->cfg, r->be.get(), *lc, {.act_dtype = DType::kF32, .max_tokens = max_len});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  r->model = std::move(*m);
  ASSERT_TRUE(r->model->load_extras(*ck).ok());
  auto src = ResidentLayerSource::from_checkpoint(r->be.get(), r->cfg, r->model->layer_layout(), *ck);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  r->src = std::move(*src);
  Status s = r->model->lora().load_peft(dir + "/adapter");
  ASSERT_TRUE(s.ok()) << s.to_string();
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, LogitsMatchHf) {
  Rig r;
  make_rig(GetParam(), &r);
  if (HasFatalFailure()) return;
  auto ex = SafetensorsFile::open(fixture(GetParam()) + "/expected.safetensors");
  ASSERT_TRUE(ex.ok());
  auto logits = r.model->forward_logits(r.rows[0], *r.src);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  double e = rel_err(*logits, read_f32(*ex, "logits"));
  std::printf("%s logits rel err %.3g\n", GetParam().c_str(), e);
  EXPECT_LT(e, 1e-4) << "logits rel err " << e;

  // Without the adapter: zero every B (DoRA: and m back to the row norms of W, PEFT's init).
  Lora& lora = r.model->lora();
  std::vector<float> p = lora.params_to_host();
  for (int l = 0; l < r.cfg.num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      if (!lora.config().has(static_cast<LoraTarget>(t))) continue;
      auto [in, out] = lora_target_dims(r.cfg, static_cast<LoraTarget>(t));
      std::fill_n(p.begin() + lora.offset_b(l, static_cast<LoraTarget>(t)), out * lora.config().r, 0.0f);
      (void)in;
    }
  lora.params_from_host(p);
  if (lora.config().dora) {
    lora.set_magnitudes_pending(true);
    ASSERT_TRUE(r.model->init_dora_magnitudes(*r.src).ok());
  }
  auto base = r.model->forward_logits(r.rows[0], *r.src);
  ASSERT_TRUE(base.ok());
  e = rel_err(*base, read_f32(*ex, "base_logits"));
  std::printf("%s base logits rel err %.3g\n", GetParam().c_str(), e);
  EXPECT_LT(e, 1e-4) << "base logits rel err " << e;
}

// The first micro-batch's loss and LoRA gradients against HF + PEFT's (dropout as make_rig says).
void check_first_grads(const std::string& name, double dropout = -1) {
  Rig r;
  make_rig(name, &r, dropout);
  if (::testing::Test::HasFatalFailure()) return;
  auto ex = SafetensorsFile::open(fixture(name) + "/expected.safetensors");
  ASSERT_TRUE(ex.ok());
  Lora& lora = r.model->lora();
  lora.zero_grads();
  const Batch& b = r.rows[0];
  auto losses = r.model->forward_backward({&b}, *r.src, {1.0f / static_cast<float>(b.num_targets)});
  ASSERT_TRUE(losses.ok()) << losses.status().to_string();
  auto trace = read_json_file(fixture(name) + "/trace.json");
  ASSERT_TRUE(trace.ok());
  const double want_loss = (*trace)["first_microbatch_loss"].get<double>();
  EXPECT_NEAR((*losses)[0] / b.num_targets, want_loss, 1e-5 * want_loss);

  std::vector<float> g(static_cast<size_t>(lora.numel()));
  r.be->copy_d2h(g.data(), lora.grads().data, g.size() * sizeof(float), StreamId::kCompute);
  r.be->sync_all();
  int checked = 0;
  double worst = 0;
  for (int l = 0; l < r.cfg.num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      auto tt = static_cast<LoraTarget>(t);
      if (!lora.config().has(tt) || !lora.config().on_layer(l)) continue;  // llama_layers: layers 0 and 2
      auto [in, out] = lora_target_dims(r.cfg, tt);
      const int64_t rr = lora.config().r;
      for (int is_b = 0; is_b < 2; ++is_b) {
        int64_t off = is_b ? lora.offset_b(l, tt) : lora.offset_a(l, tt);
        int64_t n = is_b ? out * rr : rr * in;
        std::vector<float> got(g.begin() + off, g.begin() + off + n);
        const std::string name = peft_tensor_name(l, tt, is_b);
        double e = rel_err(got, read_f32(*ex, name));
        EXPECT_LT(e, 1e-4) << name << " rel err " << e;
        worst = std::max(worst, e);
        ++checked;
      }
      if (lora.config().dora) {  // the magnitude's gradient (Note [DoRA])
        const int64_t off = lora.offset_mag(l, tt);
        std::vector<float> got(g.begin() + off, g.begin() + off + out);
        const std::string name = peft_magnitude_name(l, tt);
        double e = rel_err(got, read_f32(*ex, name));
        EXPECT_LT(e, 1e-4) << name << " rel err " << e;
        worst = std::max(worst, e);
        ++checked;
      }
    }
  std::printf("%s %d LoRA grads, worst rel err %.3g\n", name.c_str(), checked, worst);
  EXPECT_GT(checked, 0);
}

TEST_P(Golden, FirstMicroBatchGradsMatchHf) { check_first_grads(GetParam()); }

// The DoRA-with-dropout path (layer.cc Note [DoRA with dropout]: the extra base products of the
// dropped input, the scaled dropped gradient) at p = 1e-9: every element is kept and 1/(1-p)
// rounds to 1 in f32, so PEFT's dropout-free numbers are its oracle.
TEST(GoldenDoraDropout, TinyDropoutMatchesHf) { check_first_grads("qwen2_dora", 1e-9); }

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::Values("llama_gqa", "qwen2_tied", "qwen3_qknorm", "mistral_swa", "qwen2_swa",
                                                             "qwen2_dora", "llama_layers"));

}  // namespace
}  // namespace st
