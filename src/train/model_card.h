// The README.md model card written beside the final adapter, as PEFT's save_pretrained writes one
// (its YAML header is what the Hugging Face Hub reads: library_name peft, base_model when it is a
// Hub id), with what a reader of the directory wants to know: the base, the LoRA settings, the
// data and chat template, the schedule and the last logged losses, and how to load it.
#pragma once

#include <string>

#include "core/status.h"
#include "train/train_config.h"

namespace st {

// The card's text. `metrics_jsonl` (output_dir/metrics.jsonl) gives the last train and eval losses
// and the step count; unreadable lines are skipped (the card is a summary, not a record).
std::string model_card_text(const TrainConfig& cfg, const std::string& metrics_jsonl);

// Writes output_dir/README.md unless one is there that is not ours (the card ends with a line that
// says the next run rewrites it; a README.md without that line -- the user's -- is never replaced).
// Returns whether it wrote.
StatusOr<bool> write_model_card(const TrainConfig& cfg);

}  // namespace st
