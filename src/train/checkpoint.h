// Training checkpoints: output_dir/checkpoint-N/ holds everything a killed run needs to continue
// bit-identically (losses and final adapter equal to an uninterrupted run):
//
//   adapter_model.safetensors, adapter_config.json   the PEFT adapter at step N (usable as is)
//   optimizer.safetensors   lora.params / lora.adam_m / lora.adam_v: the LoRA arena's f32
//                           sections (Note [lora arena] in model/lora.h, padding included)
//   trainer_state.json      TrainerState below: step, epoch, data position, dropout counter,
//                           logging accumulators, log history and the config fingerprint
//
// Writes are atomic at the directory level: everything goes to checkpoint-N.tmp.<pid>/ (each
// file fsync'd), which is then renamed to checkpoint-N; a kill at any moment leaves either the
// previous complete checkpoints or the new one, never a partial checkpoint-N. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/json.h"
#include "core/status.h"
#include "data/data_loader.h"
#include "io/hf_config.h"
#include "model/lora.h"
#include "train/best_eval.h"
#include "train/train_config.h"

namespace st {

struct TrainerState {
  int64_t global_step = 0;         // optimizer steps taken (the AdamW step count)
  int64_t total_steps = 0;         // LR schedule horizon
  int64_t epoch = 0;               // the trainer's epoch counter
  bool epoch_started = false;      // start_epoch(epoch) has been called on the source
  int64_t batches_in_epoch = 0;    // micro-batches consumed from the current epoch
  bool has_data_position = false;  // the source is a DataLoaderSource (exact seek)
  LoaderPosition data_position;
  uint64_t micro_batches_run = 0;  // LoRA dropout RNG counter (Model::micro_batches_run)
  int64_t tokens = 0;              // cumulative trained tokens
  double elapsed_s = 0;
  // Logging window in progress (logging_steps > 1): what the next logged mean is made of.
  double loss_acc = 0;
  int64_t loss_count = 0;
  int64_t tokens_at_log = 0;
  double elapsed_at_log = 0;
  Json fingerprint;                // config_fingerprint() of the run that wrote it
  Json log_history = Json::array();  // logged {step, loss, lr, grad_norm} and {step, eval_loss}
  BestEval best;                   // "best_eval" (absent in checkpoints of runs before it: none yet)
};

Json trainer_state_to_json(const TrainerState& s);
StatusOr<TrainerState> trainer_state_from_json(const Json& j, const std::string& what);

// What must not change between a checkpoint and the run resuming from it: model architecture
// and sizes, LoRA r/alpha/dropout/targets, dtype, sequence length, batch shape, optimiser and
// schedule settings, seed, data order settings and the micro-batches per epoch.
Json config_fingerprint(const TrainConfig& tc, const ModelConfig& mc, DType act_dtype, int64_t batches_per_epoch);
// InvalidArgument naming every differing key ("lora_r: checkpoint 4, this run 8") and the dir.
Status check_fingerprint(const Json& saved, const Json& now, const std::string& ckpt_dir);

std::string checkpoint_dir(const std::string& output_dir, int64_t step);
// Complete checkpoints (checkpoint-<N> dirs with a trainer_state.json), sorted by N.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& output_dir);
// `spec` "true" = the latest complete checkpoint in output_dir (NotFound when there is none);
// "auto" = the same, or "" when there is none (start fresh: axolotl's auto_resume_from_checkpoints);
// otherwise a checkpoint directory (NotFound when it holds no trainer_state.json).
StatusOr<std::string> resolve_resume_checkpoint(const std::string& spec, const std::string& output_dir);

// Before a run writes anything: output_dir must be a directory (or not exist yet), must not be or
// hold the base model or a dataset (metrics.jsonl, adapter files and checkpoints are written
// there), and may hold checkpoint-<N> directories only as complete checkpoints (one of another
// kind would be replaced when step N is saved). Errors name output_dir and the path in the way.
Status check_output_dir(const TrainConfig& tc);

// Writes checkpoint-<state.global_step> under output_dir atomically (see file comment) and
// returns its path. An existing checkpoint of the same step is replaced only once the new one
// is complete.
StatusOr<std::string> write_checkpoint(const std::string& output_dir, const Lora& lora, Backend* be,
                                       const std::string& base_model_name, const TrainerState& state);
// Reads trainer_state.json, refuses a fingerprint different from `expect`, then restores the
// LoRA params and AdamW moments into `lora`.
StatusOr<TrainerState> read_checkpoint(const std::string& dir, const Json& expect, Lora* lora, Backend* be);

// Deletes the oldest checkpoints until at most `limit` remain (limit <= 0: keep all); never the
// one of step `keep_step` nor that of `best_step` (the best eval's, kept for the final adapter as
// HF keeps its best_model_checkpoint; 0 = none).
Status prune_checkpoints(const std::string& output_dir, int64_t limit, int64_t keep_step, int64_t best_step = 0);

// Where the tokenizer saved with an adapter is: `adapter_dir` when it holds tokenizer.json or
// tokenizer.model, else the output_dir above it when adapter_dir is one of train's checkpoint-N
// directories (train saves the tokenizer once, in output_dir); "" when there is none.
std::string saved_tokenizer_dir(const std::string& adapter_dir);

}  // namespace st
