// Trainer: the LoRA training loop (design.md §1).
//
//   for each optimizer step: take gradient_accumulation_steps micro-batches from a BatchSource,
//   zero LoRA grads, Model::forward_backward (one LayerSource step for the window), grad-norm +
//   clip + AdamW (train/optimizer.h) at the scheduled LR, log metrics.jsonl; every eval_steps
//   (and at the end) evaluate the eval set; every save_steps write a checkpoint (checkpoint.h);
//   at the end export the PEFT adapter to output_dir.
//
// Failure policy: a base-weight load error (LayerSource::status) or a non-finite loss / grad norm
// fails the run before anything of that step is saved, so the last checkpoint stays good.
//
// Where base weights come from is pluggable: TrainerParts carries the ModelConfig, a factory for
// the LayerSource (resident: hf_resident_parts below; streamed: stream/) and a loader for the
// extras. Not thread-safe; the backend must outlive the Trainer.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/model.h"
#include "model/weights.h"
#include "train/batch_source.h"
#include "train/checkpoint.h"
#include "train/evaluation.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/preference_loss.h"
#include "train/train_config.h"

namespace st {

using LayerSourceFactory =
    std::function<StatusOr<std::unique_ptr<LayerSource>>(Backend* be, const LayerLayout& layout)>;

struct TrainerParts {
  ModelConfig model;
  std::string base_model_name;                        // adapter_config.json base_model_name_or_path
  LayerSourceFactory make_layers;                      // called once, with the Model's layer layout
  std::function<Status(Model& m)> load_extras;         // fills embedding / norm / lm_head
  bool host_extras = false;                            // ModelOptions::host_extras (the plan's choice)
  Recompute recompute = Recompute::kFull;              // ModelOptions::recompute (the plan's choice)
  int micro_batch_slots = 1;                           // ModelOptions::micro_batch_slots (the plan's choice)
  uint64_t fused_attention_allowance = 0;              // ModelOptions::fused_attention_allowance (the plan's)
  uint64_t launch_plan_bytes = 0;                      // ModelOptions::launch_plan_bytes (the plan's)
};

// Resident parts from an HF checkpoint dir (config.json + *.safetensors): every layer packed to
// the layout's dtype and copied to the device once (model/resident_source.h).
StatusOr<TrainerParts> hf_resident_parts(const std::string& hf_dir);

// Activation dtype the trainer uses: f32 on the CPU backend; the config dtype on CUDA.
StatusOr<DType> training_act_dtype(const TrainConfig& tc, const Backend& be);
// The checks every trainer (single device or data parallel) applies to a TrainConfig before
// building anything: batch and sequence sizes, loss_normalization, step counts.
Status check_trainer_config(const TrainConfig& tc);
// Early stopping and load_best_model_at_end read evaluations: InvalidArgument, naming the key, when a
// run has no eval set (has_eval false) or early stopping has no evaluation during training.
Status check_eval_plan(const TrainConfig& tc, bool has_eval);
// Note [loss watchdog] (trainer.cc): looks at the last entry of `log_history` at the end of a step;
// true when loss_watchdog_patience logged losses in a row were above loss_watchdog_threshold.
bool watch_loss(const TrainConfig& tc, const Json& log_history, int64_t* violations);
// Puts `data` where a checkpointed run left it: epoch st.epoch started (when it was), then seeked
// (a DataLoaderSource) or replayed past its first st.batches_in_epoch micro-batches. Returns that count.
StatusOr<int64_t> seek_checkpoint_data(const TrainerState& st, BatchSource& data);
// LoRA config from the TrainConfig (targets parsed; adapter must be "lora" or "qlora").
StatusOr<LoraConfig> lora_config_from(const TrainConfig& tc);
// How the frozen base is stored: adapter "qlora" = NF4 linears (model/weights.h Note [NF4 base
// layout]), "lora" = the training dtype.
StatusOr<BaseQuant> base_quant_from(const TrainConfig& tc);

class Trainer {
 public:
  // Validates the config, builds Model + LayerSource + Optimizer, initialises LoRA (PEFT init with
  // tc.seed, or loads tc.lora_model_dir). Allocation failures return ResourceExhausted.
  static StatusOr<std::unique_ptr<Trainer>> create(const TrainConfig& tc, Backend* be, TrainerParts parts);
  ~Trainer();

  // Runs the whole training: max_steps (or num_epochs over `data`), writes output_dir/metrics.jsonl
  // and the final adapter (output_dir/adapter_model.safetensors + adapter_config.json). With
  // tc.resume_from_checkpoint, first restores that checkpoint (checkpoint.h), keeps the
  // metrics.jsonl lines up to its step and appends. When stop_requested() turns true, finishes the
  // step, writes a checkpoint and returns OK with interrupted() true (no final adapter).
  Status train(BatchSource& data);
  // Evaluated every eval_steps and at the end (lines {"step","eval_loss","eval_ppl"} in
  // metrics.jsonl). Not owned; must outlive train().
  void set_eval_data(BatchSource* eval) { eval_data_ = eval; }
  // Restores a checkpoint dir (refusing a different model/config) and positions `data` after the
  // last micro-batch the checkpointed run consumed.
  Status resume(const std::string& ckpt_dir, BatchSource& data);
  // Writes output_dir/checkpoint-<step> now (atomic), then applies save_total_limit.
  Status save_checkpoint(BatchSource& data);
  // One optimizer step on the given micro-batches (an accumulation window). Returns its metrics.
  StatusOr<StepMetrics> train_step(const std::vector<Batch>& window);
  // Mean loss per target token over one pass of `data` (no dropout, no gradient); with rl the
  // preference loss over its pairs.
  StatusOr<double> evaluate(BatchSource& data);
  // rl: the preference loss and its logged values over one pass of `data`'s pairs.
  StatusOr<PreferenceStats> evaluate_preference(BatchSource& data);
  const PreferenceConfig& preference() const { return pref_; }
  Status save_adapter(const std::string& dir) const;

  // Called after every optimizer step (progress bars, tests).
  std::function<void(const StepMetrics&)> on_step;
  std::function<void(const EvalMetrics&)> on_eval;
  // Inside each eval pass (evaluate, evaluate_preference): micro-batches done of the pass's total.
  EvalProgress on_eval_progress;
  // Notices for the user (checkpoint written, resumed from ...).
  std::function<void(const std::string&)> on_message;
  // Polled after every step (SIGINT); true = checkpoint and stop.
  std::function<bool()> stop_requested;

  bool interrupted() const { return interrupted_; }
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  int64_t steps_taken() const { return opt_->steps_taken(); }

  Model& model() { return *model_; }
  LayerSource& layers() { return *layers_; }
  int64_t total_steps() const { return sched_.total_steps; }
  // The run's optimizer steps (max_steps, or num_epochs over `data`) and the step counts of the
  // ratio keys (resolve_step_ratios). train() calls it; callers that show progress call it first.
  Status plan_steps(BatchSource& data);

 private:
  Trainer() = default;
  StatusOr<bool> fill_window(BatchSource& data, std::vector<Batch>* window);
  Status start_epoch(BatchSource& data, int64_t epoch);
  Status log_step(const StepMetrics& m);
  // rl (train/preference_loss.h).
  StatusOr<std::vector<double>> preference_forward_backward(const std::vector<Batch>& window, PreferenceStats* stats);
  StatusOr<BestEval::Verdict> run_eval(int64_t step);
  // load_best_model_at_end, or early stopping (which implies it): the final adapter is the best eval's.
  bool keep_best() const { return eval_data_ && (tc_.load_best_model_at_end || tc_.early_stopping_patience > 0); }
  Status save_final_adapter();
  Status position_data(const TrainerState& st, BatchSource& data);
  Json fingerprint(BatchSource& data) const;

  TrainConfig tc_;
  PreferenceConfig pref_;  // with rl
  Backend* be_ = nullptr;
  TrainerParts parts_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<LayerSource> layers_;
  std::unique_ptr<Optimizer> opt_;
  LrSchedule sched_;
  DType act_ = DType::kF32;
  BatchSource* eval_data_ = nullptr;
  std::unique_ptr<MetricsWriter> metrics_;
  // Everything below is saved in checkpoints (TrainerState).
  int64_t epoch_ = 0;
  bool epoch_started_ = false;
  int64_t batches_in_epoch_ = 0;
  int64_t tokens_ = 0;
  double elapsed_s_ = 0;
  double loss_acc_ = 0;
  int64_t loss_count_ = 0;
  int64_t tokens_at_log_ = 0;
  double elapsed_at_log_ = 0;
  ExtraMeans extra_means_;  // StepMetrics::extra since the last log (not in checkpoints)
  int64_t last_eval_step_ = -1;
  Json log_history_ = Json::array();
  BestEval best_;
  int64_t watchdog_violations_ = 0;  // not in checkpoints (Note [loss watchdog])
  std::string last_checkpoint_;
  bool interrupted_ = false;
};

}  // namespace st
