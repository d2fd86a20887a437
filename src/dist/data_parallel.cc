#include "dist/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/check.h"
#include "core/file.h"
#include "train/checkpoint.h"
#include "train/evaluation.h"
#include "train/loader_source.h"
#include "train/preference_step.h"

namespace st {

// ---- the replica threads ---------------------------------------------------------------------

// One persistent thread per local replica (CUDA device binding and OpenMP thread pools are per
// thread, so a replica always runs on the same thread). run() hands every thread the same job
// and waits for all of them.
class DataParallelTrainer::Pool {
 public:
  Pool(int n, std::function<void(int)> on_start) : status_(n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, i, on_start] { loop(i, on_start); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  std::vector<Status> run(std::function<Status(int)> job) {
    std::unique_lock<std::mutex> lk(mu_);
    job_ = std::move(job);
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
    cv_.notify_all();
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    return status_;
  }

 private:
  void loop(int i, const std::function<void(int)>& on_start) {
    if (on_start) on_start(i);
    uint64_t seen = 0;
    for (;;) {
      std::function<Status(int)> job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_;
        job = job_;
      }
      Status s = job(i);
      std::lock_guard<std::mutex> lk(mu_);
      status_[i] = std::move(s);
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::vector<Status> status_;
  std::function<Status(int)> job_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool quit_ = false;
};

struct DataParallelTrainer::Replica {
  Backend* be = nullptr;
  std::unique_ptr<Communicator> comm;
  TrainerParts parts;
  std::unique_ptr<Model> model;
  std::unique_ptr<LayerSource> layers;
  std::unique_ptr<Optimizer> opt;
  // kExact: one grad copy per local micro-batch, plus the receive buffer (backend memory).
  float* micro_grads = nullptr;
  float* recv = nullptr;
  int64_t micro_slots = 0;
  StepMetrics metrics;  // of the last step (the same on every rank)
};

namespace {

Status validate(const TrainConfig& tc) {
  return check_trainer_config(tc);
}

// FNV-1a over the parameter bytes.
int64_t checksum(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return static_cast<int64_t>(h >> 1);  // keep sums of one non-zero entry far from overflow
}

}  // namespace

StatusOr<std::unique_ptr<DataParallelTrainer>> DataParallelTrainer::create(
    const TrainConfig& tc, std::vector<Backend*> backends, std::vector<std::unique_ptr<Communicator>> comms,
    const ReplicaPartsFactory& parts, const DataParallelOptions& o) {
  RETURN_IF_ERROR(validate(tc));
  if (backends.empty() || backends.size() != comms.size())
    return InvalidArgument("DataParallelTrainer: one backend and one communicator per local replica");
  std::unique_ptr<DataParallelTrainer> t(new DataParallelTrainer());
  t->tc_ = tc;
  t->opts_ = o;
  t->world_ = comms[0]->world_size();
  t->window_size_ = tc.gradient_accumulation_steps * t->world_;
  if (!tc.rl.empty()) {
    ASSIGN_OR_RETURN(t->pref_, preference_config_from(tc));
  }
  ASSIGN_OR_RETURN(LoraConfig lc, lora_config_from(tc));
  ASSIGN_OR_RETURN(BaseQuant quant, base_quant_from(tc));
  const AdamWConfig ac = adamw_config_from(tc);
  for (size_t i = 0; i < backends.size(); ++i) {
    auto r = std::make_unique<Replica>();
    r->be = backends[i];
    r->comm = std::move(comms[i]);
    const std::string who = Str() << "replica " << r->comm->rank();
    ASSIGN_OR_RETURN(r->parts, parts(r->comm->rank(), r->be), who);
    ASSIGN_OR_RETURN(DType act, training_act_dtype(tc, *r->be));
    ModelOptions mo{.act_dtype = act,
                    .base_quant = quant,
                    .max_tokens = micro_batch_rows(tc) * tc.sequence_len,
                    .seed = tc.seed,
                    .vocab_chunk = tc.vocab_chunk,
                    .host_extras = r->parts.host_extras,
                    .recompute = r->parts.recompute,
                    .fused_attention_allowance = r->parts.fused_attention_allowance,
                    .fused_attention_batch = micro_batch_rows(tc),
                    .fused_attention_seq = tc.sequence_len,
                    .launch_plan_bytes = r->parts.launch_plan_bytes,
                    .micro_batch_slots = r->parts.micro_batch_slots,
                    .neftune_alpha = tc.neftune_noise_alpha};
    ASSIGN_OR_RETURN(r->model, Model::create(r->parts.model, r->be, lc, mo), who);
    RETURN_IF_ERROR(r->parts.load_extras(*r->model), who << ": loading embedding / final norm / lm_head");
    ASSIGN_OR_RETURN(r->layers, r->parts.make_layers(r->be, r->model->layer_layout()), who << ": base layers");
    if (!tc.lora_model_dir.empty()) {
      RETURN_IF_ERROR(r->model->lora().load_peft(tc.lora_model_dir), who << ": lora_model_dir");
    } else {
      r->model->lora().init(tc.seed);
      RETURN_IF_ERROR(r->model->init_dora_magnitudes(*r->layers), who);
    }
    ASSIGN_OR_RETURN(r->opt, Optimizer::create(r->be, &r->model->lora(), ac), who);
    if (o.reduction == DpReduction::kExact) {
      r->micro_slots = tc.gradient_accumulation_steps;  // ceil(window / world) at most
      const size_t bytes = static_cast<size_t>(r->micro_slots + 1) * r->model->lora().numel() * sizeof(float);
      ASSIGN_OR_RETURN(void* p, r->be->alloc(bytes), who << ": exact-reduction grad buffers");
      r->micro_grads = static_cast<float*>(p);
      r->recv = r->micro_grads + r->micro_slots * r->model->lora().numel();
    }
    t->reps_.push_back(std::move(r));
  }
  if (!t->reps_.empty()) t->base_model_name_ = t->reps_[0]->parts.base_model_name;
  ASSIGN_OR_RETURN(t->sched_, lr_schedule_from(tc));
  t->pool_ = std::make_unique<Pool>(static_cast<int>(t->reps_.size()), o.on_thread_start);
  return t;
}

DataParallelTrainer::~DataParallelTrainer() {
  pool_.reset();
  for (auto& r : reps_) {
    r->be->sync_all();
    if (r->micro_grads) r->be->free(r->micro_grads);
  }
}

bool DataParallelTrainer::holds_rank0() const {
  for (const auto& r : reps_)
    if (r->comm->rank() == 0) return true;
  return false;
}

Model& DataParallelTrainer::model(int local_index) { return *reps_.at(local_index)->model; }
int64_t DataParallelTrainer::steps_taken() const { return reps_[0]->opt->steps_taken(); }

// Runs fn on every replica thread. A failing replica aborts its communicator so the others leave
// their collectives; the first error that is not such a Cancelled echo is returned.
Status DataParallelTrainer::run_on_replicas(const std::function<Status(int, Replica&)>& fn) {
  std::vector<Status> st = pool_->run([&](int i) -> Status {
    Replica& r = *reps_[i];
    Status s = fn(i, r);
    if (!s.ok()) r.comm->abort(s.to_string());
    return s;
  });
  for (const Status& s : st)
    if (!s.ok() && s.code() != StatusCode::kCancelled) return s;
  for (const Status& s : st) RETURN_IF_ERROR(s);
  return Status::OK();
}

// ---- one step --------------------------------------------------------------------------------

// Note [exact reduction] (data_parallel.h): grads := 0 + g_0 + g_1 + ... in global order; g_i
// comes from its owner rank by broadcast.
Status DataParallelTrainer::reduce_exact(Replica& r, const std::vector<int>& mine, int64_t window_size) {
  Lora& lora = r.model->lora();
  const int64_t n = lora.numel();
  Tensor grads = lora.grads();
  lora.zero_grads();
  for (int64_t g = 0; g < window_size; ++g) {
    const int owner = static_cast<int>(g % world_);
    float* buf = r.recv;
    if (owner == r.comm->rank()) {
      const auto j = std::find(mine.begin(), mine.end(), static_cast<int>(g)) - mine.begin();
      buf = r.micro_grads + j * n;
    }
    RETURN_IF_ERROR(r.comm->broadcast(buf, static_cast<size_t>(n), owner, StreamId::kCompute));
    r.be->add(grads, grads, Tensor(buf, DType::kF32, {n}));
  }
  return Status::OK();
}

// One run(j) per micro-batch mine[j], with the dropout counter a single device would use (its
// global index); kExact: each from zeroed gradients, then copied aside for reduce_exact.
Status DataParallelTrainer::each_micro_batch(Replica& r, const std::vector<int>& mine,
                                             const std::function<Status(size_t)>& run) {
  Lora& lora = r.model->lora();
  for (size_t j = 0; j < mine.size(); ++j) {
    if (opts_.reduction == DpReduction::kExact) lora.zero_grads();
    r.model->set_micro_batches_run(micro_seen_ + static_cast<uint64_t>(mine[j]));
    RETURN_IF_ERROR(run(j));
    if (opts_.reduction == DpReduction::kExact)
      r.be->copy_d2d(r.micro_grads + static_cast<int64_t>(j) * lora.numel(), lora.grads().data, lora.grads().bytes(),
                     StreamId::kCompute);
  }
  return Status::OK();
}

// Supervised: each of `mine`'s loss sums into (*losses)[g], its gradients into the replica's.
Status DataParallelTrainer::replica_grads(Replica& r, const std::vector<Batch>& window, const std::vector<int>& mine,
                                          std::vector<double>* losses) {
  const auto k = static_cast<int64_t>(window.size());
  const bool per_micro = tc_.loss_normalization == "micro_batch";
  int64_t total = 0;
  for (int g : mine) total += count_targets(window[g]);
  RETURN_IF_ERROR(r.comm->all_reduce_sum_host(&total, 1), "all-reducing the window's target count");
  auto scale_of = [&](int g) {
    const double n = static_cast<double>(std::max<int64_t>(count_targets(window[g]), 1));
    return per_micro ? static_cast<float>(1.0 / (n * static_cast<double>(k)))
                     : static_cast<float>(1.0 / static_cast<double>(std::max<int64_t>(total, 1)));
  };
  Lora& lora = r.model->lora();
  losses->assign(static_cast<size_t>(k), 0.0);
  lora.zero_grads();
  if (one_call() && !mine.empty()) {
    std::vector<const Batch*> ptrs;
    std::vector<float> scales;
    for (int g : mine) {
      ptrs.push_back(&window[g]);
      scales.push_back(scale_of(g));
    }
    ASSIGN_OR_RETURN(std::vector<double> sums, r.model->forward_backward(ptrs, *r.layers, scales));
    for (size_t j = 0; j < mine.size(); ++j) (*losses)[mine[j]] = sums[j];
    return Status::OK();
  }
  return each_micro_batch(r, mine, [&](size_t j) -> Status {
    const int g = mine[j];
    ASSIGN_OR_RETURN(std::vector<double> sums, r.model->forward_backward({&window[g]}, *r.layers, {scale_of(g)}));
    (*losses)[g] = sums[0];
    return Status::OK();
  });
}

// Preference training (train/preference_step.h Note [preference window]) on `mine`, normalized over
// the global window; (*losses) gets each micro-batch's PreferenceStats::sums() at its global index
// (zeros elsewhere: the all-reduce in replica_step sums them exactly), so every rank merges the
// window's statistics in window order, as one device does.
Status DataParallelTrainer::replica_preference_grads(Replica& r, const std::vector<Batch>& window,
                                                     const std::vector<int>& mine, std::vector<double>* losses) {
  const auto k = static_cast<int64_t>(window.size());
  int64_t units = 0;
  std::vector<const Batch*> ptrs;
  for (int g : mine) {
    units += preference_units(window[g]);
    ptrs.push_back(&window[g]);
  }
  RETURN_IF_ERROR(r.comm->all_reduce_sum_host(&units, 1), "all-reducing the window's pairs");
  std::vector<PreferenceStats> stats;
  ASSIGN_OR_RETURN(PreferenceWindow w, PreferenceWindow::prepare(*r.model, *r.layers, pref_, ptrs, units, k, &stats));
  Lora& lora = r.model->lora();
  lora.zero_grads();  // the references borrowed the gradient section
  if (one_call() && !mine.empty()) {
    RETURN_IF_ERROR(w.forward_backward(*r.model, *r.layers, 0, w.size(), &stats).status());
  } else {
    RETURN_IF_ERROR(each_micro_batch(r, mine, [&](size_t j) {
      return w.forward_backward(*r.model, *r.layers, j, 1, &stats).status();
    }));
  }
  const size_t fields = PreferenceStats(pref_).sums().size();
  losses->assign(static_cast<size_t>(k) * fields, 0.0);
  for (size_t j = 0; j < mine.size(); ++j) {
    const std::vector<double> v = stats[j].sums();
    std::copy(v.begin(), v.end(), losses->begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(mine[j]) * fields));
  }
  return Status::OK();
}

Status DataParallelTrainer::replica_step(Replica& r, const std::vector<Batch>& window, std::vector<double>* losses) {
  const int rank = r.comm->rank();
  const auto k = static_cast<int64_t>(window.size());
  std::vector<int> mine;
  for (int64_t g = rank; g < k; g += world_) mine.push_back(static_cast<int>(g));
  if (tc_.rl.empty()) {
    RETURN_IF_ERROR(replica_grads(r, window, mine, losses));
  } else {
    RETURN_IF_ERROR(replica_preference_grads(r, window, mine, losses));
  }
  RETURN_IF_ERROR(r.layers->status(), "base weights of replica " << rank);
  Lora& lora = r.model->lora();
  if (opts_.reduction == DpReduction::kExact) {
    RETURN_IF_ERROR(reduce_exact(r, mine, k), "exact gradient reduction");
  } else {
    RETURN_IF_ERROR(r.comm->all_reduce_sum(lora.grads().ptr<float>(), static_cast<size_t>(lora.numel()),
                                           StreamId::kCompute),
                    "all-reducing LoRA gradients");
  }
  // Each loss sum is non-zero on its owner only: the f64 sum is exact.
  RETURN_IF_ERROR(r.comm->all_reduce_sum_host(losses->data(), losses->size()), "all-reducing losses");
  StepMetrics& m = r.metrics;
  m.lr = lr_at(sched_, r.opt->steps_taken());
  m.grad_norm = r.opt->step(m.lr);
  m.step = r.opt->steps_taken();
  r.be->sync_stream(StreamId::kCompute);
  if (opts_.verify_replicas) RETURN_IF_ERROR(verify_identical(r));
  return Status::OK();
}

// Every rank's parameters must be the same bits after the update (same reduced grads, same AdamW).
Status DataParallelTrainer::verify_identical(Replica& r) {
  std::vector<int64_t> sums(static_cast<size_t>(world_), 0);
  sums[r.comm->rank()] = checksum(r.model->lora().params_to_host());
  RETURN_IF_ERROR(r.comm->all_reduce_sum_host(sums.data(), sums.size()), "all-gathering parameter checksums");
  for (int i = 1; i < world_; ++i)
    if (sums[i] != sums[0])
      return Internal(Str() << "data parallel: LoRA parameters of rank " << i << " differ from rank 0 after step "
                            << r.opt->steps_taken() << " (checksum " << sums[i] << " vs " << sums[0] << ")");
  return Status::OK();
}

StatusOr<StepMetrics> DataParallelTrainer::train_step(const std::vector<Batch>& window) {
  if (window.empty()) return InvalidArgument("train_step: empty window");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<double>> losses(reps_.size());
  RETURN_IF_ERROR(run_on_replicas([&](int i, Replica& r) { return replica_step(r, window, &losses[i]); }));
  micro_seen_ += window.size();
  // Loss exactly as Trainer::train_step computes it, in global micro-batch order.
  const std::vector<double>& sums = losses[0];
  double loss = 0;
  int64_t tokens = 0;
  std::vector<std::pair<std::string, double>> extra;
  for (const Batch& b : window) tokens += b.real_tokens > 0 ? b.real_tokens : b.batch * b.seq;  // as Trainer: padding is not throughput
  if (!tc_.rl.empty()) {  // each micro-batch's statistics, merged in window order (replica_preference_grads)
    PreferenceStats stats(pref_);
    const size_t fields = stats.sums().size();
    for (size_t g = 0; g < window.size(); ++g)
      stats.add_sums(std::vector<double>(sums.begin() + static_cast<std::ptrdiff_t>(g * fields),
                                         sums.begin() + static_cast<std::ptrdiff_t>((g + 1) * fields)));
    loss = stats.mean_loss();
    extra = stats.metrics();
  } else {
    const bool per_micro = tc_.loss_normalization == "micro_batch";
    int64_t total = 0;
    for (size_t g = 0; g < window.size(); ++g) {
      const int64_t n = count_targets(window[g]);
      total += n;
      loss += per_micro ? sums[g] / static_cast<double>(std::max<int64_t>(n, 1)) : sums[g];
    }
    loss /= per_micro ? static_cast<double>(window.size()) : static_cast<double>(std::max<int64_t>(total, 1));
  }
  StepMetrics m = reps_[0]->metrics;
  m.loss = loss;
  m.extra = std::move(extra);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tokens_ += tokens;
  elapsed_s_ += dt;
  m.tokens = tokens_;
  m.tok_s = dt > 0 ? static_cast<double>(tokens) / dt : 0;
  m.elapsed_s = elapsed_s_;
  return m;
}

// ---- the loop (mirrors Trainer::train with a global window) -----------------------------------

Status DataParallelTrainer::plan_steps(BatchSource& data) {
  if (tc_.max_steps > 0) {
    sched_.total_steps = tc_.max_steps;
  } else {
    const int64_t mb = data.micro_batches_per_epoch();
    if (mb <= 0) return InvalidArgument("max_steps is required when the dataset size is unknown");
    sched_.total_steps = std::max<int64_t>(1, tc_.num_epochs * ((mb + window_size_ - 1) / window_size_));
  }
  resolve_step_ratios(&tc_, sched_.total_steps);
  sched_.warmup_steps = tc_.warmup_steps;
  return Status::OK();
}

StatusOr<bool> DataParallelTrainer::fill_window(BatchSource& data, std::vector<Batch>* window) {
  window->clear();
  auto start = [&](int64_t epoch) {
    epoch_ = epoch;
    epoch_started_ = true;
    batches_in_epoch_ = 0;
    return data.start_epoch(epoch);
  };
  if (!epoch_started_) RETURN_IF_ERROR(start(epoch_));
  bool fresh_epoch = false;
  while (static_cast<int64_t>(window->size()) < window_size_) {
    Batch b;
    ASSIGN_OR_RETURN(bool got, data.next(&b));
    if (got) {
      window->push_back(std::move(b));
      ++batches_in_epoch_;
      fresh_epoch = false;
      continue;
    }
    if (!window->empty()) {  // an epoch that ends mid-window ends the window (as Trainer)
      epoch_started_ = false;
      ++epoch_;
      batches_in_epoch_ = 0;
      return true;
    }
    if (fresh_epoch) return InvalidArgument("the training dataset yields no batches");
    if (tc_.max_steps == 0 && epoch_ + 1 >= tc_.num_epochs) return false;
    RETURN_IF_ERROR(start(epoch_ + 1));
    fresh_epoch = true;
  }
  return true;
}

Status DataParallelTrainer::train(BatchSource& data) {
  RETURN_IF_ERROR(plan_steps(data));
  RETURN_IF_ERROR(check_eval_plan(tc_, eval_data_ != nullptr));
  const bool writer = holds_rank0();
  const std::string metrics_path = path_join(tc_.output_dir, "metrics.jsonl");
  bool append = false;
  if (!tc_.resume_from_checkpoint.empty()) {
    ASSIGN_OR_RETURN(std::string dir, resolve_resume_checkpoint(tc_.resume_from_checkpoint, tc_.output_dir));
    if (!dir.empty()) {  // "auto" with no checkpoint yet: a fresh start
      RETURN_IF_ERROR(resume(dir, data));
      if (writer) RETURN_IF_ERROR(truncate_metrics(metrics_path, reps_[0]->opt->steps_taken()));
      append = true;
    }
  }
  std::unique_ptr<MetricsWriter> metrics;
  if (writer) {
    RETURN_IF_ERROR(make_dirs(tc_.output_dir), "output_dir");
    ASSIGN_OR_RETURN(metrics, MetricsWriter::open(metrics_path, append));
  }
  std::vector<Batch> window;
  // A checkpoint written at the step its run stopped early at (a save step) resumes as stopped.
  bool stopped_early = tc_.early_stopping_patience > 0 && best_.evals_not_improved >= tc_.early_stopping_patience;
  while (reps_[0]->opt->steps_taken() < sched_.total_steps && !stopped_early) {
    ASSIGN_OR_RETURN(bool more, fill_window(data, &window));
    if (!more) break;
    ASSIGN_OR_RETURN(StepMetrics m, train_step(window),
                     "step " << reps_[0]->opt->steps_taken() + 1
                             << (last_checkpoint_.empty() ? std::string()
                                                          : "; the last good checkpoint is " + last_checkpoint_));
    if (on_step) on_step(m);
    const bool watchdog = watch_loss(tc_, log_history_, &watchdog_violations_);  // before this step's log
    RETURN_IF_ERROR(log_step(m, metrics.get()));
    const bool last = m.step == sched_.total_steps;
    // Every process evaluates (each rank its share) and so reaches the same verdicts: the ranks
    // stop together and agree on the best step.
    BestEval::Verdict ev;
    if (eval_data_ && (last || (tc_.eval_steps > 0 && m.step % tc_.eval_steps == 0))) {
      ASSIGN_OR_RETURN(ev, run_eval(m.step, metrics.get()));
    }
    stopped_early = (ev.stop || watchdog) && !last;
    bool stop = false;
    if (!last && !stopped_early && stop_requested) {
      ASSIGN_OR_RETURN(stop, stop_agreed());
    }
    // A new best is checkpointed so that it can be the final adapter (the last step's is the model itself).
    const bool keep = keep_best() && ev.new_best && !last && !stopped_early;
    const bool first = tc_.save_first_step && m.step == 1;
    if (stop || keep || first || (tc_.save_steps > 0 && m.step % tc_.save_steps == 0)) RETURN_IF_ERROR(save_checkpoint(data));
    if (stop) {
      interrupted_ = true;
      return Status::OK();
    }
    if (watchdog && !last && on_message)
      on_message(Str() << "loss watchdog: the logged training loss was above loss_watchdog_threshold "
                       << tc_.loss_watchdog_threshold << " at the end of " << watchdog_violations_
                       << " steps in a row; stopping at step " << m.step << " of " << sched_.total_steps
                       << " (the adapter is written; lower learning_rate or check the data)");
    if (ev.stop && !last && on_message)
      on_message(Str() << "early stopping at step " << m.step << " of " << sched_.total_steps << ": "
                       << best_.evals_not_improved << " evals in a row did not lower eval_loss by more than "
                       << tc_.early_stopping_threshold << " (best " << *best_.loss << " at step " << best_.step
                       << "; early_stopping_patience " << tc_.early_stopping_patience << ")");
  }
  // The data ran out before total_steps (or a finished run was resumed): evaluate what we have.
  const int64_t now = reps_[0]->opt->steps_taken();
  if (eval_data_ && last_eval_step_ != now && now > 0) RETURN_IF_ERROR(run_eval(now, metrics.get()).status());
  return save_final_adapter();
}

// As Trainer::log_step: the mean over the logged steps, written where this process writes.
Status DataParallelTrainer::log_step(const StepMetrics& m, MetricsWriter* metrics) {
  loss_acc_ += m.loss;
  ++loss_count_;
  extra_means_.add(m.extra);
  const bool last = m.step == sched_.total_steps;
  if (m.step % std::max<int64_t>(tc_.logging_steps, 1) != 0 && !last) return Status::OK();
  StepMetrics logged = m;
  logged.loss = loss_acc_ / static_cast<double>(loss_count_);
  logged.extra = extra_means_.take();
  const double dt = elapsed_s_ - elapsed_at_log_;
  logged.tok_s = dt > 0 ? static_cast<double>(tokens_ - tokens_at_log_) / dt : 0;
  if (metrics) RETURN_IF_ERROR(metrics->write(logged));
  log_history_.push_back({{"step", logged.step}, {"loss", logged.loss}, {"lr", logged.lr},
                          {"grad_norm", logged.grad_norm}});
  loss_acc_ = 0;
  loss_count_ = 0;
  tokens_at_log_ = tokens_;
  elapsed_at_log_ = elapsed_s_;
  return Status::OK();
}

StatusOr<bool> DataParallelTrainer::stop_agreed() {
  const int64_t here = stop_requested() ? 1 : 0;
  std::vector<int64_t> votes(reps_.size(), 0);
  RETURN_IF_ERROR(run_on_replicas([&](int i, Replica& r) -> Status {
    int64_t v = here;
    RETURN_IF_ERROR(r.comm->all_reduce_sum_host(&v, 1), "agreeing to stop");
    votes[static_cast<size_t>(i)] = v;
    return Status::OK();
  }));
  return votes[0] > 0;
}

// ---- checkpoints (train/checkpoint.h) ---------------------------------------------------------

Json DataParallelTrainer::fingerprint(BatchSource& data) const {
  const StatusOr<DType> act = training_act_dtype(tc_, *reps_[0]->be);  // create() checked it
  Json fp = config_fingerprint(tc_, reps_[0]->parts.model, act.ok() ? *act : DType::kF32, data.micro_batches_per_epoch());
  fp["devices"] = world_;  // the global window is gradient_accumulation_steps x devices
  return fp;
}

Status DataParallelTrainer::save_checkpoint(BatchSource& data) {
  Replica* r0 = nullptr;
  for (auto& r : reps_)
    if (r->comm->rank() == 0) r0 = r.get();
  if (r0 == nullptr) return Status::OK();  // another process writes it
  TrainerState st;
  st.global_step = r0->opt->steps_taken();
  st.total_steps = sched_.total_steps;
  st.epoch = epoch_;
  st.epoch_started = epoch_started_;
  st.batches_in_epoch = batches_in_epoch_;
  if (auto* dl = dynamic_cast<DataLoaderSource*>(&data)) {
    st.has_data_position = true;
    st.data_position = dl->position();
  }
  st.micro_batches_run = micro_seen_;  // the global dropout counter: a single device's micro_batches_run
  st.tokens = tokens_;
  st.elapsed_s = elapsed_s_;
  st.loss_acc = loss_acc_;
  st.loss_count = loss_count_;
  st.tokens_at_log = tokens_at_log_;
  st.elapsed_at_log = elapsed_at_log_;
  st.fingerprint = fingerprint(data);
  st.log_history = log_history_;
  st.best = best_;
  r0->be->sync_all();
  ASSIGN_OR_RETURN(last_checkpoint_, write_checkpoint(tc_.output_dir, r0->model->lora(), r0->be, base_model_name_, st),
                   "writing checkpoint-" << st.global_step);
  RETURN_IF_ERROR(prune_checkpoints(tc_.output_dir, tc_.save_total_limit, st.global_step, keep_best() ? best_.step : 0));
  if (on_message) on_message("checkpoint saved: " + last_checkpoint_);
  return Status::OK();
}

// Every replica reads the checkpoint (its parameters and AdamW moments), so they start identical.
Status DataParallelTrainer::resume(const std::string& ckpt_dir, BatchSource& data) {
  const Json expect = fingerprint(data);
  TrainerState st;
  for (auto& r : reps_) {
    ASSIGN_OR_RETURN(st, read_checkpoint(ckpt_dir, expect, &r->model->lora(), r->be));
    r->opt->set_steps_taken(st.global_step);
  }
  epoch_ = st.epoch;
  epoch_started_ = st.epoch_started;
  ASSIGN_OR_RETURN(batches_in_epoch_, seek_checkpoint_data(st, data), "resuming from " << ckpt_dir);
  micro_seen_ = st.micro_batches_run;
  if (st.total_steps != sched_.total_steps && on_message)
    on_message(Str() << "note: the checkpoint planned " << st.total_steps << " steps, this run plans "
                     << sched_.total_steps << " (the LR schedule follows this run)");
  tokens_ = st.tokens;
  elapsed_s_ = st.elapsed_s;
  loss_acc_ = st.loss_acc;
  loss_count_ = st.loss_count;
  tokens_at_log_ = st.tokens_at_log;
  elapsed_at_log_ = st.elapsed_at_log;
  log_history_ = st.log_history;
  best_ = st.best;
  last_eval_step_ = -1;
  for (const Json& e : log_history_)
    if (e.contains("eval_loss")) last_eval_step_ = e.value("step", int64_t{-1});
  last_checkpoint_ = ckpt_dir;
  if (on_message) on_message(Str() << "resumed from " << ckpt_dir << " at step " << st.global_step);
  return Status::OK();
}

// ---- evaluation (train/evaluation.h Note [eval figures]) --------------------------------------

StatusOr<std::vector<EvalFigures>> DataParallelTrainer::eval_figures(BatchSource& data) {
  const bool pref = !tc_.rl.empty();
  const size_t width = pref ? PreferenceStats(pref_).sums().size() : 2;
  // A round is `group` batches for every rank, `group` the smallest of the ranks' eval groups (one
  // plan gives one size everywhere; the round's collective needs every rank to agree on it).
  std::vector<int64_t> groups(reps_.size());
  RETURN_IF_ERROR(run_on_replicas([&](int i, Replica& r) -> Status {
    std::vector<int64_t> g(static_cast<size_t>(world_), 0);
    g[static_cast<size_t>(r.comm->rank())] = r.model->eval_group_size(*r.layers);
    RETURN_IF_ERROR(r.comm->all_reduce_sum_host(g.data(), g.size()), "agreeing on the eval group");
    groups[static_cast<size_t>(i)] = *std::min_element(g.begin(), g.end());
    return Status::OK();
  }));
  const int group = static_cast<int>(std::max<int64_t>(groups[0], 1));
  auto round = [&](const std::vector<Batch>& bs) -> StatusOr<std::vector<EvalFigures>> {
    std::vector<std::vector<double>> gathered(reps_.size());
    RETURN_IF_ERROR(run_on_replicas([&](int i, Replica& r) -> Status {
      std::vector<Batch> mine;
      std::vector<size_t> at;
      for (size_t k = static_cast<size_t>(r.comm->rank()); k < bs.size(); k += static_cast<size_t>(world_)) {
        mine.push_back(bs[k]);
        at.push_back(k);
      }
      std::vector<double> v(bs.size() * width, 0.0);
      if (!mine.empty()) {
        ASSIGN_OR_RETURN(std::vector<EvalFigures> f, pref ? preference_eval_figures(*r.model, *r.layers, pref_, mine)
                                                          : eval_loss_figures(*r.model, *r.layers, mine));
        for (size_t j = 0; j < at.size(); ++j) {
          CHECK(f[j].size() == width, "eval figures of an unexpected width");
          std::copy(f[j].begin(), f[j].end(), v.begin() + static_cast<std::ptrdiff_t>(at[j] * width));
        }
      }
      // Each element is non-zero on one rank only: the sum is exact (Note [eval figures]).
      RETURN_IF_ERROR(r.comm->all_reduce_sum_host(v.data(), v.size()), "gathering the eval figures");
      gathered[static_cast<size_t>(i)] = std::move(v);
      return Status::OK();
    }));
    std::vector<EvalFigures> out;
    const std::vector<double>& v = gathered[0];
    for (size_t k = 0; k < bs.size(); ++k)
      out.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(k * width),
                       v.begin() + static_cast<std::ptrdiff_t>((k + 1) * width));
    return out;
  };
  return eval_pass(data, group * world_, round);
}

StatusOr<double> DataParallelTrainer::evaluate(BatchSource& data) {
  ASSIGN_OR_RETURN(std::vector<EvalFigures> f, eval_figures(data));
  return mean_loss_of(f);
}

StatusOr<PreferenceStats> DataParallelTrainer::evaluate_preference(BatchSource& data) {
  ASSIGN_OR_RETURN(std::vector<EvalFigures> f, eval_figures(data));
  return preference_stats_of(pref_, f);
}

// As Trainer::run_eval: the line in metrics.jsonl (where this process writes), then the verdict.
StatusOr<BestEval::Verdict> DataParallelTrainer::run_eval(int64_t step, MetricsWriter* metrics) {
  EvalMetrics e{.step = step};
  const auto t0 = std::chrono::steady_clock::now();
  if (!tc_.rl.empty()) {
    ASSIGN_OR_RETURN(PreferenceStats s, evaluate_preference(*eval_data_), "evaluation at step " << step);
    e.loss = s.mean_loss();
    e.extra = s.metrics("eval_");
  } else {
    ASSIGN_OR_RETURN(e.loss, evaluate(*eval_data_), "evaluation at step " << step);
  }
  e.runtime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (metrics) RETURN_IF_ERROR(metrics->write(e));
  log_history_.push_back({{"step", step}, {"eval_loss", e.loss}});
  last_eval_step_ = step;
  if (on_eval) on_eval(e);
  return best_.observe(e.loss, step, tc_.early_stopping_patience, tc_.early_stopping_threshold);
}

// The trained state, or with keep_best() the best eval's, read back from the checkpoint rank 0
// wrote at that step (as Trainer::save_final_adapter).
Status DataParallelTrainer::save_final_adapter() {
  if (!holds_rank0()) return Status::OK();  // another process writes it
  const int64_t now = reps_[0]->opt->steps_taken();
  if (keep_best() && best_.loss && best_.step != now) {
    const std::string dir = checkpoint_dir(tc_.output_dir, best_.step);
    Status ls;  // every local replica takes it, so that they stay one model
    for (auto& r : reps_)
      if (ls.ok()) ls = r->model->lora().load_peft(dir);
    if (ls.ok()) {
      if (on_message)
        on_message(Str() << "final adapter: the best eval's, step " << best_.step << " (eval_loss " << *best_.loss
                         << "; from " << dir << "), not step " << now << "'s");
    } else if (on_message) {
      on_message(Str() << "warning: the best eval's checkpoint (step " << best_.step << ") could not be read ("
                       << ls.message() << "); the final adapter is step " << now << "'s");
    }
  }
  return save_adapter(tc_.output_dir);
}

Status DataParallelTrainer::save_adapter(const std::string& dir) const {
  for (const auto& r : reps_)
    if (r->comm->rank() == 0) return r->model->lora().save_peft(dir, base_model_name_);
  return Status::OK();  // another process writes it
}

}  // namespace st
