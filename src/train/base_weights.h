// BaseWeights: the frozen base of a training run, assembled from TrainConfig (design.md §1, §3):
//   source (HF dir or .gguf) -> layer store (sharded on demand, cached) -> tier (ram | disk; `off`
//   is the RAM store with every layer resident) -> Planner (what stays resident, pool slots,
//   refusal before any allocation) -> a LayerSource factory and an extras loader for the Trainer.
// Resident and streamed runs read the same store bytes through the same kernels, which is why
// they are bit-identical.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/speed_probe.h"
#include "store/layer_store.h"
#include "store/sharder.h"
#include "stream/planner.h"
#include "stream/streamed_layer_source.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace st {

struct BaseWeights {
  std::unique_ptr<LayerStore> store;  // must outlive the Trainer (the LayerSource reads it)
  std::string store_dir;
  bool store_reused = false;
  std::string store_reason;
  std::string stream_compress;  // what the run uses: "true" | "false" (shard_base_model)
  Plan plan;
  TrainerParts parts;
};

// Shards (or reuses) the store for cfg.base_model in `act` dtype (shard_base_model), opens the
// tier, plans the device memory and returns parts whose LayerSource follows the plan. The caller
// trains with cfg.stream_compress = the result's. Progress goes to stderr.
StatusOr<BaseWeights> open_base_weights(const TrainConfig& cfg, Backend* be, DType act);

// The store for this run: resolves stream_compress (Note [stream_compress auto]; what decided auto
// goes to stderr) into *stream_compress, then shards or reuses. When auto chose code12 and a tensor
// cannot be coded (core/code12.h: too many exponents outside the table), it says so and uses the
// dense base instead; an explicit `true` fails naming the tensor.
StatusOr<ShardResult> shard_base_model(const TrainConfig& cfg, Backend* be, DType act, const DeviceSpeed& speed,
                                       std::string* stream_compress);

// Note [stream_compress auto]: the default `stream_compress: auto` turns the code12 base on when it
// can hold the run (bfloat16 compute, adapter lora, a streaming tier) and the plan for the dense
// base streams at least one layer (or does not fit): streamed layers then move ~24% fewer bytes
// (8-30% faster link-bound steps: bench/RESULTS.md session 17) and decode on each visit; resident
// layers are decoded once when loaded (stream/streamed_layer_source.h Note [resident code12
// layers]), so only streamed visits pay the decode. A run whose layers all stay resident keeps the
// dense store (nothing to gain). The bits are the same either way. Returns "true" or "false" ("true"/"false" in cfg pass through); `why` (may be null)
// says what decided auto.
StatusOr<std::string> resolve_stream_compress(const TrainConfig& cfg, Backend* be, DType act, const DeviceSpeed& speed,
                                              std::string* why);
// The ModelConfig of base_model: a layer store's manifest, else the checkpoint's (open_model_source).
StatusOr<ModelConfig> base_model_config(const std::string& path);

// The pieces of open_base_weights that the data-parallel run (dist/) assembles per replica.

// `device`: cpu | cuda | auto (CUDA when available); InvalidArgument naming the value otherwise.
// store/host_memory.h Note [partial RAM store]: which layers of the sharded store the RAM tier's
// arena keeps under ram_budget (or the machine's free memory), resident ones out first; empty when
// every layer fits. Says on stderr what it keeps when not everything.
StatusOr<std::vector<bool>> ram_layers_for(const TrainConfig& cfg, const ShardResult& store, const Plan& plan);

StatusOr<DeviceKind> device_kind_for(const std::string& device);
// InvalidArgument unless `stream` is off, ram or disk.
Status check_stream_tier(const std::string& stream);
// The device's speeds for this run's plans (stream/planner.h Note [host extras plan]): probed once
// (backend/speed_probe.h) for a CUDA run that streams, unknown (zeros) otherwise. The run's plans
// -- stream_compress auto's dense one and the run's own -- take the same figures.
DeviceSpeed planning_speed(const TrainConfig& cfg, Backend* be);
// The Planner's answer for this run on `be` (its free memory, cfg's shapes, LoRA, tier, budget,
// `speed`).
StatusOr<Plan> plan_for(const TrainConfig& cfg, Backend* be, const ModelConfig& mc, DType act, const DeviceSpeed& speed);
// The plan's resident layers and pool slots; stream: off keeps every layer resident.
StreamedSourceOptions streamed_options(const TrainConfig& cfg, const Plan& plan, const ModelConfig& mc);
// Parts whose layers stream from `store` (not owned: it must outlive them) and whose extras
// come through `be`. The LayerSource refuses a layout whose size differs from the store's.
TrainerParts streamed_parts(LayerStore* store, Backend* be, StreamedSourceOptions opts, const ModelConfig& mc,
                            const std::string& base_model_name);

}  // namespace st
