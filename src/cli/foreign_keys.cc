#include "cli/foreign_keys.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "cli/config_words.h"

namespace st {
namespace {

// Keys that change nothing computed here (Note [foreign keys]).
const std::vector<std::string> kNoEffect = {
    // the model / tokenizer classes: read from the checkpoint's own files
    "model_type", "tokenizer_type", "trust_remote_code", "strict", "base_model_config", "tokenizer_config",
    "is_llama_derived_model", "is_mistral_derived_model", "is_qwen_derived_model",
    // logging, experiment tracking, hubs
    "wandb_project", "wandb_entity", "wandb_watch", "wandb_name", "wandb_run_id", "wandb_log_model", "wandb_mode",
    "use_wandb", "mlflow_tracking_uri", "mlflow_experiment_name", "use_mlflow", "use_tensorboard",
    "comet_api_key", "comet_workspace", "comet_project_name", "hub_model_id", "hub_strategy",
    "push_dataset_to_hub", "hf_use_auth_token", "include_tokens_per_second", "debug",
    // data preparation caches and workers
    "dataset_prepared_path", "dataset_keep_in_memory", "dataloader_num_workers",
    "dataloader_pin_memory", "dataloader_prefetch_factor", "dataloader_drop_last", "shuffle_merged_datasets",
    "sample_packing_eff_est", "total_num_tokens", "pad_to_sequence_len", "eval_sample_packing",
    // kernels and attention backends (ours are chosen per shape; the math is the same)
    "flash_attention", "xformers_attention", "sdp_attention", "flash_attn_cross_entropy", "flash_attn_rms_norm",
    "flash_attn_fuse_qkv", "flash_attn_fuse_mlp", "liger_rope", "liger_rms_norm", "liger_glu_activation",
    "liger_layer_norm", "liger_fused_linear_cross_entropy", "liger_cross_entropy", "cut_cross_entropy",
    "unsloth_lora_mlp", "unsloth_lora_qkv", "unsloth_lora_o", "tf32", "torch_compile", "torch_compile_backend",
    // LoRA+'s learning rate for adapters on the embeddings, which are not built here (LoRA targets
    // the linears; loraplus_lr_ratio is ours: train/optimizer.h Note [LoRA+])
    "loraplus_lr_embedding",
    // memory tactics the planner owns (stream/planner.h): recompute never changes the bits
    "gradient_checkpointing", "gradient_checkpointing_kwargs", "activation_offloading",
    // launchers and distribution (this engine: devices: N)
    "local_rank", "deepspeed", "fsdp", "fsdp_config", "ddp_timeout", "ddp_bucket_cap_mb",
    "ddp_broadcast_buffers", "ddp_find_unused_parameters",
    // evaluation extras that need generation
    "eval_table_size", "eval_max_new_tokens", "eval_causal_lm_metrics", "dpo_generate_during_eval",
    // DPO: the reference log-probabilities are computed beside each step (train/preference_loss.h),
    // which gives what precomputing them would; TRL's kernel choices
    "precompute_ref_log_probs", "dpo_use_liger_kernel", "dpo_use_logits_to_keep",
};

// Keys whose non-empty value asks for a training we do not build: refused with the reason.
struct Refused {
  const char* key;
  const char* what;
};
const Refused kRefusedUnlessEmpty[] = {
    {"lora_modules_to_save", "training whole modules beside the adapter (modules_to_save) is not supported"},
    {"unfrozen_parameters", "training base parameters is not supported (LoRA only)"},
    {"cosine_constant_lr_ratio", "this cosine variant is not supported (constant, linear, cosine)"},
    {"lr_quadratic_warmup", "a quadratic warmup is not supported"},
    {"relora_steps", "ReLoRA is not supported"},
    {"tokens", "adding tokens (which resizes the embeddings) is not supported"},
    {"added_tokens_overrides", "overriding tokens is not supported"},
    {"plugins", "axolotl plugins are not supported"},
    {"chat_template_jinja", "set chat_template to the template file instead (chat_template: my.jinja)"},
    {"pretraining_dataset", "streaming pretraining datasets are not supported (datasets with type: text)"},
    {"test_datasets", "use eval_datasets"},
};

// Boolean keys accepted only at the value that means what we do.
struct BoolOnly {
  const char* key;
  bool ok;           // the accepted value
  const char* what;  // why the other is refused
};
const BoolOnly kBoolOnly[] = {
    {"fp16", false, "float16 training is not supported (dtype: bfloat16 or float32)"},
    {"save_safetensors", true, "checkpoints are always safetensors"},
    {"group_by_length", false, "grouping samples by length (which reorders the data) is not supported"},
    {"s2_attention", false, "shifted sparse attention is not supported"},
    {"lora_fan_in_fan_out", false, "fan_in_fan_out (Conv1D-style weights) is not supported"},
    {"auto_find_batch_size", false, "micro_batch_size is fixed (the planner fits it or says what would)"},
    {"greater_is_better", false, "the best model is the lowest eval_loss (metric_for_best_model: loss)"},
    {"dpo_use_weighting", false, "WPO's weighting of DPO is not supported"},
};

// AdamW as torch / HF spell it: the same update as ours (train/optimizer.h).
const std::vector<std::string> kAdamW = {"adamw_torch", "adamw_torch_fused", "adamw_hf", "adamw", "adamw_apex_fused",
                                         "paged_adamw_32bit", "adamw_torch_xla", "adamw_torch_npu_fused"};
// 8-bit AdamW: the same update with the moments quantized; run as 32-bit AdamW.
const std::vector<std::string> kAdamW8bit = {"adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit", "adamw_anyprecision",
                                             "adamw_torch_4bit", "adamw_torch_8bit"};

// axolotl's config keys (tools/ref/axolotl_config_keys.py), sorted.
constexpr const char* kAxolotlKeys[] = {
#include "cli/axolotl_keys.inc"
};

bool axolotl_key(const std::string& key) {
  return std::binary_search(std::begin(kAxolotlKeys), std::end(kAxolotlKeys), key,
                            [](const std::string& a, const std::string& b) { return a < b; });
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::optional<bool> as_bool(const ForeignValue& v) { return parse_bool_word(v.scalar); }

bool empty_value(const ForeignValue& v) {
  if (v.is_null || v.empty_collection) return true;
  if (v.is_collection) return false;
  const std::string l = ascii_lower(v.scalar);
  return l.empty() || l == "false" || l == "none" || l == "null";
}

Status refuse(const std::string& key, const ForeignValue& v, const std::string& why) {
  const std::string value = v.is_collection ? std::string() : Str() << " = '" << v.scalar << "'";
  return Unimplemented(Str() << v.where << ": key '" << key << "'" << value << ": " << why);
}

Status bad(const std::string& key, const ForeignValue& v, const std::string& why) {
  return InvalidArgument(Str() << v.where << ": key '" << key << "': " << why);
}

void note_no_effect(TrainConfig& cfg, const std::string& key) {
  // One note lists them all: "axolotl keys with no effect here: a, b, c".
  static const std::string kHead = "keys with no effect here (other tools' settings): ";
  for (std::string& n : cfg.notes)
    if (n.rfind(kHead, 0) == 0) {
      n += ", " + key;
      return;
    }
  cfg.notes.push_back(kHead + key);
}

// save_strategy / eval_strategy: steps (keep the *_steps key), no, epoch (once an epoch).
Status apply_strategy(const std::string& key, const ForeignValue& v, TrainConfig& cfg, bool save) {
  const std::string s = ascii_lower(v.scalar);
  if (s == "steps" || (v.is_null)) return Status::OK();
  if (s == "no") {
    (save ? cfg.save_steps : cfg.eval_steps) = 0;
    (save ? cfg.saves_per_epoch : cfg.evals_per_epoch) = 0;
    if (save) cfg.notes.push_back("save_strategy: no -- the final adapter is still written");
    return Status::OK();
  }
  if (s == "epoch") {
    (save ? cfg.saves_per_epoch : cfg.evals_per_epoch) = 1;
    return Status::OK();
  }
  return refuse(key, v, "only steps, epoch and no are supported");
}

}  // namespace

std::string foreign_key_slot(const std::string& key) { return key == "bf16" ? "dtype" : key; }

bool apply_foreign_key(const std::string& key, const ForeignValue& v, TrainConfig& cfg, Status* st) {
  *st = Status::OK();
  if (contains(kNoEffect, key)) {
    note_no_effect(cfg, key);
    return true;
  }
  for (const Refused& r : kRefusedUnlessEmpty) {
    if (key != r.key) continue;
    if (!empty_value(v)) *st = refuse(key, v, r.what);
    return true;
  }
  for (const BoolOnly& b : kBoolOnly) {
    if (key != b.key) continue;
    if (v.is_null) return true;
    auto x = as_bool(v);
    if (!x) *st = bad(key, v, Str() << "expected true or false, got '" << v.scalar << "'");
    else if (*x != b.ok) *st = refuse(key, v, b.what);
    return true;
  }
  if (key == "bf16") {  // axolotl: bf16 true / auto = bfloat16, false (with fp16 false) = float32
    const std::string l = ascii_lower(v.scalar);
    if (l == "auto" || l == "full" || v.is_null) return true;
    auto x = as_bool(v);
    if (!x) *st = bad(key, v, Str() << "expected true, false or auto, got '" << v.scalar << "'");
    else cfg.dtype = *x ? "bfloat16" : "float32";
    return true;
  }
  if (key == "optimizer" || key == "optim") {
    const std::string o = ascii_lower(v.scalar);
    if (v.is_null || contains(kAdamW, o)) return true;
    if (contains(kAdamW8bit, o)) {
      cfg.notes.push_back(Str() << "optimizer " << v.scalar
                                << " runs as 32-bit AdamW (the LoRA moments are small; kept in float32)");
      return true;
    }
    *st = refuse(key, v, "only AdamW is supported (adamw_torch, adamw_torch_fused, adamw_hf, adamw_bnb_8bit, "
                         "paged_adamw_8bit, ...)");
    return true;
  }
  if (key == "dpo_norm_loss") {  // axolotl's: DPO on mean log-probs = TRL's loss_type sigmoid_norm
    if (v.is_null) return true;
    auto x = as_bool(v);
    if (!x) {
      *st = bad(key, v, Str() << "expected true or false, got '" << v.scalar << "'");
    } else if (*x) {
      cfg.dpo_loss_type = "sigmoid_norm";
      cfg.notes.push_back("dpo_norm_loss: DPO on mean log-probs, as dpo_loss_type: sigmoid_norm (the logged rewards "
                          "are beta x the summed log-ratios, as TRL logs sigmoid_norm's)");
    }
    return true;
  }
  if (key == "save_strategy") {
    *st = apply_strategy(key, v, cfg, true);
    return true;
  }
  if (key == "eval_strategy" || key == "evaluation_strategy") {
    *st = apply_strategy(key, v, cfg, false);
    return true;
  }
  if (key == "auto_resume_from_checkpoints") {
    auto x = as_bool(v);
    if (!x && !v.is_null) *st = bad(key, v, Str() << "expected true or false, got '" << v.scalar << "'");
    else if (x && *x && cfg.resume_from_checkpoint.empty()) cfg.resume_from_checkpoint = "auto";
    return true;
  }
  if (axolotl_key(key)) {  // Note [foreign keys]: the rest of axolotl's schema
    if (!empty_value(v)) {
      *st = refuse(key, v, "this axolotl setting is not built here (left at its default -- null, false or empty -- it is "
                           "accepted)");
      return true;
    }
    static const std::string kHead = "axolotl keys left at their defaults: ";
    for (std::string& n : cfg.notes)
      if (n.rfind(kHead, 0) == 0) {
        n += ", " + key;
        return true;
      }
    cfg.notes.push_back(kHead + key);
    return true;
  }
  return false;
}

}  // namespace st
