// Evaluation passes over a BatchSource, shared by Trainer and DataParallelTrainer: the batches go
// to the Model in groups, which it takes through the layers together where the layers stream
// (model/model.h Note [layer-major evaluation]) -- the same bits as one batch at a time.
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "data/batch.h"
#include "model/model.h"
#include "model/weights.h"
#include "train/batch_source.h"

namespace st {

// Up to n more batches of `data`'s current epoch (fewer, or none, at its end).
StatusOr<std::vector<Batch>> next_batches(BatchSource& data, int n);

// Pointers to the batches, in order.
std::vector<const Batch*> batch_pointers(const std::vector<Batch>& bs);

// Called as an eval pass goes: micro-batches done, of the pass's total.
using EvalProgress = std::function<void(int64_t done, int64_t total)>;

// Note [eval figures]: an eval pass is a sum over its micro-batches in batch order, and each
// micro-batch's part of it is a few numbers -- its loss sum and target count, or with rl its
// PreferenceStats::sums() (train/preference_step.h). A pass split over devices
// (dist/data_parallel.h: rank r takes the batches i with i % world == r, and the figures are
// gathered by a host sum whose every element is non-zero on one rank only, so exact) adds the same
// numbers in the same order as one device: the same bits, whatever the device count.
using EvalFigures = std::vector<double>;
// The figures of a group of micro-batches, one per batch, in order.
using GroupFigures = std::function<StatusOr<std::vector<EvalFigures>>(const std::vector<Batch>& bs)>;

// One pass of `data` (from its epoch 0) in groups of up to `group` batches: every batch's figures,
// in batch order; `progress` after each group.
StatusOr<std::vector<EvalFigures>> eval_pass(BatchSource& data, int group, const GroupFigures& fn,
                                             const EvalProgress* progress = nullptr);
// {loss sum, target count} of each batch, the group through the layers together (Model::eval_loss_sums).
StatusOr<std::vector<EvalFigures>> eval_loss_figures(Model& m, LayerSource& layers, const std::vector<Batch>& bs);
// The mean loss per target of a pass's {loss sum, target count} figures, added in order.
StatusOr<double> mean_loss_of(const std::vector<EvalFigures>& figures);

// The mean loss over the targets of one pass of `data` (from its epoch 0).
StatusOr<double> mean_eval_loss(Model& m, LayerSource& layers, BatchSource& data, const EvalProgress* progress = nullptr);

}  // namespace st
