// The single call from cli/ into train/ for `streamtune train`: keeps the subcommand independent
// of the trainer's API, which is written in parallel.
#pragma once

#include <string>

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

struct EvaluateOptions {
  std::string adapter;  // "" = cfg.lora_model_dir, else output_dir's adapter when there is one
  bool base = true;     // also the base model's loss (a fresh LoRA: B = 0)
};

// `streamtune evaluate` (cli/run_evaluate.cc): the eval loss and perplexity of the base and of the
// adapter on the config's eval samples (or its training samples when it has none), one device.
Status run_evaluate(const TrainConfig& cfg, const EvaluateOptions& o);

}  // namespace st
