// Planner: sizes every device arena of a (streaming) training run before anything is allocated,
// decides how many layers stay resident, and refuses an impossible plan up front (design.md §3).
//
// Terms (bytes): resident layers, pool slots (n x layer blob), extras (embedding, final norm,
// lm_head — or, with host extras, the final norm and two lm_head vocabulary-chunk buffers),
// activation checkpoints, hidden/gradient buffers, one layer's recompute scratch, the head
// scratch (all from the Model's own arena function), LoRA params + grads + AdamW moments, library
// workspaces. It keeps as many layers resident as fit; resident layers are spread evenly over the
// depth so each streamed copy overlaps the compute of the resident layers around it.
//
// Note [host extras plan]: in a streaming plan the embedding and lm_head may stay in host memory
// (model/model.h Note [host extras]): the embedding rows are gathered per batch and the lm_head
// streams in vocabulary chunks "like a layer". offload_embeddings "auto" picks, of the two plans
// (extras on the device / on the host) that fit, the one with the shorter estimated step when the
// device's speeds are known (PlanInput::link_gbps, gemm_tflops) and the layers stream from RAM (from
// disk they come at the disk's speed, which the probe does not see), else the one that streams fewer
// bytes (the lm_head costs its size once per micro-batch; every layer it displaces costs two
// loads); ties and all-resident plans keep the extras on the device. The estimate (Note [step
// estimate]) adds, with the lm_head on the host, what its streaming adds to the head: nothing
// overlaps the head (the backward waits for it), and below ~6k tokens a micro-batch its chunks load
// slower than they are used (an lm_head chunk is V_c x H x 2 bytes for 4 T V_c H flops). Bytes alone
// picked the host for Qwen2.5-3B@2048 in 5-6 GiB and 1.5B@2048 in 2.5 GiB, where the device was
// 4-8% faster (bench/RESULTS.md session 18 call 6). The choice never changes the numerics.
//
// Note [step estimate]: a streaming step from the probed link (GB/s) and GEMM rate (P, a 4096^3
// bf16 GEMM), phase by phase: forward = max(its compute, its layer loads / link), then the head
// (nothing loads: the pool holds the layers the backward starts with), then backward = max(its
// compute, its loads / link) -- a load can only run ahead into memory its phase frees, and the
// backward's loads cannot move into the forward. (Until session 22 it was one max(compute, all
// loads) over the step with compute as GEMM flops at 3/4 of P: -9% to +18% off session 22 call 1's
// measured steps, short where the forward is link-bound and the backward compute-bound, 7B@2048 in
// 10 GiB. Phases alone were tried in session 18 and misordered 1.5B@2048's extras placements; with
// the fitted compute below they order all five of those rows and read 0-12% under call 1's 25
// measured plans, most 2-8%.) Compute, fitted
// to the H200's resident steps over the grid (0.5B-14B at 512-4096 tokens, batch 1 and 4:
// within 8% on all 29, where GEMM flops at 3/4 of P read 0.31-1.09 of them): the GEMMs at 0.98 P;
// attention at 0.43 P (causal forward 1 unit, backward 2.5); the memory-bound rest (norms, RoPE,
// SwiGLU, LoRA, residuals) as kElementwiseFlops per token, layer and (F + H), 36% of it in the
// forward; 0.174 ms a layer visit pair of launch gaps (40% forward). A recomputed forward adds
// kRecomputeShare of the forward's time (3B / 7B@2048 all resident, attention outputs kept
// against nothing recomputed: +12.7 / +28 ms, ~0.63 of a forward: a plan that recomputes also
// skips writing what kNone keeps). The memory-bound terms scale with the GEMM rate here, which
// holds for GPUs with the H200's flops per byte of HBM (A100, H100, RTX 4090 within ~1.5x).
//
// Note [recompute plan]: recompute "auto" spends the memory left once every layer is resident on
// less recomputation (model/layer.h Note [recompute]): first kNone (every intermediate the
// backward reads is kept: no forward op runs twice), else kAttention (attention output + lse),
// else kFull (per-layer checkpointing). A streaming plan spends memory on resident layers first:
// a layer kept resident saves two copies per step, a kept intermediate saves only compute. Where
// the link and GEMM speeds are known (a RAM tier on CUDA: Note [host extras plan]) that first plan
// is held against the same attention path with kNone and with kAttention, each with the most
// resident layers that fit beside its activations, and the one whose estimated step is lowest by
// more than kRecomputeMargin wins: on the H200 Qwen2.5-7B@2048 in 22 GiB ran 134.5 ms with every
// layer resident and attention outputs kept against 107.3 ms with 6 layers streamed and no
// recompute, and @4096 in 32 GiB 283.9 against 226.6 (bench/RESULTS.md session 19): a fast link
// hides a few layers' copies behind compute, and kNone's regions are lent to the pool. An explicit
// mode is planned as asked (fewer resident layers if need be) or refused.
//
// Note [fused attention plan]: a fused attention path (cuDNN SDPA on CUDA) runs other kernels than
// the own ones, and its backward in query chunks (attention_cudnn.cc Note [chunked backward]) sums
// in another order than the whole one: the path decides the bits. A streamed run must give the
// bits of the all-resident run (design.md §1), so the path must not depend on how many layers fit:
// its workspace is reserved before any layer is made resident -- the whole one (1.1 GB for
// Llama-3-8B at 4096 tokens: its deterministic backward keeps dP), else the chunked one, else none,
// the first that fits beside the smallest plan (every layer streamed). So every budget that holds
// the smallest plan and the whole workspace -- the all-resident one included -- runs the same
// kernels; a smaller one is told in the banner that its bits differ. The price is paid by
// link-bound plans: the workspace displaces resident layers (3B at 2048 tokens: 151 MB, ~1 layer,
// two loads a step). A compute-bound plan gains: at Qwen2.5-3B x 2048 in 5 GiB the own kernels'
// step was ~10% longer (bench/RESULTS.md session 17 call 7), and the chunked backward runs
// 1.4-1.8x the whole one's time (session 18 call 1).
//
// Note [layer-major plan]: with gradient accumulation (G micro-batches a step) a streaming plan
// may hold s > 1 micro-batches' activations at once (model/model.h Note [layer-major
// accumulation]): each streamed layer is then loaded once per s micro-batches. A slot costs
// model_slot_bytes, memory a resident layer could have had; layer_major "auto" picks the s in
// 1..G (and the residency that fits beside it) that streams the fewest bytes per step, ties to the
// smaller s. "true" takes s = G (with what residency fits), "false" s = 1. Resident plans keep
// s = 1. The choice never changes the numerics.
//
// Note [launch plan memory]: recorded layer launch plans (model/launch_plans.h) hold device memory
// (~11 KiB per recorded op on the H200: ~0.3-0.8 MiB per layer visit). On CUDA the plan grants
// them what is left beside the chosen residency and the fused attention, up to kLaunchPlanBytes,
// when that is at least kLaunchPlanBytesMin; ungranted, layer ops run one by one. A grant short of
// every visit's plans still pays: the cache records plans until it is full and runs the rest op
// by op (until session 18 the floor was 2 MiB a layer, and a 3B plan with 64 MiB left ran every
// visit op by op, ~2% slower: bench/RESULTS.md session 18 call 5). The bits are the same either way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/byte_size.h"
#include "io/hf_config.h"
#include "model/layer.h"
#include "model/lora.h"

namespace st {


constexpr uint64_t kCudaWorkspaceBytes = 64ull << 20;  // cuBLASLt + attention workspaces
constexpr uint64_t kLaunchPlanBytes = 192ull << 20;    // Note [launch plan memory]
constexpr uint64_t kLaunchPlanBytesMin = 8ull << 20;

struct PlanInput {
  ModelConfig model;
  DType dtype = DType::kBF16;  // weights and activations
  BaseQuant quant = BaseQuant::kNone;  // kNF4 / kCode12: coded layer blobs + the layer's decode staging
  int64_t micro_batch_size = 1;
  int64_t sequence_len = 2048;
  LoraConfig lora;
  int num_slots = 2;           // stream_buffers
  std::string tier = "ram";    // off | ram | disk
  DeviceKind device = DeviceKind::kCpu;
  uint64_t vram_budget = 0;    // 0 = default (below)
  // Free device memory (for the default budget: free minus max(512 MiB, 5%)). 0 with no budget
  // = unlimited (CPU runs).
  uint64_t device_free_bytes = 0;
  std::string offload_embeddings = "auto";  // auto | true | false (Note [host extras plan])
  int64_t vocab_chunk = 16384;              // ModelOptions::vocab_chunk
  std::string recompute = "auto";           // auto | full | attention | none (Note [recompute plan])
  int64_t gradient_accumulation_steps = 1;  // micro-batches a step (Note [layer-major plan])
  std::string layer_major = "auto";         // auto | true | false (Note [layer-major plan])
  // Backend::fused_attention_workspace for this shape (0: none; Note [fused attention plan]), and
  // Backend::fused_attention_min_workspace: the smaller one of its chunked backward, asked for
  // when the whole one does not fit (0: none).
  uint64_t fused_attention_workspace = 0;
  uint64_t fused_attention_min_workspace = 0;
  // The device's measured speeds (backend/speed_probe.h; 0: unknown). With both, offload_embeddings
  // "auto" picks by estimated step time instead of bytes (Note [host extras plan]).
  double link_gbps = 0, gemm_tflops = 0;
};

// A streaming plan's step, estimated from the device's probed speeds (Note [step estimate]): the
// forward's layer loads overlap the forward's compute, the backward's the backward's; nothing
// overlaps the head (the backward waits for it) or the lm_head's streaming (host extras).
struct StepEstimate {
  double forward_compute_ms = 0, forward_loads_ms = 0;    // all 0: not estimated
  double backward_compute_ms = 0, backward_loads_ms = 0;  // backward_compute_ms includes the recompute
  double head_ms = 0;         // the head's GEMMs
  double head_stream_ms = 0;  // what streaming the lm_head adds to them (host extras)
  int forward_loads = 0, backward_loads = 0;  // layer loads a step (all micro-batches)
  double forward_ms() const { return forward_compute_ms > forward_loads_ms ? forward_compute_ms : forward_loads_ms; }
  double backward_ms() const { return backward_compute_ms > backward_loads_ms ? backward_compute_ms : backward_loads_ms; }
  double total_ms() const { return forward_ms() + head_ms + head_stream_ms + backward_ms(); }
  bool estimated() const { return forward_compute_ms > 0; }
};

struct PlanTerm {
  std::string name;
  uint64_t bytes = 0;
};

struct Plan {
  std::string tier;                 // off | ram | disk
  BaseQuant quant = BaseQuant::kNone;  // the layer blobs' linears (NF4: the QLoRA base; code12: lossless)
  int num_slots = 0;                // pool slots (0 when nothing streams)
  std::vector<int> resident_layers; // sorted
  int num_layers = 0;
  bool host_extras = false;         // embedding + lm_head in host memory, lm_head streamed
  Recompute recompute = Recompute::kFull;  // ModelOptions::recompute (Note [recompute plan])
  uint64_t fused_attention_allowance = 0;  // ModelOptions::fused_attention_allowance (0: not granted)
  uint64_t fused_attention_whole = 0;      // PlanInput::fused_attention_workspace (the banner's note)
  uint64_t launch_plan_bytes = 0;          // ModelOptions::launch_plan_bytes (Note [launch plan memory])
  int micro_batch_slots = 1;               // ModelOptions::micro_batch_slots (Note [layer-major plan])
  int lent_slots = 0;  // pool slots the source is expected to make in activation memory (prefetcher.h)
  uint64_t layer_bytes = 0;
  uint64_t budget = 0;
  std::vector<PlanTerm> vram;       // device bytes by term
  uint64_t vram_total = 0;
  uint64_t host_bytes = 0;          // RAM-store arena or disk staging ring (+ host extras)
  int ram_layers = -1;              // layers the RAM arena holds when not all (store/host_memory.h)
  uint64_t streamed_bytes_per_micro_batch = 0;  // layer loads (Belady) / micro_batch_slots + lm_head chunks
  uint64_t streamed_bytes_per_step = 0;         // for gradient_accumulation_steps micro-batches
  StepEstimate estimate;  // streaming from RAM with the device's speeds known; else zeros
  double link_gbps = 0;   // PlanInput::link_gbps (the estimate's)
  int streamed_layers() const { return num_layers - static_cast<int>(resident_layers.size()); }
  std::string banner() const;       // multi-line, for the run banner
};

// Layer loads a training step in steady state: every streamed layer is visited by the forward and
// the backward, less those still pooled at the turn and across the step boundary; with `lent` lent
// slots (stream/prefetcher.h Note [lent region spans]) the next forward also finds about that many
// of the layers the backward loaded. The planner's model of the prefetcher; lent_slots_test holds
// it against the prefetcher itself.
int steady_layer_loads(int streamed, int pooled, int lent);

// ResourceExhausted (before any allocation) naming the largest term and what would fit.
StatusOr<Plan> make_plan(const PlanInput& in);
// make_plan, asking min_workspace() for in.fused_attention_min_workspace only when the whole fused
// attention workspace is not granted: finding it builds the chunked backward's cuDNN graphs (~1 s
// each), which a run that gets the whole workspace never uses. The plan is the one make_plan
// gives with both figures known up front.
StatusOr<Plan> make_plan_fused_fallback(PlanInput in, const std::function<uint64_t()>& min_workspace);

}  // namespace st
