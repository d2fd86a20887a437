// One window of preference training on a Model (train/preference_loss.h, train/kto_loss.h), shared
// by Trainer (the whole window) and DataParallelTrainer (a replica's share of a global window).
//
// Note [preference window]: two phases. prepare() runs what the loss compares against before any
// gradient exists -- the micro-batches' reference forwards, together where the layers stream
// (model/model.h Note [layer-major evaluation]; the adapter disabled: its B parameters
// wait in the gradient section, model/lora.h Note [adapter disabled]) and, for KTO, the policy's
// forward over the KL rows, hence z0 -- and builds the rows the model trains (train/pair_batch.h;
// KTO's example rows). forward_backward() then runs the weighted forward-backward of some of the
// prepared micro-batches, accumulating into the gradients (the caller zeroes them between the
// phases), each micro-batch's terms into a PreferenceStats of its own. The weights use the GLOBAL
// window's normalizers -- its units (pairs or KTO examples) and its micro-batches -- so a replica's
// share weighs its rows as one device taking the whole window would; and since each micro-batch
// has its own statistics, merging them in window order gives the same sums wherever they ran.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "data/batch.h"
#include "model/model.h"
#include "model/weights.h"
#include "train/batch_source.h"
#include "train/evaluation.h"
#include "train/pair_batch.h"
#include "train/preference_loss.h"

namespace st {

// Per batch, the reference's summed log p of every segment: the adapter disabled, no dropout, the
// batches together where the layers stream (model/model.h Note [layer-major evaluation]); then
// the adapter back, bit for bit.
StatusOr<std::vector<std::vector<double>>> reference_logps(Model& m, LayerSource& layers,
                                                           const std::vector<const Batch*>& bs);

// A preference micro-batch's units: its pairs (rows 2j, 2j+1) or KTO examples (rows j, their KL rows
// after them) -- half its rows either way.
inline int64_t preference_units(const Batch& b) { return b.batch / 2; }

class PreferenceWindow {
 public:
  // stats gets one PreferenceStats per batch (KTO's z0 already added).
  static StatusOr<PreferenceWindow> prepare(Model& m, LayerSource& layers, const PreferenceConfig& c,
                                            const std::vector<const Batch*>& batches, int64_t window_units,
                                            int64_t window_micro_batches, std::vector<PreferenceStats>* stats);
  // The weighted forward-backward of prepared micro-batches [first, first + n): their loss terms
  // into stats[first ..]; returns Model::forward_backward's sums.
  StatusOr<std::vector<double>> forward_backward(Model& m, LayerSource& layers, size_t first, size_t n,
                                                 std::vector<PreferenceStats>* stats) const;
  size_t size() const { return pbs_.size(); }

 private:
  PreferenceConfig c_;
  std::vector<PairBatch> pbs_;            // the trained rows (KTO: the examples, batch.kto their labels)
  std::vector<std::vector<double>> ref_;  // per micro-batch, per row (empty without a reference)
  std::vector<double> z0_;                // KTO: per micro-batch
  double per_unit_ = 1.0;                 // 1 / the window's units
  int64_t window_micro_batches_ = 1;
};

// Eval micro-batches' preference terms, each batch's into its own PreferenceStats (the group's
// references, then the policy's forwards, through the layers together).
StatusOr<std::vector<PreferenceStats>> preference_eval_batches(Model& m, LayerSource& layers, const PreferenceConfig& c,
                                                               const std::vector<Batch>& bs);
// Their PreferenceStats::sums(), one per batch (train/evaluation.h Note [eval figures]).
StatusOr<std::vector<EvalFigures>> preference_eval_figures(Model& m, LayerSource& layers, const PreferenceConfig& c,
                                                           const std::vector<Batch>& bs);
// A pass's figures merged in batch order; InvalidArgument when they hold no pair (or KTO example).
StatusOr<PreferenceStats> preference_stats_of(const PreferenceConfig& c, const std::vector<EvalFigures>& figures);
// The preference loss and its logged values over one pass of `data` (from its epoch 0).
StatusOr<PreferenceStats> evaluate_preference(Model& m, LayerSource& layers, const PreferenceConfig& c,
                                              BatchSource& data, const EvalProgress* progress = nullptr);

}  // namespace st
