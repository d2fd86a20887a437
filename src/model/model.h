// Model: runs micro-batches through embed -> layers -> head -> layers in reverse (design.md §1).
//
// Owns: the extras (embedding, final norm, lm_head), the LoRA arena (model/lora.h), and one
// activation arena sized up front (model_arena_bytes) holding the per-layer checkpoints
// ((L+1) x tokens x H: each layer's input, saved during the forward), two gradient buffers, one
// layer's recompute scratch, the head scratch and the token/label buffers. Base layer weights are
// NOT owned: each visit asks a LayerSource (resident or streamed) for views.
//
// Note [host extras]: with ModelOptions::host_extras the embedding table and lm_head stay in
// (pinned) host memory: each micro-batch's embedding rows (and the lm_head rows of its labels)
// are gathered on the host and copied up, and the lm_head streams through two vocabulary-chunk
// buffers (model/head.h). Only the final norm and those buffers live on the device. The bytes the
// kernels read are the same either way, so losses are bit-identical to device extras.
//
// Not thread-safe. The backend must outlive the Model.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "data/batch.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/head.h"
#include "model/launch_plans.h"
#include "model/layer.h"
#include "model/lora.h"
#include "model/weights.h"

namespace st {

// The visit sequence of one LayerSource step (design.md §3): which layer, for which micro-batch,
// in which phase. micro_batch_major(L, k) is the standard order (per micro-batch: 0..L-1 forward,
// then L-1..0 backward); layer_major(L, k, slots) takes the micro-batches `slots` at a time and
// visits each layer once for all of them (Note [layer-major accumulation]).
//
// Note [layer-major accumulation]: with ModelOptions::micro_batch_slots = s > 1 the Model holds s
// micro-batches' activations at once (s arena slots: checkpoints, gradients, labels, seeds) and a
// step runs forward layer by layer over s micro-batches, then backward layer by layer over them:
// a streamed layer is loaded once per s micro-batches instead of once per micro-batch. Each
// layer's LoRA gradients still receive the micro-batches' contributions in micro-batch order,
// every micro-batch keeps its own dropout seeds, and each visit runs the same kernels on the same
// bytes, so the losses and gradients are bit-identical to micro-batch-major order; only memory (s
// x the per-micro-batch activations) and the bytes streamed change. (The last layer's backward
// reuses its forward's intermediates only when nothing ran in between: with s = 1.)
//
// Note [layer-major evaluation]: an eval forward needs, per batch, only its hidden state and its
// small vectors (tokens, positions, documents, labels, head rows). Where the source loads layers
// (LayerSource::loads_layers), the multi-batch evals take up to eval_group_size() batches through
// the layers together: each layer is acquired once and run on every batch of the group in turn,
// so a streamed layer is loaded once per group instead of once per batch (an eval set, a
// preference window's reference forwards). The memory is the training slot's, idle between
// steps: the group's n hidden states rotate through slot 0's first n+1 checkpoint buffers (batch
// j's input to layer l is buffer (j - l) mod (n+1); it writes the one batch j-1 has just left, or
// for j = 0 the one no batch holds), and each batch's vectors live in an eval slot carved from slot
// 0's gradient and label-row buffers; their heads share one pass over the lm_head (model/head.h
// Note [grouped head]), so a streamed lm_head is copied once a group too. Each batch runs the same
// kernels on the same bytes as alone, so the results are the bits of one batch at a time. A group's visits run op by op (recording
// them would fill the launch-plan memory the training visits use; a streamed eval waits on its
// loads anyway), and a source that loads nothing evaluates one batch at a time, as before.
enum class Phase { kForward, kBackward };
struct Visit {
  int layer;
  int micro_batch;
  Phase phase;
};
class StepSchedule {
 public:
  static StepSchedule micro_batch_major(int num_layers, int micro_batches);
  static StepSchedule layer_major(int num_layers, int micro_batches, int slots);
  static StepSchedule forward_only(int num_layers);
  const std::vector<Visit>& visits() const { return visits_; }
  std::vector<int> layers() const;  // what LayerSource::begin_step takes

 private:
  std::vector<Visit> visits_;
};

struct ModelOptions {
  DType act_dtype = DType::kF32;       // activations AND base weights (layer/extras layouts)
  // How the layer blobs store the seven linears (model/weights.h Note [NF4 base layout]); kNF4
  // adds the dequantization staging to the layer scratch.
  BaseQuant base_quant = BaseQuant::kNone;
  int64_t max_tokens = 0;              // upper bound of B*T per micro-batch (arena sizing)
  uint64_t seed = 42;                  // LoRA dropout masks
  size_t logits_chunk_bytes = 64ull << 20;
  int64_t vocab_chunk = kDefaultVocabChunk;  // lm_head rows per head chunk (model/head.h); part of the numerics
  bool host_extras = false;            // Note [host extras]
  // How much of each layer's forward the backward runs again (model/layer.h Note [recompute]):
  // kAttention and kNone keep L x layer_saved_bytes(...) more activation memory for less work per
  // step. Never changes the numerics.
  Recompute recompute = Recompute::kFull;
  // Device bytes the plan grants a fused attention path (backend.h Note [fused attention
  // workspace]) and the micro-batch shape it was planned for: Model::create prepares that shape on
  // the backend and grants the bytes. 0: only what fits the default scratch.
  uint64_t fused_attention_allowance = 0;
  int64_t fused_attention_batch = 0, fused_attention_seq = 0;
  // Device bytes recorded layer launch plans may hold (model/launch_plans.h; the planner's grant,
  // stream/planner.h Note [launch plan memory]). 0: layer ops run one by one.
  uint64_t launch_plan_bytes = 0;
  // Micro-batches whose activations are held at once (Note [layer-major accumulation]): each one
  // more costs model_slot_bytes(...). 1 = micro-batch-major order.
  int micro_batch_slots = 1;
  // The head works on the trained positions only (model/head.h Note [trained rows]); false: on
  // every position (also with STREAMTUNE_HEAD_ROWS=all in the environment, for A/B timing).
  bool head_trained_rows = true;
  // NEFTune (model.cc Note [NEFTune]): uniform noise on the embeddings of training forwards; 0 = off.
  double neftune_alpha = 0.0;
};

// Every byte of the activation arena for these options (the planner's "activations" term).
size_t model_arena_bytes(const ModelConfig& c, const LoraConfig& lc, const ModelOptions& o);
// The part of it one micro-batch slot takes (Note [layer-major accumulation]).
size_t model_slot_bytes(const ModelConfig& c, const LoraConfig& lc, const ModelOptions& o);
// Device bytes of the extras: the whole extras blob, or with host_extras the final norm plus the
// two lm_head chunk buffers.
size_t model_device_extras_bytes(const ModelConfig& c, const ModelOptions& o);
// Host bytes the Model itself keeps (the pinned extras copy and gather staging with host_extras).
size_t model_host_extras_bytes(const ModelConfig& c, const ModelOptions& o);

// A batch's documents as spans (backend.h Note [document spans]): every run of equal ids within a
// row of `seq` tokens, padded to document_slots(spans) entries (starts: one more, the token count).
struct DocumentSpans {
  std::vector<int32_t> starts, lens;
  int64_t spans = 0, slots = 0, max_len = 0;
};
DocumentSpans document_spans(const std::vector<int32_t>& doc_ids, int64_t seq);

// The segments of a batch (Note [sequence weights]): its rows, or with Batch::segments the largest
// segment id + 1 (at least the rows).
int64_t segment_count(const Batch& b);

class Model {
 public:
  // Allocates the LoRA arena (zeroed, not initialised), the activation arena and the extras.
  static StatusOr<std::unique_ptr<Model>> create(const ModelConfig& c, Backend* be, const LoraConfig& lc,
                                                 const ModelOptions& o);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Extras blob in make_extras_layout(config, act_dtype), host memory (copied now; blocks).
  // With host_extras the blob is copied into the Model's pinned host buffer instead.
  void load_extras_from_host(const void* blob);
  bool host_extras() const { return opts_.host_extras; }
  // Bytes of lm_head copied host -> device so far (host_extras only).
  int64_t lm_head_bytes_streamed() const;
  Status load_extras(const Checkpoint& ck);  // packs from an HF checkpoint dir
  const ExtrasLayout& extras_layout() const { return extras_layout_; }
  LayerLayout layer_layout() const { return make_layer_layout(cfg_, opts_.act_dtype, opts_.base_quant); }

  Lora& lora() { return *lora_; }
  const ModelConfig& config() const { return cfg_; }
  Backend* backend() const { return be_; }

  // Note [sequence weights]: a loss that is a function of per-segment sums of log-probabilities
  // (a preference loss, train/preference_loss.h) passes `seq_weights`: once micro-batch i's head
  // has every token's log p, it is called with i and, per segment, the sum of log p over that
  // segment's targets (in position order, f64), and returns one factor per segment; each target
  // token's cross-entropy gradient is multiplied by its segment's factor (head.h Note [row-weighted
  // head]). A segment is a batch row unless the batch says otherwise (Batch::segments; segment_count).
  // With grad_scales[i] = 1 the gradient is then that of sum_segments factor * (-logp_segment).
  using SequenceWeights = std::function<std::vector<float>(int micro_batch, const std::vector<double>& seq_logp)>;

  // Forward + backward of `batches` (micro-batches of one accumulation window) in one LayerSource
  // step (schedule micro_batch_major). LoRA grads ACCUMULATE (the caller zeroes them per window);
  // micro-batch i's gradient is that of grad_scales[i] * (its loss sum), or with seq_weights as
  // Note [sequence weights] says. Returns each micro-batch's loss sum (sum of -log p over its
  // targets). Blocks at the end to read the losses.
  StatusOr<std::vector<double>> forward_backward(const std::vector<const Batch*>& batches, LayerSource& src,
                                                 const std::vector<float>& grad_scales,
                                                 const SequenceWeights* seq_weights = nullptr);
  // Eval: the loss sum of one batch (no dropout, no gradient).
  StatusOr<double> eval_loss_sum(const Batch& b, LayerSource& src);
  // Eval: per segment (a batch row unless Batch::segments says otherwise), the sum of log p over
  // its targets (f64; 0 for a segment without targets).
  StatusOr<std::vector<double>> eval_sequence_logps(const Batch& b, LayerSource& src);
  // The same for several batches, in batch order, layer-major where the source loads layers (Note
  // [layer-major evaluation]): each result has the bits of its batch evaluated alone.
  StatusOr<std::vector<double>> eval_loss_sums(const std::vector<const Batch*>& bs, LayerSource& src);
  StatusOr<std::vector<std::vector<double>>> eval_sequence_logps(const std::vector<const Batch*>& bs,
                                                                 LayerSource& src);
  // Batches an eval pass over `src` takes through the layers together (1: one at a time).
  int eval_group_size(const LayerSource& src) const;
  // Logits [B*T, V] f32 of one batch (no dropout). Blocks.
  StatusOr<std::vector<float>> forward_logits(const Batch& b, LayerSource& src);
  // DoRA, freshly initialised adapter (Lora::magnitudes_pending): sets every magnitude vector to
  // the row norms of its base weight (PEFT's init), one pass over the layers. A no-op otherwise.
  Status init_dora_magnitudes(LayerSource& src);

  // Dropout masks derive from (seed, micro-batch counter, layer); the counter is part of resume state.
  uint64_t micro_batches_run() const { return micro_counter_; }

  // Layer visits enqueued eagerly / from recorded launch plans so far (model/launch_plans.h).
  const LaunchPlanCache::Stats& launch_plan_stats() const { return plans_->stats(); }
  void set_micro_batches_run(uint64_t n) { micro_counter_ = n; }

 private:
  Model(const ModelConfig& c, Backend* be, const ModelOptions& o);
  struct Arena;
  struct Slot;
  Status validate(const Batch& b) const;
  void upload(const Batch& b, uint64_t micro);
  void upload_document_spans(const Batch& b);
  void embed(const Batch& b, uint64_t micro, bool train = false);
  void gather_label_rows();
  LayerCtx layer_ctx(int l, bool train) const;
  Tensor final_norm() const;
  void forward_layer(int l, LayerSource& src, bool train);
  void backward_layer(int l, LayerSource& src, bool forward_current);
  void run_forward(LayerSource& src, bool train);
  Status forward_one(const Batch& b, LayerSource& src);  // eval: slot 0 through every layer
  Status eval_forward(const Batch& b, LayerSource& src, std::vector<double>* row_logp);
  // Note [layer-major evaluation]: the eval slots, and the evals of several batches (losses[i] and,
  // with rows, rows[i]: batch i's loss sum and head-row log p).
  Slot& slot();
  const Slot& slot() const;
  void carve_eval_slots();
  Status eval_group(const std::vector<const Batch*>& bs, LayerSource& src, std::vector<float>* losses,
                    std::vector<std::vector<double>>* rows);
  Status eval_batches(const std::vector<const Batch*>& bs, LayerSource& src, std::vector<float>* losses,
                      std::vector<std::vector<double>>* rows);
  LaunchPlanCache::Key visit_key(Phase phase, int l, bool train, const LayerWeights& w,
                                 bool forward_current = false) const;

  ModelConfig cfg_;
  Backend* be_;
  ModelOptions opts_;
  std::unique_ptr<Lora> lora_;
  ExtrasLayout extras_layout_;
  void* extras_ = nullptr;             // device: the extras blob, or final norm + head chunk slots
  void* host_extras_ = nullptr;        // host_extras: the extras blob (pinned, or host_pageable_)
  std::vector<char> host_pageable_;    // fallback when pinning fails
  void* host_staging_ = nullptr;       // host_extras: 2 x [max_tokens, H] gather buffers (pinned)
  std::unique_ptr<LmHeadSource> head_;
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::unique_ptr<Arena> a_;
  std::unique_ptr<LaunchPlanCache> plans_;  // Note [layer launch plans]
  uint64_t micro_counter_ = 0;
  int cur_ = 0;  // the arena slot the visit being enqueued works on; past the slots: an eval slot
  // Host copies kept alive while their async uploads are in flight.
  std::vector<int32_t> host_labels_, host_pos_, host_safe_labels_;
  HeadRowPlan host_head_rows_;
  DocumentSpans host_spans_;
  std::vector<uint64_t> host_seeds_;
};

}  // namespace st
