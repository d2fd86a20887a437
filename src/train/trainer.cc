#include "train/trainer.h"

#include <chrono>

#include "core/file.h"
#include "io/safetensors.h"
#include "model/resident_source.h"

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
  return be.kind() == DeviceKind::kCpu ? DType::kF32 : d;
}

StatusOr<LoraConfig> lora_config_from(const TrainConfig& tc) {
  if (tc.adapter != "lora")
    return Unimplemented(Str() << "adapter '" << tc.adapter << "' is not supported yet (lora)");
  LoraConfig lc;
  lc.r = tc.lora_r;
  lc.alpha = tc.lora_alpha;
  lc.dropout = tc.lora_dropout;
  if (lc.r <= 0) return InvalidArgument(Str() << "lora_r must be > 0, got " << lc.r);
  if (lc.dropout < 0 || lc.dropout >= 1) return InvalidArgument("lora_dropout must be in [0, 1)");
  ASSIGN_OR_RETURN(auto targets, parse_lora_targets(tc.lora_target_modules), "lora_target_modules");
  for (LoraTarget t : targets) lc.targets[static_cast<int>(t)] = true;
  return lc;
}

namespace {
Status validate(const TrainConfig& tc) {
  if (tc.micro_batch_size <= 0) return InvalidArgument("micro_batch_size must be > 0");
  if (tc.gradient_accumulation_steps <= 0) return InvalidArgument("gradient_accumulation_steps must be > 0");
  if (tc.sequence_len <= 1) return InvalidArgument("sequence_len must be > 1");
  if (tc.loss_normalization != "window" && tc.loss_normalization != "micro_batch")
    return InvalidArgument(Str() << "loss_normalization '" << tc.loss_normalization
                                 << "' is not supported (window, micro_batch)");
  if (tc.max_steps < 0 || tc.num_epochs < 0) return InvalidArgument("max_steps / num_epochs must be >= 0");
  return Status::OK();
}
}  // namespace

StatusOr<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& tc, Backend* be, TrainerParts parts) {
  RETURN_IF_ERROR(validate(tc));
  std::unique_ptr<Trainer> t(new Trainer());
  t->tc_ = tc;
  t->be_ = be;
  ASSIGN_OR_RETURN(DType act, training_act_dtype(tc, *be));
  ASSIGN_OR_RETURN(LoraConfig lc, lora_config_from(tc));
  ModelOptions mo{.act_dtype = act, .max_tokens = tc.micro_batch_size * tc.sequence_len, .seed = tc.seed};
  ASSIGN_OR_RETURN(t->model_, Model::create(parts.model, be, lc, mo));
  RETURN_IF_ERROR(parts.load_extras(*t->model_), "loading embedding / final norm / lm_head");
  ASSIGN_OR_RETURN(t->layers_, parts.make_layers(be, t->model_->layer_layout()), "preparing base layers");
  if (!tc.lora_model_dir.empty()) {
    RETURN_IF_ERROR(t->model_->lora().load_peft(tc.lora_model_dir), "lora_model_dir");
  } else {
    t->model_->lora().init(tc.seed);
  }
  AdamWConfig ac{.beta1 = tc.adam_beta1, .beta2 = tc.adam_beta2, .eps = tc.adam_epsilon,
                 .weight_decay = tc.weight_decay, .max_grad_norm = tc.max_grad_norm};
  ASSIGN_OR_RETURN(t->opt_, Optimizer::create(be, &t->model_->lora(), ac));
  ASSIGN_OR_RETURN(t->sched_.kind, parse_lr_kind(tc.lr_scheduler));
  t->sched_.base_lr = tc.learning_rate;
  t->sched_.warmup_steps = tc.warmup_steps;
  t->sched_.total_steps = std::max<int64_t>(tc.max_steps, 1);
  t->parts_ = std::move(parts);
  return t;
}

Trainer::~Trainer() {
  if (be_) be_->sync_all();
}

Status Trainer::plan_steps(BatchSource& data) {
  if (tc_.max_steps > 0) {
    sched_.total_steps = tc_.max_steps;
    return Status::OK();
  }
  const int64_t mb = data.micro_batches_per_epoch();
  if (mb <= 0) return InvalidArgument("max_steps is required when the dataset size is unknown");
  const int64_t k = tc_.gradient_accumulation_steps;
  sched_.total_steps = std::max<int64_t>(1, tc_.num_epochs * ((mb + k - 1) / k));
  return Status::OK();
}

// Up to k micro-batches. An epoch that ends mid-window ends the window (HF does the same); the
// next window starts the next epoch. Returns false when the data is exhausted (num_epochs done).
StatusOr<bool> Trainer::fill_window(BatchSource& data, std::vector<Batch>* window) {
  window->clear();
  if (!epoch_started_) {
    RETURN_IF_ERROR(data.start_epoch(epoch_));
    epoch_started_ = true;
  }
  bool fresh_epoch = false;
  while (static_cast<int64_t>(window->size()) < tc_.gradient_accumulation_steps) {
    Batch b;
    ASSIGN_OR_RETURN(bool got, data.next(&b));
    if (got) {
      window->push_back(std::move(b));
      fresh_epoch = false;
      continue;
    }
    if (!window->empty()) {
      epoch_started_ = false;
      ++epoch_;
      return true;
    }
    if (fresh_epoch) return InvalidArgument("the training dataset yields no batches");
    if (tc_.max_steps == 0 && epoch_ + 1 >= tc_.num_epochs) return false;
    ++epoch_;
    RETURN_IF_ERROR(data.start_epoch(epoch_));
    fresh_epoch = true;
  }
  return true;
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
    tokens += b.batch * b.seq;
  }
  const double k = static_cast<double>(window.size());
  for (int64_t n : targets)
    scales.push_back(per_micro ? static_cast<float>(1.0 / (static_cast<double>(std::max<int64_t>(n, 1)) * k))
                               : static_cast<float>(1.0 / static_cast<double>(std::max<int64_t>(total, 1))));
  model_->lora().zero_grads();
  ASSIGN_OR_RETURN(std::vector<double> sums, model_->forward_backward(ptrs, *layers_, scales));
  double loss = 0;
  if (per_micro) {
    for (size_t i = 0; i < sums.size(); ++i) loss += sums[i] / static_cast<double>(std::max<int64_t>(targets[i], 1));
    loss /= k;
  } else {
    for (double s : sums) loss += s;
    loss /= static_cast<double>(std::max<int64_t>(total, 1));
  }
  StepMetrics m;
  m.lr = lr_at(sched_, opt_->steps_taken());
  m.grad_norm = opt_->step(m.lr);
  m.step = opt_->steps_taken();
  m.loss = loss;
  be_->sync_stream(StreamId::kCompute);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tokens_ += tokens;
  elapsed_s_ += dt;
  m.tokens = tokens_;
  m.tok_s = dt > 0 ? static_cast<double>(tokens) / dt : 0;
  m.elapsed_s = elapsed_s_;
  return m;
}

Status Trainer::train(BatchSource& data) {
  RETURN_IF_ERROR(plan_steps(data));
  RETURN_IF_ERROR(make_dirs(tc_.output_dir));
  ASSIGN_OR_RETURN(auto metrics, MetricsWriter::open(path_join(tc_.output_dir, "metrics.jsonl"), false));
  const int64_t log_every = std::max<int64_t>(tc_.logging_steps, 1);
  double loss_acc = 0;
  int64_t n_acc = 0, tok_at_log = tokens_;
  double t_at_log = elapsed_s_;
  std::vector<Batch> window;
  while (opt_->steps_taken() < sched_.total_steps) {
    ASSIGN_OR_RETURN(bool more, fill_window(data, &window));
    if (!more) break;
    ASSIGN_OR_RETURN(StepMetrics m, train_step(window));
    if (on_step) on_step(m);
    loss_acc += m.loss;
    ++n_acc;
    const bool last = m.step == sched_.total_steps;
    if (m.step % log_every == 0 || last) {
      StepMetrics logged = m;
      logged.loss = loss_acc / static_cast<double>(n_acc);  // mean over the logged steps, as HF
      const double dt = elapsed_s_ - t_at_log;
      logged.tok_s = dt > 0 ? static_cast<double>(tokens_ - tok_at_log) / dt : 0;
      RETURN_IF_ERROR(metrics->write(logged));
      loss_acc = 0;
      n_acc = 0;
      tok_at_log = tokens_;
      t_at_log = elapsed_s_;
    }
    if (tc_.save_steps > 0 && m.step % tc_.save_steps == 0 && !last)
      RETURN_IF_ERROR(save_adapter(path_join(tc_.output_dir, Str() << "checkpoint-" << m.step)));
  }
  return save_adapter(tc_.output_dir);
}

StatusOr<double> Trainer::evaluate(BatchSource& data) {
  RETURN_IF_ERROR(data.start_epoch(0));
  double sum = 0;
  int64_t n = 0;
  for (;;) {
    Batch b;
    ASSIGN_OR_RETURN(bool got, data.next(&b));
    if (!got) break;
    ASSIGN_OR_RETURN(double s, model_->eval_loss_sum(b, *layers_));
    sum += s;
    n += count_targets(b);
  }
  if (n == 0) return InvalidArgument("the eval dataset has no target tokens");
  return sum / static_cast<double>(n);
}

Status Trainer::save_adapter(const std::string& dir) const {
  return model_->lora().save_peft(dir, parts_.base_model_name);
}

}  // namespace st
