// Trainer: the LoRA training loop (design.md §1).
//
//   for each optimizer step: take gradient_accumulation_steps micro-batches from a BatchSource,
//   zero LoRA grads, Model::forward_backward (one LayerSource step for the window), grad-norm +
//   clip + AdamW (train/optimizer.h) at the scheduled LR, log metrics.jsonl; at the end export
//   the PEFT adapter to output_dir.
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
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/train_config.h"

namespace st {

using LayerSourceFactory =
    std::function<StatusOr<std::unique_ptr<LayerSource>>(Backend* be, const LayerLayout& layout)>;

struct TrainerParts {
  ModelConfig model;
  std::string base_model_name;                        // adapter_config.json base_model_name_or_path
  LayerSourceFactory make_layers;                      // called once, with the Model's layer layout
  std::function<Status(Model& m)> load_extras;         // fills embedding / norm / lm_head
};

// Resident parts from an HF checkpoint dir (config.json + *.safetensors): every layer packed to
// the layout's dtype and copied to the device once (model/resident_source.h).
StatusOr<TrainerParts> hf_resident_parts(const std::string& hf_dir);

// Activation dtype the trainer uses: f32 on the CPU backend; the config dtype on CUDA.
StatusOr<DType> training_act_dtype(const TrainConfig& tc, const Backend& be);
// LoRA config from the TrainConfig (targets parsed; adapter must be "lora").
StatusOr<LoraConfig> lora_config_from(const TrainConfig& tc);

class Trainer {
 public:
  // Validates the config, builds Model + LayerSource + Optimizer, initialises LoRA (PEFT init with
  // tc.seed, or loads tc.lora_model_dir). Allocation failures return ResourceExhausted.
  static StatusOr<std::unique_ptr<Trainer>> create(const TrainConfig& tc, Backend* be, TrainerParts parts);
  ~Trainer();

  // Runs the whole training: max_steps (or num_epochs over `data`), writes output_dir/metrics.jsonl
  // and the final adapter (output_dir/adapter_model.safetensors + adapter_config.json).
  Status train(BatchSource& data);
  // One optimizer step on the given micro-batches (an accumulation window). Returns its metrics.
  StatusOr<StepMetrics> train_step(const std::vector<Batch>& window);
  // Mean loss per target token over one pass of `data` (no dropout, no gradient).
  StatusOr<double> evaluate(BatchSource& data);
  Status save_adapter(const std::string& dir) const;

  // Called after every optimizer step (progress bars, tests).
  std::function<void(const StepMetrics&)> on_step;

  Model& model() { return *model_; }
  LayerSource& layers() { return *layers_; }
  int64_t total_steps() const { return sched_.total_steps; }

 private:
  Trainer() = default;
  Status plan_steps(BatchSource& data);
  StatusOr<bool> fill_window(BatchSource& data, std::vector<Batch>* window);

  TrainConfig tc_;
  Backend* be_ = nullptr;
  TrainerParts parts_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<LayerSource> layers_;
  std::unique_ptr<Optimizer> opt_;
  LrSchedule sched_;
  int64_t epoch_ = 0;
  bool epoch_started_ = false;
  int64_t tokens_ = 0;
  double elapsed_s_ = 0;
};

}  // namespace st
