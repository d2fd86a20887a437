// Everything a training run is configured by. Filled by cli/ from YAML + --key=value overrides
// (axolotl-style keys, same names as the fields), validated there, consumed by train/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/prompt_format.h"

namespace st {

struct DatasetSpec {
  std::string path;
  // tokenized | text | prompt_completion | alpaca | messages | sharegpt | input_output, or with rl:
  // dpo a preference type (preference, chatml.intel, llama3.argilla, ...: data/datasets.h)
  std::string type = "tokenized";
  // Field names when the records use others (axolotl's field_messages, message_property_mappings,
  // field): "" = the type's own (data/datasets.h RecordFields).
  std::string field_messages = {}, field_role = {}, field_content = {}, field_text = {};
  std::string field_chosen = {}, field_rejected = {};  // preference types (axolotl field_chosen / field_rejected)
  int64_t overlap_len = 0;  // type text: tokens a window repeats as context (data/datasets.h Note [long texts])
  PromptFormat format = {};  // type user_defined: axolotl's `type:` mapping (data/prompt_format.h)
  std::string chat_template = {};  // this entry's chat template (axolotl's per-dataset chat_template /
                                   // conversation): as TrainConfig::chat_template; "" = that one
  std::string chat_template_jinja = {};  // with chat_template "jinja": the template's text
  // A Hub dataset id resolved in the Hugging Face cache (io/hf_cache.h): path is its snapshot and
  // these its train split's files, read in this order instead of path.
  std::vector<std::string> files = {};
};

// The most tokens a micro-batch (micro_batch_size x sequence_len) may hold: ~100x any real run,
// and it keeps element counts (tokens x widths) far from int64 overflow. Checked by the YAML
// reader per key and by check_trainer_config for the product.
constexpr int64_t kMaxMicroBatchTokens = int64_t{1} << 24;

struct TrainConfig {
  // model
  std::string base_model;           // HF dir, store dir, or .gguf
  // A Hub model's revision in the Hugging Face cache (axolotl's revision_of_model / model_revision):
  // a branch or tag under refs/, or a commit under snapshots/; "" = refs/main (io/hf_cache.h).
  std::string revision_of_model;
  std::string dtype = "bfloat16";   // bfloat16 | float32
  std::string device = "auto";      // auto | cpu | cuda
  // Data parallel replicas (dist/): "1" (default), "all" (every visible GPU) or N. One process
  // per node, one thread per device; gradient_accumulation_steps is per device.
  std::string devices = "1";
  // data
  std::vector<DatasetSpec> datasets;
  int64_t sequence_len = 2048;
  bool shuffle = true;
  bool sample_packing = false;
  // Rows without packing are padded to the longest, rounded up to this multiple. 0 = auto: 64 on
  // CUDA (layer launch plans replay repeated shapes: model/launch_plans.h), else 1.
  int64_t pad_to_multiple_of = 0;
  // auto | true | false: a micro-batch's rows as one row of their samples back to back
  // (data/data_loader.h Note [padding-free batches]). auto = true when micro_batch_size > 1 and
  // sample_packing is off (packed rows keep their fixed shape).
  std::string padding_free = "auto";
  bool train_on_inputs = false;
  // axolotl's special_tokens naming tokens the tokenizer already has ("" = its own): eos_token is
  // what text samples end with and what chat templates see as eos_token; pad_token fills padding
  // (masked, so it changes no number); bos_token only as the tokenizer's own (another would change
  // what its post-processor adds, differently in each HF class); unk_token changes nothing in a
  // BPE tokenizer. A token the vocabulary lacks would resize the embeddings: refused.
  struct SpecialTokens {
    std::string bos, eos, pad, unk;
  } special_tokens = {};
  std::string chat_template;        // "" = from tokenizer_config.json (axolotl's tokenizer_default); a built-in name (cli/config_input.h chat_template_names), tokenizer_default_fallback_chatml, a .jinja file, or jinja (chat_template_jinja)
  // axolotl's chat_template_jinja: the template's text (a file's, when the value names one) for
  // chat_template: jinja (which a chat_template_jinja without a chat_template implies).
  std::string chat_template_jinja;
  // axolotl's chat_template_kwargs: extra variables a Jinja chat template is rendered with
  // (transformers' apply_chat_template **kwargs), as a JSON object's text; "" = none.
  std::string chat_template_kwargs;
  double val_set_size = 0.0;        // fraction (<1) or count (>=1) of samples held out
  int64_t dataset_processes = 0;    // threads tokenizing the datasets (axolotl's key; 0 = every core)
  std::vector<DatasetSpec> eval_datasets;
  int64_t eval_steps = 0;           // 0 = eval only at the end when there is an eval set
  int64_t evals_per_epoch = 0;      // axolotl's: eval_steps = ceil(total steps / (this x num_epochs)); 0 = off
  // Early stopping (HF's EarlyStoppingCallback; train/best_eval.h Note [best eval and early
  // stopping]): stop once this many evals in a row did not lower eval_loss by more than
  // early_stopping_threshold; 0 = off. Needs an eval set evaluated every eval_steps.
  int64_t early_stopping_patience = 0;
  double early_stopping_threshold = 0.0;
  // The final adapter is the best eval's (lowest eval_loss; a checkpoint is written at every new
  // best so it is kept); on whenever early stopping is (axolotl's rule). metric_for_best_model:
  // loss / eval_loss, the one metric computed here.
  bool load_best_model_at_end = false;
  // axolotl's loss watchdog (its LossWatchDogCallback): stop -- keeping the adapter, as it does --
  // once loss_watchdog_patience steps in a row end with the last logged training loss above this;
  // 0 = off (train/trainer.cc Note [loss watchdog]).
  double loss_watchdog_threshold = 0.0;
  int64_t loss_watchdog_patience = 3;
  std::string metric_for_best_model = "loss";
  // adapter
  std::string adapter = "lora";    // lora | qlora (NF4 base: model/weights.h Note [NF4 base layout])
  bool load_in_4bit = false;       // axolotl's QLoRA flag: true only with adapter qlora
  int64_t lora_r = 8;
  double lora_alpha = 16;
  double lora_dropout = 0.0;
  bool use_rslora = false;          // rsLoRA: scale alpha / sqrt(r) (PEFT use_rslora; axolotl peft_use_rslora)
  bool use_dora = false;            // DoRA: a learned magnitude per output row (PEFT use_dora; axolotl peft_use_dora)
  // The decoder layers that carry the adapter (axolotl peft_layers_to_transform, PEFT
  // layers_to_transform); empty = every layer.
  std::vector<int64_t> peft_layers_to_transform;
  std::vector<std::string> lora_target_modules = {"q_proj", "v_proj"};
  bool lora_target_linear = false;  // axolotl's: every linear layer as well (all-linear)
  std::string lora_model_dir;       // continue from an existing PEFT adapter
  // optimisation
  double learning_rate = 2e-4;
  // constant | constant_with_warmup | linear | cosine | cosine_with_restarts | cosine_with_min_lr |
  // polynomial | inverse_sqrt (HF's names; train/lr_schedule.h)
  std::string lr_scheduler = "cosine";
  // HF's scheduler_specific_kwargs (YAML `lr_scheduler_kwargs: {num_cycles: 2, ...}`); a negative
  // value means the scheduler's own default.
  double lr_num_cycles = -1;   // cosine (0.5), cosine_with_restarts (1), cosine_with_min_lr (0.5)
  double lr_end = -1;          // polynomial (1e-7)
  double lr_power = -1;        // polynomial (1.0)
  int64_t lr_timescale = -1;   // inverse_sqrt (warmup_steps, or 10000 without warmup)
  double min_lr = -1;          // cosine_with_min_lr: the floor as an LR (else cosine_min_lr_ratio)
  int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;        // HF's: warmup_steps = ceil(total steps x ratio) (not with warmup_steps)
  double cosine_min_lr_ratio = 0.0; // axolotl's: the cosine decays to this fraction of learning_rate
  double weight_decay = 0.0;
  // LoRA+ (axolotl / PEFT loraplus_lr_ratio): B and DoRA's magnitudes at learning_rate x this,
  // A at learning_rate (train/optimizer.h Note [LoRA+]); 0 = off.
  double loraplus_lr_ratio = 0.0;
  // NEFTune (transformers / axolotl neftune_noise_alpha): uniform noise of magnitude
  // alpha / sqrt(T x hidden) on the embeddings of training forwards (model/model.cc Note [NEFTune]); 0 = off.
  double neftune_noise_alpha = 0.0;
  // Preference training (axolotl rl; train/preference_loss.h): "" = supervised fine-tuning; "dpo"
  // (with dpo_loss_type "sigmoid" or "ipo"), "ipo", "orpo" or "simpo" on (chosen, rejected) pairs.
  // rl_beta is TRL's beta (orpo_alpha sets it for ORPO when rl_beta is not written, as axolotl);
  // dpo_label_smoothing is conservative DPO's (and SimPO's) epsilon; simpo_gamma and cpo_alpha are
  // TRL's CPOConfig's (SimPO's margin and NLL weight). "kto" trains on unpaired examples
  // (train/kto_loss.h), each loss weighted by kto_desirable_weight or kto_undesirable_weight.
  std::string rl;
  std::string dpo_loss_type = "sigmoid";
  double rl_beta = 0.1;
  double orpo_alpha = 0.0;  // 0 = not set
  double simpo_gamma = 0.5;
  double cpo_alpha = 1.0;
  double rpo_alpha = 0.0;  // TRL's RPO: DPO / IPO + rpo_alpha x NLL of the chosen reply; 0 = off
  double discopop_tau = 0.05;  // dpo_loss_type: discopop's temperature (TRL's)
  double kto_desirable_weight = 1.0, kto_undesirable_weight = 1.0;  // rl: kto (TRL's KTOConfig)
  int64_t max_prompt_len = 0;  // axolotl's / TRL's: a longer prompt keeps its last tokens; 0 = no limit
  double dpo_label_smoothing = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;       // 0 = off
  int64_t micro_batch_size = 1;
  int64_t gradient_accumulation_steps = 1;
  // How micro-batch losses combine over an accumulation window:
  //   "window":      sum of token losses / target tokens of the whole window (transformers >= 4.46
  //                  Trainer with num_items_in_batch; the default)
  //   "micro_batch": each micro-batch's mean loss / number of micro-batches (classic loop; what
  //                  tools/ref/make_goldens.py does)
  std::string loss_normalization = "window";
  int64_t max_steps = 0;            // 0 = from num_epochs
  int64_t num_epochs = 1;
  uint64_t seed = 42;
  // output
  std::string output_dir = "out";
  int64_t save_steps = 0;           // 0 = only at the end
  int64_t saves_per_epoch = 0;      // axolotl's: save_steps = ceil(total steps / (this x num_epochs)); 0 = off
  int64_t save_total_limit = 0;     // 0 = keep all
  bool save_first_step = false;     // axolotl's: a checkpoint after step 1 too
  std::string resume_from_checkpoint;  // "" | path | "true" (latest in output_dir)
  int64_t logging_steps = 1;
  // streaming (design.md §3)
  std::string stream = "ram";       // off | ram | disk
  int64_t stream_buffers = 2;
  // Store the base's seven linears losslessly in ~12 bits a weight (core/code12.h; bf16 runs): a
  // streamed layer moves ~24% fewer bytes, host RAM holds ~24% less, the bits are the same; each
  // layer visit decodes its weights first (a cost resident layers pay too). auto | true | false;
  // auto: on when the plan streams layers (train/base_weights.h Note [stream_compress auto]).
  std::string stream_compress = "auto";
  std::string vram_budget;          // "" = auto (free device memory minus a margin); "4GiB", bytes
  // Host RAM for the RAM tier's arena (store/host_memory.h Note [partial RAM store]): "" = auto
  // (MemAvailable less a margin); the layers that do not fit are read from their store files.
  std::string ram_budget;
  std::string cache_dir;            // "" = $XDG_CACHE_HOME/streamtune or ~/.cache/streamtune
  // Embedding table + lm_head in host memory, the lm_head streamed in vocabulary chunks
  // (stream/planner.h Note [host extras plan]): auto | true | false. Never changes the numerics.
  std::string offload_embeddings = "auto";
  int64_t vocab_chunk = 16384;      // lm_head rows per head chunk (model/head.h); part of the numerics
  // How much of each layer's forward the backward recomputes (stream/planner.h Note [recompute
  // plan]): auto | full | attention | none. Never changes the numerics.
  std::string recompute = "auto";
  // Layer-major gradient accumulation (stream/planner.h Note [layer-major plan]): auto | true |
  // false. With streamed layers and gradient_accumulation_steps > 1, hold several micro-batches'
  // activations and load each streamed layer once for them. Never changes the numerics.
  std::string layer_major = "auto";
  // Training attention kernels (backend.h Note [fused attention workspace]): auto (the backend's
  // fused path, e.g. cuDNN SDPA, where the plan grants its workspace) | own (always the backend's
  // own kernels: runs with different budgets then run the same attention bit for bit).
  std::string attention = "auto";
  // Not keys: what the config reader noted about other tools' keys it accepted (an axolotl key
  // with no effect here, an optimizer run as another), for the run's banner.
  std::vector<std::string> notes;
  // Not a key: base_model as written when it is a Hub id found neither here nor in the Hugging
  // Face cache (io/hf_cache.h); load_train_config refuses it, naming where it looked.
  std::string base_model_hub_id;
  // Not a key: base_model as written when it is a Hub id and no local path (found in the cache or
  // not): revision_of_model resolves it again once every key is read.
  std::string base_model_cache_id;
};

// The preference loss of the run: rl, or with rl: dpo its dpo_loss_type unless sigmoid ("ipo",
// "hinge", ...: train/preference_loss.h); "" = SFT.
inline std::string preference_loss_kind(const TrainConfig& c) {
  return c.rl == "dpo" && c.dpo_loss_type != "sigmoid" ? c.dpo_loss_type : c.rl;
}

// Rows of a micro-batch: micro_batch_size, or with preference training (rl) twice that
// (micro_batch_size counts pairs, as TRL's per-device batch does; each pair is a chosen and a
// rejected row; under KTO an example and its KL sequence: data/data_loader.h Note [KTO batches]).
// What the memory plan and the model's buffers are sized for.
inline int64_t micro_batch_rows(const TrainConfig& c) { return c.micro_batch_size * (c.rl.empty() ? 1 : 2); }

// The chat template name data/chat_template.h reads: "jinja" (with its text) as "jinja:" + text.
inline std::string effective_chat_template(const std::string& name, const std::string& jinja_text) {
  return name == "jinja" ? "jinja:" + jinja_text : name;
}

// Turns the ratio keys (warmup_ratio, evals_per_epoch, saves_per_epoch) into step counts once the
// run's total optimizer steps are known, as HF's Trainer rounds a ratio: ceil(total x ratio).
void resolve_step_ratios(TrainConfig* tc, int64_t total_steps);

}  // namespace st
