#include "cli/bench_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "backend/backend.h"
#include "backend/speed_probe.h"
#include "cli/bench_device.h"
#include "cli/bench_timeline.h"
#include "cli/bench_weights.h"
#include "model/lora.h"
#include "model/model.h"
#include "stream/planner.h"
#include "stream/streamed_layer_source.h"

#ifdef STREAMTUNE_HAVE_CUDA
#include "backend/cuda/profiler.h"
#endif

namespace st {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

StatusOr<DeviceKind> pick_device(const std::string& d) {
  if (d == "cpu") return DeviceKind::kCpu;
  if (d == "cuda") return DeviceKind::kCuda;
  if (d == "auto") return cuda_available() ? DeviceKind::kCuda : DeviceKind::kCpu;
  return InvalidArgument("--device must be auto, cpu or cuda (got '" + d + "')");
}

StatusOr<DType> pick_dtype(const std::string& d, DeviceKind k) {
  if (d == "auto") return k == DeviceKind::kCuda ? DType::kBF16 : DType::kF32;
  if (d == "bfloat16" || d == "bf16") return DType::kBF16;
  if (d == "float32" || d == "f32") return DType::kF32;
  return InvalidArgument("--dtype must be bfloat16 or float32 (got '" + d + "')");
}

// Seeded random token ids; labels = ids (Model shifts them the HF way). doc_len > 0: each row
// packed with doc_len-token documents, as sample_packing lays them out (doc ids; positions and
// attention restart per document). prompt_len > 0: the first prompt_len tokens of each document
// (each row without doc_len) are not trained, as a prompt with train_on_inputs false.
Batch synthetic_batch(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed, int64_t doc_len,
                      int64_t prompt_len) {
  Batch b;
  b.batch = batch;
  b.seq = seq;
  std::mt19937_64 rng(seed ^ 0x5EEDull);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 1));
  b.input_ids.resize(static_cast<size_t>(batch * seq));
  for (int32_t& t : b.input_ids) t = tok(rng);
  b.labels = b.input_ids;
  const int64_t doc = doc_len > 0 ? doc_len : seq;
  for (int64_t i = 0; i < batch * seq; ++i)
    if ((i % seq) % doc < prompt_len) b.labels[static_cast<size_t>(i)] = kIgnoreIndex;
  b.num_targets = 0;
  for (int64_t i = 0; i < batch * seq; ++i)  // the targets after the HF shift
    if (i % seq + 1 < seq && b.labels[static_cast<size_t>(i + 1)] != kIgnoreIndex) ++b.num_targets;
  if (doc_len > 0) {
    for (int64_t i = 0; i < batch * seq; ++i) {
      const int64_t t = i % seq;
      b.doc_ids.push_back(static_cast<int32_t>(t / doc_len));
      b.positions.push_back(static_cast<int32_t>(t % doc_len));
    }
  }
  return b;
}

void measure_ceilings(Backend* be, DType dtype, BenchResult* r) {
  const bool cuda = be->kind() == DeviceKind::kCuda;
  // The ceiling is a bf16 tensor-core GEMM on CUDA; on CPU a modest GEMM in the run's dtype.
  StatusOr<double> g = cuda ? measure_gemm_tflops(be, 8192, DType::kBF16, 20) : measure_gemm_tflops(be, 512, dtype, 3);
  StatusOr<double> h = measure_h2d_gbps(be, cuda ? (size_t{1} << 30) : (size_t{256} << 20), cuda ? 5 : 3);
  if (g.ok()) r->gemm_ceiling_tflops = *g;
  else std::fprintf(stderr, "streamtune: warning: GEMM ceiling not measured: %s\n", g.status().message().c_str());
  if (h.ok()) r->h2d_gbps = *h;
  else std::fprintf(stderr, "streamtune: warning: link not measured: %s\n", h.status().message().c_str());
}

// Which layers stay on the device, and how many pool slots (Note [bench residency]).
struct Residency {
  std::vector<int> resident;
  int slots = 0;
  uint64_t planned = 0;
  double estimate_ms = 0;  // the plan's estimated step (stream/planner.h StepEstimate; 0: not estimated)
  DeviceSpeed probed;      // the speeds it was estimated from (zeros: not probed)
  bool host_extras = false;
  Recompute recompute = Recompute::kFull;
  uint64_t fused_attention = 0;  // bytes granted to the fused (cuDNN) attention; 0: own kernels
  uint64_t fused_whole = 0;      // its whole workspace (more than the grant: the chunked backward)
  uint64_t launch_plans = 0;     // bytes granted to layer launch plans (Note [launch plan memory])
  int mb_slots = 1;              // micro-batches held at once (model/model.h Note [layer-major accumulation])
};

// Note [bench residency]: stream off keeps every layer resident. A streamed run without
// --vram-budget streams EVERY layer (the planner would keep everything resident on a big GPU,
// which measures nothing about streaming; the PyTorch streaming peer streams every layer too).
// With --vram-budget the planner decides, exactly as `streamtune train` would. --recompute applies
// to every run; "auto" leaves it to the planner (full recompute for the all-streamed runs).
StatusOr<Residency> decide_residency(const BenchOptions& o, Backend* be, const ModelConfig& c, DType dt,
                                     const LoraConfig& lc) {
  PlanInput in;
  in.model = c;
  in.dtype = dt;
  in.quant = o.quant;
  in.micro_batch_size = o.batch;
  in.sequence_len = o.seq;
  in.lora = lc;
  in.num_slots = o.stream_buffers;
  in.tier = o.stream;
  in.device = be->kind();
  in.offload_embeddings = o.offload_embeddings;
  in.recompute = o.recompute;
  in.gradient_accumulation_steps = o.grad_accum;
  in.layer_major = o.layer_major;
  if (dt == DType::kBF16) in.fused_attention_workspace = fused_attention_workspace(be, o.batch, o.seq, c, o.doc_len > 0);
  if (!o.vram_budget.empty()) {
    ASSIGN_OR_RETURN(in.vram_budget, parse_byte_size(o.vram_budget), "--vram-budget");
  }
  DeviceSpeed probed;
  if (in.device == DeviceKind::kCuda && o.stream != "off" && !o.vram_budget.empty()) {
    // As train probes (train/base_weights.h planning_speed): the same plan for the same settings.
    probed = probe_device_speed(be);  // Note [step estimate]
    in.link_gbps = probed.link_gbps;
    in.gemm_tflops = probed.gemm_tflops;
  }
  DeviceMemory dm = device_memory(be);
  if (dm.known) in.device_free_bytes = dm.free;
  const int L = static_cast<int>(c.num_layers);
  Residency res;
  res.fused_whole = in.fused_attention_workspace;
  if (o.stream == "off" && o.offload_embeddings == "true")
    return InvalidArgument("--offload-embeddings true needs --stream ram or disk");
  if (o.stream != "off" && o.vram_budget.empty()) {
    res.slots = std::min(o.stream_buffers, L);
    res.host_extras = o.offload_embeddings == "true";
    if (o.recompute != "auto" && !parse_recompute(o.recompute, &res.recompute))
      return InvalidArgument("--recompute must be auto, full, attention or none (got '" + o.recompute + "')");
    res.fused_attention = in.fused_attention_workspace;  // no budget: nothing to trade it against
    res.launch_plans = be->kind() == DeviceKind::kCuda ? kLaunchPlanBytes : 0;
    res.mb_slots = o.layer_major == "false" ? 1 : o.grad_accum;  // no budget: every micro-batch at once
    return res;
  }
  ASSIGN_OR_RETURN(Plan p, make_plan_fused_fallback(
                               in, [&] { return fused_attention_min_workspace(be, o.batch, o.seq, c, o.doc_len > 0); }));
  res.host_extras = p.host_extras;
  res.recompute = p.recompute;
  res.fused_attention = p.fused_attention_allowance;
  res.launch_plans = p.launch_plan_bytes;
  res.resident = p.resident_layers;
  res.slots = p.num_slots;
  res.planned = p.vram_total;
  res.estimate_ms = p.estimate.total_ms();
  res.probed = probed;
  res.mb_slots = p.micro_batch_slots;
  if (o.stream == "off") {
    res.resident.clear();
    for (int l = 0; l < L; ++l) res.resident.push_back(l);
    res.slots = 0;
  }
  return res;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

double seed_convention_flops(int64_t layer_params, int64_t layers, int64_t vocab, int64_t hidden, int64_t tokens) {
  return 6.0 * static_cast<double>(layer_params) * layers * tokens + 4.0 * static_cast<double>(vocab) * hidden * tokens;
}

// Causal attention, per layer: forward = 2 GEMM-like products (QKᵀ, PV) x 2 FLOP per MAC x
// (T²/2 causal pairs) x D x NH per sequence = 2·B·T²·D·NH. A step runs it forward, again in the
// recompute, and backward at twice the forward (dV, dP, dQ, dK): 4 x forward = 8·B·T²·D·NH per
// layer. (The flash backward's own recompute of QKᵀ is not counted, as is customary.)
double attention_flops(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, int64_t layers) {
  return 8.0 * static_cast<double>(batch) * seq * seq * head_dim * heads * layers;
}

StatusOr<BenchResult> run_bench(const BenchOptions& o) {
  ASSIGN_OR_RETURN(DeviceKind kind, pick_device(o.device));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, make_backend(kind));
  ASSIGN_OR_RETURN(DType dt, pick_dtype(o.dtype, kind));
  BenchResult r;
  r.device = be->description();
  r.dtype = dtype_name(dt);
  r.quant = base_quant_name(o.quant);
  r.stream = o.stream;
  r.seq = o.seq;
  r.batch = o.batch;
  r.doc_len = o.doc_len;
  r.prompt_len = o.prompt_len;
  r.tokens_per_step = o.seq * o.batch * o.grad_accum;
  r.grad_accum = o.grad_accum;
  r.steps = o.steps;
  r.warmup = o.warmup;
  r.lora_r = static_cast<int>(o.lora_r);
  r.targets = join(o.targets);
  if (o.ceilings) measure_ceilings(be.get(), dt, &r);
  const DeviceMemory base = device_memory(be.get());
  if (base.known) r.vram_baseline_used = static_cast<int64_t>(base.used());

  BenchWeights w;
  if (!o.preset.empty()) {
    ASSIGN_OR_RETURN(w, synthetic_weights(be.get(), o.preset, dt, o.quant, o.stream != "off", o.seed));
  } else {
    ASSIGN_OR_RETURN(w, checkpoint_weights(be.get(), o.model_dir, dt, o.quant, o.stream));
  }
  const ModelConfig& c = w.config;
  r.model = o.preset.empty() ? w.source : o.preset;
  r.setup_s = w.setup_seconds;
  r.params = c.total_params();
  r.layers = c.num_layers;
  r.host_store_bytes = w.store->host_bytes();
  if (auto* s = dynamic_cast<SyntheticStore*>(w.store.get())) r.store_pinned = s->pinned() ? "yes" : "no";
  else r.store_pinned = "n/a";

  LoraConfig lc;
  lc.r = o.lora_r;
  lc.alpha = o.lora_alpha > 0 ? o.lora_alpha : 2.0 * static_cast<double>(o.lora_r);
  ASSIGN_OR_RETURN(std::vector<LoraTarget> tg, parse_lora_targets(o.targets), "--targets");
  for (LoraTarget t : tg) lc.targets[static_cast<int>(t)] = true;
  lc.dora = o.dora;
  lc.dropout = o.lora_dropout;
  r.dora = o.dora;
  ASSIGN_OR_RETURN(Residency res, decide_residency(o, be.get(), c, dt, lc));
  r.resident_layers = static_cast<int64_t>(res.resident.size());
  r.vram_planned = res.planned;
  r.plan_estimate_ms = res.estimate_ms;
  r.probe_link_gbps = res.probed.link_gbps;
  r.probe_gemm_tflops = res.probed.gemm_tflops;

  ModelOptions mo;
  mo.act_dtype = dt;
  mo.base_quant = o.quant;
  mo.max_tokens = o.seq * o.batch;
  mo.seed = o.seed;
  mo.host_extras = res.host_extras;
  mo.recompute = res.recompute;
  mo.fused_attention_allowance = res.fused_attention;
  mo.launch_plan_bytes = res.launch_plans;
  mo.fused_attention_batch = o.batch;
  mo.fused_attention_seq = o.seq;
  mo.micro_batch_slots = res.mb_slots;
  r.micro_batch_slots = res.mb_slots;
  // Packed documents run on cuDNN as ragged spans (attention_cudnn.cc Note [ragged documents])
  // where the plan grants cuDNN at all (a shape needing more workspace keeps the own kernels).
  r.attention = res.fused_attention == 0 ? (o.doc_len > 0 ? "own kernels (packed documents)" : "own kernels")
                : o.doc_len > 0                        ? "fused (cuDNN, documents as ragged spans)"
                : res.fused_attention < res.fused_whole ? "fused (cuDNN, backward in query chunks)"
                                                        : "fused (cuDNN)";
  r.host_extras = res.host_extras;
  r.recompute = recompute_name(res.recompute);
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::create(c, be.get(), lc, mo));
  model->lora().init(o.seed);
  {
    ASSIGN_OR_RETURN(std::vector<char> extras, extras_to_host(be.get(), *w.store));
    model->load_extras_from_host(extras.data());
  }
  StreamedSourceOptions so;
  so.num_slots = std::max(1, res.slots);
  so.resident_layers = res.resident;
  // Note [device timeline]: the store behind the source marks its copies once armed.
  const char* timeline_path = std::getenv("STREAMTUNE_TIMELINE");
  std::unique_ptr<DeviceTimeline> timeline;
  std::unique_ptr<TimedStore> timed_store;
  if (timeline_path != nullptr && *timeline_path != '\0' && be->kind() == DeviceKind::kCuda) {
    timeline = std::make_unique<DeviceTimeline>(be.get());
    timed_store = std::make_unique<TimedStore>(w.store.get(), timeline.get());
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StreamedLayerSource> src,
                   StreamedLayerSource::create(be.get(), timed_store ? timed_store.get() : w.store.get(), so));
  r.num_slots = src->num_slots();
  RETURN_IF_ERROR(model->init_dora_magnitudes(*src));
  const uint64_t lb = w.store->manifest().layer_bytes;
  r.vram_allocated = model_arena_bytes(c, lc, mo) + model->lora().bytes() + model_device_extras_bytes(c, mo) +
                     lb * (res.resident.size() + static_cast<uint64_t>(r.num_slots));

  std::vector<Batch> batches;
  std::vector<const Batch*> window;
  int64_t targets = 0;
  for (int i = 0; i < o.grad_accum; ++i) {
    batches.push_back(
        synthetic_batch(o.batch, o.seq, c.vocab_size, o.seed + static_cast<uint64_t>(i), o.doc_len, o.prompt_len));
    targets += batches.back().num_targets;
  }
  for (const Batch& b : batches) window.push_back(&b);
  const float grad_scale = 1.0f / static_cast<float>(targets);
  const std::vector<float> scales(batches.size(), grad_scale);
  Lora& lora = model->lora();
  int64_t opt_step = 0;
  int64_t peak_used = r.vram_baseline_used;
  // Host-side phase times (printed with STREAMTUNE_PROFILE=1): forward_backward returns after its
  // loss read-back, so it covers the device work of the layers and the head.
  std::vector<double> fb_ms, opt_ms;
  auto one_step = [&](LayerSource& ls) -> StatusOr<double> {
    auto t0 = Clock::now();
    lora.zero_grads();
    ASSIGN_OR_RETURN(std::vector<double> loss, model->forward_backward(window, ls, scales));
    fb_ms.push_back(ms_since(t0));
    t0 = Clock::now();
    RETURN_IF_ERROR(src->status(), "streaming a layer");
    Backend::AdamW h{1e-4f, 0.9f, 0.999f, 1e-8f, 0.0f, ++opt_step};
    be->adamw(lora.params(), lora.grads(), lora.adam_m(), lora.adam_v(), h);
    be->sync_stream(StreamId::kCompute);
    opt_ms.push_back(ms_since(t0));
    DeviceMemory dm = device_memory(be.get());
    if (dm.known) peak_used = std::max(peak_used, static_cast<int64_t>(dm.used()));
    double sum = 0;
    for (double l : loss) sum += l;
    return sum / static_cast<double>(targets);
  };

  for (int i = 0; i < o.warmup; ++i) RETURN_IF_ERROR(one_step(*src).status(), "warm-up step " << i + 1);
#ifdef STREAMTUNE_HAVE_CUDA
  cuda::profile_reset();
#endif
  fb_ms.clear();
  opt_ms.clear();
  const PrefetchStats s0 = src->stats();
  const int64_t head0 = model->lm_head_bytes_streamed();
  const LaunchPlanCache::Stats p0 = model->launch_plan_stats();
  std::vector<double> times;
  for (int i = 0; i < o.steps; ++i) {
    auto t0 = Clock::now();
    ASSIGN_OR_RETURN(double loss, one_step(*src), "timed step " << i + 1);
    times.push_back(ms_since(t0));
    if (i == 0) r.loss_first = loss;
    r.loss_last = loss;
  }
  const PrefetchStats s1 = src->stats();
  const int64_t head1 = model->lm_head_bytes_streamed();
  const LaunchPlanCache::Stats p1 = model->launch_plan_stats();
#ifdef STREAMTUNE_HAVE_CUDA
  if (cuda::profile_enabled()) {
    std::fprintf(stderr, "== %s seq %lld stream %s: host phases (median ms): zero_grads+forward_backward %.2f, "
                 "adamw+sync %.2f\n%s", r.model.c_str(), static_cast<long long>(o.seq), o.stream.c_str(),
                 median(fb_ms), median(opt_ms), cuda::profile_report(o.steps, median(times)).c_str());
  }
#endif
  const double n = std::max(1, o.steps);
  r.step_ms_median = median(times);
  r.step_ms_min = times.empty() ? 0 : *std::min_element(times.begin(), times.end());
  for (double t : times) r.step_ms_mean += t / n;
  r.tok_s = r.step_ms_median > 0 ? static_cast<double>(r.tokens_per_step) / (r.step_ms_median / 1e3) : 0;
  r.model_flops = seed_convention_flops(c.layer_params(), c.num_layers, c.vocab_size, c.hidden_size, r.tokens_per_step);
  r.attn_flops = attention_flops(o.batch * o.grad_accum, o.seq, c.num_heads, c.head_dim, c.num_layers);
  const double step_s = r.step_ms_median / 1e3;
  r.tflops = step_s > 0 ? r.model_flops / step_s / 1e12 : 0;
  r.tflops_with_attn = step_s > 0 ? (r.model_flops + r.attn_flops) / step_s / 1e12 : 0;
  r.bytes_streamed_per_step = static_cast<int64_t>((s1.bytes - s0.bytes + head1 - head0) / n);
  r.loads_per_step = static_cast<int64_t>((s1.loads - s0.loads) / n);
  r.reuse_hits_per_step = static_cast<int64_t>((s1.reuse_hits - s0.reuse_hits) / n);
  r.lent_slots = src->lent_slots();
  r.plan_replays_per_step = static_cast<int64_t>((p1.replayed - p0.replayed) / n);
  r.eager_visits_per_step = static_cast<int64_t>((p1.eager - p0.eager) / n);
  r.stream_gbps = step_s > 0 ? r.bytes_streamed_per_step / step_s / 1e9 : 0;
  r.host_wait_ms = (s1.compute_wait_ns - s0.compute_wait_ns) / 1e6 / n;
  if (r.gemm_ceiling_tflops > 0) r.compute_floor_ms = (r.model_flops + r.attn_flops) / (r.gemm_ceiling_tflops * 1e12) * 1e3;
  if (r.h2d_gbps > 0) r.transfer_floor_ms = r.bytes_streamed_per_step / (r.h2d_gbps * 1e9) * 1e3;

  const bool streams = r.resident_layers < r.layers;
  if (!streams) {
    r.exposed_copy_ms = 0;
    r.exposed_copy_method = "none (nothing streams)";
  } else if (be->kind() == DeviceKind::kCuda && o.probe_steps > 0) {
    ExposedCopyProbe probe(be.get(), src.get(), 2 * static_cast<size_t>(c.num_layers) * static_cast<size_t>(o.grad_accum));
    std::vector<double> pt;
    for (int i = 0; i < o.probe_steps; ++i) {
      auto t0 = Clock::now();
      RETURN_IF_ERROR(one_step(probe).status(), "probe step " << i + 1);
      pt.push_back(ms_since(t0));
    }
    r.probe_step_ms = median(pt);
    r.exposed_copy_ms = probe.exposed_ns() / 1e6 / o.probe_steps;
    r.exposed_copy_method = "device events polled on probe steps";
    if (timeline) {  // Note [device timeline]
      TimelineSource ts(src.get(), timeline.get());
      timeline->arm(true);
      RETURN_IF_ERROR(one_step(ts).status(), "timeline step");
      timeline->arm(false);
      RETURN_IF_ERROR(timeline->write_csv(timeline_path), "STREAMTUNE_TIMELINE");
      std::fprintf(stderr, "device timeline of one step written to %s\n", timeline_path);
    }
  } else {
    // Synchronous copies (CPU): the compute thread blocking in acquire IS the exposed copy.
    r.exposed_copy_ms = r.host_wait_ms;
    r.exposed_copy_method = "host wait in acquire (prefetcher)";
  }
  if (r.exposed_copy_ms >= 0 && r.step_ms_median > 0)
    r.compute_fraction = std::max(0.0, 1.0 - r.exposed_copy_ms / r.step_ms_median);
  r.vram_peak_used = peak_used;
  return r;
}

}  // namespace st
