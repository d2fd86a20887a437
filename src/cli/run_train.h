// The single call from cli/ into train/ for `streamtune train`: keeps the subcommand independent
// of the trainer's API, which is written in parallel.
#pragma once

#include "core/status.h"
#include "train/train_config.h"

namespace st {

// Runs a whole training job as configured (already validated by load_train_config). Blocks
// until done; returns the first error (Unimplemented while the trainer is not wired in).
Status run_train(const TrainConfig& cfg);

}  // namespace st
