// `streamtune train`: assembles backend, base weights (store + tier + plan), data and the Trainer.
#include "cli/run_train.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/file.h"
#include "core/sigint.h"
#include "dist/run_train_dp.h"
#include "model/load.h"
#include "store/manifest.h"
#include "stream/planner.h"
#include "train/base_weights.h"
#include "train/checkpoint.h"
#include "train/loader_source.h"
#include "train/loss_curve.h"
#include "train/model_card.h"
#include "train/progress.h"
#include "train/train_data.h"
#include "train/trainer.h"

namespace st {
namespace {

StatusOr<std::unique_ptr<Backend>> backend_for(const std::string& device) {
  ASSIGN_OR_RETURN(DeviceKind kind, device_kind_for(device));
  return make_backend(kind);
}

int64_t trainable_params(const ModelConfig& mc, const LoraConfig& lc) {
  int64_t n = 0;
  for (int t = 0; t < kNumLoraTargets; ++t) {
    if (!lc.targets[t]) continue;
    auto [in, out] = lora_target_dims(mc, static_cast<LoraTarget>(t));
    n += lc.r * (in + out) + (lc.dora ? out : 0);
  }
  return n * lc.adapted_layers(mc.num_layers);
}

void print_banner(const TrainConfig& cfg, const Backend& be, const BaseWeights& bw, const TrainData& td,
                  const LoraConfig& lc) {
  const ModelConfig& mc = bw.parts.model;
  const int64_t total = mc.total_params(), trainable = trainable_params(mc, lc);
  std::printf("streamtune train\n");
  std::printf("  model      %s (%s, %lld layers, hidden %lld, vocab %lld)\n", cfg.base_model.c_str(),
              arch_name(mc.arch), static_cast<long long>(mc.num_layers), static_cast<long long>(mc.hidden_size),
              static_cast<long long>(mc.vocab_size));
  std::printf("  params     %.1fM, trainable %.3fM (%.3f%%) %s r=%lld alpha=%g%s\n", total / 1e6, trainable / 1e6,
              100.0 * static_cast<double>(trainable) / static_cast<double>(total), lc.dora ? "DoRA" : "LoRA",
              static_cast<long long>(lc.r), lc.alpha,
              lc.rslora ? (Str() << " rsLoRA (scale alpha/sqrt(r) = " << lc.scaling() << ")").str().c_str() : "");
  if (!lc.layers.empty()) {
    Str list;
    for (size_t i = 0; i < lc.layers.size(); ++i) list << (i ? ", " : "") << lc.layers[i];
    std::printf("  layers     the adapter on %zu of %lld layers (peft_layers_to_transform): %s\n", lc.layers.size(),
                static_cast<long long>(mc.num_layers), list.str().c_str());
  }
  if (cfg.neftune_noise_alpha > 0)
    std::printf("  NEFTune    noise alpha %g on the embeddings of training forwards (magnitude alpha / sqrt(T x %lld))\n",
                cfg.neftune_noise_alpha, static_cast<long long>(mc.hidden_size));
  if (StatusOr<PreferenceConfig> pc = preference_config_from(cfg); !cfg.rl.empty() && pc.ok()) {
    std::printf("  %-10s %s; micro_batch_size %lld %s = %lld rows\n", preference_loss_kind(cfg).c_str(),
                preference_summary(*pc).c_str(), static_cast<long long>(cfg.micro_batch_size),
                cfg.rl == "kto" ? "example(s) and their KL sequences" : "pair(s)",
                static_cast<long long>(micro_batch_rows(cfg)));
  }
  if (cfg.loraplus_lr_ratio > 0)
    std::printf("  LoRA+      B%s at learning_rate x %g, A at learning_rate\n", lc.dora ? " and the magnitudes" : "",
                cfg.loraplus_lr_ratio);
  int64_t windowed = 0;
  for (int64_t l = 0; l < mc.num_layers; ++l) windowed += mc.attention_window(l) > 0 ? 1 : 0;
  if (windowed > 0)
    std::printf("  attention  sliding window of %lld tokens on %lld of %lld layers%s\n",
                static_cast<long long>(mc.sliding_window), static_cast<long long>(windowed),
                static_cast<long long>(mc.num_layers),
                cfg.sequence_len <= mc.sliding_window ? " (no effect at this sequence_len)" : "");
  if (mc.attention_dropout > 0)
    std::printf("  note       config.json's attention_dropout %g is not applied: attention probabilities are not\n"
                "             dropped in training (LoRA dropout is lora_dropout)\n",
                mc.attention_dropout);
  // Positions restart in every sample (packed or not), so the longest sample sets the largest one.
  size_t longest = 0;
  for (const Sample& smp : *td.train) longest = std::max(longest, smp.input_ids.size());
  if (mc.max_position_embeddings > 0 && static_cast<int64_t>(longest) > mc.max_position_embeddings)
    std::printf("  note       the longest sample has %zu tokens, past config.json's max_position_embeddings %lld:\n"
                "             its later positions are ones the model was not trained on (RoPE extrapolates, as\n"
                "             in transformers; a rope_scaling entry in config.json extends the context)\n",
                longest, static_cast<long long>(mc.max_position_embeddings));
  std::printf("  device     %s\n", be.description().c_str());
  std::printf("  store      %s (%s: %s)\n", bw.store_dir.c_str(), bw.store_reused ? "reused" : "built",
              bw.store_reason.c_str());
  std::printf("%s", bw.plan.banner().c_str());
  std::printf("  train      %s, micro_batch %lld%s x accumulation %lld, seq %lld, lr %g (%s, warmup %s)\n",
              cfg.max_steps > 0 ? (Str() << cfg.max_steps << " steps").str().c_str()
                                : (Str() << cfg.num_epochs << " epoch(s)").str().c_str(),
              static_cast<long long>(cfg.micro_batch_size),
              padding_free_on(cfg) ? " (padding-free: samples back to back in one row)"
              : cfg.sample_packing ? " (packed rows)"
                                   : "",
              static_cast<long long>(cfg.gradient_accumulation_steps),
              static_cast<long long>(cfg.sequence_len), cfg.learning_rate,
              cfg.cosine_min_lr_ratio > 0 ? (Str() << "cosine to " << cfg.cosine_min_lr_ratio << "x").str().c_str()
                                          : cfg.lr_scheduler.c_str(),
              cfg.warmup_ratio > 0 ? (Str() << "ratio " << cfg.warmup_ratio).str().c_str()
                                   : std::to_string(cfg.warmup_steps).c_str());
  std::printf("  output     %s (save every %s%s)%s%s\n", cfg.output_dir.c_str(),
              cfg.saves_per_epoch > 0 ? (Str() << "1/" << cfg.saves_per_epoch << " epoch").str().c_str()
              : cfg.save_steps > 0    ? (Str() << cfg.save_steps << " steps").str().c_str()
                                      : "- only at the end",
              cfg.save_total_limit > 0 ? (Str() << ", keep " << cfg.save_total_limit).str().c_str() : "",
              cfg.resume_from_checkpoint.empty() ? "" : ", resume from ",
              cfg.resume_from_checkpoint.c_str());
  std::printf("  data       %lld samples (%lld tokens, %lld trained), %lld truncated, %lld dropped; eval %lld\n",
              static_cast<long long>(td.train->size()), static_cast<long long>(td.stats.tokens),
              static_cast<long long>(td.stats.target_tokens), static_cast<long long>(td.stats.truncated),
              static_cast<long long>(td.stats.dropped_no_targets),
              static_cast<long long>(td.eval ? td.eval->size() : 0));
  if (td.stats.pairs > 0)
    std::printf("  pairs      %lld (chosen, rejected) pairs read: training %lld, eval %lld (truncated and dropped count "
                "pairs)\n",
                static_cast<long long>(td.stats.pairs), static_cast<long long>(td.train->size() / 2),
                static_cast<long long>(td.eval ? td.eval->size() / 2 : 0));
  if (td.stats.desirable + td.stats.undesirable > 0) {
    std::printf("  examples   %lld desirable, %lld undesirable (KTO; truncated and dropped count examples)\n",
                static_cast<long long>(td.stats.desirable), static_cast<long long>(td.stats.undesirable));
    // KTO's paper (and TRL's warning): w_d n_d / (w_u n_u) in [1, 4/3] works best.
    const double nd = static_cast<double>(std::max<int64_t>(td.stats.desirable, 1));
    const double nu = static_cast<double>(std::max<int64_t>(td.stats.undesirable, 1));
    const double ratio = cfg.kto_desirable_weight * nd / (cfg.kto_undesirable_weight * nu);
    if (ratio < 1.0 || ratio > 4.0 / 3.0)
      std::printf("  note       kto weights x counts: desirable / undesirable = %.3g, outside the [1, 4/3] KTO recommends; "
                  "try kto_desirable_weight in [%.3g, %.3g] or kto_undesirable_weight in [%.3g, %.3g] (not both)\n",
                  ratio, cfg.kto_undesirable_weight * nu / nd, 4.0 / 3.0 * cfg.kto_undesirable_weight * nu / nd,
                  0.75 * cfg.kto_desirable_weight * nd / nu, cfg.kto_desirable_weight * nd / nu);
  }
  if (cfg.early_stopping_patience > 0 || cfg.load_best_model_at_end) {
    if (cfg.early_stopping_patience > 0)
      std::printf("  stopping   after %lld evals in a row that do not lower eval_loss by more than %g (early_stopping_patience)\n",
                  static_cast<long long>(cfg.early_stopping_patience), cfg.early_stopping_threshold);
    std::printf("  final      the adapter of the lowest eval_loss (each new best is checkpointed; load_best_model_at_end)\n");
  }
  if (td.stats.split > 0)
    std::printf("  note       %lld text(s) longer than sequence_len %lld split into %lld windows (each its own sample)\n",
                static_cast<long long>(td.stats.split), static_cast<long long>(cfg.sequence_len),
                static_cast<long long>(td.stats.windows));
  for (const std::string& n : cfg.notes) std::printf("  note       %s\n", n.c_str());
  if (td.stats.system_dropped > 0)
    std::printf("  note       %lld conversation(s) end with the assistant: the %s template leaves their system message\n"
                "             out (only a conversation ending with a user message carries it, as in HF's template)\n",
                static_cast<long long>(td.stats.system_dropped), cfg.chat_template.empty() ? "tokenizer's" : cfg.chat_template.c_str());
  std::fflush(stdout);
}

void print_outputs(const TrainConfig& cfg, const std::string& curve) {
  std::printf("adapter    %s (adapter_config.json beside it)\n",
              path_join(cfg.output_dir, "adapter_model.safetensors").c_str());
  std::printf("metrics    %s\n", path_join(cfg.output_dir, "metrics.jsonl").c_str());
  if (!curve.empty()) std::printf("curve      %s\n", curve.c_str());
}

Status train_and_report(const TrainConfig& given, bool* interrupted) {
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, backend_for(given.device), "device '" << given.device << "'");
  ASSIGN_OR_RETURN(DType act, training_act_dtype(given, *be));
  ASSIGN_OR_RETURN(LoraConfig lc, lora_config_from(given));
  ASSIGN_OR_RETURN(BaseWeights bw, open_base_weights(given, be.get(), act));
  TrainConfig cfg = given;
  cfg.stream_compress = bw.stream_compress;  // auto, resolved
  ASSIGN_OR_RETURN(TrainData td, load_train_data(cfg, bw.parts.model));
  print_banner(cfg, *be, bw, td, lc);

  DataLoaderSource data(td.train, loader_options(cfg, td.pad_id, /*train=*/true, *be));
  std::unique_ptr<DataLoaderSource> eval;
  if (td.eval) eval = std::make_unique<DataLoaderSource>(td.eval, loader_options(cfg, td.pad_id, /*train=*/false, *be));
  RETURN_IF_ERROR(make_dirs(cfg.output_dir), "output_dir");
  if (cfg.resume_from_checkpoint.empty() && file_exists(path_join(cfg.output_dir, "adapter_model.safetensors")))
    std::printf("note: %s holds the adapter of an earlier run; this run replaces it when it saves\n",
                cfg.output_dir.c_str());
  std::printf("tokenizer  %s\n", save_train_tokenizer(cfg, td.tokenizer ? &*td.tokenizer : nullptr).c_str());  // axolotl saves it before training too
  ASSIGN_OR_RETURN(auto trainer, Trainer::create(cfg, be.get(), std::move(bw.parts)));
  trainer->set_eval_data(eval.get());
  if (const int g = trainer->model().eval_group_size(trainer->layers()); eval && g > 1)  // model.h Note [layer-major evaluation]
    std::printf("eval       %lld micro-batches a pass, up to %d through the layers together (each streamed layer "
                "loaded once for them)\n",
                static_cast<long long>(eval->micro_batches_per_epoch()), g);
  RETURN_IF_ERROR(trainer->plan_steps(data));  // the progress line's total (num_epochs runs)
  ProgressDisplay progress(stdout, {.total_steps = trainer->total_steps(), .logging_steps = cfg.logging_steps,
                                    .mode = progress_mode_for(stdout), .backend = be.get()});
  bool first = true;
  trainer->on_step = [&](const StepMetrics& m) {
    if (first) progress.set_first_step(m.step - 1);  // resumed runs: ETA from this session's pace
    first = false;
    progress.on_step(m);
  };
  trainer->on_eval = [&](const EvalMetrics& e) { progress.on_eval(e); };
  trainer->on_eval_progress = [&](int64_t done, int64_t total) { progress.on_eval_progress(done, total); };
  trainer->on_message = [&](const std::string& m) { progress.message(m); };
  trainer->stop_requested = [] { return SigintStop::requested(); };
  Status s;
  {
    SigintStop sigint;
    s = trainer->train(data);
  }
  progress.finish();
  RETURN_IF_ERROR(s);
  if (trainer->interrupted()) {
    *interrupted = true;
    std::printf("interrupted at step %lld: checkpoint %s\nresume with: streamtune train CONFIG.yaml "
                "--resume_from_checkpoint=true\n",
                static_cast<long long>(trainer->steps_taken()), trainer->last_checkpoint().c_str());
    return Status::OK();
  }
  const std::string metrics = path_join(cfg.output_dir, "metrics.jsonl");
  const std::string curve = path_join(cfg.output_dir, "loss_curve.svg");
  Status cs = write_loss_curve_svg(metrics, curve, "streamtune: " + path_basename(cfg.output_dir));
  if (!cs.ok()) std::fprintf(stderr, "warning: no loss curve: %s\n", cs.message().c_str());
  print_outputs(cfg, cs.ok() ? curve : std::string());
  StatusOr<bool> card = write_model_card(cfg);  // train/model_card.h: never replaces an existing README.md
  if (!card.ok()) std::fprintf(stderr, "warning: no model card: %s\n", card.status().message().c_str());
  else if (*card) std::printf("card       %s\n", path_join(cfg.output_dir, "README.md").c_str());
  if (auto* ss = dynamic_cast<StreamedLayerSource*>(&trainer->layers())) {
    const PrefetchStats ps = ss->stats();
    std::printf("streamed   %.3f GB in %lld layer loads (%lld visits served from the pool", static_cast<double>(ps.bytes) / 1e9,
                static_cast<long long>(ps.loads), static_cast<long long>(ps.reuse_hits));
    if (ss->lent_slots() > 0)  // stream/prefetcher.h Note [lent activation memory]
      std::printf("; %d pool slots in lent activation memory", ss->lent_slots());
    std::printf(")\n");
  }
  const LaunchPlanCache::Stats& lp = trainer->model().launch_plan_stats();
  if (be->plan_recorder())  // Note [layer launch plans]; nothing to say where ops run on the call
    std::printf("launch     %lld layer visits replayed from launch plans, %lld op by op\n",
                static_cast<long long>(lp.replayed), static_cast<long long>(lp.eager));
  return Status::OK();
}

}  // namespace

Status plan_train(const TrainConfig& given) {
  RETURN_IF_ERROR(check_stream_tier(given.stream));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, backend_for(given.device), "device '" << given.device << "'");
  ASSIGN_OR_RETURN(DType act, training_act_dtype(given, *be));
  TrainConfig cfg = given;
  std::string why;
  const DeviceSpeed speed = planning_speed(given, be.get());
  ASSIGN_OR_RETURN(cfg.stream_compress, resolve_stream_compress(given, be.get(), act, speed, &why));
  if (!why.empty()) std::fprintf(stderr, "%s\n", why.c_str());
  ASSIGN_OR_RETURN(ModelConfig mc, base_model_config(cfg.base_model));
  ASSIGN_OR_RETURN(Plan plan, plan_for(cfg, be.get(), mc, act, speed));
  std::printf("streamtune train --plan\n");
  std::printf("  model      %s (%s, %lld layers, hidden %lld, vocab %lld)\n", cfg.base_model.c_str(),
              arch_name(mc.arch), static_cast<long long>(mc.num_layers), static_cast<long long>(mc.hidden_size),
              static_cast<long long>(mc.vocab_size));
  std::printf("  device     %s\n", be->description().c_str());
  std::printf("  batch      micro_batch %lld x seq %lld, %s\n", static_cast<long long>(cfg.micro_batch_size),
              static_cast<long long>(cfg.sequence_len), dtype_name(act));
  std::printf("%s", plan.banner().c_str());
  return Status::OK();
}

// Exit status 130 after a SIGINT that saved a checkpoint (the shell convention for Ctrl-C), so
// scripts can tell an interrupted run from a finished one; the process objects (trainer,
// backend, store) are destroyed before exiting.
Status run_train(const TrainConfig& cfg) {
  RETURN_IF_ERROR(check_output_dir(cfg));  // before anything is loaded or written
  const bool on_cpu = cfg.device == "cpu" || (cfg.device == "auto" && !cuda_available());
  ASSIGN_OR_RETURN(int replicas, resolve_devices(cfg.devices, on_cpu ? DeviceKind::kCpu : DeviceKind::kCuda));
  bool interrupted = false;
  Status s = replicas > 1 ? run_train_data_parallel(cfg, replicas, &interrupted) : train_and_report(cfg, &interrupted);
  if (s.ok() && interrupted) {
    std::fflush(stdout);
    std::exit(130);
  }
  return s;
}

}  // namespace st
