// `streamtune evaluate` (axolotl's `evaluate`): the eval loss of the base and of a trained adapter
// on a config's data, with the run's own tokenization, masking, batching and memory plan.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "backend/backend.h"
#include "cli/run_train.h"
#include "core/file.h"
#include "train/base_weights.h"
#include "train/loader_source.h"
#include "train/train_data.h"
#include "train/trainer.h"

namespace st {
namespace {

// The adapter asked for: --adapter, else lora_model_dir, else output_dir's when it holds one.
std::string adapter_of(const TrainConfig& cfg, const EvaluateOptions& o) {
  if (!o.adapter.empty()) return o.adapter;
  if (!cfg.lora_model_dir.empty()) return cfg.lora_model_dir;
  if (!cfg.output_dir.empty() && file_exists(path_join(cfg.output_dir, "adapter_model.safetensors"))) return cfg.output_dir;
  return "";
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void print_row(const std::string& what, double loss, double seconds) {
  std::printf("  %-40s eval_loss %.6f  perplexity %.4f  (%.1f s)\n", what.c_str(), loss, std::exp(loss), seconds);
  std::fflush(stdout);
}

}  // namespace

Status run_evaluate(const TrainConfig& given, const EvaluateOptions& o) {
  const std::string adapter = adapter_of(given, o);
  if (adapter.empty() && !o.base)
    return InvalidArgument("nothing to evaluate: --no-base and no adapter (give --adapter DIR, lora_model_dir, or "
                           "an output_dir that holds one)");
  if (!adapter.empty() && !file_exists(path_join(adapter, "adapter_config.json")))
    return NotFound(Str() << "adapter " << adapter << ": no adapter_config.json there");
  // One device, no training: the keys that only shape a training run are set aside.
  TrainConfig cfg = given;
  cfg.lora_model_dir.clear();
  cfg.resume_from_checkpoint.clear();
  cfg.early_stopping_patience = 0;
  cfg.load_best_model_at_end = false;
  cfg.lora_dropout = 0;
  ASSIGN_OR_RETURN(DeviceKind kind, device_kind_for(cfg.device));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, make_backend(kind), "device '" << cfg.device << "'");
  ASSIGN_OR_RETURN(DType act, training_act_dtype(cfg, *be));
  ASSIGN_OR_RETURN(BaseWeights bw, open_base_weights(cfg, be.get(), act));
  cfg.stream_compress = bw.stream_compress;
  ASSIGN_OR_RETURN(TrainData td, load_train_data(cfg, bw.parts.model));
  const bool eval_set = td.eval != nullptr;
  const std::shared_ptr<std::vector<Sample>> samples = eval_set ? td.eval : td.train;
  int64_t targets = 0;
  for (const Sample& s : *samples)
    for (int32_t l : s.labels) targets += l != kIgnoreIndex;
  std::printf("streamtune evaluate: %s on %s (%zu samples, %lld target tokens), %s\n", cfg.base_model.c_str(),
              eval_set ? "the eval data" : "the training datasets (the config has no eval data)", samples->size(),
              static_cast<long long>(targets), be->description().c_str());
  std::fflush(stdout);
  DataLoaderSource data(samples, loader_options(cfg, td.pad_id, /*train=*/false, *be));
  ASSIGN_OR_RETURN(auto trainer, Trainer::create(cfg, be.get(), std::move(bw.parts)));
  if (!cfg.rl.empty()) {  // train/preference_loss.h: the pairs' loss (DPO / IPO against the base)
    const std::string kind = preference_loss_kind(cfg);
    auto row = [&](const std::string& label) -> Status {
      const Clock::time_point t0 = Clock::now();
      ASSIGN_OR_RETURN(PreferenceStats s, trainer->evaluate_preference(data), "evaluating " << label);
      std::printf("  %-40s eval_loss %.6f (%s, %lld %s)", label.c_str(), s.mean_loss(), kind.c_str(),
                  static_cast<long long>(s.pairs()), cfg.rl == "kto" ? "examples" : "pairs");
      for (const auto& [k, v] : s.metrics()) std::printf("  %s %.4f", k.c_str(), v);
      std::printf("  (%.1f s)\n", seconds_since(t0));
      std::fflush(stdout);
      return Status::OK();
    };
    if (o.base) RETURN_IF_ERROR(row(uses_reference(trainer->preference().loss) ? "base (the reference itself)" : "base"));
    if (adapter.empty()) return Status::OK();
    RETURN_IF_ERROR(trainer->model().lora().load_peft(adapter), "adapter " << adapter);
    return row("adapter " + adapter);
  }
  if (o.base) {  // a fresh LoRA adds nothing (B = 0): the base model's loss
    const Clock::time_point t0 = Clock::now();
    ASSIGN_OR_RETURN(double loss, trainer->evaluate(data), "evaluating the base");
    print_row("base", loss, seconds_since(t0));
  }
  if (!adapter.empty()) {
    RETURN_IF_ERROR(trainer->model().lora().load_peft(adapter), "adapter " << adapter);
    const Clock::time_point t0 = Clock::now();
    ASSIGN_OR_RETURN(double loss, trainer->evaluate(data), "evaluating the adapter");
    print_row("adapter " + adapter, loss, seconds_since(t0));
  }
  return Status::OK();
}

}  // namespace st
