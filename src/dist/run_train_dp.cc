// run_train_data_parallel (run_train_dp.h): assembled from the same pieces as cli/run_train.cc
// (train/train_data.h for the data, train/base_weights.h for device, plan and streamed parts).
#include "dist/run_train_dp.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "core/sigint.h"
#include "dist/data_parallel.h"
#include "store/disk_store.h"
#include "store/sharder.h"
#include "train/base_weights.h"
#include "train/loader_source.h"
#include "train/progress.h"
#include "train/train_data.h"

#ifdef STREAMTUNE_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace st {
namespace {

int visible_gpus() {
#ifdef STREAMTUNE_HAVE_CUDA
  return cuda_device_count();
#else
  return 0;
#endif
}

// stream: disk: one DiskStore (own staging ring) per replica; the page cache is shared anyway.
ReplicaPartsFactory disk_parts(const std::string& dir, const ModelConfig& mc, StreamedSourceOptions opts,
                               const std::string& name) {
  return [dir, mc, opts, name](int, Backend* be) -> StatusOr<TrainerParts> {
    ASSIGN_OR_RETURN(std::unique_ptr<DiskStore> d, DiskStore::open(dir, be), "opening the disk store " << dir);
    std::shared_ptr<DiskStore> store(std::move(d));
    TrainerParts p = streamed_parts(store.get(), be, opts, mc, name);
    // The parts own this replica's store: it lives as long as the layer source and extras loader.
    p.make_layers = [store, f = std::move(p.make_layers)](Backend* b, const LayerLayout& l) { return f(b, l); };
    p.load_extras = [store, f = std::move(p.load_extras)](Model& m) { return f(m); };
    return p;
  };
}

StatusOr<std::vector<std::unique_ptr<Communicator>>> communicators(DeviceKind kind, const std::vector<Backend*>& bes) {
  ASSIGN_OR_RETURN(DistEnv env, dist_env_from_environment());
  if (kind == DeviceKind::kCuda && nccl_available()) {
    std::vector<int> devs;
    for (int i = 0; i < static_cast<int>(bes.size()); ++i) devs.push_back(i);
    return make_nccl_communicators(devs, bes, env);
  }
  if (env.num_nodes > 1)
    return Unimplemented(Str() << "WORLD_SIZE " << env.num_nodes << ": multi-node training needs a CUDA + NCCL build");
  return make_thread_communicators(bes);
}

// Everything a data-parallel run holds, in destruction order (trainer, then store, then backends).
struct DpRun {
  std::vector<std::unique_ptr<Backend>> owned;
  std::unique_ptr<RamStore> ram;  // ONE host copy of the base for every replica of this node
  ModelConfig model;
  std::unique_ptr<DataParallelTrainer> trainer;
  ~DpRun() { trainer.reset(); }  // replicas (their LayerSources read the store) go before it
};

StatusOr<std::unique_ptr<DpRun>> setup_data_parallel(const TrainConfig& given, int n) {
  TrainConfig cfg = given;
  if (n < 1) return InvalidArgument(Str() << "devices: " << n);
  RETURN_IF_ERROR(check_stream_tier(cfg.stream));
  ASSIGN_OR_RETURN(DeviceKind kind, device_kind_for(cfg.device));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int cpu_threads = std::max(1, cores / n);
  auto run = std::make_unique<DpRun>();
  std::vector<Backend*> bes;
  for (int i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(auto be, make_backend(kind, {.device_index = kind == DeviceKind::kCuda ? i : 0,
                                                  .num_threads = cpu_threads}),
                     "device " << i);
    bes.push_back(be.get());
    run->owned.push_back(std::move(be));
  }
  ASSIGN_OR_RETURN(DType act, training_act_dtype(cfg, *bes[0]));
  // Replicas are alike: one store, one stream_compress decision.
  const DeviceSpeed speed = planning_speed(given, bes[0]);
  ASSIGN_OR_RETURN(ShardResult sr, shard_base_model(given, bes[0], act, speed, &cfg.stream_compress));
  run->model = sr.manifest.config;
  ASSIGN_OR_RETURN(Plan plan, plan_for(cfg, bes[0], run->model, act, speed));  // replicas are alike: one plan
  const StreamedSourceOptions opts = streamed_options(cfg, plan, run->model);
  ReplicaPartsFactory parts;
  if (cfg.stream == "disk") {
    parts = disk_parts(sr.dir, run->model, opts, cfg.base_model);
  } else {
    RamStoreOptions ro;  // store/host_memory.h Note [partial RAM store]: one arena for every replica
    ASSIGN_OR_RETURN(ro.in_ram, ram_layers_for(cfg, sr, plan));
    ASSIGN_OR_RETURN(run->ram, RamStore::open(sr.dir, bes[0], ro), "opening the RAM store " << sr.dir);
    parts = shared_ram_store_parts(run->ram.get(), opts, cfg.base_model);
  }
  // Every replica follows the one plan's extras placement and recompute mode.
  parts = [f = std::move(parts), plan](int rank, Backend* be) -> StatusOr<TrainerParts> {
    ASSIGN_OR_RETURN(TrainerParts p, f(rank, be));
    p.host_extras = plan.host_extras;
    p.recompute = plan.recompute;
    p.micro_batch_slots = plan.micro_batch_slots;
    p.fused_attention_allowance = plan.fused_attention_allowance;
    p.launch_plan_bytes = plan.launch_plan_bytes;
    return p;
  };
  ASSIGN_OR_RETURN(auto comms, communicators(kind, bes));
  DataParallelOptions dpo;
  if (kind == DeviceKind::kCpu) dpo.on_thread_start = [cpu_threads](int) { omp_set_num_threads(cpu_threads); };
  ASSIGN_OR_RETURN(run->trainer, DataParallelTrainer::create(cfg, bes, std::move(comms), parts, dpo));
  return run;
}

// Seeded synthetic micro-batch (labels = ids; the model shifts), as `streamtune bench` uses.
Batch synthetic_batch(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed) {
  Batch b;
  b.batch = batch;
  b.seq = seq;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < batch * seq; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const auto id = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
    b.input_ids.push_back(id);
    b.labels.push_back(id);
    b.positions.push_back(static_cast<int32_t>(i % seq));
    b.doc_ids.push_back(0);
  }
  b.num_targets = batch * (seq - 1);
  return b;
}

}  // namespace

StatusOr<int> resolve_devices(const std::string& devices, DeviceKind kind) {
  const int gpus = kind == DeviceKind::kCuda ? visible_gpus() : 0;
  if (devices.empty() || devices == "1") return 1;
  if (devices == "all") return std::max(1, gpus);
  char* end = nullptr;
  const long n = std::strtol(devices.c_str(), &end, 10);
  if (end == devices.c_str() || *end != '\0' || n < 1 || n > 4096)
    return InvalidArgument("devices: '" + devices + "' (expected 1, all, or a number of devices >= 1)");
  if (kind == DeviceKind::kCuda && n > gpus)
    return InvalidArgument(Str() << "devices: " << n << " requested but " << gpus << " GPU(s) are visible");
  return static_cast<int>(n);
}

Status run_train_data_parallel(const TrainConfig& cfg, int n, bool* interrupted) {
  ASSIGN_OR_RETURN(std::unique_ptr<DpRun> run, setup_data_parallel(cfg, n));
  DataParallelTrainer& trainer = *run->trainer;
  ASSIGN_OR_RETURN(TrainData data, load_train_data(cfg, run->model));
  const bool talk = trainer.holds_rank0();
  if (talk)
    std::printf("streamtune train: data parallel, %d replica(s) here, world %d, %s\n", n, trainer.world_size(),
                run->owned[0]->description().c_str());
  trainer.on_step = [&trainer, talk](const StepMetrics& m) {
    if (!talk) return;
    std::printf("step %lld/%lld  loss %.4f  lr %.3g  grad_norm %.3f  %.0f tok/s  %.1fs\n",
                static_cast<long long>(m.step), static_cast<long long>(trainer.total_steps()), m.loss, m.lr,
                m.grad_norm, m.tok_s, m.elapsed_s);
    std::fflush(stdout);
  };
  DataLoaderSource train(data.train, loader_options(cfg, data.pad_id, /*train=*/true, *run->owned[0]));
  if (talk) {  // as the single-device run: before training (train_data.h save_train_tokenizer)
    RETURN_IF_ERROR(make_dirs(cfg.output_dir), "output_dir");
    std::printf("tokenizer  %s\n", save_train_tokenizer(cfg, data.tokenizer ? &*data.tokenizer : nullptr).c_str());
  }
  // Every process evaluates its ranks' share of the eval set (DataParallelTrainer::evaluate).
  std::unique_ptr<DataLoaderSource> eval;
  if (data.eval) {
    eval = std::make_unique<DataLoaderSource>(data.eval,
                                              loader_options(cfg, data.pad_id, /*train=*/false, *run->owned[0]));
    trainer.set_eval_data(eval.get());
  }
  trainer.on_eval = [talk](const EvalMetrics& e) {
    if (!talk) return;
    std::printf("%s\n", eval_line(e).c_str());
    std::fflush(stdout);
  };
  trainer.on_message = [talk](const std::string& text) {
    if (talk) std::printf("%s\n", text.c_str());
  };
  trainer.stop_requested = [] { return SigintStop::requested(); };
  {
    SigintStop sigint;
    RETURN_IF_ERROR(trainer.train(train));
  }
  if (trainer.interrupted()) {
    *interrupted = true;
    if (talk)
      std::printf("interrupted at step %lld: checkpoint %s\nresume with: streamtune train CONFIG.yaml "
                  "--resume_from_checkpoint=true\n",
                  static_cast<long long>(trainer.steps_taken()),
                  trainer.last_checkpoint().c_str());
    return Status::OK();
  }
  if (talk) std::printf("adapter written to %s\n", cfg.output_dir.c_str());
  return Status::OK();
}

StatusOr<DpBenchResult> bench_data_parallel(const TrainConfig& cfg, int n, int steps, int warmup) {
  if (steps < 1 || warmup < 0) return InvalidArgument("bench: steps must be >= 1 and warmup >= 0");
  ASSIGN_OR_RETURN(std::unique_ptr<DpRun> run, setup_data_parallel(cfg, n));
  DataParallelTrainer& trainer = *run->trainer;
  const int64_t k = cfg.gradient_accumulation_steps * trainer.world_size();
  DpBenchResult r;
  r.replicas = n;
  r.world_size = trainer.world_size();
  r.tokens_per_step = k * cfg.micro_batch_size * cfg.sequence_len;
  std::vector<double> ms;
  uint64_t seed = cfg.seed;
  for (int s = 0; s < warmup + steps; ++s) {
    std::vector<Batch> window;
    for (int64_t i = 0; i < k; ++i)
      window.push_back(synthetic_batch(cfg.micro_batch_size, cfg.sequence_len, run->model.vocab_size, ++seed));
    const auto t0 = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(StepMetrics m, trainer.train_step(window), "bench step " << s + 1);
    const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s == warmup) r.loss_first = m.loss;
    r.loss_last = m.loss;
    if (s >= warmup) ms.push_back(dt);
  }
  std::sort(ms.begin(), ms.end());
  r.step_ms_median = ms[ms.size() / 2];
  r.tok_s = r.step_ms_median > 0 ? 1000.0 * static_cast<double>(r.tokens_per_step) / r.step_ms_median : 0;
  r.tok_s_per_device = r.tok_s / r.world_size;
  return r;
}

}  // namespace st
