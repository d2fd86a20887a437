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
  in.offload_embeddings = "false";  // extras on the device (host extras: HostExtras* below)
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
  // Everything resident with room to spare: every activation is kept (no recompute).
  EXPECT_EQ(all->recompute, Recompute::kNone);
  ModelOptions keep_all = mo, keep_att = mo;
  keep_all.recompute = Recompute::kNone;
  keep_att.recompute = Recompute::kAttention;
  const uint64_t saved = model_arena_bytes(c, in.lora, keep_all) - model_arena_bytes(c, in.lora, mo);
  // Per layer: att [N,Q] + lse [N*NH] f32 + rstd1/rstd2 [N] f32 + xn/h/hn [N,H] + q [N,Q] + k/v
  // [N,KV] + g/u/m [N,F] (bf16 act; every size a multiple of 256 here). The t [N,r] f32 of each
  // target are kept in every mode, kFull too (model/layer.cc Note [kept LoRA t]).
  const uint64_t N = 2048, H = 896, Q = 896, KV = 128, F = 4864;
  const uint64_t per_layer = N * Q * 2 + N * 14 * 4 + 2 * N * 4 + 3 * N * H * 2 + N * Q * 2 + 2 * N * KV * 2 +
                             3 * N * F * 2;
  EXPECT_EQ(saved, static_cast<uint64_t>(c.num_layers) * per_layer);
  EXPECT_EQ(layer_saved_bytes(c, N, in.lora, DType::kBF16, Recompute::kFull), 2 * N * 16 * 4);
  EXPECT_EQ(model_arena_bytes(c, in.lora, keep_att) - model_arena_bytes(c, in.lora, mo),
            static_cast<uint64_t>(c.num_layers) * (N * Q * 2 + N * 14 * 4));
  EXPECT_EQ(term(*all, "activations + scratch (model arena)"), model_arena_bytes(c, in.lora, keep_all));
  EXPECT_GE(model_arena_bytes(c, in.lora, mo), static_cast<uint64_t>(c.num_layers) * 2048 * c.hidden_size * 2);
  // GQA (14 heads over 2 kv heads): per-head dK/dV + delta, f32.
  EXPECT_EQ(term(*all, "attention backward scratch"), 4ull * (2ull * 2048 * 14 * 64 + 2048ull * 14));
  // LoRA: r x (in + out) per target, q: 896 -> 896, v: 896 -> 128; x4 (param, grad, m, v) x f32.
  EXPECT_EQ(term(*all, "LoRA params+grads+AdamW"), 16ull * 24 * 16 * ((896 + 896) + (896 + 128)));
  uint64_t sum = 0;
  for (const PlanTerm& t : all->vram) sum += t.bytes;
  EXPECT_EQ(sum, all->vram_total);
  // Note [launch plan memory]: granted on CUDA when it fits.
  EXPECT_EQ(term(*all, "launch plans (CUDA graphs)"), kLaunchPlanBytes);
  EXPECT_EQ(all->launch_plan_bytes, kLaunchPlanBytes);

  // The minimal streaming plan + 5.5 layers: 5 resident, 2 slots.
  in.vram_budget = 1ull << 40;
  // exactly the minimum (no launch plans: they are granted only beside the residency)
  in.vram_budget = all->vram_total - saved - lb * c.num_layers + 2 * lb - kLaunchPlanBytes;
  StatusOr<Plan> min = make_plan(in);
  ASSERT_TRUE(min.ok()) << min.status().to_string();
  EXPECT_EQ(min->resident_layers.size(), 0u);
  EXPECT_EQ(min->launch_plan_bytes, 0u);
  {  // what is left beside the residency goes to launch plans when it is at least kLaunchPlanBytesMin
    PlanInput more = in;
    more.tier = "off";
    more.recompute = "full";
    more.vram_budget = 1ull << 40;
    StatusOr<Plan> big = make_plan(more);
    ASSERT_TRUE(big.ok());
    EXPECT_EQ(big->launch_plan_bytes, kLaunchPlanBytes);
    const uint64_t base = big->vram_total - kLaunchPlanBytes;
    more.vram_budget = base + (48ull << 20);
    StatusOr<Plan> p = make_plan(more);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->launch_plan_bytes, 48ull << 20);
    EXPECT_EQ(p->vram_total, more.vram_budget);
    more.vram_budget = base + kLaunchPlanBytesMin;  // the floor: granted (a partial grant still pays)
    EXPECT_EQ(make_plan(more)->launch_plan_bytes, kLaunchPlanBytesMin);
    more.vram_budget -= 1;  // one byte short of the floor: none
    EXPECT_EQ(make_plan(more)->launch_plan_bytes, 0u);
  }
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

// Note [resident code12 layers]: a code12 plan counts its resident layers dense (decoded once) and
// its pool slots coded; with layers resident and none streamed, one coded staging blob.
TEST(Planner, Code12CountsResidentLayersDenseAndSlotsCoded) {
  PlanInput in = qwen_input(1ull << 40);
  in.offload_embeddings = "false";
  in.quant = BaseQuant::kCode12;
  in.recompute = "full";  // a fixed activation term: the budget below moves layers, not recompute
  const ModelConfig& c = in.model;
  const uint64_t dense = make_layer_layout(c, DType::kBF16).bytes;
  const uint64_t coded = make_layer_layout(c, DType::kBF16, BaseQuant::kCode12).bytes;
  ASSERT_LT(coded * 100, dense * 80);
  StatusOr<Plan> all = make_plan(in);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(all->num_slots, 0);
  EXPECT_EQ(term(*all, "resident layers"), dense * static_cast<uint64_t>(c.num_layers));
  EXPECT_EQ(term(*all, "pool slots"), coded);  // the decode staging
  in.vram_budget = all->vram_total - dense * 10;  // some layers must stream
  StatusOr<Plan> some = make_plan(in);
  ASSERT_TRUE(some.ok()) << some.status().to_string();
  ASSERT_GT(some->num_slots, 0);
  ASSERT_GT(some->resident_layers.size(), 0u);
  EXPECT_EQ(term(*some, "resident layers"), dense * some->resident_layers.size());
  EXPECT_EQ(term(*some, "pool slots"), coded * static_cast<uint64_t>(some->num_slots));
  EXPECT_EQ(some->layer_bytes, coded);
}

// Note [recompute plan]: auto takes the least recompute that fits once every layer is resident;
// an explicit mode is planned as asked or refused with a fix.
TEST(Planner, RecomputeFollowsSpareMemory) {
  PlanInput in = qwen_input(1ull << 40);
  in.offload_embeddings = "false";
  auto total_with = [&](const char* mode) {
    PlanInput t = in;
    t.recompute = mode;
    StatusOr<Plan> p = make_plan(t);
    EXPECT_TRUE(p.ok()) << mode << ": " << p.status().to_string();
    EXPECT_EQ(std::string(recompute_name(p->recompute)), mode);
    return p->vram_total;
  };
  const uint64_t full = total_with("full"), att = total_with("attention"), none = total_with("none");
  EXPECT_LT(full, att);
  EXPECT_LT(att, none);
  auto pick = [&](uint64_t budget) {
    PlanInput t = in;
    t.vram_budget = budget;
    StatusOr<Plan> p = make_plan(t);
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->resident_layers.size(), static_cast<size_t>(in.model.num_layers));
    return p->recompute;
  };
  EXPECT_EQ(pick(none), Recompute::kNone);
  EXPECT_EQ(pick(none - 1), Recompute::kAttention);
  EXPECT_EQ(pick(att - 1), Recompute::kFull);
  EXPECT_EQ(pick(full), Recompute::kFull);

  // Streaming: auto spends memory on resident layers, never on kept activations.
  in.tier = "ram";
  in.vram_budget = full - 10 * make_layer_layout(in.model, DType::kBF16).bytes;
  StatusOr<Plan> streamed = make_plan(in);
  ASSERT_TRUE(streamed.ok());
  EXPECT_LT(streamed->resident_layers.size(), static_cast<size_t>(in.model.num_layers));
  EXPECT_EQ(streamed->recompute, Recompute::kFull);
  // Forced none: planned as asked, with fewer layers resident, or refused with the fix.
  const uint64_t lb = make_layer_layout(in.model, DType::kBF16).bytes;
  in.recompute = "none";
  StatusOr<Plan> too_small = make_plan(in);
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.status().message().find("recompute: auto"), std::string::npos);
  in.vram_budget = none - 10 * lb;
  StatusOr<Plan> forced = make_plan(in);
  ASSERT_TRUE(forced.ok()) << forced.status().to_string();
  EXPECT_EQ(forced->recompute, Recompute::kNone);
  EXPECT_LT(forced->resident_layers.size(), static_cast<size_t>(in.model.num_layers));
  EXPECT_LE(forced->vram_total, in.vram_budget);
  EXPECT_NE(forced->banner().find("no recompute"), std::string::npos) << forced->banner();
  in.recompute = "auto";  // the same budget: every layer resident, activations kept as far as they fit
  StatusOr<Plan> autop = make_plan(in);
  ASSERT_TRUE(autop.ok());
  EXPECT_EQ(autop->resident_layers.size(), static_cast<size_t>(in.model.num_layers));
  EXPECT_NE(autop->recompute, Recompute::kNone);

  // Resident, forced none, too small: refused, and the message names the mode that fits.
  in.recompute = "none";
  in.tier = "off";
  in.vram_budget = full;
  StatusOr<Plan> refused = make_plan(in);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("recompute: auto"), std::string::npos) << refused.status().message();

  in.recompute = "sometimes";
  StatusOr<Plan> bad = make_plan(in);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("sometimes"), std::string::npos);
}

// Note [fused attention plan]: a workspace within the counted scratch is granted for free; a larger
// one is reserved before any layer is made resident (the kernels it picks decide the bits, which
// must not depend on the budget), and left out -- with a note in the banner -- only when it does
// not fit beside the smallest plan.
TEST(Planner, FusedAttentionWorkspaceComesBeforeResidentLayers) {
  PlanInput in = qwen_input(1ull << 40);
  in.offload_embeddings = "false";
  in.recompute = "full";
  StatusOr<Plan> base = make_plan(in);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(base->fused_attention_allowance, 0u);
  EXPECT_EQ(term(*base, "fused attention workspace (cuDNN)"), 0u);
  // What the all-resident plan needs (launch plans only take what is left: Note [launch plan memory]).
  const uint64_t need = base->vram_total - term(*base, "launch plans (CUDA graphs)");

  in.fused_attention_workspace = 1ull << 20;  // inside attention scratch + 32 MiB: free
  in.vram_budget = need;
  StatusOr<Plan> small = make_plan(in);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->fused_attention_allowance, 1ull << 20);
  EXPECT_EQ(small->vram_total, need);
  EXPECT_EQ(small->resident_layers.size(), base->resident_layers.size());
  EXPECT_NE(small->banner().find("fused (cuDNN) attention"), std::string::npos) << small->banner();

  const uint64_t lb = make_layer_layout(in.model, DType::kBF16).bytes;
  const uint64_t big = 3 * lb + (64ull << 20);  // ~3 layers beyond the counted scratch
  in.fused_attention_workspace = big;
  StatusOr<Plan> tight = make_plan(in);  // the budget of the all-resident plan without it
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->fused_attention_allowance, big);
  EXPECT_LT(tight->resident_layers.size(), base->resident_layers.size()) << "no resident layer made room for it";
  EXPECT_GT(tight->vram_total - term(*tight, "launch plans (CUDA graphs)") + lb, need)
      << "one more layer would have fit beside it";
  EXPECT_LE(tight->vram_total, in.vram_budget);
  EXPECT_EQ(tight->banner().find("note:"), std::string::npos) << tight->banner();
  in.vram_budget = need + big;
  StatusOr<Plan> roomy = make_plan(in);
  ASSERT_TRUE(roomy.ok());
  EXPECT_EQ(roomy->fused_attention_allowance, big);
  EXPECT_EQ(roomy->resident_layers.size(), base->resident_layers.size());
  const uint64_t extra = term(*roomy, "fused attention workspace (cuDNN)");
  EXPECT_GT(extra, 0u);
  EXPECT_LT(extra, big);  // the part already counted is not counted twice
  EXPECT_EQ(roomy->vram_total - term(*roomy, "launch plans (CUDA graphs)"), need + extra);

  // Stream off: every layer must be resident, so a workspace that does not fit beside them is left
  // out, and the banner says the bits differ from a run with room for it.
  in.tier = "off";
  in.vram_budget = need;
  StatusOr<Plan> off = make_plan(in);
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_EQ(off->fused_attention_allowance, 0u);
  EXPECT_NE(off->banner().find("attention runs on the own kernels"), std::string::npos) << off->banner();

  // Streaming in a budget where the smallest plan has no room for it either: the own kernels.
  in.tier = "ram";
  in.fused_attention_workspace = 0;
  in.vram_budget = 1;
  StatusOr<Plan> refused = make_plan(in);  // the smallest plan's size, from the refusal's search
  ASSERT_FALSE(refused.ok());
  in.vram_budget = need;
  uint64_t lo = 0, hi = need;  // the smallest budget that plans, by bisection
  while (lo + 1 < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    in.vram_budget = mid;
    (make_plan(in).ok() ? hi : lo) = mid;
  }
  in.vram_budget = hi;
  in.fused_attention_workspace = big;
  StatusOr<Plan> smallest = make_plan(in);
  ASSERT_TRUE(smallest.ok()) << smallest.status().to_string();
  EXPECT_EQ(smallest->resident_layers.size(), 0u);
  EXPECT_EQ(smallest->fused_attention_allowance, 0u);
  EXPECT_NE(smallest->banner().find("the bits differ"), std::string::npos) << smallest->banner();
}

// The chunked backward's smaller workspace (attention_cudnn.cc Note [chunked backward]) is granted
// when the whole one does not fit beside the smallest plan but it does; the whole one otherwise.
TEST(Planner, FusedAttentionFallsBackToTheChunkedWorkspace) {
  PlanInput in = qwen_input(1ull << 40);
  in.offload_embeddings = "false";
  in.recompute = "full";
  StatusOr<Plan> base = make_plan(in);
  ASSERT_TRUE(base.ok());
  const uint64_t need = base->vram_total - term(*base, "launch plans (CUDA graphs)");
  const uint64_t whole = 40ull << 30, chunked = 256ull << 20;  // whole: more than the model itself
  in.fused_attention_workspace = whole;
  in.fused_attention_min_workspace = chunked;
  in.vram_budget = base->vram_total + (512ull << 20);  // room for the chunked one only
  StatusOr<Plan> tight = make_plan(in);
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->fused_attention_allowance, chunked);
  EXPECT_EQ(tight->resident_layers.size(), base->resident_layers.size());
  EXPECT_LE(tight->vram_total, in.vram_budget);
  EXPECT_NE(tight->banner().find("backward in query chunks"), std::string::npos) << tight->banner();
  EXPECT_NE(tight->banner().find("its backward runs in query chunks"), std::string::npos) << tight->banner();
  in.vram_budget = need;  // the chunked one still comes before resident layers
  StatusOr<Plan> fewer = make_plan(in);
  ASSERT_TRUE(fewer.ok());
  EXPECT_EQ(fewer->fused_attention_allowance, chunked);
  EXPECT_LT(fewer->resident_layers.size(), base->resident_layers.size());
  in.vram_budget = base->vram_total + whole;
  StatusOr<Plan> roomy = make_plan(in);
  ASSERT_TRUE(roomy.ok());
  EXPECT_EQ(roomy->fused_attention_allowance, whole);
  EXPECT_EQ(roomy->banner().find("note:"), std::string::npos) << roomy->banner();

  // make_plan_fused_fallback asks for the chunked figure only when the whole one is not granted,
  // and then plans as make_plan does with both known.
  int asked = 0;
  auto min_ws = [&] { ++asked; return chunked; };
  PlanInput lazy = in;
  lazy.fused_attention_min_workspace = 0;
  lazy.vram_budget = base->vram_total + whole;
  StatusOr<Plan> got = make_plan_fused_fallback(lazy, min_ws);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->fused_attention_allowance, whole);
  EXPECT_EQ(asked, 0);
  lazy.vram_budget = base->vram_total + (512ull << 20);
  got = make_plan_fused_fallback(lazy, min_ws);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(got->fused_attention_allowance, chunked);
  EXPECT_EQ(got->vram_total, tight->vram_total);
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

TEST(Planner, ExtrasOnTheDeviceWhenForcedAndDefaultBudget) {
  PlanInput in;
  in.model = *model_preset("llama3-8b");
  in.sequence_len = 4096;
  in.lora.r = 16;
  in.lora.targets[static_cast<int>(LoraTarget::kQ)] = true;
  in.device = DeviceKind::kCuda;
  in.vram_budget = *parse_byte_size("8GiB");
  in.offload_embeddings = "false";
  StatusOr<Plan> p = make_plan(in);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  // Extras kept on the device: the plan counts the whole blob there.
  EXPECT_FALSE(p->host_extras);
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


PlanInput big_input(const char* preset, int64_t seq, const char* budget) {
  PlanInput in;
  in.model = *model_preset(preset);
  in.sequence_len = seq;
  in.lora.r = 16;
  in.lora.targets[static_cast<int>(LoraTarget::kQ)] = true;
  in.lora.targets[static_cast<int>(LoraTarget::kV)] = true;
  in.device = DeviceKind::kCuda;
  in.vram_budget = *parse_byte_size(budget);
  return in;
}

// The memory goals: 7B at 2048, 14B at 2048 and Llama-3-8B at 4096 within 4 GiB need the
// embedding and lm_head off the device; with them forced on the device 7B does not fit.
TEST(Planner, HostExtrasFitTheBigModelsInFourGiB) {
  for (auto [preset, seq] : {std::pair{"qwen2.5-7b", 2048}, {"qwen2.5-14b", 2048}, {"llama3-8b", 4096}}) {
    PlanInput in = big_input(preset, seq, "4GiB");
    StatusOr<Plan> p = make_plan(in);
    ASSERT_TRUE(p.ok()) << preset << ": " << p.status().to_string();
    EXPECT_TRUE(p->host_extras) << preset;
    EXPECT_LE(p->vram_total, 4ull << 30) << preset;
    EXPECT_GE(p->num_slots, 1) << preset;
    EXPECT_EQ(term(*p, "final norm + lm_head chunk buffers"),
              (in.model.hidden_size * 2 + 255) / 256 * 256 + 2ull * 16384 * in.model.hidden_size * 2)
        << preset;
    // The host keeps the extras copy and the gather staging on top of the RAM store.
    EXPECT_GE(p->host_bytes, make_extras_layout(in.model, DType::kBF16).bytes + p->layer_bytes * in.model.num_layers);
    EXPECT_NE(p->banner().find("lm_head streamed"), std::string::npos) << p->banner();
  }
  PlanInput dev = big_input("qwen2.5-7b", 2048, "4GiB");
  dev.offload_embeddings = "false";
  StatusOr<Plan> refused = make_plan(dev);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
}

// auto picks the placement that streams fewer bytes; forcing either way is honoured.
TEST(Planner, HostExtrasChoiceFollowsStreamedBytes) {
  PlanInput in = big_input("qwen2.5-7b", 2048, "12GiB");
  in.offload_embeddings = "false";
  StatusOr<Plan> dev = make_plan(in);
  in.offload_embeddings = "true";
  StatusOr<Plan> host = make_plan(in);
  in.offload_embeddings = "auto";
  StatusOr<Plan> autop = make_plan(in);
  ASSERT_TRUE(dev.ok() && host.ok() && autop.ok());
  EXPECT_FALSE(dev->host_extras);
  EXPECT_TRUE(host->host_extras);
  EXPECT_GT(host->resident_layers.size(), dev->resident_layers.size());
  const Plan& best = host->streamed_bytes_per_micro_batch < dev->streamed_bytes_per_micro_batch ? *host : *dev;
  EXPECT_EQ(autop->host_extras, best.host_extras);
  EXPECT_EQ(autop->streamed_bytes_per_micro_batch, best.streamed_bytes_per_micro_batch);

  // Everything resident (huge budget): nothing streams, extras stay on the device.
  in.vram_budget = 1ull << 40;
  StatusOr<Plan> all = make_plan(in);
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->host_extras);
  EXPECT_EQ(all->streamed_bytes_per_micro_batch, 0u);

  in.tier = "off";
  in.offload_embeddings = "true";
  EXPECT_EQ(make_plan(in).status().code(), StatusCode::kInvalidArgument);
  in.offload_embeddings = "sometimes";
  EXPECT_EQ(make_plan(in).status().code(), StatusCode::kInvalidArgument);
}

// Note [host extras plan]: with the device's speeds known, auto picks by estimated step time. The
// cases are the H200 rows of bench/RESULTS.md session 18 call 6 (code12 base, cuDNN's workspace as
// measured there, link 55 GB/s, GEMM 750 TFLOP/s): bytes alone put the extras on the host in all
// five; the device was faster for the compute-bound three (3B in 5 and 6 GiB, 1.5B in 2.5 GiB),
// the host for the link-bound 7B in 8 GiB.
TEST(Planner, HostExtrasChoiceFollowsEstimatedStepTime) {
  struct Row {
    const char* preset;
    const char* budget;
    uint64_t workspace;
    bool host_faster;
  };
  for (const Row& r : {Row{"qwen2.5-3b", "5GiB", 151126272, false}, Row{"qwen2.5-3b", "6GiB", 151126272, false},
                       Row{"qwen2.5-1.5b", "2500MiB", 113246208, false}, Row{"qwen2.5-7b", "8GiB", 264241152, true}}) {
    PlanInput in = big_input(r.preset, 2048, r.budget);
    in.quant = BaseQuant::kCode12;
    in.fused_attention_workspace = r.workspace;
    StatusOr<Plan> bytes = make_plan(in);
    ASSERT_TRUE(bytes.ok()) << r.preset << " " << bytes.status().to_string();
    EXPECT_TRUE(bytes->host_extras) << r.preset << " " << r.budget << ": fewer bytes with the extras on the host";
    in.link_gbps = 55;
    in.gemm_tflops = 750;
    StatusOr<Plan> timed = make_plan(in);
    ASSERT_TRUE(timed.ok());
    EXPECT_EQ(timed->host_extras, r.host_faster) << r.preset << " " << r.budget << "\n" << timed->banner();
    if (!r.host_faster) {
      EXPECT_LT(timed->resident_layers.size(), bytes->resident_layers.size()) << r.preset;
    }
    // The banner says what bounds the step (the 3B and 1.5B rows measured exposed copy <= 7 ms of
    // 46-77: a backward that hides its loads, at most a forward that does not quite; the 7B row
    // link-bound, its lm_head streamed).
    EXPECT_EQ(bytes->banner().find("estimate:"), std::string::npos) << bytes->banner();
    const std::string banner = timed->banner();
    if (r.host_faster) {
      EXPECT_NE(banner.find("link-bound ("), std::string::npos) << banner;
    } else {
      EXPECT_TRUE(banner.find("compute-bound") != std::string::npos ||
                  banner.find("link-bound in the forward") != std::string::npos)
          << banner;
    }
    EXPECT_EQ(banner.find("lm_head streaming") != std::string::npos, r.host_faster) << banner;
    EXPECT_GT(timed->estimate.total_ms(), 0.0);
  }
  {  // From disk the layers come at the disk's speed, which the probe does not measure: bytes decide.
    PlanInput d = big_input("qwen2.5-3b", 2048, "5GiB");
    d.quant = BaseQuant::kCode12;
    d.fused_attention_workspace = 151126272;
    d.tier = "disk";
    d.link_gbps = 55;
    d.gemm_tflops = 750;
    StatusOr<Plan> disk = make_plan(d);
    ASSERT_TRUE(disk.ok());
    EXPECT_TRUE(disk->host_extras);
  }
  // A consumer card (PCIe 4: ~25 GB/s, ~150 TFLOP/s) has fewer flops per byte of link than the H200,
  // so the same 3B plan is more compute-bound there: the device too.
  PlanInput in = big_input("qwen2.5-3b", 2048, "5GiB");
  in.quant = BaseQuant::kCode12;
  in.link_gbps = 25;
  in.gemm_tflops = 150;
  EXPECT_FALSE(make_plan(in)->host_extras);
  // Very link-bound (a slow link, fast GEMMs, few layers resident): the host, as bytes say.
  in.vram_budget = *parse_byte_size("3GiB");
  in.link_gbps = 5;
  in.gemm_tflops = 750;
  StatusOr<Plan> slow_link = make_plan(in);
  ASSERT_TRUE(slow_link.ok());
  in.link_gbps = in.gemm_tflops = 0;
  EXPECT_EQ(slow_link->host_extras, make_plan(in)->host_extras);
}

// Note [recompute plan]: on the H200 (bench/RESULTS.md session 19) Qwen2.5-7B@2048 in 22 GiB ran
// 134.5 ms with every layer resident and attention outputs kept against 107.3 ms with 6 layers
// streamed and no recompute; @4096 in 32 GiB 283.9 against 226.6. With the speeds probed, auto
// takes the faster; without them, or over a slow link, residency comes first as before.
TEST(Planner, RecomputeTradesResidencyWhereTheEstimateSaysSo) {
  for (auto [seq, budget] : {std::pair{2048, "22GiB"}, {4096, "32GiB"}}) {
    PlanInput in = big_input("qwen2.5-7b", seq, budget);
    in.tier = "ram";
    in.fused_attention_workspace = 264241152;
    StatusOr<Plan> untimed = make_plan(in);
    ASSERT_TRUE(untimed.ok()) << untimed.status().to_string();
    EXPECT_EQ(untimed->resident_layers.size(), 28u) << seq;
    EXPECT_NE(untimed->recompute, Recompute::kNone) << seq;
    in.link_gbps = 55;
    in.gemm_tflops = 750;
    StatusOr<Plan> timed = make_plan(in);
    ASSERT_TRUE(timed.ok());
    EXPECT_EQ(timed->recompute, Recompute::kNone) << seq << "\n" << timed->banner();
    EXPECT_LT(timed->resident_layers.size(), 28u) << seq;
    EXPECT_EQ(timed->fused_attention_allowance, untimed->fused_attention_allowance) << seq;  // the same bits
    EXPECT_LE(timed->vram_total, in.vram_budget) << seq;
    // At 4096 tokens a layer's saved region holds its blob: the forward finds the layers the last
    // backward loaded into lent activation memory and loads fewer than the backward.
    EXPECT_EQ(timed->lent_slots > 0, seq == 4096) << seq;
    if (seq == 4096) {
      EXPECT_LT(timed->estimate.forward_loads, timed->estimate.backward_loads) << timed->banner();
    }
    // A slow link (~3 GB/s) would not hide the copies: residency first. (At 6 GB/s the estimate
    // of 7B@4096 in 32 GiB, 4 layers streamed, 1 load in the forward and 2 in the backward, is
    // already ~272 ms, more than 10% under the all-resident plan's: Note [lent region spans].)
    in.link_gbps = 3;
    StatusOr<Plan> slow = make_plan(in);
    ASSERT_TRUE(slow.ok());
    EXPECT_EQ(slow->resident_layers.size(), 28u) << seq << "\n" << slow->banner();
  }
}

}  // namespace
}  // namespace st

namespace st {
namespace {

// stream/prefetcher.h Note [lent region spans]: the plan predicts the source's lent slots -- with
// one arena slot, per run of consecutive streamed layers one slot per k regions, k the regions a
// layer blob needs (StreamedLayerSource::lend_regions; stream_equivalence_test checks the source).
TEST(Planner, PredictsLentSlotsPerRunOfStreamedLayers) {
  // Qwen2.5-14B, recompute none: at 4096 tokens a region (~567 MB) holds a layer (~551 MB), at 2048
  // (~284 MB) two adjacent ones do.
  struct Row {
    int64_t seq;
    int k;
    const char* budget;
  };
  for (auto [seq, k, budget] : {Row{4096, 1, "40GiB"}, Row{2048, 2, "20GiB"}}) {
    PlanInput in = big_input("qwen2.5-14b", seq, budget);
    in.recompute = "none";
    StatusOr<Plan> p = make_plan(in);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const int L = p->num_layers;
    ASSERT_GT(p->streamed_layers(), 0) << seq;
    std::vector<bool> resident(L, false);
    for (int l : p->resident_layers) resident[l] = true;
    int want = 0, run = 0;
    for (int l = 0; l <= L; ++l) {
      if (l < L && !resident[l]) {
        ++run;
      } else {
        want += run / k;
        run = 0;
      }
    }
    EXPECT_EQ(p->lent_slots, want) << seq << "\n" << p->banner();
    EXPECT_GT(p->lent_slots, 0) << seq;
    if (k == 1) {
      EXPECT_EQ(p->lent_slots, p->streamed_layers()) << seq;
    } else {
      EXPECT_LT(p->lent_slots, p->streamed_layers()) << seq;
    }
  }
  // Two micro-batches held at once (layer-major) keep two arena slots: nothing is lent.
  PlanInput in = big_input("qwen2.5-14b", 2048, "36GiB");
  in.recompute = "none";
  in.gradient_accumulation_steps = 2;
  in.layer_major = "true";
  StatusOr<Plan> lm = make_plan(in);
  ASSERT_TRUE(lm.ok()) << lm.status().to_string();
  EXPECT_EQ(lm->micro_batch_slots, 2);
  EXPECT_GT(lm->streamed_layers(), 1);
  EXPECT_EQ(lm->lent_slots, 0);
}

}  // namespace
}  // namespace st

namespace st {
namespace {

// Note [step estimate]: the estimate against steps measured on the H200 (bench/RESULTS.md session 22
// calls 2-3: recompute_plan_call.sh, bench's own plan for each budget; the probe read 52-55 GB/s
// and 703-739 TFLOP/s). The phase-by-phase estimate read 0.89-1.03 of them, where one max(compute,
// loads) over the step with GEMM flops at 3/4 of the probed rate read 0.91-1.18.
TEST(Planner, StepEstimateReadsTheMeasuredSteps) {
  struct Row {
    const char* preset;
    int64_t seq;
    const char* budget;
    uint64_t workspace_mib;  // cuDNN's whole attention workspace (session 18 call 1)
    const char* recompute;
    double measured_ms;
  };
  for (const Row& r : {Row{"qwen2.5-7b", 2048, "10GiB", 252, "full", 191.0}, Row{"qwen2.5-7b", 2048, "14GiB", 252, "full", 135.4},
                       Row{"qwen2.5-7b", 2048, "14GiB", 252, "none", 309.7}, Row{"qwen2.5-7b", 2048, "18GiB", 252, "attention", 132.3},
                       Row{"qwen2.5-3b", 2048, "5GiB", 144, "full", 83.1}, Row{"qwen2.5-3b", 2048, "8GiB", 144, "none", 120.8},
                       Row{"qwen2.5-3b", 2048, "8GiB", 144, "attention", 66.8}, Row{"llama3-8b", 4096, "18GiB", 1089, "attention", 302.3},
                       Row{"qwen2.5-14b", 2048, "20GiB", 360, "full", 347.7}, Row{"qwen2.5-14b", 2048, "20GiB", 360, "none", 642.8},
                       Row{"qwen2.5-1.5b", 4096, "3GiB", 408, "full", 80.9}}) {
    PlanInput in = big_input(r.preset, r.seq, r.budget);
    in.tier = "ram";
    in.fused_attention_workspace = r.workspace_mib << 20;
    in.recompute = r.recompute;
    in.link_gbps = 54;
    in.gemm_tflops = 725;
    StatusOr<Plan> p = make_plan(in);
    ASSERT_TRUE(p.ok()) << r.preset << " " << r.budget << " " << p.status().to_string();
    const double ratio = p->estimate.total_ms() / r.measured_ms;
    EXPECT_GT(ratio, 0.85) << r.preset << " " << r.budget << " " << r.recompute << "\n" << p->banner();
    EXPECT_LT(ratio, 1.06) << r.preset << " " << r.budget << " " << r.recompute << "\n" << p->banner();
  }
  // 7B@2048 in 10 GiB, full recompute: 11 layers streamed through 2 buffers, 9 loads a phase. The
  // forward's loads outlast its compute, the backward's do not: a single max() over the step would
  // hide 30 ms of the forward's wait.
  PlanInput in = big_input("qwen2.5-7b", 2048, "10GiB");
  in.tier = "ram";
  in.fused_attention_workspace = 252ull << 20;
  in.link_gbps = 55;
  in.gemm_tflops = 735;
  StatusOr<Plan> p = make_plan(in);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const StepEstimate& e = p->estimate;
  EXPECT_EQ(e.forward_loads, e.backward_loads);
  EXPECT_EQ(e.forward_loads + e.backward_loads, steady_layer_loads(p->streamed_layers(), 2, 0));
  EXPECT_GT(e.forward_loads_ms, e.forward_compute_ms);
  EXPECT_LT(e.backward_loads_ms, e.backward_compute_ms);
  EXPECT_NEAR(e.total_ms(), e.forward_loads_ms + e.head_ms + e.head_stream_ms + e.backward_compute_ms, 1e-9);
  EXPECT_NE(p->banner().find("link-bound in the forward"), std::string::npos) << p->banner();
  // Every layer resident: compute alone, said so.
  in.vram_budget = *parse_byte_size("40GiB");
  StatusOr<Plan> resident = make_plan(in);
  ASSERT_TRUE(resident.ok());
  ASSERT_EQ(resident->streamed_layers(), 0);
  EXPECT_EQ(resident->estimate.forward_loads + resident->estimate.backward_loads, 0);
  EXPECT_NE(resident->banner().find("no layer loads"), std::string::npos) << resident->banner();
}

}  // namespace
}  // namespace st
