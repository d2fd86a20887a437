// DataParallelTrainer: LoRA training over N replicas (design.md §4 "Multi-GPU").
//
// One process per node, one thread per replica (GPU). Each replica has its own Backend, Model,
// LayerSource and Optimizer; every replica of a node streams from ONE shared host store
// (shared_ram_store_parts: one copy of the base in RAM per node). Per optimizer step:
//
//   global window = gradient_accumulation_steps x world_size micro-batches (what one device with
//                   gradient_accumulation_steps x world_size would take from the same data);
//   rank r takes micro-batches r, r+N, r+2N, ... of it (N = world size);
//   the target count is all-reduced first, so the loss normalisation is global over the window
//   across ranks ("window": 1 / sum of targets; "micro_batch": 1 / (n_i x window size));
//   LoRA grads are reduced across ranks ONCE (DpReduction below), then every replica runs the
//   same grad-norm + clip + AdamW on the same bits, so parameters stay identical everywhere
//   (checked by checksum when verify_replicas); the process holding rank 0 writes
//   metrics.jsonl, checkpoints and the adapter.
//
// Dropout: each micro-batch runs with the dropout counter a single device would use for it (its
// global index), so masks match too.
//
// Checkpoints (save_steps, a new best eval, SIGINT through stop_requested) are Trainer's
// (train/checkpoint.h), written by the process holding rank 0 from its replica; its fingerprint
// also names the world size. resume_from_checkpoint: every process reads the checkpoint (on
// several nodes, output_dir must be a shared file system) into every replica and positions the
// data stream; the rest of the run is the uninterrupted run's.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "store/ram_store.h"
#include "stream/streamed_layer_source.h"
#include "train/trainer.h"

namespace st {

enum class DpReduction {
  // Each rank accumulates its micro-batches into its grad buffer, then one all_reduce_sum per
  // step. Equal to a single device up to f32 summation order (and run-to-run deterministic with
  // ThreadCommunicator).
  kFast,
  // Note [exact reduction]: each micro-batch's gradient is computed alone, then broadcast and
  // added into a zeroed buffer in GLOBAL micro-batch order 0..k-1 -- the order in which a single
  // device accumulates them. The result is bit-identical for every replica count (1, 2, 3, ...),
  // and bit-identical to Trainer whenever the backend's accumulating GEMM (C += alpha.A.B) rounds
  // like C + (alpha.A.B) (true on the CPU backend for the LoRA scalings 2^k and token counts of one
  // GEMM K-block). Costs one broadcast per micro-batch and gradient_accumulation_steps grad copies.
  kExact,
};

// Builds rank `rank`'s TrainerParts on its backend (called once per local replica, from the
// creating thread). The LayerSource it makes must copy with THAT backend.
using ReplicaPartsFactory = std::function<StatusOr<TrainerParts>(int rank, Backend* be)>;

// Parts over one shared RamStore: each replica gets a StreamedLayerSource over a read-only view of
// the store whose copies go through the replica's own backend (RamStore::load_layer would use the
// backend that opened the store). The store must outlive every trainer made from these parts.
ReplicaPartsFactory shared_ram_store_parts(const RamStore* store, StreamedSourceOptions opts,
                                           std::string base_model_name);

struct DataParallelOptions {
  DpReduction reduction = DpReduction::kFast;
#ifdef NDEBUG
  bool verify_replicas = false;
#else
  bool verify_replicas = true;  // checksum the parameters of every rank after every step
#endif
  // Runs first on each replica thread (e.g. omp_set_num_threads for CPU replicas).
  std::function<void(int local_index)> on_thread_start;
};

class DataParallelTrainer {
 public:
  // backends[i] and comms[i] belong to local replica i (global rank comms[i]->rank()); all comms
  // are of one group whose world size may exceed the local count (multi-node). Initialises every
  // replica like Trainer::create (same seed / lora_model_dir: identical starting parameters).
  // The backends must outlive the trainer.
  static StatusOr<std::unique_ptr<DataParallelTrainer>> create(const TrainConfig& tc, std::vector<Backend*> backends,
                                                               std::vector<std::unique_ptr<Communicator>> comms,
                                                               const ReplicaPartsFactory& parts,
                                                               const DataParallelOptions& o = {});
  ~DataParallelTrainer();

  // Runs max_steps (or num_epochs of `data`). Every process must pass the same data stream: it
  // reads whole global windows and keeps its ranks' shares. Writes output_dir/metrics.jsonl,
  // checkpoint-N/ (save_steps) and the final adapter when this process holds rank 0. With eval
  // data, evaluates every eval_steps and at the end as Trainer does (eval lines in metrics.jsonl,
  // early_stopping_patience, load_best_model_at_end), every rank taking its share of the batches.
  Status train(BatchSource& data);
  // Evaluated during train(); every process passes the same eval stream. Not owned.
  void set_eval_data(BatchSource* eval) { eval_data_ = eval; }
  // Polled after every step by every process (SIGINT); true anywhere = checkpoint and stop.
  std::function<bool()> stop_requested;
  bool interrupted() const { return interrupted_; }
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  // One optimizer step over a global window (its size need not be a multiple of the world size:
  // ranks without a micro-batch contribute zero). Returns rank 0's view (identical everywhere).
  StatusOr<StepMetrics> train_step(const std::vector<Batch>& window);
  // Mean loss per target token over `data` (no dropout, no gradient). Rank r evaluates the batches
  // i with i % world == r, each rank's in groups through the layers (model/model.h Note
  // [layer-major evaluation]); the result has the bits of one device (train/evaluation.h Note
  // [eval figures]). A collective: every rank's process calls it with the same data.
  StatusOr<double> evaluate(BatchSource& data);
  // rl: the preference loss and its logged values over `data`, split over the ranks as evaluate().
  StatusOr<PreferenceStats> evaluate_preference(BatchSource& data);
  Status save_adapter(const std::string& dir) const;

  std::function<void(const StepMetrics&)> on_step;
  std::function<void(const EvalMetrics&)> on_eval;
  // Notices for the user (early stopping, the final adapter being the best eval's).
  std::function<void(const std::string&)> on_message;

  int world_size() const { return world_; }
  int local_replicas() const { return static_cast<int>(reps_.size()); }
  bool holds_rank0() const;
  Model& model(int local_index);
  int64_t total_steps() const { return sched_.total_steps; }
  int64_t steps_taken() const;

 private:
  struct Replica;
  class Pool;
  DataParallelTrainer() = default;
  Status plan_steps(BatchSource& data);
  StatusOr<bool> fill_window(BatchSource& data, std::vector<Batch>* window);
  Status replica_step(Replica& r, const std::vector<Batch>& window, std::vector<double>* losses);
  // One forward_backward for all local micro-batches when nothing depends on the dropout counter
  // and no per-micro-batch gradient is kept; otherwise each_micro_batch.
  bool one_call() const { return opts_.reduction == DpReduction::kFast && tc_.lora_dropout == 0.0; }
  Status each_micro_batch(Replica& r, const std::vector<int>& mine, const std::function<Status(size_t)>& run);
  Status replica_grads(Replica& r, const std::vector<Batch>& window, const std::vector<int>& mine,
                       std::vector<double>* losses);
  Status replica_preference_grads(Replica& r, const std::vector<Batch>& window, const std::vector<int>& mine,
                                  std::vector<double>* losses);
  Status reduce_exact(Replica& r, const std::vector<int>& mine, int64_t window_size);
  Status verify_identical(Replica& r);
  Status run_on_replicas(const std::function<Status(int, Replica&)>& fn);
  // One eval pass split over the ranks: every batch's figures, gathered on every rank.
  StatusOr<std::vector<EvalFigures>> eval_figures(BatchSource& data);
  StatusOr<BestEval::Verdict> run_eval(int64_t step, MetricsWriter* metrics);
  Status log_step(const StepMetrics& m, MetricsWriter* metrics);
  Json fingerprint(BatchSource& data) const;
  Status save_checkpoint(BatchSource& data);
  Status resume(const std::string& ckpt_dir, BatchSource& data);
  // stop_requested() on any process: every rank learns it (a host sum), so all stop at one step.
  StatusOr<bool> stop_agreed();
  bool keep_best() const { return eval_data_ && (tc_.load_best_model_at_end || tc_.early_stopping_patience > 0); }
  Status save_final_adapter();

  TrainConfig tc_;
  PreferenceConfig pref_;  // rl (train/preference_loss.h)
  DataParallelOptions opts_;
  int world_ = 1;
  std::vector<std::unique_ptr<Replica>> reps_;
  std::unique_ptr<Pool> pool_;
  std::string base_model_name_;
  LrSchedule sched_;
  int64_t window_size_ = 1;     // gradient_accumulation_steps x world
  uint64_t micro_seen_ = 0;     // global micro-batches trained (the dropout counter base)
  int64_t epoch_ = 0;
  bool epoch_started_ = false;
  int64_t batches_in_epoch_ = 0;
  int64_t tokens_ = 0;
  double elapsed_s_ = 0;
  // The logging window in progress (saved in checkpoints, as Trainer's).
  double loss_acc_ = 0;
  int64_t loss_count_ = 0;
  int64_t tokens_at_log_ = 0;
  double elapsed_at_log_ = 0;
  ExtraMeans extra_means_;
  Json log_history_ = Json::array();
  int64_t watchdog_violations_ = 0;
  std::string last_checkpoint_;
  bool interrupted_ = false;
  BatchSource* eval_data_ = nullptr;
  int64_t last_eval_step_ = -1;
  BestEval best_;
};

}  // namespace st
