// The head: final RMSNorm + lm_head + softmax cross-entropy (design.md §1).
//
// Note [vocab-chunked head]
// The head walks the vocabulary in chunks of `vocab_chunk` lm_head rows (outer loop) and the
// tokens in chunks of `rows` (inner loop), keeping an online softmax per token (Backend::ce_chunk):
// running max m, running sum s, the target logit, and, when training, acc = sum_j p_j W_j in f32
// (rescaled whenever m grows), so that after the last chunk
//   loss = m + log s - target,   d(loss)/d(xn) = acc / s - W[label]   (Backend::ce_finish).
// One GEMM for the logits and one for acc per (vocabulary, token) chunk: no more work than a
// whole-vocabulary head, never [tokens, V] logits, and only one vocabulary chunk of the lm_head
// needs to be on the device at a time — so the lm_head can stream from host memory through two
// chunk buffers like a layer (LmHeadSource). Resident and streamed heads run the very same
// sequence of kernels on the same shapes, which is why they are bit-identical.
//
// Labels: `shifted` labels, already aligned so shifted[t] is the target of position t (HF
// label shift: shifted[t] = labels[t+1] within the same row, ignore at each row's last position).
// Use shift_labels() to build them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "io/hf_config.h"
#include "model/weights.h"

namespace st {

constexpr int64_t kDefaultVocabChunk = 16384;  // lm_head rows per chunk (Note [vocab-chunked head])

// Host-side HF label shift for B rows of T: out[b*T+t] = labels[b*T+t+1], -100 at t = T-1.
std::vector<int32_t> shift_labels(const std::vector<int32_t>& labels, int64_t batch, int64_t seq);

// Tokens per logits chunk [rows, vocab_chunk] for a budget in bytes (at least 1, at most `tokens`).
int64_t head_chunk_rows(int64_t vocab_chunk, int64_t tokens, DType act, size_t chunk_budget_bytes);
size_t head_scratch_bytes(const ModelConfig& c, int64_t tokens, DType act, int64_t vocab_chunk,
                          size_t chunk_budget_bytes);

// The lm_head's vocabulary chunks, handed to the head one at a time in order 0..n-1 per pass.
class LmHeadSource {
 public:
  virtual ~LmHeadSource() = default;
  int64_t num_chunks() const { return (vocab_ + chunk_ - 1) / chunk_; }
  int64_t chunk_rows(int64_t c) const { return std::min(chunk_, vocab_ - c * chunk_); }
  virtual void begin_pass() {}
  // Rows [c*chunk, c*chunk + chunk_rows(c)) of the lm_head, readable by compute-stream work
  // enqueued after this call.
  virtual Tensor acquire(int64_t c) = 0;
  // Compute-stream work reading chunk c has been enqueued.
  virtual void release(int64_t c) { (void)c; }
  int64_t bytes_streamed() const { return bytes_streamed_; }

 protected:
  LmHeadSource(int64_t vocab, int64_t chunk) : vocab_(vocab), chunk_(chunk) {}
  int64_t vocab_, chunk_;
  int64_t bytes_streamed_ = 0;
};

// Views into an lm_head [V, H] that lives on the device.
std::unique_ptr<LmHeadSource> resident_lm_head(Tensor lm_head, int64_t vocab_chunk);
// An lm_head [V, H] in host memory (pinned for asynchronous copies), streamed chunk by chunk into
// two device buffers of vocab_chunk x H elements each (`slots`: 2 x that many bytes of backend
// memory, Note [head chunk streaming] in head.cc). The host memory must outlive the source.
std::unique_ptr<LmHeadSource> streamed_lm_head(Backend* be, const void* host_lm_head, DType dtype, int64_t vocab,
                                               int64_t hidden, int64_t vocab_chunk, void* slots);
size_t lm_head_slot_bytes(const ModelConfig& c, DType dtype, int64_t vocab_chunk);  // both slots

// Note [trained rows]
// Only positions with a label reach the loss; the rest (prompt tokens with train_on_inputs false,
// padding, each row's last position) get a zero gradient. The head's work -- two [rows, V] x H
// products and passes over [rows, V] logits, a large share of a small model's step with a 150k
// vocabulary -- is therefore done on the trained positions only: the head gathers them into
// `rows` compact rows, runs as before on those, and gathers its input gradient back, every
// untrained position reading one row of exact zeros. `rows` is the count of trained positions
// plus that zero row, rounded up to kHeadRowQuantum (so a run sees a bounded set of GEMM shapes);
// where that is not fewer than the positions, the head runs on all of them as it always did
// (so every position trained -- a benchmark batch -- is unchanged). Positions' losses and
// gradients are their own either way (row-independent GEMMs and softmax); only the order in
// which ce_finish sums the loss differs.
constexpr int64_t kHeadRowQuantum = 64;

struct HeadRowPlan {
  bool compact = false;           // false: the head runs on every position
  int64_t rows = 0;               // compact rows (a multiple of kHeadRowQuantum, or 0: none trained)
  int64_t trained = 0;            // rows [0, trained) are trained positions; row `trained` is the zero row
  std::vector<int32_t> gather;    // [rows] position of each compact row (padding: an untrained position)
  std::vector<int32_t> scatter;   // [positions] compact row of each position (untrained: `trained`)
  std::vector<int32_t> labels;    // [rows] shifted label of each compact row (padding: -100)
};
// From shifted labels (head.h label convention; -100 = ignored).
HeadRowPlan plan_head_rows(const std::vector<int32_t>& shifted_labels);

// The head's rows on the device (HeadRowPlan's gather and scatter in backend memory).
struct HeadRows {
  const int32_t* gather = nullptr;   // null: every position, as before
  const int32_t* scatter = nullptr;
  int64_t rows = 0, trained = 0;
};

struct HeadCtx {
  Backend* be = nullptr;
  const ModelConfig* cfg = nullptr;
  DType act = DType::kF32;
  int64_t tokens = 0;
  void* scratch = nullptr;  // head_scratch_bytes(...) bytes of backend memory
  size_t scratch_bytes = 0;
  int64_t vocab_chunk = kDefaultVocabChunk;
  size_t chunk_budget_bytes = 64ull << 20;
  HeadRows rows;  // Note [trained rows]: with rows.gather, `labels` and `w_label` are per compact row
};

// Note [row-weighted head]: a preference loss (train/preference_loss.h) is a function of each
// sequence's summed log-probabilities, so its gradient is the cross-entropy gradient of every
// token weighed by its sequence's factor -- known only once every token's log p is. The head's
// online softmax has it before the gradient is formed: after the vocabulary pass, log p of each
// head row is target - (m + log s); `row_weights` gets those (host, one per head row; meaningless
// for ignored rows) and returns one factor per head row, which ce_finish multiplies into that row's
// gradient. That costs one host round trip (3 x 4 bytes a row) in the middle of the step; the
// logits are computed once, as for plain cross-entropy.
using HeadRowWeights = std::function<std::vector<float>(const std::vector<double>& row_logp)>;

// loss_sum (f32 [1], backend memory) += sum of -log p(target) over counted positions;
// dx[N,H] = d(grad_scale * loss_sum)/dx (with row_weights: row r's part times its factor). x: the last layer's output [N,H]. labels: shifted, int32
// backend memory [N]; w_label [N,H]: the lm_head row of each label (any row where ignored). With
// ctx.rows.gather (Note [trained rows]) labels and w_label hold the compact rows' instead
// ([ctx.rows.rows]). Enqueues on compute.
void head_forward_backward(const HeadCtx& ctx, Tensor final_norm, LmHeadSource& head, Tensor x,
                           const int32_t* labels, Tensor w_label, float grad_scale, Tensor loss_sum, Tensor dx,
                           const HeadRowWeights* row_weights = nullptr);

// Loss only (no gradient written anywhere the caller sees). With row_logp: log p(target) of every
// head row copied to the host too (blocks; meaningless for ignored rows).
void head_loss(const HeadCtx& ctx, Tensor final_norm, LmHeadSource& head, Tensor x, const int32_t* labels,
               Tensor loss_sum, std::vector<double>* row_logp = nullptr);

// Note [grouped head]: the losses of several batches in one pass over the vocabulary: each lm_head
// chunk is acquired once and used by every batch in turn, so a streamed lm_head is copied once for
// the group (model/model.h Note [layer-major evaluation]). Each batch keeps its own normalized rows
// (in its x, or in the buffer another batch left) and online-softmax state, and runs the kernels of
// head_loss on the same shapes -- its token chunks are those head_loss takes for its rows -- so
// each gets head_loss's bits.
struct HeadLossBatch {
  HeadCtx ctx;                  // its tokens and rows; ctx.scratch: the head scratch (its logits block)
  Tensor x;                     // [>= every batch's tokens, H]: the last layer's output in its first rows (overwritten)
  const int32_t* labels = nullptr;
  Tensor loss_sum;              // f32 [1], += as head_loss
  Tensor rstd, m, s, tgt;       // f32, at least the head's rows each: this batch's state
  std::vector<double>* row_logp = nullptr;  // as head_loss's (blocks)
};
// `spare`: one free act buffer of at least every batch's [tokens, H].
void head_losses(const std::vector<HeadLossBatch>& bs, Tensor spare, Tensor final_norm, LmHeadSource& head);

// Logits of every position copied to host_logits ([N, V] f32, host memory). Blocks the host.
void head_logits(const HeadCtx& ctx, Tensor final_norm, LmHeadSource& head, Tensor x, float* host_logits);

}  // namespace st
