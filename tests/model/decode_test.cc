// Decoder (model/decode.h) and Backend::attention_kv.
//
// Oracles: (1) the model helper's full-sequence forward (Model::forward_logits, the training
// forward) on the same tokens: prefill (chunked) + one-token steps must reproduce every row of its
// logits within 1e-4 relative (f32), with and without a LoRA adapter, for llama / qwen2 (biases,
// tied) / qwen3 (qk-norm) tiny presets; (2) attention_kv against the training attention op on the
// CPU reference; (3) sampling: greedy = argmax, seeded sampling reproducible, top-p -> 0 = argmax.
#include "model/decode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include <unistd.h>

#include "data/batch.h"
#include "io/safetensors.h"
#include "model/init_model.h"
#include "model/load.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/resident_source.h"

namespace st {
namespace {

std::unique_ptr<Backend> cpu() {
  auto b = make_backend(DeviceKind::kCpu);
  CHECK(b.ok());
  return std::move(b).value();
}

std::string tiny_model_dir(const std::string& preset, int64_t window = 0) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("st_decode_" + preset + "_w" + std::to_string(window) + "_" + std::to_string(::getpid())))
                              .string();
  auto c = model_preset(preset);
  CHECK(c.ok());
  c->sliding_window = window;  // every layer (config.json says so explicitly)
  InitModelOptions o;
  o.seed = 7;
  o.dtype = DType::kF32;
  o.std = 0.08;  // large enough that logits differ visibly between tokens
  o.overwrite = true;
  auto r = init_model(*c, dir, o);
  CHECK(r.ok(), r.status().message());
  return dir;
}

// max |a-b| / max |b|
double rel_err(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(b[i])));
  }
  return num / std::max(den, 1e-30);
}

LoraConfig all_linear(int64_t r, bool dora = false) {
  LoraConfig lc;
  lc.r = r;
  lc.dora = dora;
  lc.alpha = 2.0 * static_cast<double>(r);
  for (auto& t : lc.targets) t = true;
  return lc;
}

// Non-zero A and B, so the adapter changes the logits.
void randomize_lora(Lora& lora, uint64_t seed) {
  std::vector<float> p = lora.params_to_host();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  for (float& x : p) x = nd(rng);
  // Padding floats must stay zero (Note [lora arena]); rebuild from the offsets.
  std::vector<float> q(p.size(), 0.0f);
  const ModelConfig& c = lora.model_config();
  for (int l = 0; l < c.num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const auto tg = static_cast<LoraTarget>(t);
      if (lora.offset_a(l, tg) < 0) continue;
      const auto [in, out] = lora_target_dims(c, tg);
      const int64_t r = lora.config().r;
      for (int64_t i = 0; i < r * in; ++i) q[lora.offset_a(l, tg) + i] = p[lora.offset_a(l, tg) + i];
      for (int64_t i = 0; i < out * r; ++i) q[lora.offset_b(l, tg) + i] = p[lora.offset_b(l, tg) + i];
      if (lora.offset_mag(l, tg) >= 0)  // DoRA magnitudes: positive, away from the row norms
        for (int64_t i = 0; i < out; ++i) q[lora.offset_mag(l, tg) + i] = 0.5f + std::fabs(p[lora.offset_mag(l, tg) + i]);
    }
  lora.params_from_host(q);
}

struct Oracle {
  std::unique_ptr<Model> model;
  std::unique_ptr<ResidentLayerSource> src;
};

Oracle make_oracle(Backend* be, const std::string& dir, const LoraConfig& lc, int64_t max_tokens) {
  auto ck = Checkpoint::open(dir);
  CHECK(ck.ok());
  auto cfg = load_hf_config(dir + "/config.json");
  CHECK(cfg.ok());
  ModelOptions mo;
  mo.act_dtype = DType::kF32;
  mo.max_tokens = max_tokens;
  Oracle o;
  auto m = Model::create(*cfg, be, lc, mo);
  CHECK(m.ok(), m.status().message());
  o.model = std::move(m).value();
  CHECK(o.model->load_extras(*ck).ok());
  auto s = ResidentLayerSource::from_checkpoint(be, *cfg, o.model->layer_layout(), *ck);
  CHECK(s.ok());
  o.src = std::move(s).value();
  return o;
}

std::vector<float> full_logits(Oracle& o, const std::vector<int32_t>& ids) {
  Batch b;
  b.batch = 1;
  b.seq = static_cast<int64_t>(ids.size());
  b.input_ids = ids;
  b.labels.assign(ids.size(), kIgnoreIndex);
  for (size_t i = 0; i < ids.size(); ++i) b.positions.push_back(static_cast<int32_t>(i));
  b.doc_ids.assign(ids.size(), 0);
  auto r = o.model->forward_logits(b, *o.src);
  CHECK(r.ok(), r.status().message());
  return std::move(r).value();
}

// Prefill `prompt` (in chunks of 3), then feed `more` one token at a time; every logits row must
// match the full forward's.
void check_decode(const std::string& preset, bool with_lora, int64_t window = 0, bool dora = false) {
  auto be = cpu();
  const std::string dir = tiny_model_dir(preset, window);
  const LoraConfig lc = with_lora ? all_linear(4, dora) : LoraConfig{};
  const std::vector<int32_t> prompt = {5, 17, 300, 2, 99, 511, 42}, more = {7, 8, 250, 1, 64};
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), more.begin(), more.end());
  Oracle o = make_oracle(be.get(), dir, lc, static_cast<int64_t>(all.size()));
  if (with_lora) randomize_lora(o.model->lora(), 3);
  const std::vector<float> ref = full_logits(o, all);

  auto msrc = open_model_source(dir);
  ASSERT_TRUE(msrc.ok()) << msrc.status().message();
  auto lm = load_model_resident(be.get(), **msrc, DType::kF32);
  ASSERT_TRUE(lm.ok()) << lm.status().message();
  const int64_t V = (*lm)->config.vocab_size;
  auto dec = Decoder::create(be.get(), (*lm)->config, (*lm)->extras, (*lm)->layers.get(),
                             with_lora ? &o.model->lora() : nullptr, {.max_seq = 16, .max_chunk = 3, .act = DType::kF32});
  ASSERT_TRUE(dec.ok()) << dec.status().message();
  auto pre = (*dec)->forward(prompt, LogitsFor::kAll);
  ASSERT_TRUE(pre.ok()) << pre.status().message();
  double worst = 0;
  for (size_t t = 0; t < prompt.size(); ++t) worst = std::max(worst, rel_err(pre->data() + t * V, ref.data() + t * V, V));
  for (size_t i = 0; i < more.size(); ++i) {
    auto step = (*dec)->forward(std::span<const int32_t>(&more[i], 1), LogitsFor::kLast);
    ASSERT_TRUE(step.ok()) << step.status().message();
    worst = std::max(worst, rel_err(step->data(), ref.data() + (prompt.size() + i) * V, V));
  }
  EXPECT_LT(worst, 1e-4) << preset << (with_lora ? " + lora" : "");
  EXPECT_EQ((*dec)->pos(), static_cast<int64_t>(all.size()));
  // The window must matter (otherwise the windowed case proves nothing).
  if (window > 0) {
    const std::string full_dir = tiny_model_dir(preset, 0);
    Oracle full = make_oracle(be.get(), full_dir, lc, static_cast<int64_t>(all.size()));
    if (with_lora) randomize_lora(full.model->lora(), 3);
    EXPECT_GT(rel_err(full_logits(full, all).data() + (all.size() - 1) * V, ref.data() + (all.size() - 1) * V, V), 1e-3);
    std::filesystem::remove_all(full_dir);
  }
  // The adapter must matter (otherwise the LoRA case proves nothing).
  if (with_lora) {
    Oracle base = make_oracle(be.get(), dir, LoraConfig{}, static_cast<int64_t>(all.size()));
    EXPECT_GT(rel_err(full_logits(base, all).data(), ref.data(), V), 1e-3);
  }
  // Overflowing the cache is refused.
  std::vector<int32_t> big(5, 1);
  EXPECT_FALSE((*dec)->forward(big, LogitsFor::kLast).ok());
  std::filesystem::remove_all(dir);
}

TEST(Decode, LlamaMatchesFullForward) { check_decode("tiny-llama", false); }
TEST(Decode, Qwen2DoraMatchesFullForward) { check_decode("tiny-qwen2", true, 0, /*dora=*/true); }
TEST(Decode, LlamaLoraMatchesFullForward) { check_decode("tiny-llama", true); }
TEST(Decode, Qwen2LoraMatchesFullForward) { check_decode("tiny-qwen2", true); }
TEST(Decode, Qwen3LoraMatchesFullForward) { check_decode("tiny-qwen3", true); }
// A sliding window of 3 over 12 tokens: the cache walk starts where the training mask does.
TEST(Decode, SlidingWindowMatchesFullForward) { check_decode("tiny-qwen2", true, 3); }

// attention_kv on rows q_start.. equals the training attention's rows (same q, k, v).
TEST(AttentionKv, MatchesCausalAttention) {
  for (int64_t window : {0, 4}) {  // full causal, and a sliding window shorter than q0
  SCOPED_TRACE(window);
  auto be = cpu();
  const int64_t T = 11, NH = 4, KVH = 2, D = 16, q0 = 6;
  const AttnShape s{.num_heads = NH, .num_kv_heads = KVH, .head_dim = D, .scale = 0.25f, .window = window};
  std::mt19937_64 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> q(T * NH * D), k(T * KVH * D), v(T * KVH * D), out(T * NH * D), lse(NH * T);
  for (auto* vec : {&q, &k, &v})
    for (float& x : *vec) x = nd(rng);
  SeqLayout L;
  L.seq = T;
  std::vector<int32_t> pos(T);
  for (int64_t i = 0; i < T; ++i) pos[i] = static_cast<int32_t>(i);
  L.positions = pos.data();
  be->attention(Tensor(out.data(), DType::kF32, {T, NH, D}), Tensor(lse.data(), DType::kF32, {1, NH, T}),
                Tensor(q.data(), DType::kF32, {T, NH, D}), Tensor(k.data(), DType::kF32, {T, KVH, D}),
                Tensor(v.data(), DType::kF32, {T, KVH, D}), L, s);
  // Cache with extra garbage rows beyond q0+Tq: they must not be read.
  const int64_t Tq = 3, Tk = q0 + Tq + 2;
  std::vector<float> kc(Tk * KVH * D, 1e30f), vc(Tk * KVH * D, 1e30f), o2(Tq * NH * D);
  std::copy(k.begin(), k.begin() + (q0 + Tq) * KVH * D, kc.begin());
  std::copy(v.begin(), v.begin() + (q0 + Tq) * KVH * D, vc.begin());
  be->attention_kv(Tensor(o2.data(), DType::kF32, {Tq, NH, D}), Tensor(q.data() + q0 * NH * D, DType::kF32, {Tq, NH, D}),
                   Tensor(kc.data(), DType::kF32, {Tk, KVH, D}), Tensor(vc.data(), DType::kF32, {Tk, KVH, D}), q0, s);
  for (int64_t i = 0; i < Tq * NH * D; ++i) ASSERT_EQ(o2[i], out[q0 * NH * D + i]) << i;  // same arithmetic
  }
}

TEST(Sampling, GreedySeededAndTopP) {
  std::vector<float> logits = {0.1f, 2.0f, 1.9f, -3.0f, 2.0f};
  std::mt19937_64 rng(5);
  EXPECT_EQ(sample_token(logits, {}, rng), 1);  // lowest id among the tied maxima
  EXPECT_EQ(sample_token(logits, {.temperature = 1.0f, .top_p = 1e-6f}, rng), 1);
  std::vector<int32_t> a, b;
  std::mt19937_64 r1(9), r2(9);
  int counts[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < 400; ++i) {
    a.push_back(sample_token(logits, {.temperature = 1.0f, .top_p = 0.9f}, r1));
    b.push_back(sample_token(logits, {.temperature = 1.0f, .top_p = 0.9f}, r2));
    ++counts[a.back()];
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(counts[3], 0);  // outside the top-p set
  EXPECT_EQ(counts[0], 0);  // p(0) ~ 0.07 is outside 0.9 of the mass after 1, 4, 2
  EXPECT_GT(counts[2], 50);
}

}  // namespace
}  // namespace st
