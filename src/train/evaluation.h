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

// The mean loss over the targets of one pass of `data` (from its epoch 0).
StatusOr<double> mean_eval_loss(Model& m, LayerSource& layers, BatchSource& data, const EvalProgress* progress = nullptr);

}  // namespace st
