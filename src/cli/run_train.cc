#include "cli/run_train.h"

#include <cstdio>

#include "backend/backend.h"
#include "train/batch_source.h"
#include "train/trainer.h"

namespace st {
namespace {

// What this entry point wires today: resident base weights from an HF directory and
// pre-tokenized JSONL. Everything else is refused by name rather than silently ignored.
Status check_supported(const TrainConfig& c) {
  if (c.stream != "off") {
    return Unimplemented("stream: '" + c.stream + "' is not wired into `streamtune train` yet; use stream: off");
  }
  for (const DatasetSpec& d : c.datasets) {
    if (d.type != "tokenized") {
      return Unimplemented("dataset type '" + d.type + "' (" + d.path +
                           ") is not wired into `streamtune train` yet; only type: tokenized");
    }
  }
  if (!c.eval_datasets.empty() || c.val_set_size > 0) {
    return Unimplemented("evaluation (eval_datasets / val_set_size) is not wired into `streamtune train` yet");
  }
  if (!c.resume_from_checkpoint.empty()) {
    return Unimplemented("resume_from_checkpoint is not wired into `streamtune train` yet");
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<Backend>> backend_for(const std::string& device) {
  if (device == "cpu") return make_backend(DeviceKind::kCpu);
  if (device == "cuda") return make_backend(DeviceKind::kCuda);
  return make_backend(cuda_available() ? DeviceKind::kCuda : DeviceKind::kCpu);
}

}  // namespace

Status run_train(const TrainConfig& cfg) {
  RETURN_IF_ERROR(check_supported(cfg));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, backend_for(cfg.device), "device '" << cfg.device << "'");
  ASSIGN_OR_RETURN(TrainerParts parts, hf_resident_parts(cfg.base_model), "loading " << cfg.base_model);
  TokenizedJsonlOptions data_opts;
  for (const DatasetSpec& d : cfg.datasets) data_opts.paths.push_back(d.path);
  data_opts.micro_batch_size = cfg.micro_batch_size;
  data_opts.sequence_len = cfg.sequence_len;
  data_opts.shuffle = cfg.shuffle;
  data_opts.seed = cfg.seed;
  ASSIGN_OR_RETURN(auto data, TokenizedJsonlSource::open(data_opts));
  ASSIGN_OR_RETURN(auto trainer, Trainer::create(cfg, be.get(), std::move(parts)));
  trainer->on_step = [](const StepMetrics& m) {
    std::fprintf(stderr, "%s\n", metrics_json_line(m).c_str());
  };
  RETURN_IF_ERROR(trainer->train(*data));
  std::fprintf(stderr, "adapter written to %s\n", cfg.output_dir.c_str());
  return Status::OK();
}

}  // namespace st
