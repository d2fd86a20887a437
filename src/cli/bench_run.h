// `streamtune bench`: full training steps on synthetic tokens, measured (design.md §5).
//
// A step is exactly the trainer's: embed -> layers forward (checkpoint each input) -> final norm
// + chunked lm_head + cross-entropy -> layers backward (recompute + gradient, LoRA grads) ->
// AdamW on the LoRA arena. Tokens are seeded random ids; labels are the ids (the model shifts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "model/weights.h"

namespace st {

struct BenchOptions {
  std::string model_dir;      // --model (exactly one of model_dir / preset)
  std::string preset;         // --preset
  int64_t seq = 512;
  int64_t batch = 1;
  int64_t doc_len = 0;        // --doc-len N: rows packed with N-token documents (0 = one a row)
  int64_t prompt_len = 0;     // --prompt-len N: the first N tokens of each document untrained
  int steps = 10;             // timed steps
  int warmup = 3;
  std::string stream = "off"; // off | ram | disk
  int stream_buffers = 2;
  int64_t lora_r = 16;        // the peers' configuration: r 16, alpha 32, q_proj + v_proj
  double lora_alpha = 0;      // 0 = 2 r
  std::vector<std::string> targets = {"q_proj", "v_proj"};
  bool dora = false;          // --dora: DoRA on the targets (model/layer.cc Note [DoRA])
  double lora_dropout = 0;    // --lora-dropout P
  std::string vram_budget;    // "" = stream every layer when stream != off (see bench_run.cc)
  std::string offload_embeddings = "auto";  // auto | true | false (stream/planner.h)
  std::string recompute = "auto";           // auto | full | attention | none (stream/planner.h)
  std::string device = "auto";
  std::string dtype = "auto"; // auto = bfloat16 on CUDA, float32 on CPU
  BaseQuant quant = BaseQuant::kNone;  // --quant nf4: the QLoRA base; code12: lossless (model/weights.h)
  int grad_accum = 1;                  // --grad-accum G: micro-batches a step
  std::string layer_major = "auto";    // --layer-major (stream/planner.h Note [layer-major plan])
  uint64_t seed = 0;
  bool ceilings = true;       // measure GEMM ceiling + pinned link in the same run
  int probe_steps = 2;        // CUDA streamed runs: extra steps timing the exposed copy
};

// All figures of one run. Times in ms, rates per second, sizes in bytes.
struct BenchResult {
  std::string model, device, dtype, stream;
  std::string quant = "none";  // the base's linears: none | nf4 | code12
  int grad_accum = 1, micro_batch_slots = 1;  // micro-batches a step; held at once (layer-major)
  int64_t seq = 0, batch = 0, tokens_per_step = 0, doc_len = 0, prompt_len = 0;
  int steps = 0, warmup = 0, lora_r = 0;
  std::string targets;
  bool dora = false;
  int64_t params = 0, layers = 0, resident_layers = 0, num_slots = 0;
  bool host_extras = false;  // embedding + lm_head in host memory, lm_head streamed
  std::string recompute = "full";  // what the backward recomputed (model/layer.h Note [recompute])
  std::string attention;           // "fused (cuDNN)" | "own kernels" (backend.h Note [fused attention workspace])
  double setup_s = 0;
  double step_ms_median = 0, step_ms_mean = 0, step_ms_min = 0, tok_s = 0;
  double loss_first = 0, loss_last = 0;  // mean per-token loss of the first / last timed step
  // FLOPs per step: the seed's convention (decoder 6 x layer params x tokens, lm_head 4 x V x H
  // x tokens, embedding 0) and causal attention separately (see bench_run.cc).
  double model_flops = 0, attn_flops = 0;
  double tflops = 0, tflops_with_attn = 0;
  double gemm_ceiling_tflops = -1, h2d_gbps = -1;  // -1: not measured
  int64_t bytes_streamed_per_step = 0;
  double stream_gbps = 0;             // bytes streamed / step time
  double exposed_copy_ms = -1;        // per step; -1 when not measured
  std::string exposed_copy_method;    // "device events (probe steps)" | "host wait (prefetcher)" | "none"
  double host_wait_ms = 0;            // per step, compute thread blocked in acquire (host side)
  double probe_step_ms = -1;          // median step time of the probe steps
  double compute_fraction = -1;       // 1 - exposed / step
  double compute_floor_ms = -1, transfer_floor_ms = -1;  // FLOPs / ceiling, bytes / link
  int64_t reuse_hits_per_step = 0, loads_per_step = 0;
  int64_t lent_slots = 0;  // pool slots over lent activation memory (stream/prefetcher.h)
  // Layer visits per timed step launched from recorded plans / op by op (model/launch_plans.h).
  int64_t plan_replays_per_step = 0, eager_visits_per_step = 0;
  uint64_t vram_planned = 0;          // the planner's total for this configuration
  double plan_estimate_ms = 0;        // the planner's estimated step (with --vram-budget from RAM on CUDA; else 0)
  double probe_link_gbps = 0, probe_gemm_tflops = 0;  // the speeds it came from (backend/speed_probe.h; 0: none)
  uint64_t vram_allocated = 0;        // what bench allocated (arenas, LoRA, extras, layers, pool)
  int64_t vram_peak_used = -1;        // cudaMemGetInfo total - free, max over the run (-1 unknown)
  int64_t vram_baseline_used = -1;    // the same before the run allocated anything (context etc.)
  uint64_t host_store_bytes = 0;
  std::string store_pinned;           // "yes" | "no" | "n/a"
};

StatusOr<BenchResult> run_bench(const BenchOptions& o);

Json bench_result_json(const BenchResult& r);
std::string bench_result_text(const BenchResult& r);

// FLOP conventions (exposed for tests and the report).
double seed_convention_flops(int64_t layer_params, int64_t layers, int64_t vocab, int64_t hidden, int64_t tokens);
double attention_flops(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, int64_t layers);

}  // namespace st
