// `streamtune train` with devices > 1: the data-parallel run (data_parallel.h), assembled from a
// TrainConfig the way cli/run_train.cc assembles a single-device run.
#pragma once

#include <string>

#include "backend/backend.h"
#include "core/status.h"
#include "train/train_config.h"

namespace st {

// The `devices` key: "1" (default), "all" (every visible GPU; 1 on the CPU) or N >= 1.
// InvalidArgument naming the value; on CUDA also when N exceeds the visible GPUs.
StatusOr<int> resolve_devices(const std::string& devices, DeviceKind kind);

// Trains with n replicas in this process (n threads; CUDA: devices 0..n-1 of this node, NCCL
// when built with it, else the thread communicator; CPU: n CPU replicas sharing the cores).
// Multi-node when the launcher variables say so (communicator.h, DistEnv): needs NCCL.
// One RAM store per node is shared by every replica (stream: ram | off); stream: disk opens one
// DiskStore per replica. Writes what `streamtune train` writes, from rank 0 only. Ctrl-C during
// training (core/sigint.h) checkpoints after the step and returns OK with *interrupted true.
Status run_train_data_parallel(const TrainConfig& cfg, int n, bool* interrupted);

// `streamtune bench --devices N`: the same assembly as run_train_data_parallel, then `warmup` +
// `steps` optimizer steps on seeded synthetic windows (gradient_accumulation_steps x world
// micro-batches of micro_batch_size x sequence_len tokens), timed on the host.
struct DpBenchResult {
  int replicas = 0, world_size = 0;
  int64_t tokens_per_step = 0;  // global
  double step_ms_median = 0;
  double tok_s = 0, tok_s_per_device = 0;
  double loss_first = 0, loss_last = 0;
};
StatusOr<DpBenchResult> bench_data_parallel(const TrainConfig& cfg, int n, int steps, int warmup);

}  // namespace st
