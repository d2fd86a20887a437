// The report of `streamtune bench`: one JSON object (--json) or a human-readable block.
#include <cmath>
#include <cstdio>
#include <iomanip>

#include "cli/bench_run.h"
#include "stream/planner.h"

namespace st {

namespace {

double round_to(double x, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(x * f) / f;
}

// Negative sentinels ("not measured") become null.
Json maybe(double x, int digits) { return x < 0 ? Json(nullptr) : Json(round_to(x, digits)); }

std::string fmt(double x, const char* spec, const char* unit) {
  if (x < 0) return "n/a";
  char b[64];
  std::snprintf(b, sizeof b, spec, x);
  return std::string(b) + unit;
}

}  // namespace

Json bench_result_json(const BenchResult& r) {
  Json j;
  j["model"] = r.model;
  j["device"] = r.device;
  j["dtype"] = r.dtype;
  j["stream"] = r.stream;
  j["seq"] = r.seq;
  j["doc_len"] = r.doc_len;
  j["prompt_len"] = r.prompt_len;
  j["batch"] = r.batch;
  j["tokens_per_step"] = r.tokens_per_step;
  j["steps"] = r.steps;
  j["warmup"] = r.warmup;
  j["lora_r"] = r.lora_r;
  j["dora"] = r.dora;
  j["targets"] = r.targets;
  j["params"] = r.params;
  j["layers"] = r.layers;
  j["resident_layers"] = r.resident_layers;
  j["offload_embeddings"] = r.host_extras;
  j["recompute"] = r.recompute;
  j["quant"] = r.quant;
  j["grad_accum"] = r.grad_accum;
  j["micro_batch_slots"] = r.micro_batch_slots;
  j["attention"] = r.attention;
  j["stream_buffers"] = r.num_slots;
  j["setup_s"] = round_to(r.setup_s, 2);
  j["tok_s"] = round_to(r.tok_s, 1);
  j["step_ms"] = round_to(r.step_ms_median, 3);
  j["step_ms_mean"] = round_to(r.step_ms_mean, 3);
  j["step_ms_min"] = round_to(r.step_ms_min, 3);
  j["loss_first"] = round_to(r.loss_first, 4);
  j["loss_last"] = round_to(r.loss_last, 4);
  // Every digit: two runs that must train to the same bits (a coded base, a streamed plan) compare it.
  j["loss_last_exact"] = Str() << std::setprecision(17) << r.loss_last;
  j["flops_per_step"] = r.model_flops;
  j["attn_flops_per_step"] = r.attn_flops;
  j["tflops"] = round_to(r.tflops, 6);
  j["tflops_with_attn"] = round_to(r.tflops_with_attn, 6);
  j["gemm_ceiling_tflops"] = maybe(r.gemm_ceiling_tflops, 6);
  j["h2d_pinned_gbps"] = maybe(r.h2d_gbps, 2);
  j["compute_floor_ms"] = maybe(r.compute_floor_ms, 3);
  j["transfer_floor_ms"] = maybe(r.transfer_floor_ms, 3);
  j["bytes_streamed_per_step"] = r.bytes_streamed_per_step;
  j["loads_per_step"] = r.loads_per_step;
  j["reuse_hits_per_step"] = r.reuse_hits_per_step;
  j["lent_slots"] = r.lent_slots;
  j["plan_replays_per_step"] = r.plan_replays_per_step;
  j["eager_visits_per_step"] = r.eager_visits_per_step;
  j["stream_gbps"] = round_to(r.stream_gbps, 4);
  j["exposed_copy_ms"] = maybe(r.exposed_copy_ms, 3);
  j["exposed_copy_method"] = r.exposed_copy_method;
  j["host_wait_ms"] = round_to(r.host_wait_ms, 3);
  j["probe_step_ms"] = maybe(r.probe_step_ms, 3);
  j["compute_fraction"] = maybe(r.compute_fraction, 4);
  j["vram_planned_bytes"] = r.vram_planned;
  j["plan_estimate_ms"] = r.plan_estimate_ms > 0 ? Json(round_to(r.plan_estimate_ms, 1)) : Json(nullptr);
  j["probe_link_gbps"] = r.probe_link_gbps > 0 ? Json(round_to(r.probe_link_gbps, 2)) : Json(nullptr);
  j["probe_gemm_tflops"] = r.probe_gemm_tflops > 0 ? Json(round_to(r.probe_gemm_tflops, 1)) : Json(nullptr);
  j["vram_allocated_bytes"] = r.vram_allocated;
  j["vram_peak_used_bytes"] = r.vram_peak_used < 0 ? Json(nullptr) : Json(r.vram_peak_used);
  j["vram_baseline_used_bytes"] = r.vram_baseline_used < 0 ? Json(nullptr) : Json(r.vram_baseline_used);
  j["host_store_bytes"] = r.host_store_bytes;
  j["host_store_pinned"] = r.store_pinned;
  return j;
}

std::string bench_result_text(const BenchResult& r) {
  std::string s;
  char b[512];
  auto line = [&](const char* k, const std::string& v) {
    std::snprintf(b, sizeof b, "  %-22s %s\n", k, v.c_str());
    s += b;
  };
  std::snprintf(b, sizeof b, "bench: %s, seq %lld x batch %lld, %s%s, stream %s, %s r %d on %s\n",
                r.model.c_str(), static_cast<long long>(r.seq), static_cast<long long>(r.batch), r.dtype.c_str(),
                r.quant == "nf4" ? " (NF4 base)" : "", r.stream.c_str(), r.dora ? "DoRA" : "LoRA", r.lora_r,
                r.targets.c_str());
  s += b;
  line("device", r.device);
  line("layers resident", std::to_string(r.resident_layers) + " of " + std::to_string(r.layers) +
                              (r.num_slots ? ", " + std::to_string(r.num_slots) + " pool buffers" : "") +
                              (r.lent_slots ? " + " + std::to_string(r.lent_slots) + " in lent activation memory" : "") +
                              (r.host_extras ? "; embedding + lm_head in host memory (lm_head streamed)" : "") +
                              "; recompute " + r.recompute + "; attention: " + r.attention +
                              (r.grad_accum > 1 ? "; " + std::to_string(r.grad_accum) + " micro-batches a step" +
                                                      (r.micro_batch_slots > 1 ? ", layer-major over " +
                                                                                     std::to_string(r.micro_batch_slots)
                                                                               : std::string())
                                                : std::string()));
  line("tok/s", fmt(r.tok_s, "%.1f", ""));
  line("step (median)", fmt(r.step_ms_median, "%.2f", " ms") + "  (min " + fmt(r.step_ms_min, "%.2f", " ms") +
                            ", " + std::to_string(r.steps) + " steps after " + std::to_string(r.warmup) + " warm-up)");
  line("TFLOP/s", fmt(r.tflops, "%.4g", "") + " (seed convention), " + fmt(r.tflops_with_attn, "%.4g", "") +
                      " with attention");
  line("GEMM ceiling", fmt(r.gemm_ceiling_tflops, "%.4g", " TFLOP/s"));
  line("pinned H2D link", fmt(r.h2d_gbps, "%.2f", " GB/s"));
  line("floors", "compute " + fmt(r.compute_floor_ms, "%.2f", " ms") + ", transfer " +
                     fmt(r.transfer_floor_ms, "%.2f", " ms"));
  line("streamed per step", format_bytes(static_cast<uint64_t>(r.bytes_streamed_per_step)) + " (" +
                                std::to_string(r.loads_per_step) + " loads, " + std::to_string(r.reuse_hits_per_step) +
                                " reuse hits), " + fmt(r.stream_gbps, "%.2f", " GB/s"));
  line("layer visits", std::to_string(r.plan_replays_per_step) + " replayed from launch plans, " +
                          std::to_string(r.eager_visits_per_step) + " op by op (per step)");
  line("exposed copy", fmt(r.exposed_copy_ms, "%.3f", " ms/step") + " [" + r.exposed_copy_method + "]");
  line("compute fraction", fmt(r.compute_fraction, "%.3f", ""));
  line("VRAM", "allocated " + format_bytes(r.vram_allocated) +
                   (r.vram_planned ? ", planned " + format_bytes(r.vram_planned) : std::string()) +
                   (r.vram_peak_used >= 0 ? ", peak used " + format_bytes(static_cast<uint64_t>(r.vram_peak_used)) +
                                                " (incl. context " +
                                                format_bytes(static_cast<uint64_t>(r.vram_baseline_used)) + ")"
                                          : std::string()));
  line("host store", format_bytes(r.host_store_bytes) + " (pinned: " + r.store_pinned + ")");
  line("loss", fmt(r.loss_first, "%.4f", "") + " -> " + fmt(r.loss_last, "%.4f", ""));
  return s;
}

}  // namespace st
