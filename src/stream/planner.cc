#include "stream/planner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "model/carver.h"
#include "model/layer.h"
#include "model/model.h"
#include "model/weights.h"
#include "store/range_reader.h"

namespace st {
namespace {

uint64_t lora_bytes(const ModelConfig& c, const LoraConfig& lc) {
  uint64_t floats = 0;
  for (int t = 0; t < kNumLoraTargets; ++t) {
    if (!lc.targets[t]) continue;
    auto [in, out] = lora_target_dims(c, static_cast<LoraTarget>(t));
    // Each of A and B starts aligned to kLoraAlignFloats (model/lora.h Note [lora arena]).
    auto up = [](uint64_t n) { return (n + kLoraAlignFloats - 1) / kLoraAlignFloats * kLoraAlignFloats; };
    floats += up(static_cast<uint64_t>(lc.r * in)) + up(static_cast<uint64_t>(lc.r * out));
  }
  return 4 /* params, grads, m, v */ * 4 /* f32 */ * floats * static_cast<uint64_t>(lc.adapted_layers(c.num_layers));
}

struct Shape {
  int64_t tokens;
  int slots;
  int resident;
  bool host_extras;
  Recompute recompute = Recompute::kFull;
  uint64_t fused_attention = 0;  // the fused attention workspace granted (Note [fused attention plan]); 0: none
  uint64_t launch_plan_bytes = 0;  // Note [launch plan memory]
  int mb_slots = 1;                // micro-batches held at once (Note [layer-major plan])
};

ModelOptions model_options(const PlanInput& in, const Shape& s) {
  ModelOptions o;
  o.act_dtype = in.dtype;
  o.base_quant = in.quant;
  o.max_tokens = s.tokens;
  o.vocab_chunk = in.vocab_chunk;
  o.host_extras = s.host_extras;
  o.recompute = s.recompute;
  o.micro_batch_slots = s.mb_slots;
  return o;
}

uint64_t attention_scratch_bytes(const ModelConfig& c, int64_t tokens) {
  const uint64_t T = static_cast<uint64_t>(tokens), NH = static_cast<uint64_t>(c.num_heads);
  const uint64_t gqa = c.num_heads == c.num_kv_heads ? 0 : 2 * T * NH * static_cast<uint64_t>(c.head_dim);
  return 4 * (gqa + T * NH);
}

// The part of a fused attention workspace not already inside "attention backward scratch" plus the
// spare half of "workspaces" (the CUDA backend's default allowance, cuda_backend.cu).
constexpr uint64_t kFusedSpareWorkspace = 32ull << 20;
uint64_t fused_attention_extra(const PlanInput& in, int64_t tokens, uint64_t workspace) {
  const uint64_t free_part = attention_scratch_bytes(in.model, tokens) + kFusedSpareWorkspace;
  return workspace > free_part ? workspace - free_part : 0;
}

std::vector<PlanTerm> plan_terms(const PlanInput& in, const Shape& s) {
  const ModelConfig& c = in.model;
  const uint64_t lb = make_layer_layout(c, in.dtype, in.quant).bytes;
  const uint64_t rb = resident_layer_layout(c, in.dtype, in.quant).bytes;  // Note [resident code12 layers]
  const ModelOptions mo = model_options(in, s);
  const char* extras_name = s.host_extras ? "final norm + lm_head chunk buffers"
                            : c.tie_word_embeddings ? "embedding + final norm"
                                                    : "embedding + final norm + lm_head";
  std::vector<PlanTerm> t = {
      {"resident layers", rb * static_cast<uint64_t>(s.resident)},
      // A coded resident layer is decoded through one staging blob: a pool slot serves when any.
      {"pool slots", lb * static_cast<uint64_t>(std::max(s.slots, rb != lb && s.resident > 0 ? 1 : 0))},
      // The Model's own functions are the single source of truth for its device bytes.
      {extras_name, model_device_extras_bytes(c, mo)},
      {"activations + scratch (model arena)", model_arena_bytes(c, in.lora, mo)},
      // Backend-internal: the CUDA attention backward's GQA dK/dV and delta scratch (f32).
      {"attention backward scratch", in.device == DeviceKind::kCuda ? attention_scratch_bytes(c, s.tokens) : 0},
      {"LoRA params+grads+AdamW", lora_bytes(c, in.lora)},
      {"workspaces", in.device == DeviceKind::kCuda ? kCudaWorkspaceBytes : 0},
      {"fused attention workspace (cuDNN)", fused_attention_extra(in, s.tokens, s.fused_attention)},
      {"launch plans (CUDA graphs)", s.launch_plan_bytes},
  };
  return t;
}

uint64_t total(const std::vector<PlanTerm>& t) {
  uint64_t s = 0;
  for (const PlanTerm& x : t) s += x.bytes;
  return s;
}

uint64_t default_budget(const PlanInput& in) {
  if (in.vram_budget > 0) return in.vram_budget;
  if (in.device_free_bytes == 0) return UINT64_MAX / 4;  // CPU: no device limit
  uint64_t margin = std::max<uint64_t>(512ull << 20, in.device_free_bytes / 20);
  return in.device_free_bytes > margin ? in.device_free_bytes - margin : 0;
}

// Why the minimal plan does not fit, and what would.
Status refuse(const PlanInput& in, const Shape& min, uint64_t budget) {
  std::vector<PlanTerm> t = plan_terms(in, min);
  const PlanTerm& big = *std::max_element(t.begin(), t.end(), [](auto& a, auto& b) { return a.bytes < b.bytes; });
  Str msg;
  std::string need = format_bytes(total(t)), have = format_bytes(budget);
  if (need == have) {  // close: say it in bytes rather than print two equal sizes
    need = Str() << total(t) << " bytes";
    have = Str() << budget << " bytes";
  }
  msg << "the training plan needs " << need << " of device memory even with every layer streamed "
      << "through " << min.slots << " buffer(s), but vram_budget is " << have << "; the largest term is "
      << big.name << " (" << format_bytes(big.bytes) << ")";
  auto fits = [&](int64_t mbs, int64_t seq, int slots) {
    Shape s = min;
    s.tokens = mbs * seq;
    s.slots = slots;
    return total(plan_terms(in, s)) <= budget;
  };
  int64_t lo = 0, hi = in.sequence_len;  // largest sequence_len that fits: binary search
  while (lo < hi) {
    int64_t mid = (lo + hi + 1) / 2;
    if (fits(in.micro_batch_size, mid, min.slots)) lo = mid;
    else hi = mid - 1;
  }
  std::vector<std::string> fixes;
  if (lo >= 1) fixes.push_back(Str() << "sequence_len <= " << lo);
  if (in.micro_batch_size > 1 && fits(1, in.sequence_len, min.slots))
    fixes.push_back("micro_batch_size: 1 (raise gradient_accumulation_steps instead)");
  if (min.slots > 2 && fits(in.micro_batch_size, in.sequence_len, 2)) fixes.push_back("stream_buffers: 2");
  if (min.recompute != Recompute::kFull) {
    Shape s = min;
    s.recompute = Recompute::kFull;
    if (total(plan_terms(in, s)) <= budget) fixes.push_back("recompute: auto (keep only each layer's input)");
  }
  if (fixes.empty()) fixes.push_back("a larger vram_budget (this model does not fit at any sequence length)");
  msg << ". To fit: ";
  for (size_t i = 0; i < fixes.size(); ++i) msg << (i ? ", or " : "") << fixes[i];
  return ResourceExhausted(msg);
}

std::vector<int> spread_layers(int k, int L) {
  std::vector<int> out;
  for (int i = 0; i < k; ++i) out.push_back(static_cast<int>((static_cast<int64_t>(2 * i + 1) * L) / (2 * k)));
  return out;
}

// How many lent pool slots the source will make (stream/prefetcher.h Notes [lent activation
// memory], [lent region spans]): with one arena slot, per run of consecutive streamed layers one
// slot per k regions, k the regions a layer blob needs. This restates StreamedLayerSource::
// lend_regions's rule, to predict it.
int lent_slots(const PlanInput& in, const Shape& s) {
  const int L = static_cast<int>(in.model.num_layers);
  if (s.mb_slots != 1 || s.resident >= L || in.tier == "off") return 0;
  const uint64_t a = Carver::kAlign;  // the Model offers each region with its padding (model.cc)
  const uint64_t region = (layer_saved_bytes(in.model, s.tokens, in.lora, in.dtype, s.recompute) + a - 1) / a * a;
  if (region == 0) return 0;
  const uint64_t k = (make_layer_layout(in.model, in.dtype, in.quant).bytes + region - 1) / region;
  std::vector<bool> resident(L, false);
  for (int l : spread_layers(s.resident, L)) resident[l] = true;
  int slots = 0, run = 0;
  for (int l = 0; l <= L; ++l) {
    if (l < L && !resident[l]) {
      ++run;
      continue;
    }
    slots += static_cast<int>(static_cast<uint64_t>(run) / k);
    run = 0;
  }
  return slots;
}

// Layer bytes loaded for one group of s.mb_slots micro-batches: forward + backward visit every
// streamed layer once for the whole group, less the ones still pooled at the forward->backward turn
// (Belady keeps them) and, with `boundary`, those the pool carries from the previous group's
// backward into this group's forward (both end / start at layer 0: steady state).
uint64_t layer_load_bytes(const PlanInput& in, const Shape& s, bool boundary) {
  const int streamed = static_cast<int>(in.model.num_layers) - s.resident;
  const int pooled = std::min(s.slots, streamed);
  const int loads = boundary ? steady_layer_loads(streamed, pooled, lent_slots(in, s)) : std::max(0, 2 * streamed - pooled);
  return make_layer_layout(in.model, in.dtype, in.quant).bytes * static_cast<uint64_t>(loads);
}

// The lm_head streams once per micro-batch when it lives on the host (Note [host extras plan]).
uint64_t head_bytes(const PlanInput& in, const Shape& s, int64_t micro_batches) {
  if (!s.host_extras) return 0;
  return static_cast<uint64_t>(micro_batches) * static_cast<uint64_t>(in.model.vocab_size * in.model.hidden_size) *
         dtype_size(in.dtype);
}

// Bytes streamed for one group of micro-batches (the extras-placement comparison).
uint64_t streamed_bytes(const PlanInput& in, const Shape& s) {
  return layer_load_bytes(in, s, false) + head_bytes(in, s, s.mb_slots);
}

// Bytes streamed in steady state for a whole step of G micro-batches (groups of s.mb_slots).
uint64_t step_bytes(const PlanInput& in, const Shape& s) {
  const int64_t G = std::max<int64_t>(1, in.gradient_accumulation_steps);
  const int64_t groups = (G + s.mb_slots - 1) / s.mb_slots;
  return layer_load_bytes(in, s, true) * static_cast<uint64_t>(groups) + head_bytes(in, s, G);
}

// Note [step estimate]: the constants, fitted to the H200's resident steps.
constexpr double kGemmEfficiency = 0.98;       // the model's GEMMs against the probed 4096^3 GEMM
constexpr double kAttentionEfficiency = 0.43;  // fused attention's flops against it
constexpr double kElementwiseFlops = 5700;     // a token, layer and (F + H) of memory-bound ops, as flops
constexpr double kElementwiseForward = 0.36;   // of which the forward's
constexpr double kLayerGapMs = 0.174;          // launch gaps of a layer's forward + backward visit
constexpr double kLayerGapForward = 0.4;       // of which the forward's
constexpr double kRecomputeShare = 0.63;       // a recomputed forward against the forward's time
// Note [recompute plan]: the estimated gain a plan with less recomputation (and fewer resident
// layers) must show over the residency-first plan (the estimate reads 0-12% under measured
// streaming steps, most 2-8%: bench/RESULTS.md session 22).
constexpr double kRecomputeMargin = 0.05;
StepEstimate estimate_step(const PlanInput& in, const Shape& s) {
  const ModelConfig& c = in.model;
  const double H = static_cast<double>(c.hidden_size), Q = static_cast<double>(c.q_dim()),
               KV = static_cast<double>(c.kv_dim()), F = static_cast<double>(c.intermediate_size),
               V = static_cast<double>(c.vocab_size), L = static_cast<double>(c.num_layers);
  const double B = static_cast<double>(in.micro_batch_size), S = static_cast<double>(in.sequence_len), T = B * S;
  const int64_t G = std::max<int64_t>(1, in.gradient_accumulation_steps);
  const int64_t groups = (G + s.mb_slots - 1) / s.mb_slots;
  const double rate = in.gemm_tflops * 1e9;  // flops per ms
  const double link = in.link_gbps * 1e6;    // bytes per ms
  // One micro-batch, every layer: a GEMM pass over the frozen weights, a causal attention unit,
  // the memory-bound ops and the launch gaps.
  const double gemm = 2 * T * (H * Q + 2 * H * KV + Q * H + 3 * H * F) * L / (kGemmEfficiency * rate);
  const double attention = 2 * B * S * S * Q * L / (kAttentionEfficiency * rate);
  const double elementwise = kElementwiseFlops * T * L * (F + H) / rate, gaps = kLayerGapMs * L;
  const double forward = gemm + attention + kElementwiseForward * elementwise + kLayerGapForward * gaps;
  const double recompute = s.recompute == Recompute::kNone ? 0
                           : s.recompute == Recompute::kAttention ? kRecomputeShare * (forward - attention)
                                                                  : kRecomputeShare * forward;
  const double backward = gemm + 2.5 * attention + (1 - kElementwiseForward) * elementwise +
                          (1 - kLayerGapForward) * gaps + recompute;
  const double head_flops = 4 * T * V * H;  // logits and their input gradient
  // Loads, steady state: the backward visits every streamed layer but the pooled ones; the forward
  // loads the rest of a group's (steady_layer_loads: lent slots and the carried pool). Groups of
  // micro-batches are alike, so the sum of their phases' max() is the max() of the sums.
  const int streamed = static_cast<int>(c.num_layers) - s.resident, pooled = std::min(s.slots, streamed);
  const int group_loads = steady_layer_loads(streamed, pooled, lent_slots(in, s));
  const int backward_loads = std::max(0, streamed - pooled);
  const double blob_ms = static_cast<double>(make_layer_layout(c, in.dtype, in.quant).bytes) / link;
  StepEstimate e;
  e.forward_loads = static_cast<int>(groups) * (group_loads - backward_loads);
  e.backward_loads = static_cast<int>(groups) * backward_loads;
  e.forward_compute_ms = static_cast<double>(G) * forward;
  e.forward_loads_ms = e.forward_loads * blob_ms;
  e.backward_compute_ms = static_cast<double>(G) * backward;
  e.backward_loads_ms = e.backward_loads * blob_ms;
  e.head_ms = static_cast<double>(G) * head_flops / (kGemmEfficiency * rate);
  if (s.host_extras) e.head_stream_ms = G * std::max(0.0, V * H * static_cast<double>(dtype_size(in.dtype)) / link - head_flops / rate);
  return e;
}

// The most-resident shape that fits with the given extras placement; false if even the minimal
// one (every layer streamed) does not.
bool best_shape(const PlanInput& in, uint64_t budget, bool host_extras, Recompute r, uint64_t attention, Shape* out,
                int mb_slots = 1) {
  const int L = static_cast<int>(in.model.num_layers);
  const int64_t tokens = in.micro_batch_size * in.sequence_len;
  if (in.tier == "off") {
    *out = Shape{tokens, 0, L, false, r, attention};
    return total(plan_terms(in, *out)) <= budget;
  }
  for (int k = L; k >= 0; --k) {
    Shape t{tokens, std::min(in.num_slots, L - k), k, host_extras, r, attention};
    t.mb_slots = mb_slots;
    if (total(plan_terms(in, t)) <= budget) {
      *out = t;
      return true;
    }
  }
  return false;
}

// The residency of a plan that reserves `attention` bytes of fused attention workspace: the extras
// placement (Note [host extras plan]) and the micro-batches held at once (Note [layer-major plan])
// with the most resident layers that fit. *fits = false when even the smallest shape does not.
Status residency(const PlanInput& in, uint64_t budget, Recompute forced, uint64_t attention, Shape* out, bool* fits) {
  const int L = static_cast<int>(in.model.num_layers);
  const bool stream = in.tier != "off";
  Shape dev{}, host{};
  const bool dev_ok = in.offload_embeddings != "true" && best_shape(in, budget, false, forced, attention, &dev);
  const bool host_ok =
      stream && in.offload_embeddings != "false" && best_shape(in, budget, true, forced, attention, &host);
  *fits = dev_ok || host_ok;
  if (!*fits) return Status::OK();
  Shape s = dev_ok ? dev : host;
  if (dev_ok && host_ok && in.offload_embeddings == "auto") {
    // Note [host extras plan]: timed from RAM only (a disk tier's layers come at the disk's speed).
    const bool timed = in.tier == "ram" && in.link_gbps > 0 && in.gemm_tflops > 0;
    if (timed ? estimate_step(in, host).total_ms() < estimate_step(in, dev).total_ms()
              : streamed_bytes(in, host) < streamed_bytes(in, dev))
      s = host;
  }
  const int G = static_cast<int>(std::clamp<int64_t>(in.gradient_accumulation_steps, 1, 1 << 20));
  if (stream && s.resident < L && G > 1 && in.layer_major != "false") {
    Shape best = s;
    for (int k = in.layer_major == "true" ? G : 2; k <= G; ++k) {
      Shape t;
      if (!best_shape(in, budget, s.host_extras, forced, attention, &t, k)) break;  // more slots fit even less
      if (in.layer_major == "true" || step_bytes(in, t) < step_bytes(in, best)) best = t;
    }
    if (in.layer_major == "true" && best.mb_slots != G)
      return ResourceExhausted(Str() << "layer_major: true needs " << G << " micro-batches' activations ("
                                     << format_bytes(static_cast<uint64_t>(G) *
                                                     model_slot_bytes(in.model, in.lora, model_options(in, s)))
                                     << ") beside the pool, more than vram_budget " << format_bytes(budget)
                                     << " allows; use layer_major: auto");
    s = best;
  }
  *out = s;
  return Status::OK();
}

}  // namespace

int steady_layer_loads(int streamed, int pooled, int lent) {
  if (streamed <= pooled) return 0;
  if (lent == 0) return 2 * streamed - 2 * pooled;
  return 2 * streamed - 2 * pooled + 1 - std::min(streamed - pooled, lent);
}

StatusOr<Plan> make_plan(const PlanInput& in) {
  const ModelConfig& c = in.model;
  const int L = static_cast<int>(c.num_layers);
  if (in.tier != "off" && in.tier != "ram" && in.tier != "disk")
    return InvalidArgument("stream must be off, ram or disk (got '" + in.tier + "')");
  if (in.offload_embeddings != "auto" && in.offload_embeddings != "true" && in.offload_embeddings != "false")
    return InvalidArgument("offload_embeddings must be auto, true or false (got '" + in.offload_embeddings + "')");
  if (in.tier == "off" && in.offload_embeddings == "true")
    return InvalidArgument("offload_embeddings: true needs a streaming tier (stream: ram or disk)");
  if (in.num_slots < 1) return InvalidArgument("stream_buffers must be at least 1");
  if (in.micro_batch_size < 1 || in.sequence_len < 1) return InvalidArgument("micro_batch_size and sequence_len must be >= 1");
  if (in.vocab_chunk < 1) return InvalidArgument("vocab_chunk must be >= 1");
  if (in.layer_major != "auto" && in.layer_major != "true" && in.layer_major != "false")
    return InvalidArgument("layer_major must be auto, true or false (got '" + in.layer_major + "')");
  Recompute forced = Recompute::kFull;
  const bool auto_recompute = in.recompute == "auto";
  if (!auto_recompute && !parse_recompute(in.recompute, &forced))
    return InvalidArgument("recompute must be auto, full, attention or none (got '" + in.recompute + "')");
  const uint64_t budget = default_budget(in);
  const bool stream = in.tier != "off";
  // Note [fused attention plan]: the workspace comes before any resident layer -- the whole one,
  // else the chunked one, else none (the own kernels): the first that fits beside the smallest plan.
  std::vector<uint64_t> workspaces;
  if (in.fused_attention_workspace > 0) workspaces.push_back(in.fused_attention_workspace);
  if (in.fused_attention_min_workspace > 0 && in.fused_attention_min_workspace < in.fused_attention_workspace)
    workspaces.push_back(in.fused_attention_min_workspace);
  workspaces.push_back(0);
  Shape s{};
  bool fits = false;
  for (uint64_t ws : workspaces) {
    RETURN_IF_ERROR(residency(in, budget, forced, ws, &s, &fits));
    if (fits) break;
  }
  if (!fits) {
    const int64_t tokens = in.micro_batch_size * in.sequence_len;
    Shape min{tokens, stream ? std::min(in.num_slots, L) : 0, stream ? 0 : L, stream && in.offload_embeddings != "false",
              forced};
    // The smaller placement of the two the run may use: the lm_head's chunk buffers on the host
    // side can outweigh a small vocabulary kept whole on the device.
    if (min.host_extras && in.offload_embeddings == "auto") {
      Shape dev_min = min;
      dev_min.host_extras = false;
      if (total(plan_terms(in, dev_min)) < total(plan_terms(in, min))) min = dev_min;
    }
    return refuse(in, min, budget);
  }
  // Note [launch plan memory]: what is left beside this residency, up to kLaunchPlanBytes, when
  // that is at least kLaunchPlanBytesMin.
  auto grant_launch_plans = [&](Shape* t) {
    if (in.device != DeviceKind::kCuda) return;
    const uint64_t used = total(plan_terms(in, *t));
    if (used < budget && budget - used >= kLaunchPlanBytesMin) t->launch_plan_bytes = std::min(kLaunchPlanBytes, budget - used);
  };
  grant_launch_plans(&s);
  // Note [recompute plan]: spare memory once every layer is resident buys less recomputation.
  if (auto_recompute && s.resident == L) {
    for (Recompute r : {Recompute::kNone, Recompute::kAttention}) {
      Shape t = s;
      t.recompute = r;
      if (total(plan_terms(in, t)) <= budget) {
        s = t;
        break;
      }
    }
  }
  // Note [recompute plan]: with the speeds known, less recomputation may be worth some residency.
  if (auto_recompute && in.tier == "ram" && in.link_gbps > 0 && in.gemm_tflops > 0) {
    const Recompute first = s.recompute;
    double best_ms = (1 - kRecomputeMargin) * estimate_step(in, s).total_ms();
    for (Recompute r : {Recompute::kNone, Recompute::kAttention}) {
      if (r == first) continue;
      Shape t{};
      bool ok = false;
      // The same attention path; a mode that cannot be planned (layer_major: true) is no candidate.
      if (!residency(in, budget, r, s.fused_attention, &t, &ok).ok() || !ok) continue;
      grant_launch_plans(&t);
      const double e = estimate_step(in, t).total_ms();
      if (e < best_ms) {
        s = t;
        best_ms = e;
      }
    }
  }
  const uint64_t lb = make_layer_layout(c, in.dtype, in.quant).bytes;
  Plan p;
  p.tier = in.tier;
  p.quant = in.quant;
  p.num_layers = L;
  p.num_slots = s.slots;
  p.resident_layers = stream ? spread_layers(s.resident, L) : spread_layers(L, L);
  p.host_extras = s.host_extras;
  p.recompute = s.recompute;
  p.fused_attention_allowance = s.fused_attention;
  p.fused_attention_whole = in.fused_attention_workspace;
  p.launch_plan_bytes = s.launch_plan_bytes;
  p.micro_batch_slots = s.mb_slots;
  p.lent_slots = lent_slots(in, s);
  p.layer_bytes = lb;
  p.budget = budget;
  p.vram = plan_terms(in, s);
  p.vram_total = total(p.vram);
  p.streamed_bytes_per_step = step_bytes(in, s);
  if (in.tier == "ram" && in.link_gbps > 0 && in.gemm_tflops > 0) {  // all resident too: compute alone
    p.estimate = estimate_step(in, s);
    p.link_gbps = in.link_gbps;
  }
  p.streamed_bytes_per_micro_batch =
      p.streamed_bytes_per_step / static_cast<uint64_t>(std::max<int64_t>(1, in.gradient_accumulation_steps));
  const uint64_t extras = make_extras_layout(c, in.dtype).bytes;
  if (in.tier == "ram") p.host_bytes = round_up_io(lb) * static_cast<uint64_t>(L) + round_up_io(extras);
  if (in.tier == "disk") p.host_bytes = 2 * round_up_io(lb);
  p.host_bytes += model_host_extras_bytes(c, model_options(in, s));
  return p;
}

std::string Plan::banner() const {
  Str b;
  b << "plan: stream " << tier << ", " << resident_layers.size() << " of " << num_layers << " layers resident, "
    << streamed_layers() << " streamed through " << num_slots << " buffer(s) of " << format_bytes(layer_bytes)
    << (quant == BaseQuant::kNF4 ? " (NF4 base)" : quant == BaseQuant::kCode12 ? " (code12 base: lossless, ~12 bits a weight)" : "")
    << (host_extras ? ", embedding + lm_head in host memory (lm_head streamed in vocabulary chunks)" : "")
    << (recompute == Recompute::kAttention ? ", attention outputs kept for the backward"
        : recompute == Recompute::kNone    ? ", every layer's activations kept (no recompute)"
                                           : "")
    << (fused_attention_allowance == 0               ? ""
        : fused_attention_allowance < fused_attention_whole ? ", fused (cuDNN) attention, backward in query chunks"
                                                            : ", fused (cuDNN) attention")
    << (micro_batch_slots > 1
            ? ", layer-major over " + std::to_string(micro_batch_slots) + " micro-batches (each streamed layer loaded once for them)"
            : std::string())
    << "\n";
  if (fused_attention_whole > 0 && fused_attention_allowance < fused_attention_whole)
    b << "  note: cuDNN's whole attention workspace (" << format_bytes(fused_attention_whole)
      << ") does not fit beside the smallest plan, so "
      << (fused_attention_allowance > 0 ? "its backward runs in query chunks" : "attention runs on the own kernels")
      << ": the bits differ from a run with room for it (a larger vram_budget or a shorter sequence_len)\n";
  if (estimate.estimated()) {  // Note [step estimate]
    const bool fwd_link = estimate.forward_loads_ms > estimate.forward_compute_ms,
               bwd_link = estimate.backward_loads_ms > estimate.backward_compute_ms;
    const char* bound = fwd_link && bwd_link ? "link-bound"
                        : fwd_link           ? "link-bound in the forward"
                        : bwd_link           ? "link-bound in the backward"
                                             : "compute-bound";
    // stream/prefetcher.h Note [lent activation memory]; Note [host extras plan].
    const std::string lent =
        lent_slots > 0 ? std::string(Str() << ", with " << lent_slots << " pool slots in lent activation memory") : std::string();
    const std::string head_stream =
        estimate.head_stream_ms > 0.5
            ? std::string(Str() << " + ~" << static_cast<int>(estimate.head_stream_ms + 0.5) << " ms of lm_head streaming")
            : std::string();
    char line[640];
    if (estimate.forward_loads + estimate.backward_loads == 0)
      std::snprintf(line, sizeof(line), "  estimate: ~%.0f ms a step, no layer loads (forward ~%.0f ms, head ~%.0f ms%s, backward ~%.0f ms)\n",
                    estimate.total_ms(), estimate.forward_compute_ms, estimate.head_ms, head_stream.c_str(),
                    estimate.backward_compute_ms);
    else
      std::snprintf(line, sizeof(line),
                  "  estimate: ~%.0f ms a step, %s (forward: compute ~%.0f ms, %d layer loads ~%.0f ms%s; head ~%.0f ms%s; "
                  "backward: compute ~%.0f ms, %d loads ~%.0f ms; at the probed %.0f GB/s)\n",
                  estimate.total_ms(), bound, estimate.forward_compute_ms, estimate.forward_loads,
                  estimate.forward_loads_ms, lent.c_str(), estimate.head_ms, head_stream.c_str(),
                  estimate.backward_compute_ms, estimate.backward_loads, estimate.backward_loads_ms, link_gbps);
    b << line;
  }
  b << "  device memory " << format_bytes(vram_total) << " of "
    << (budget >= UINT64_MAX / 4 ? std::string("unlimited") : format_bytes(budget)) << ":\n";
  for (const PlanTerm& t : vram) {
    if (t.bytes == 0) continue;
    char line[128];
    std::snprintf(line, sizeof(line), "    %-34s %12s\n", t.name.c_str(), format_bytes(t.bytes).c_str());
    b << line;
  }
  b << "  host memory " << format_bytes(host_bytes);
  if (ram_layers >= 0)  // store/host_memory.h Note [partial RAM store]
    b << " (RAM store arena: " << ram_layers << " of " << num_layers << " layers; the other "
      << num_layers - ram_layers << " read from the store files through a disk staging ring)";
  else
    b << (tier == "ram" ? " (RAM store arena)" : tier == "disk" ? " (disk staging ring)" : "");
  b << "\n";
  return b.str();
}

StatusOr<Plan> make_plan_fused_fallback(PlanInput in, const std::function<uint64_t()>& min_workspace) {
  ASSIGN_OR_RETURN(Plan p, make_plan(in));
  if (in.fused_attention_workspace == 0 || p.fused_attention_allowance > 0) return p;
  in.fused_attention_min_workspace = min_workspace();
  if (in.fused_attention_min_workspace == 0) return p;
  return make_plan(in);
}

}  // namespace st
