// The single call from cli/ into train/ for `streamtune train`: keeps the subcommand independent
// of the trainer's API, which is written in parallel.
#pragma once

#include "core/status.h"
#include "train/train_config.h"

namespace st {

// Runs a whole training job as configured (already validated by load_train_config). Blocks
// until done; returns the first error (Unimplemented while the trainer is not wired in).
Status run_train(const TrainConfig& cfg);

// `train --plan`: the memory plan this config gets on this device (the banner's plan lines), from
// the model's config alone -- no store is built, no weights are read, no data is tokenized -- or
// the planner's refusal with what would fit. For "will this model fit my card?" in a second.
Status plan_train(const TrainConfig& cfg);

}  // namespace st
