#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include "core/file.h"
#include "io/safetensors.h"
#include "model/resident_source.h"
#include "train/loader_source.h"
#include "train/preference_loss.h"
#include "train/preference_step.h"

namespace st {

StatusOr<TrainerParts> hf_resident_parts(const std::string& hf_dir) {
  TrainerParts p;
  ASSIGN_OR_RETURN(p.model, load_hf_config(path_join(hf_dir, "config.json")));
  ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(hf_dir));
  auto shared = std::make_shared<Checkpoint>(std::move(ck));
  p.base_model_name = hf_dir;
  ModelConfig mc = p.model;
  p.make_layers = [shared, mc](Backend* be, const LayerLayout& layout) -> StatusOr<std::unique_ptr<LayerSource>> {
    ASSIGN_OR_RETURN(auto src, ResidentLayerSource::from_checkpoint(be, mc, layout, *shared));
    return std::unique_ptr<LayerSource>(std::move(src));
  };
  p.load_extras = [shared](Model& m) { return m.load_extras(*shared); };
  return p;
}

StatusOr<DType> training_act_dtype(const TrainConfig& tc, const Backend& be) {
  ASSIGN_OR_RETURN(DType d, dtype_from_user(tc.dtype), "dtype");
  if (d != DType::kF32 && d != DType::kBF16)
    return InvalidArgument(Str() << "dtype '" << tc.dtype << "' is not supported for training (bfloat16, float32)");
  RETURN_IF_ERROR(base_quant_from(tc).status());  // adapter / base refusals first
  const DType act = be.kind() == DeviceKind::kCpu ? DType::kF32 : d;
  if (tc.stream_compress == "true" && act != DType::kBF16)
    return InvalidArgument(Str() << "stream_compress: true codes bfloat16 weights, but this run computes in "
                                 << dtype_name(act) << (be.kind() == DeviceKind::kCpu ? " (every CPU run does)" : ""));
  return act;
}

StatusOr<BaseQuant> base_quant_from(const TrainConfig& tc) {
  if (tc.load_in_4bit && tc.adapter != "qlora")
    return InvalidArgument(Str() << "load_in_4bit: true needs adapter: qlora (got adapter: " << tc.adapter << ")");
  const bool code12 = tc.stream_compress == "true";  // "auto" is resolved before (resolve_stream_compress)
  if (code12 && tc.adapter == "qlora")
    return InvalidArgument("stream_compress: true codes a bfloat16 base; a QLoRA base is already 4-bit NF4");
  if (tc.adapter == "lora") return code12 ? BaseQuant::kCode12 : BaseQuant::kNone;
  if (tc.adapter == "qlora") return BaseQuant::kNF4;
  return Unimplemented(Str() << "adapter '" << tc.adapter << "' is not supported (lora, qlora)");
}

StatusOr<LoraConfig> lora_config_from(const TrainConfig& tc) {
  RETURN_IF_ERROR(base_quant_from(tc).status());
  LoraConfig lc;
  lc.r = tc.lora_r;
  lc.alpha = tc.lora_alpha;
  lc.dropout = tc.lora_dropout;
  lc.rslora = tc.use_rslora;
  lc.dora = tc.use_dora;
  if (lc.r <= 0) return InvalidArgument(Str() << "lora_r must be > 0, got " << lc.r);
  if (lc.dropout < 0 || lc.dropout >= 1) return InvalidArgument("lora_dropout must be in [0, 1)");
  ASSIGN_OR_RETURN(auto targets, parse_lora_targets(tc.lora_target_modules), "lora_target_modules");
  for (LoraTarget t : targets) lc.targets[static_cast<int>(t)] = true;
  if (tc.lora_target_linear) lc.targets.fill(true);
  lc.layers = tc.peft_layers_to_transform;
  std::sort(lc.layers.begin(), lc.layers.end());
  lc.layers.erase(std::unique(lc.layers.begin(), lc.layers.end()), lc.layers.end());
  return lc;
}

void resolve_step_ratios(TrainConfig* tc, int64_t total_steps) {
  const double total = static_cast<double>(std::max<int64_t>(total_steps, 1));
  const double epochs = static_cast<double>(std::max<int64_t>(tc->num_epochs, 1));
  auto every = [&](int64_t per_epoch) {
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(total / (static_cast<double>(per_epoch) * epochs))));
  };
  if (tc->warmup_ratio > 0) tc->warmup_steps = static_cast<int64_t>(std::ceil(total * tc->warmup_ratio));
  if (tc->evals_per_epoch > 0) tc->eval_steps = every(tc->evals_per_epoch);
  if (tc->saves_per_epoch > 0) tc->save_steps = every(tc->saves_per_epoch);
}

Status check_trainer_config(const TrainConfig& tc) {
  if (tc.micro_batch_size <= 0) return InvalidArgument("micro_batch_size must be > 0");
  if (tc.gradient_accumulation_steps <= 0) return InvalidArgument("gradient_accumulation_steps must be > 0");
  if (tc.sequence_len <= 1) return InvalidArgument("sequence_len must be > 1");
  // Each factor first, so their product cannot overflow (train_config.h kMaxMicroBatchTokens).
  const int64_t kMax = kMaxMicroBatchTokens;
  if (tc.sequence_len > kMax || tc.micro_batch_size > kMax || tc.sequence_len * micro_batch_rows(tc) > kMax)
    return InvalidArgument(Str() << "micro-batch rows x sequence_len = " << micro_batch_rows(tc) << " x "
                                 << tc.sequence_len << " is beyond " << kMax << " tokens a micro-batch");
  if (tc.lora_r > kMaxLoraRank)
    return InvalidArgument(Str() << "lora_r " << tc.lora_r << " is beyond " << kMaxLoraRank);
  if (tc.loss_normalization != "window" && tc.loss_normalization != "micro_batch")
    return InvalidArgument(Str() << "loss_normalization '" << tc.loss_normalization
                                 << "' is not supported (window, micro_batch)");
  if (tc.max_steps < 0 || tc.num_epochs < 0) return InvalidArgument("max_steps / num_epochs must be >= 0");
  if (tc.warmup_ratio > 0 && tc.warmup_steps > 0) return InvalidArgument("set warmup_steps or warmup_ratio, not both");
  RETURN_IF_ERROR(lr_schedule_from(tc).status());  // the scheduler and its kwargs
  if (tc.evals_per_epoch > 0 && tc.eval_steps > 0) return InvalidArgument("set eval_steps or evals_per_epoch, not both");
  if (!tc.rl.empty()) RETURN_IF_ERROR(preference_config_from(tc).status());
  if (tc.saves_per_epoch > 0 && tc.save_steps > 0) return InvalidArgument("set save_steps or saves_per_epoch, not both");
  return Status::OK();
}

StatusOr<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& tc, Backend* be, TrainerParts parts) {
  RETURN_IF_ERROR(check_trainer_config(tc));
  std::unique_ptr<Trainer> t(new Trainer());
  t->tc_ = tc;
  if (!tc.rl.empty()) {
    ASSIGN_OR_RETURN(t->pref_, preference_config_from(tc));
  }
  t->be_ = be;
  ASSIGN_OR_RETURN(DType act, training_act_dtype(tc, *be));
  t->act_ = act;
  ASSIGN_OR_RETURN(LoraConfig lc, lora_config_from(tc));
  ASSIGN_OR_RETURN(BaseQuant quant, base_quant_from(tc));
  ModelOptions mo{.act_dtype = act,
                  .base_quant = quant,
                  .max_tokens = micro_batch_rows(tc) * tc.sequence_len,
                  .seed = tc.seed,
                  .vocab_chunk = tc.vocab_chunk,
                  .host_extras = parts.host_extras,
                  .recompute = parts.recompute,
                  .fused_attention_allowance = parts.fused_attention_allowance,
                  .fused_attention_batch = micro_batch_rows(tc),
                  .fused_attention_seq = tc.sequence_len,
                  .launch_plan_bytes = parts.launch_plan_bytes,
                  .micro_batch_slots = parts.micro_batch_slots,
                  .neftune_alpha = tc.neftune_noise_alpha};
  ASSIGN_OR_RETURN(t->model_, Model::create(parts.model, be, lc, mo));
  RETURN_IF_ERROR(parts.load_extras(*t->model_), "loading embedding / final norm / lm_head");
  ASSIGN_OR_RETURN(t->layers_, parts.make_layers(be, t->model_->layer_layout()), "preparing base layers");
  if (!tc.lora_model_dir.empty()) {
    RETURN_IF_ERROR(t->model_->lora().load_peft(tc.lora_model_dir), "lora_model_dir");
  } else {
    t->model_->lora().init(tc.seed);
    RETURN_IF_ERROR(t->model_->init_dora_magnitudes(*t->layers_));
  }
  ASSIGN_OR_RETURN(t->opt_, Optimizer::create(be, &t->model_->lora(), adamw_config_from(tc)));
  ASSIGN_OR_RETURN(t->sched_, lr_schedule_from(tc));
  t->parts_ = std::move(parts);
  return t;
}

Trainer::~Trainer() {
  if (be_) be_->sync_all();
}

Status Trainer::plan_steps(BatchSource& data) {
  if (tc_.max_steps > 0) {
    sched_.total_steps = tc_.max_steps;
  } else {
    const int64_t mb = data.micro_batches_per_epoch();
    if (mb <= 0) return InvalidArgument("max_steps is required when the dataset size is unknown");
    const int64_t k = tc_.gradient_accumulation_steps;
    sched_.total_steps = std::max<int64_t>(1, tc_.num_epochs * ((mb + k - 1) / k));
  }
  resolve_step_ratios(&tc_, sched_.total_steps);
  sched_.warmup_steps = tc_.warmup_steps;
  return Status::OK();
}

Status Trainer::start_epoch(BatchSource& data, int64_t epoch) {
  epoch_ = epoch;
  batches_in_epoch_ = 0;
  epoch_started_ = true;
  return data.start_epoch(epoch);
}

// Up to k micro-batches. An epoch that ends mid-window ends the window (HF does the same); the
// next window starts the next epoch. Returns false when the data is exhausted (num_epochs done).
StatusOr<bool> Trainer::fill_window(BatchSource& data, std::vector<Batch>* window) {
  window->clear();
  if (!epoch_started_) RETURN_IF_ERROR(start_epoch(data, epoch_));
  bool fresh_epoch = false;
  while (static_cast<int64_t>(window->size()) < tc_.gradient_accumulation_steps) {
    Batch b;
    ASSIGN_OR_RETURN(bool got, data.next(&b));
    if (got) {
      window->push_back(std::move(b));
      ++batches_in_epoch_;
      fresh_epoch = false;
      continue;
    }
    if (!window->empty()) {
      epoch_started_ = false;
      ++epoch_;
      batches_in_epoch_ = 0;
      return true;
    }
    if (fresh_epoch) return InvalidArgument("the training dataset yields no batches");
    if (tc_.max_steps == 0 && epoch_ + 1 >= tc_.num_epochs) return false;
    RETURN_IF_ERROR(start_epoch(data, epoch_ + 1));
    fresh_epoch = true;
  }
  return true;
}

// train/preference_step.h Note [preference window] over the whole window: its references, then
// one forward_backward; each micro-batch's terms merged into `stats` in window order.
StatusOr<std::vector<double>> Trainer::preference_forward_backward(const std::vector<Batch>& window,
                                                                   PreferenceStats* stats) {
  std::vector<const Batch*> ptrs;
  int64_t units = 0;
  for (const Batch& b : window) {
    ptrs.push_back(&b);
    units += preference_units(b);
  }
  std::vector<PreferenceStats> per_mb;
  ASSIGN_OR_RETURN(PreferenceWindow w, PreferenceWindow::prepare(*model_, *layers_, pref_, ptrs, units,
                                                                 static_cast<int64_t>(window.size()), &per_mb));
  model_->lora().zero_grads();  // the references borrowed the gradient section
  ASSIGN_OR_RETURN(std::vector<double> sums, w.forward_backward(*model_, *layers_, 0, w.size(), &per_mb));
  for (const PreferenceStats& s : per_mb) stats->merge(s);
  return sums;
}

StatusOr<StepMetrics> Trainer::train_step(const std::vector<Batch>& window) {
  auto t0 = std::chrono::steady_clock::now();
  const bool per_micro = tc_.loss_normalization == "micro_batch";
  std::vector<const Batch*> ptrs;
  std::vector<float> scales;
  std::vector<int64_t> targets;
  int64_t total = 0, tokens = 0;
  for (const Batch& b : window) {
    ptrs.push_back(&b);
    targets.push_back(count_targets(b));
    total += targets.back();
    tokens += b.real_tokens > 0 ? b.real_tokens : b.batch * b.seq;  // padding is not throughput
  }
  const double k = static_cast<double>(window.size());
  for (int64_t n : targets)
    scales.push_back(per_micro ? static_cast<float>(1.0 / (static_cast<double>(std::max<int64_t>(n, 1)) * k))
                               : static_cast<float>(1.0 / static_cast<double>(std::max<int64_t>(total, 1))));
  PreferenceStats pref(pref_);
  std::vector<double> sums;
  if (!tc_.rl.empty()) {
    ASSIGN_OR_RETURN(sums, preference_forward_backward(window, &pref));
  } else {
    model_->lora().zero_grads();
    ASSIGN_OR_RETURN(sums, model_->forward_backward(ptrs, *layers_, scales));
  }
  // A failed base-weight load leaves stale bytes in a slot: discard the step, name the error.
  RETURN_IF_ERROR(layers_->status(), "loading base weights (the step was discarded)");
  double loss = 0;
  if (!tc_.rl.empty()) {
    loss = pref.mean_loss();
  } else if (per_micro) {
    for (size_t i = 0; i < sums.size(); ++i) loss += sums[i] / static_cast<double>(std::max<int64_t>(targets[i], 1));
    loss /= k;
  } else {
    for (double s : sums) loss += s;
    loss /= static_cast<double>(std::max<int64_t>(total, 1));
  }
  if (!std::isfinite(loss))
    return InvalidArgument(Str() << "the training loss is " << loss
                                 << " (not finite); stopping without saving this step (lower learning_rate, check "
                                    "the data or use float32)");
  StepMetrics m;
  m.lr = lr_at(sched_, opt_->steps_taken());
  m.grad_norm = opt_->step(m.lr);
  if (!std::isfinite(m.grad_norm))
    return InvalidArgument(Str() << "the gradient norm is " << m.grad_norm
                                 << " (not finite); stopping without saving this step");
  m.step = opt_->steps_taken();
  m.loss = loss;
  if (!tc_.rl.empty()) m.extra = pref.metrics();
  be_->sync_stream(StreamId::kCompute);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tokens_ += tokens;
  elapsed_s_ += dt;
  m.tokens = tokens_;
  m.tok_s = dt > 0 ? static_cast<double>(tokens) / dt : 0;
  m.elapsed_s = elapsed_s_;
  return m;
}

Status Trainer::log_step(const StepMetrics& m) {
  loss_acc_ += m.loss;
  ++loss_count_;
  extra_means_.add(m.extra);
  const bool last = m.step == sched_.total_steps;
  if (m.step % std::max<int64_t>(tc_.logging_steps, 1) != 0 && !last) return Status::OK();
  StepMetrics logged = m;
  logged.loss = loss_acc_ / static_cast<double>(loss_count_);  // mean over the logged steps, as HF
  // The extras (DPO's rewards) too; a resumed run's first log averages its own steps only.
  logged.extra = extra_means_.take();
  const double dt = elapsed_s_ - elapsed_at_log_;
  logged.tok_s = dt > 0 ? static_cast<double>(tokens_ - tokens_at_log_) / dt : 0;
  RETURN_IF_ERROR(metrics_->write(logged));
  log_history_.push_back({{"step", logged.step}, {"loss", logged.loss}, {"lr", logged.lr},
                          {"grad_norm", logged.grad_norm}});
  loss_acc_ = 0;
  loss_count_ = 0;
  tokens_at_log_ = tokens_;
  elapsed_at_log_ = elapsed_s_;
  return Status::OK();
}

StatusOr<BestEval::Verdict> Trainer::run_eval(int64_t step) {
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
  const double loss = e.loss;
  RETURN_IF_ERROR(metrics_->write(e));
  log_history_.push_back({{"step", step}, {"eval_loss", loss}});
  last_eval_step_ = step;
  if (on_eval) on_eval(e);
  return best_.observe(loss, step, tc_.early_stopping_patience, tc_.early_stopping_threshold);
}

// Note [loss watchdog]: axolotl's LossWatchDogCallback, as it runs: at the end of every step,
// before that step is logged, it looks at the last entry of the log history; a training loss above
// the threshold counts a violation, one at or below it resets the count, an eval entry does
// neither. At loss_watchdog_patience violations the training stops after this step (its log, eval
// and checkpoint as scheduled) and the adapter is written, as HF's should_training_stop does. The
// count restarts with a resumed run (the callback keeps no state in checkpoints).
bool watch_loss(const TrainConfig& tc, const Json& log_history, int64_t* violations) {
  if (tc.loss_watchdog_threshold <= 0 || log_history.empty()) return false;
  const Json& last = log_history.back();
  if (!last.contains("loss")) return false;
  if (last["loss"].get<double>() > tc.loss_watchdog_threshold) ++*violations;
  else *violations = 0;
  return *violations >= tc.loss_watchdog_patience;
}

// Early stopping and load_best_model_at_end read evals: refused before any step when there are none
// to read (HF asserts the same at on_train_begin; axolotl refuses the config).
Status check_eval_plan(const TrainConfig& tc, bool has_eval) {
  const bool want_best = tc.load_best_model_at_end || tc.early_stopping_patience > 0;
  const char* key = tc.early_stopping_patience > 0 ? "early_stopping_patience" : "load_best_model_at_end";
  if (want_best && !has_eval)
    return InvalidArgument(Str() << key << " compares evaluations, and this run has no eval set (set val_set_size or "
                                    "eval_datasets)");
  if (tc.early_stopping_patience > 0 && tc.eval_steps <= 0)
    return InvalidArgument("early_stopping_patience counts evaluations during training, and this run evaluates only at "
                           "the end (set eval_steps or evals_per_epoch)");
  return Status::OK();
}

// The final adapter: the trained state, or with keep_best() the best eval's, read back from the
// checkpoint written at that step (Note [best eval and early stopping]).
Status Trainer::save_final_adapter() {
  const int64_t now = opt_->steps_taken();
  if (keep_best() && best_.loss && best_.step != now) {
    const std::string dir = checkpoint_dir(tc_.output_dir, best_.step);
    Status ls = model_->lora().load_peft(dir);
    if (ls.ok()) {
      if (on_message)
        on_message(Str() << "final adapter: the best eval's, step " << best_.step << " (eval_loss " << *best_.loss
                         << "; from " << dir << "), not step " << now << "'s");
    } else if (on_message) {
      // The trained state is still a result: write it rather than nothing, and say so.
      on_message(Str() << "warning: the best eval's checkpoint (step " << best_.step << ") could not be read ("
                       << ls.message() << "); the final adapter is step " << now << "'s");
    }
  }
  return save_adapter(tc_.output_dir);
}

Status Trainer::train(BatchSource& data) {
  RETURN_IF_ERROR(plan_steps(data));
  RETURN_IF_ERROR(check_eval_plan(tc_, eval_data_ != nullptr));
  RETURN_IF_ERROR(make_dirs(tc_.output_dir));
  const std::string metrics_path = path_join(tc_.output_dir, "metrics.jsonl");
  bool append = false;
  if (!tc_.resume_from_checkpoint.empty()) {
    ASSIGN_OR_RETURN(std::string dir, resolve_resume_checkpoint(tc_.resume_from_checkpoint, tc_.output_dir));
    if (!dir.empty()) {  // "auto" with no checkpoint yet: a fresh start
      RETURN_IF_ERROR(resume(dir, data));
      RETURN_IF_ERROR(truncate_metrics(metrics_path, opt_->steps_taken()));
      append = true;
    }
  }
  ASSIGN_OR_RETURN(metrics_, MetricsWriter::open(metrics_path, append));
  std::vector<Batch> window;
  // A checkpoint written at the step its run stopped early at (a save step) resumes as stopped.
  bool stopped_early = tc_.early_stopping_patience > 0 && best_.evals_not_improved >= tc_.early_stopping_patience;
  if (stopped_early && on_message)
    on_message(Str() << "the run of this checkpoint had stopped early at step " << opt_->steps_taken()
                     << " (early_stopping_patience " << tc_.early_stopping_patience << "): not training further");
  while (opt_->steps_taken() < sched_.total_steps && !stopped_early) {
    ASSIGN_OR_RETURN(bool more, fill_window(data, &window));
    if (!more) break;
    ASSIGN_OR_RETURN(StepMetrics m, train_step(window),
                     "step " << opt_->steps_taken() + 1
                             << (last_checkpoint_.empty() ? std::string()
                                                          : "; the last good checkpoint is " + last_checkpoint_));
    if (on_step) on_step(m);
    const bool watchdog = watch_loss(tc_, log_history_, &watchdog_violations_);  // before this step's log: Note [loss watchdog]
    RETURN_IF_ERROR(log_step(m));
    const bool last = m.step == sched_.total_steps;
    BestEval::Verdict ev;
    if (eval_data_ && (last || (tc_.eval_steps > 0 && m.step % tc_.eval_steps == 0))) {
      ASSIGN_OR_RETURN(ev, run_eval(m.step));
    }
    stopped_early = (ev.stop || watchdog) && !last;
    const bool stop = !last && !stopped_early && stop_requested && stop_requested();
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
  if (eval_data_ && last_eval_step_ != opt_->steps_taken() && opt_->steps_taken() > 0)
    RETURN_IF_ERROR(run_eval(opt_->steps_taken()).status());
  return save_final_adapter();
}

Json Trainer::fingerprint(BatchSource& data) const {
  return config_fingerprint(tc_, parts_.model, act_, data.micro_batches_per_epoch());
}

Status Trainer::save_checkpoint(BatchSource& data) {
  TrainerState st;
  st.global_step = opt_->steps_taken();
  st.total_steps = sched_.total_steps;
  st.epoch = epoch_;
  st.epoch_started = epoch_started_;
  st.batches_in_epoch = batches_in_epoch_;
  if (auto* dl = dynamic_cast<DataLoaderSource*>(&data)) {
    st.has_data_position = true;
    st.data_position = dl->position();
  }
  st.micro_batches_run = model_->micro_batches_run();
  st.tokens = tokens_;
  st.elapsed_s = elapsed_s_;
  st.loss_acc = loss_acc_;
  st.loss_count = loss_count_;
  st.tokens_at_log = tokens_at_log_;
  st.elapsed_at_log = elapsed_at_log_;
  st.fingerprint = fingerprint(data);
  st.log_history = log_history_;
  st.best = best_;
  be_->sync_all();
  ASSIGN_OR_RETURN(last_checkpoint_, write_checkpoint(tc_.output_dir, model_->lora(), be_, parts_.base_model_name, st),
                   "writing checkpoint-" << st.global_step);
  RETURN_IF_ERROR(prune_checkpoints(tc_.output_dir, tc_.save_total_limit, st.global_step, keep_best() ? best_.step : 0));
  if (on_message) on_message("checkpoint saved: " + last_checkpoint_);
  return Status::OK();
}

// Puts `data` where the checkpointed run left it: the same epoch, after the same micro-batches.
// A DataLoaderSource seeks exactly; any other source replays the epoch's first batches.
StatusOr<int64_t> seek_checkpoint_data(const TrainerState& st, BatchSource& data) {
  if (!st.epoch_started) return 0;
  RETURN_IF_ERROR(data.start_epoch(st.epoch));
  auto* dl = dynamic_cast<DataLoaderSource*>(&data);
  if (dl && st.has_data_position) {
    if (st.batches_in_epoch > data.micro_batches_per_epoch())
      return Corruption(Str() << "the checkpoint is " << st.batches_in_epoch << " micro-batches into epoch " << st.epoch
                              << ", but an epoch of this dataset has " << data.micro_batches_per_epoch());
    RETURN_IF_ERROR(dl->seek(st.data_position), "data position of the checkpoint");
    return st.batches_in_epoch;
  }
  for (int64_t i = 0; i < st.batches_in_epoch; ++i) {
    Batch b;
    ASSIGN_OR_RETURN(bool got, data.next(&b));
    if (!got)
      return InvalidArgument(Str() << "the checkpoint is " << st.batches_in_epoch << " micro-batches into epoch "
                                   << st.epoch << ", but this dataset's epoch has only " << i);
  }
  return st.batches_in_epoch;
}

Status Trainer::position_data(const TrainerState& st, BatchSource& data) {
  epoch_ = st.epoch;
  epoch_started_ = st.epoch_started;
  ASSIGN_OR_RETURN(batches_in_epoch_, seek_checkpoint_data(st, data));
  return Status::OK();
}

Status Trainer::resume(const std::string& ckpt_dir, BatchSource& data) {
  ASSIGN_OR_RETURN(TrainerState st, read_checkpoint(ckpt_dir, fingerprint(data), &model_->lora(), be_));
  RETURN_IF_ERROR(position_data(st, data), "resuming from " << ckpt_dir);
  opt_->set_steps_taken(st.global_step);
  model_->set_micro_batches_run(st.micro_batches_run);
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

StatusOr<double> Trainer::evaluate(BatchSource& data) {
  if (!tc_.rl.empty()) {
    ASSIGN_OR_RETURN(PreferenceStats s, evaluate_preference(data));
    return s.mean_loss();
  }
  return mean_eval_loss(*model_, *layers_, data, &on_eval_progress);
}

StatusOr<PreferenceStats> Trainer::evaluate_preference(BatchSource& data) {
  return st::evaluate_preference(*model_, *layers_, pref_, data, &on_eval_progress);
}

Status Trainer::save_adapter(const std::string& dir) const {
  return model_->lora().save_peft(dir, parts_.base_model_name);
}

}  // namespace st
