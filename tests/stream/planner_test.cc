// Planner: byte-size parsing, the arithmetic of every term, how many layers stay resident, and
// refusals that name the largest term and a fix that really fits.
#include "stream/planner.h"

#include "model/model.h"

#include <gtest/gtest.h>

#include "model/layer.h"
#include "model/presets.h"
#include "model/weights.h"

namespace st {
namespace {

TEST(ParseByteSize, UnitsAndErrors) {
  EXPECT_EQ(*parse_byte_size("4GiB"), 4ull << 30);
  EXPECT_EQ(*parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(*parse_byte_size("1.5GB"), 1500000000ull);
  EXPECT_EQ(*parse_byte_size("123456"), 123456ull);
  EXPECT_EQ(*parse_byte_size("8G"), 8ull << 30);
  EXPECT_EQ(*parse_byte_size("2 gib"), 2ull << 30);
  EXPECT_EQ(*parse_byte_size("10KB"), 10000ull);
  for (const char* bad : {"", "GiB", "4XB", "-1GiB", "1.2.3GB", "4 G i B x"})
    EXPECT_EQ(parse_byte_size(bad).status().code(), StatusCode::kInvalidArgument) << bad;
}

PlanInput qwen_input(uint64_t budget) {
  PlanInput in;
  in.model = *model_preset("qwen2.5-0.5b");
  in.dtype = DType::kBF16;
  in.micro_batch_size = 1;
  in.sequence_len = 2048;
  in.lora.r = 16;
  in.lora.targets[static_cast<int>(LoraTarget::kQ)] = true;
  in.lora.targets[static_cast<int>(LoraTarget::kV)] = true;
  in.device = DeviceKind::kCuda;
  in.vram_budget = budget;
  return in;
}

uint64_t term(const Plan& p, const std::string& name) {
  for (const PlanTerm& t : p.vram)
    if (t.name == name) return t.bytes;
  ADD_FAILURE() << "no term " << name;
  return 0;
}

TEST(Planner, TermsAndResidentCount) {
  PlanInput in = qwen_input(1ull << 40);
  const ModelConfig& c = in.model;
  const uint64_t lb = make_layer_layout(c, DType::kBF16).bytes;
  StatusOr<Plan> all = make_plan(in);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(all->resident_layers.size(), static_cast<size_t>(c.num_layers));  // everything fits
  EXPECT_EQ(all->num_slots, 0);
  // Activations come from the Model's own arena function (what Model::create allocates).
  ModelOptions mo;
  mo.act_dtype = DType::kBF16;
  mo.max_tokens = 2048;
  EXPECT_EQ(term(*all, "activations + scratch (model arena)"), model_arena_bytes(c, in.lora, mo));
  EXPECT_GE(model_arena_bytes(c, in.lora, mo), static_cast<uint64_t>(c.num_layers) * 2048 * c.hidden_size * 2);
  // GQA (14 heads over 2 kv heads): per-head dK/dV + delta, f32.
  EXPECT_EQ(term(*all, "attention backward scratch"), 4ull * (2ull * 2048 * 14 * 64 + 2048ull * 14));
  // LoRA: r x (in + out) per target, q: 896 -> 896, v: 896 -> 128; x4 (param, grad, m, v) x f32.
  EXPECT_EQ(term(*all, "LoRA params+grads+AdamW"), 16ull * 24 * 16 * ((896 + 896) + (896 + 128)));
  uint64_t sum = 0;
  for (const PlanTerm& t : all->vram) sum += t.bytes;
  EXPECT_EQ(sum, all->vram_total);

  // The minimal streaming plan + 5.5 layers: 5 resident, 2 slots.
  in.vram_budget = 1ull << 40;
  in.vram_budget = all->vram_total - lb * c.num_layers + 2 * lb;  // exactly the minimum
  StatusOr<Plan> min = make_plan(in);
  ASSERT_TRUE(min.ok()) << min.status().to_string();
  EXPECT_EQ(min->resident_layers.size(), 0u);
  EXPECT_EQ(min->num_slots, 2);
  EXPECT_EQ(min->vram_total, in.vram_budget);
  in.vram_budget += lb * 11 / 2;
  StatusOr<Plan> some = make_plan(in);
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->resident_layers.size(), 5u);
  EXPECT_EQ(some->num_slots, 2);
  EXPECT_LE(some->vram_total, in.vram_budget);
  EXPECT_GT(some->vram_total + lb, in.vram_budget);
  // Resident layers are spread over the depth, sorted and distinct.
  for (size_t i = 1; i < some->resident_layers.size(); ++i)
    EXPECT_GT(some->resident_layers[i], some->resident_layers[i - 1]);
  EXPECT_GE(some->resident_layers.back(), c.num_layers / 2);
  // RAM tier host bytes: the whole store arena.
  EXPECT_GE(some->host_bytes, lb * c.num_layers);
  EXPECT_NE(some->banner().find("5 of 24 layers resident"), std::string::npos) << some->banner();
}

TEST(Planner, RefusesNamingLargestTermAndAFixThatFits) {
  PlanInput in = qwen_input(1ull << 30);  // 1 GiB
  in.sequence_len = 32768;
  StatusOr<Plan> p = make_plan(in);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted);
  const std::string& m = p.status().message();
  EXPECT_NE(m.find("largest term is"), std::string::npos) << m;
  size_t at = m.find("sequence_len <= ");
  ASSERT_NE(at, std::string::npos) << m;
  int64_t fit = std::stoll(m.substr(at + 16));
  EXPECT_GT(fit, 0);
  in.sequence_len = fit;
  EXPECT_TRUE(make_plan(in).ok()) << "the suggested sequence_len does not fit";
  in.sequence_len = fit + 1;
  EXPECT_FALSE(make_plan(in).ok());

  PlanInput tiny = qwen_input(10ull << 20);  // 10 MiB: nothing fits
  StatusOr<Plan> q = make_plan(tiny);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("larger vram_budget"), std::string::npos) << q.status().message();
}

TEST(Planner, UntiedLmHeadIsCountedResidentAndDefaultBudget) {
  PlanInput in;
  in.model = *model_preset("llama3-8b");
  in.sequence_len = 4096;
  in.lora.r = 16;
  in.lora.targets[static_cast<int>(LoraTarget::kQ)] = true;
  in.device = DeviceKind::kCuda;
  in.vram_budget = *parse_byte_size("8GiB");
  StatusOr<Plan> p = make_plan(in);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  // The Model keeps the lm_head on the device, so the plan must count it there.
  EXPECT_FALSE(p->lm_head_streamed);
  EXPECT_EQ(term(*p, "embedding + final norm + lm_head"), make_extras_layout(in.model, DType::kBF16).bytes);

  // No budget: free memory minus max(512 MiB, 5%).
  in.vram_budget = 0;
  in.device_free_bytes = 80ull << 30;
  StatusOr<Plan> d = make_plan(in);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->budget, (80ull << 30) - (4ull << 30));
  in.tier = "bogus";
  EXPECT_EQ(make_plan(in).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace st
