// Model's internals shared by its translation units (model.cc: the arena, the training step;
// model_eval.cc: evaluation): the slots, the arena, and the head helpers both use. Not for use
// outside src/model/model*.cc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/head.h"
#include "model/model.h"

namespace st {

// One micro-batch's device state (Note [layer-major accumulation]); per-batch views are prefixes
// of views carved for max_tokens.
struct Model::Slot {
  Tensor loss;                     // f32 [1]
  Tensor seeds;                    // u8 [8 L]: this micro-batch's dropout seed per layer (u64)
  Tensor ids, pos, docs, labels;   // i32 [Nmax]
  Tensor safe_labels;              // i32 [Nmax]: the head rows' labels, ignored ones mapped to row 0
  // The head's rows (head.h Note [trained rows]): i32 [Nmax] each; rows.gather null = every position
  Tensor head_labels, head_gather, head_scatter;
  HeadRows head_rows;
  // The documents as spans (backend.h Note [document spans]): i32 [2 Nmax + 2] and [2 Nmax]
  Tensor doc_starts, doc_lens;
  int64_t doc_spans = 0, doc_slots = 0, max_doc_len = 0;
  std::vector<Tensor> ckpt;        // L+1 x act [Nmax, H]
  std::vector<Tensor> saved;       // L x layer_saved_bytes (u8); kFull: the LoRA t only
  Tensor grad[2];                  // act [Nmax, H]
  Tensor w_label;                  // act [Nmax, H]: the lm_head row of each head row's label (head.h)
  Tensor rstd, m, s, tgt;          // eval slots: f32 [Nmax] each, the head's state (head.h Note [grouped head])
  // the micro-batch it holds
  int64_t n = 0, batch = 0, seq = 0;
  bool has_docs = false;
  uint64_t micro = 0;              // its dropout counter (Model::micro_batches_run numbering)

  // The per-batch vectors from carve_slot_vectors (model.cc), in its order.
  template <class Vectors>
  void set_vectors(const Vectors& v) {
    loss = v.loss;
    seeds = v.seeds;
    Tensor* ints[8] = {&ids, &pos, &docs, &labels, &safe_labels, &head_labels, &head_gather, &head_scatter};
    for (int i = 0; i < 8; ++i) *ints[i] = v.ints[i];
    doc_starts = v.doc_starts;
    doc_lens = v.doc_lens;
  }
};

// Views carved once for max_tokens (Note [layer scratch]).
struct Model::Arena {
  Tensor inv_freq;                     // f32 [D/2]
  std::vector<Slot> slots;             // ModelOptions::micro_batch_slots
  std::vector<Slot> eval_slots;        // Note [layer-major evaluation]: vectors only, in slot 0's memory
  Tensor layer_scratch, head_scratch;  // raw bytes (u8), shared by every slot's visits
};

namespace model_internal {

inline Tensor rows_of(Tensor t, int64_t n) { return Tensor(t.data, t.dtype, {n, t.cols()}); }

inline HeadCtx make_head_ctx(const ModelConfig& c, Backend* be, const ModelOptions& o, int64_t n,
                             const Tensor& scratch, HeadRows rows = {}) {
  HeadCtx h;
  h.vocab_chunk = o.vocab_chunk;
  h.be = be;
  h.cfg = &c;
  h.act = o.act_dtype;
  h.tokens = n;
  h.scratch = scratch.data;
  h.scratch_bytes = scratch.bytes();
  h.chunk_budget_bytes = o.logits_chunk_bytes;
  h.rows = rows;
  return h;
}

// The head's labels: per position, or per compact row (head.h Note [trained rows]).
inline const int32_t* head_labels(const Tensor& labels, const Tensor& head_labels, const HeadRows& rows) {
  return rows.gather ? head_labels.ptr<int32_t>() : labels.ptr<int32_t>();
}

// The segment of each head row (-1: an ignored target or a target in no segment), for the head's
// rows as upload() plans them (head.h Note [trained rows]): compact rows, or every position. Head
// row i (a shifted position) holds the target labels[i + 1] of the same batch row.
inline std::vector<int32_t> head_row_sequences(const Batch& b, bool trained_rows) {
  const std::vector<int32_t> shifted = shift_labels(b.labels, b.batch, b.seq);
  const HeadRowPlan plan = trained_rows ? plan_head_rows(shifted) : HeadRowPlan{};
  auto segment = [&](int64_t i) {
    return b.segments.empty() ? static_cast<int32_t>(i / b.seq) : b.segments[static_cast<size_t>(i + 1)];
  };
  std::vector<int32_t> seq;
  if (plan.compact) {
    seq.assign(static_cast<size_t>(plan.rows), -1);
    for (int64_t r = 0; r < plan.trained; ++r) seq[static_cast<size_t>(r)] = segment(plan.gather[r]);
  } else {
    seq.assign(shifted.size(), -1);
    for (size_t i = 0; i < shifted.size(); ++i)
      if (shifted[i] != kIgnoreIndex) seq[i] = segment(static_cast<int64_t>(i));
  }
  return seq;
}

// Per segment, the sum of the head rows' log p in row order (Note [sequence weights]).
inline std::vector<double> sequence_sums(const std::vector<int32_t>& seq_of_row, const std::vector<double>& row_logp,
                                         int64_t segments) {
  std::vector<double> out(static_cast<size_t>(segments), 0.0);
  for (size_t r = 0; r < seq_of_row.size() && r < row_logp.size(); ++r)
    if (seq_of_row[r] >= 0) out[static_cast<size_t>(seq_of_row[r])] += row_logp[r];
  return out;
}

}  // namespace model_internal

// The two files that include this use the helpers unqualified.
using model_internal::head_labels;
using model_internal::head_row_sequences;
using model_internal::make_head_ctx;
using model_internal::rows_of;
using model_internal::sequence_sums;

}  // namespace st
