#include "cli/config_yaml.h"
#include "core/byte_size.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <variant>

#include "cli/config_datasets.h"
#include "cli/config_input.h"
#include "cli/config_words.h"
#include "cli/foreign_keys.h"
#include "cli/suggest.h"
#include "core/file.h"
#include "core/json.h"
#include "io/hf_cache.h"
#include "model/lora.h"

namespace st {
namespace {

using namespace cfg;  // NOLINT: cli/config_input.h's helpers

// ---- the key table ---------------------------------------------------------------------------

using Member = std::variant<std::string TrainConfig::*, int64_t TrainConfig::*, uint64_t TrainConfig::*,
                            double TrainConfig::*, bool TrainConfig::*, std::vector<DatasetSpec> TrainConfig::*,
                            std::vector<std::string> TrainConfig::*, std::vector<int64_t> TrainConfig::*>;

enum class StrKind { kPlain, kPath, kByteSize };

struct Field {
  const char* name;
  Member member;
  std::vector<std::string> choices = {};  // strings: allowed values (empty = any)
  StrKind str_kind = StrKind::kPlain;
  double lo = -std::numeric_limits<double>::infinity();  // numbers: inclusive bounds
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;  // exclusive bound
  bool null_unset = false;                // numbers, booleans: a null value (`key:` alone) keeps the default
};

constexpr double kInf = std::numeric_limits<double>::infinity();
// Upper bounds far past any real run (train_config.h, model/lora.h): sizes multiply into element
// counts, so a typo such as 4611686018427387904 must not reach int64 math.
constexpr double kMaxTokens = static_cast<double>(kMaxMicroBatchTokens);
constexpr double kMaxRank = static_cast<double>(kMaxLoraRank);

const std::vector<Field>& fields() {
  using C = TrainConfig;
  static const std::vector<Field> kFields = {
      {"base_model", &C::base_model, {}, StrKind::kPath},
      {"revision_of_model", &C::revision_of_model},
      {"dtype", &C::dtype, {"bfloat16", "float32"}},
      {"device", &C::device, {"auto", "cpu", "cuda"}},
      {"devices", &C::devices},  // "1" | "all" | N: checked by dist/run_train_dp.h resolve_devices
      {"datasets", &C::datasets},
      {"sequence_len", &C::sequence_len, {}, StrKind::kPlain, 1, kMaxTokens},
      {"shuffle", &C::shuffle},
      {"sample_packing", &C::sample_packing},
      {"pad_to_multiple_of", &C::pad_to_multiple_of, {}, StrKind::kPlain, 0, kMaxTokens},
      {"train_on_inputs", &C::train_on_inputs},
      {"chat_template", &C::chat_template, chat_template_names()},
      {"chat_template_jinja", &C::chat_template_jinja},
      {"val_set_size", &C::val_set_size, {}, StrKind::kPlain, 0},
      {"dataset_processes", &C::dataset_processes, {}, StrKind::kPlain, 0, 1024},
      {"eval_datasets", &C::eval_datasets},
      {"eval_steps", &C::eval_steps, {}, StrKind::kPlain, 0},
      {"adapter", &C::adapter, {"lora", "qlora"}},
      {"load_in_4bit", &C::load_in_4bit},
      {"lora_r", &C::lora_r, {}, StrKind::kPlain, 1, kMaxRank},
      {"lora_alpha", &C::lora_alpha, {}, StrKind::kPlain, 0, kInf, true},
      {"lora_dropout", &C::lora_dropout, {}, StrKind::kPlain, 0, 1, false, true},
      {"use_rslora", &C::use_rslora},
      {"use_dora", &C::use_dora},
      {"lora_target_modules", &C::lora_target_modules},
      {"peft_layers_to_transform", &C::peft_layers_to_transform},
      {"lora_model_dir", &C::lora_model_dir, {}, StrKind::kPath},
      {"learning_rate", &C::learning_rate, {}, StrKind::kPlain, 0, kInf, true},
      {"lr_scheduler", &C::lr_scheduler, {"constant", "constant_with_warmup", "linear", "cosine", "cosine_with_restarts",
                                          "cosine_with_min_lr", "polynomial", "inverse_sqrt"}},
      {"loss_normalization", &C::loss_normalization, {"window", "micro_batch"}},
      {"warmup_steps", &C::warmup_steps, {}, StrKind::kPlain, 0},
      {"warmup_ratio", &C::warmup_ratio, {}, StrKind::kPlain, 0, 1, false, true},
      {"cosine_min_lr_ratio", &C::cosine_min_lr_ratio, {}, StrKind::kPlain, 0, 1},
      {"evals_per_epoch", &C::evals_per_epoch, {}, StrKind::kPlain, 0},
      {"early_stopping_patience", &C::early_stopping_patience, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"early_stopping_threshold", &C::early_stopping_threshold, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"load_best_model_at_end", &C::load_best_model_at_end, {}, StrKind::kPlain, -kInf, kInf, false, false, true},
      {"metric_for_best_model", &C::metric_for_best_model, {"loss", "eval_loss"}},
      {"loss_watchdog_threshold", &C::loss_watchdog_threshold, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"loss_watchdog_patience", &C::loss_watchdog_patience, {}, StrKind::kPlain, 1, kInf, false, false, true},
      {"saves_per_epoch", &C::saves_per_epoch, {}, StrKind::kPlain, 0},
      {"lora_target_linear", &C::lora_target_linear},
      {"weight_decay", &C::weight_decay, {}, StrKind::kPlain, 0},
      {"loraplus_lr_ratio", &C::loraplus_lr_ratio, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"neftune_noise_alpha", &C::neftune_noise_alpha, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"rl", &C::rl, {"dpo", "ipo", "orpo", "simpo", "kto"}},
      {"dpo_loss_type", &C::dpo_loss_type,
       {"sigmoid", "ipo", "hinge", "robust", "exo_pair", "nca_pair", "sppo_hard", "apo_zero", "apo_down", "discopop",
        "sigmoid_norm"}},
      {"discopop_tau", &C::discopop_tau, {}, StrKind::kPlain, 0, kInf, true, false, true},
      {"rl_beta", &C::rl_beta, {}, StrKind::kPlain, 0, kInf, true, false, true},
      {"kto_desirable_weight", &C::kto_desirable_weight, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"kto_undesirable_weight", &C::kto_undesirable_weight, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"orpo_alpha", &C::orpo_alpha, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"simpo_gamma", &C::simpo_gamma, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"cpo_alpha", &C::cpo_alpha, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"rpo_alpha", &C::rpo_alpha, {}, StrKind::kPlain, 0, kInf, false, false, true},
      {"max_prompt_len", &C::max_prompt_len, {}, StrKind::kPlain, 0, kMaxTokens, false, false, true},
      {"dpo_label_smoothing", &C::dpo_label_smoothing, {}, StrKind::kPlain, 0, 0.5, false, true, true},
      {"adam_beta1", &C::adam_beta1, {}, StrKind::kPlain, 0, 1, false, true},
      {"adam_beta2", &C::adam_beta2, {}, StrKind::kPlain, 0, 1, false, true},
      {"adam_epsilon", &C::adam_epsilon, {}, StrKind::kPlain, 0, kInf, true},
      {"max_grad_norm", &C::max_grad_norm, {}, StrKind::kPlain, 0},
      {"micro_batch_size", &C::micro_batch_size, {}, StrKind::kPlain, 1, kMaxTokens},
      {"gradient_accumulation_steps", &C::gradient_accumulation_steps, {}, StrKind::kPlain, 1},
      {"max_steps", &C::max_steps, {}, StrKind::kPlain, 0},
      {"num_epochs", &C::num_epochs, {}, StrKind::kPlain, 1},
      {"seed", &C::seed},
      {"output_dir", &C::output_dir, {}, StrKind::kPath},
      {"save_steps", &C::save_steps, {}, StrKind::kPlain, 0},
      {"save_total_limit", &C::save_total_limit, {}, StrKind::kPlain, 0},
      {"save_first_step", &C::save_first_step, {}, StrKind::kPlain, -kInf, kInf, false, false, true},
      {"resume_from_checkpoint", &C::resume_from_checkpoint, {}, StrKind::kPath},
      {"logging_steps", &C::logging_steps, {}, StrKind::kPlain, 1},
      {"stream", &C::stream, {"off", "ram", "disk"}},
      {"stream_buffers", &C::stream_buffers, {}, StrKind::kPlain, 2, 1024},
      {"stream_compress", &C::stream_compress, {"auto", "true", "false"}},
      {"vram_budget", &C::vram_budget, {}, StrKind::kByteSize},
      {"ram_budget", &C::ram_budget, {}, StrKind::kByteSize},
      {"cache_dir", &C::cache_dir, {}, StrKind::kPath},
      {"offload_embeddings", &C::offload_embeddings, {"auto", "true", "false"}},
      {"vocab_chunk", &C::vocab_chunk, {}, StrKind::kPlain, 1, kMaxTokens},
      {"recompute", &C::recompute, {"auto", "full", "attention", "none"}},
      {"layer_major", &C::layer_major, {"auto", "true", "false"}},
      {"padding_free", &C::padding_free, {"auto", "true", "false"}},
      {"attention", &C::attention, {"auto", "own"}},
  };
  return kFields;
}

// Other tools' names for our keys (axolotl writes peft_use_rslora).
std::string canonical_key(const std::string& key) {
  if (key == "peft_use_rslora" || key == "lora_use_rslora") return "use_rslora";
  if (key == "peft_use_dora" || key == "lora_use_dora") return "use_dora";
  if (key == "layers_to_transform") return "peft_layers_to_transform";  // PEFT's name
  if (key == "model_revision") return "revision_of_model";  // axolotl's alias
  if (key == "dpo_beta") return "rl_beta";                  // axolotl's older name
  return key;
}

const Field* find_field(const std::string& key) {
  for (const Field& f : fields()) {
    if (key == f.name) return &f;
  }
  return nullptr;
}

const std::vector<std::string> kLoraModules = {"q_proj", "k_proj", "v_proj", "o_proj",
                                               "gate_proj", "up_proj", "down_proj"};

Status check_range(const Input& in, const Field& f, double v) {
  const bool lo_ok = f.lo_open ? v > f.lo : v >= f.lo;
  const bool hi_ok = f.hi_open ? v < f.hi : v <= f.hi;
  if (lo_ok && hi_ok) return Status::OK();
  // Whole-number bounds print as integers (16777216, not 1.67772e+07).
  auto num = [](double d) -> std::string {
    if (d == std::floor(d) && std::fabs(d) < 9e15) return std::to_string(static_cast<int64_t>(d));
    return Str() << d;
  };
  Str want;
  if (std::isinf(f.hi)) {
    want << (f.lo_open ? "> " : ">= ") << num(f.lo);
  } else {
    want << "in " << (f.lo_open ? "(" : "[") << num(f.lo) << ", " << num(f.hi) << (f.hi_open ? ")" : "]");
  }
  return bad(in, f.name, Str() << "must be " << want.str() << ", got " << in.scalar);
}

Status set_string(const Input& in, const Field& f, std::string& dst) {
  std::string v = in.scalar;
  // chat_template also takes a template file (chat_template: my_template.jinja), relative to the config.
  if (std::string(f.name) == "chat_template" && v.size() > 6 && v.ends_with(".jinja")) {
    dst = resolve_path(v, in.base_dir);
    return Status::OK();
  }
  if (std::string(f.name) == "chat_template_jinja") return read_template_text(in, f.name, &dst);
  // rl: "" (written back by train_config_to_yaml), false or none = supervised fine-tuning.
  if (std::string(f.name) == "rl" && (v.empty() || lower(v) == "false" || lower(v) == "none")) {
    dst.clear();
    return Status::OK();
  }
  if (!f.choices.empty()) {
    const std::string l = lower(v);
    if (std::find(f.choices.begin(), f.choices.end(), l) == f.choices.end()) {
      // Aliases a user is likely to type for the dtype.
      if (std::string(f.name) == "dtype" && (l == "bf16" || l == "fp32" || l == "f32")) {
        dst = l == "bf16" ? "bfloat16" : "float32";
        return Status::OK();
      }
      return bad(in, f.name, Str() << "'" << v << "' is not one of: " << join(f.choices)
                                    << (std::string(f.name) == "chat_template" ? ", or a template file (*.jinja)" : "")
                                    << (std::string(f.name) == "rl" ? " (GRPO is not supported)"
                                                                    : ""));
    }
    v = l;
    if (v == "tokenizer_default") v.clear();  // axolotl's name for the tokenizer's own template
  }
  if (f.str_kind == StrKind::kByteSize && !v.empty() && !parse_byte_size(v).ok()) {
    return bad(in, f.name, Str() << "'" << v << "' is not a size (e.g. 4GiB, 512MB, or bytes)");
  }
  if (f.str_kind == StrKind::kPath) {
    // resume_from_checkpoint also takes true/false ("latest in output_dir" / "no").
    if (std::string(f.name) == "resume_from_checkpoint" && parse_bool(v).has_value() && v != "0" && v != "1") {
      dst = *parse_bool(v) ? "true" : "";
      return Status::OK();
    }
    const std::string local = resolve_path(v, in.base_dir);
    // A Hub model (or adapter) id that is not a local path: its snapshot in the Hugging Face cache
    // (io/hf_cache.h).
    const bool model_dir = std::string(f.name) == "base_model" || std::string(f.name) == "lora_model_dir";
    if (model_dir && looks_like_hub_id(v) && !v.ends_with(".gguf") && !file_exists(local) && !is_directory(local)) {
      // A miss keeps the local path: load_train_config says what is missing (validate_train_config).
      StatusOr<std::string> snap = hf_cache_snapshot(v, HubRepoKind::kModel);
      v = snap.ok() ? *snap : local;
    } else {
      v = local;
    }
  }
  dst = v;
  return Status::OK();
}

Status set_modules(const Input& in, const Field& f, std::vector<std::string>& dst);
Status set_indices(const Input& in, const Field& f, std::vector<int64_t>& dst);

bool is_null(const Input& in) { return in.node && in.node->IsNull(); }

Status set_field(const Input& in, const Field& f, TrainConfig& cfg) {
  const bool list_field = std::holds_alternative<std::vector<DatasetSpec> TrainConfig::*>(f.member) ||
                          std::holds_alternative<std::vector<std::string> TrainConfig::*>(f.member) ||
                          std::holds_alternative<std::vector<int64_t> TrainConfig::*>(f.member);
  if (in.node && !list_field && !in.node->IsScalar() && !in.node->IsNull()) {
    return bad(in, f.name, "expected a single value, got a list or mapping");
  }
  return std::visit(
      [&](auto ptr) -> Status {
        using T = std::remove_reference_t<decltype(cfg.*ptr)>;
        T& dst = cfg.*ptr;
        if constexpr (std::is_same_v<T, std::string>) {
          if (is_null(in)) {
            dst.clear();
            return Status::OK();
          }
          RETURN_IF_ERROR(set_string(in, f, dst));
          if (std::string(f.name) == "base_model") {
            cfg.base_model_hub_id.clear();
            cfg.base_model_cache_id.clear();
            if (dst != resolve_path(in.scalar, in.base_dir)) {
              cfg.notes.push_back(Str() << "base_model " << in.scalar << ": the Hugging Face cache's snapshot " << dst);
              cfg.base_model_cache_id = in.scalar;
            } else if (looks_like_hub_id(in.scalar) && !file_exists(dst) && !is_directory(dst)) {
              cfg.base_model_hub_id = in.scalar;
              cfg.base_model_cache_id = in.scalar;
            }
          }
          return Status::OK();
        } else if constexpr (std::is_same_v<T, std::vector<DatasetSpec>>) {
          RETURN_IF_ERROR(set_datasets(in, f.name, dst));
          for (const DatasetSpec& d : dst)
            if (!d.files.empty())
              cfg.notes.push_back(Str() << "dataset " << d.path << ": " << d.files.size()
                                        << (d.files.size() == 1 ? " file (" : " files (first ") << d.files.front()
                                        << (is_directory(d.path) && d.path.find("/snapshots/") != std::string::npos
                                                ? "; a Hugging Face cache snapshot)"
                                                : ")"));
          return Status::OK();
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          return set_modules(in, f, dst);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          return set_indices(in, f, dst);
        } else if constexpr (std::is_same_v<T, bool>) {
          if (is_null(in) && f.null_unset) return Status::OK();
          auto v = parse_bool(in.scalar);
          if (!v || is_null(in)) return bad(in, f.name, Str() << "expected true or false, got '" << in.scalar << "'");
          dst = *v;
          return Status::OK();
        } else if constexpr (std::is_same_v<T, double>) {
          if (is_null(in) && f.null_unset) return Status::OK();
          auto v = parse_real(in.scalar);
          if (!v || is_null(in)) return bad(in, f.name, Str() << "expected a number, got '" << in.scalar << "'");
          RETURN_IF_ERROR(check_range(in, f, *v));
          dst = *v;
          return Status::OK();
        } else {
          if (is_null(in) && f.null_unset) return Status::OK();
          auto v = parse_integer<T>(in.scalar);
          if (!v || is_null(in)) {
            return bad(in, f.name, Str() << "expected " << (std::is_signed_v<T> ? "an integer" : "a non-negative integer")
                                         << ", got '" << in.scalar << "'");
          }
          RETURN_IF_ERROR(check_range(in, f, static_cast<double>(*v)));
          dst = *v;
          return Status::OK();
        }
      },
      f.member);
}

// ---- list values -----------------------------------------------------------------------------

// The items of a list value: a YAML sequence of scalars, or one scalar in the comma form ("a, b");
// false when the value is neither (a mapping, a nested list, null).
bool list_items(const Input& in, std::vector<std::string>* items) {
  items->clear();
  if (in.node && in.node->IsSequence()) {
    for (const auto& item : *in.node) {
      if (!item.IsScalar()) return false;
      items->push_back(item.Scalar());
    }
    return true;
  }
  if (in.node && !in.node->IsScalar()) return false;
  std::string cur;
  for (char ch : in.scalar + ",") {
    if (ch == ',') {
      if (!cur.empty()) items->push_back(cur);
      cur.clear();
    } else if (!std::isspace(static_cast<unsigned char>(ch))) {
      cur += ch;
    }
  }
  return true;
}

// A list of indices ([0, 2, 5]), one index (PEFT takes an int), a comma form ("0,2,5"), or null /
// [] (none listed). Each a whole number >= 0, listed once.
Status set_indices(const Input& in, const Field& f, std::vector<int64_t>& dst) {
  std::vector<std::string> items;
  if (!is_null(in) && !list_items(in, &items)) return bad(in, f.name, "expected a list of layer indices such as [0, 1, 2]");
  dst.clear();
  for (const std::string& s : items) {
    auto v = parse_integer<int64_t>(s);
    if (!v || *v < 0 || *v > (int64_t{1} << 20))
      return bad(in, f.name, Str() << "expected layer indices >= 0, got '" << s << "'");
    if (std::find(dst.begin(), dst.end(), *v) != dst.end())
      return bad(in, f.name, Str() << "layer " << *v << " is listed twice");
    dst.push_back(*v);
  }
  return Status::OK();
}

Status set_modules(const Input& in, const Field& f, std::vector<std::string>& dst) {
  std::vector<std::string> names;
  if (!list_items(in, &names)) return bad(in, f.name, "expected a list of module names or a comma-separated string");
  dst.clear();
  for (const std::string& n : names) {
    if (n == "all-linear" || n == "all_linear") {
      for (const std::string& m : kLoraModules) dst.push_back(m);
      continue;
    }
    if (std::find(kLoraModules.begin(), kLoraModules.end(), n) == kLoraModules.end()) {
      return bad(in, f.name, Str() << "unknown module '" << n << "'" << did_you_mean(n, kLoraModules)
                                   << " (known: " << join(kLoraModules) << ", all-linear)");
    }
    if (std::find(dst.begin(), dst.end(), n) == dst.end()) dst.push_back(n);
  }
  if (dst.empty()) return bad(in, f.name, "needs at least one module");
  return Status::OK();
}

// ---- LoRA variants we refuse by name ---------------------------------------------------------

// Boolean keys whose `true` asks for something not built: false is a no-op, true is refused.
struct RefusedFlag {
  const char* key;
  const char* refusal;  // "<what> is not supported (...)"
};
constexpr RefusedFlag kRefusedFlags[] = {
    // QLoRA's bitsandbytes options: our NF4 base keeps f32 block scales and is 4-bit only.
    {"load_in_8bit", "8-bit base weights are not supported (adapter: qlora gives a 4-bit NF4 base)"},
    {"bnb_4bit_use_double_quant", "double quantization is not supported (the NF4 block scales stay float32)"},
};
const std::vector<std::string> kInitKeys = {"lora_init", "init_lora_weights", "lora_init_weights",
                                            "peft_init_lora_weights"};
const std::vector<std::string> kOtherAdapters = {"vera", "loha", "lokr", "ia3", "adalora", "oft", "boft",
                                                 "prefix_tuning", "prompt_tuning", "p_tuning", "fourierft"};

// Returns true (with `st` set) when `key` is one of the variant keys. A variant key that asks
// for plain LoRA (peft_type: lora, lora_init: true) is accepted as a no-op.
bool check_variant_key(const std::string& key, const Input& in, Status* st) {
  const std::string v = lower(in.scalar);
  const bool in_init = std::find(kInitKeys.begin(), kInitKeys.end(), key) != kInitKeys.end();
  *st = Status::OK();
  for (const RefusedFlag& f : kRefusedFlags) {
    if (key != f.key) continue;
    auto b = parse_bool(v);
    if (!b) *st = bad(in, key, Str() << "expected true or false, got '" << in.scalar << "'");
    else if (*b) *st = Unimplemented(Str() << in.where << ": key '" << key << "': " << f.refusal);
    return true;
  }
  if (in_init) {
    if (v != "true" && v != "default" && v != "kaiming" && !in.scalar.empty()) {
      *st = Unimplemented(Str() << in.where << ": key '" << key << "': LoRA initialisation '" << in.scalar
                                << "' is not supported (only the default: Kaiming-uniform A, zero B)");
    }
    return true;
  }
  if (key == "peft_type" || key == "lora_type" || key == "adapter_type") {
    if (v != "lora") {
      *st = Unimplemented(Str() << in.where << ": key '" << key << "': adapter type '" << in.scalar
                                << "' is not supported (LoRA only)");
    }
    return true;
  }
  if (key == "bnb_4bit_quant_type") {
    if (v != "nf4") *st = Unimplemented(Str() << in.where << ": key 'bnb_4bit_quant_type': '" << in.scalar << "' is not supported (nf4)");
    return true;
  }
  if (key == "adapter" && v == "dora") {
    *st = InvalidArgument(Str() << in.where << ": key 'adapter': DoRA is 'adapter: lora' (or qlora) with 'use_dora: true'");
    return true;
  }
  if (key == "adapter" && std::find(kOtherAdapters.begin(), kOtherAdapters.end(), v) != kOtherAdapters.end()) {
    *st = Unimplemented(Str() << in.where << ": key 'adapter': '" << in.scalar << "' is not supported (lora, qlora)");
    return true;
  }
  return false;
}

Status unknown_key(const std::string& key, const std::string& where) {
  const std::vector<std::string> keys = train_config_keys();
  std::string hint = did_you_mean(key, keys);
  if (hint.empty()) hint = " (closest known key: '" + closest_match(key, keys) + "'; all keys are listed in README.md)";
  return InvalidArgument(Str() << where << ": unknown key '" << key << "'" << hint);
}

// lr_scheduler_kwargs: HF's scheduler_specific_kwargs as a mapping of numbers (train/lr_schedule.h
// checks which apply to the chosen scheduler).
Status apply_lr_kwargs(const Input& in, TrainConfig& cfg) {
  const std::string key = "lr_scheduler_kwargs";
  if (!in.node) return bad(in, key, "a mapping: set it in the YAML file");
  if (in.node->IsNull()) return Status::OK();
  if (!in.node->IsMap()) return bad(in, key, "expected a mapping such as {num_cycles: 2}");
  for (const auto& kv : *in.node) {
    const std::string k = kv.first.as<std::string>();
    const std::string where = mark_str(in.what, kv.second.Mark());
    if (!kv.second.IsScalar()) return InvalidArgument(Str() << where << ": " << key << "." << k << ": expected a number");
    const std::string text = kv.second.as<std::string>();
    const std::optional<double> v = parse_real(text);
    if (!v || *v < 0) return InvalidArgument(Str() << where << ": " << key << "." << k << ": expected a number >= 0, got '" << text << "'");
    if (k == "num_cycles") cfg.lr_num_cycles = *v;
    else if (k == "lr_end") cfg.lr_end = *v;
    else if (k == "power") cfg.lr_power = *v;
    else if (k == "min_lr") cfg.min_lr = *v;
    else if (k == "min_lr_rate") cfg.cosine_min_lr_ratio = *v;
    else if (k == "timescale") {
      if (*v != std::floor(*v) || *v > 1e15) return InvalidArgument(Str() << where << ": " << key << ".timescale: expected a whole number");
      cfg.lr_timescale = static_cast<int64_t>(*v);
    } else {
      return InvalidArgument(Str() << where << ": " << key << ": unknown kwarg '" << k
                                   << "' (num_cycles, lr_end, power, timescale, min_lr, min_lr_rate)");
    }
  }
  return Status::OK();
}

// chat_template_kwargs (axolotl): a mapping of scalars, typed as YAML types them (true/false, null,
// numbers; quoted or other text a string), kept as a JSON object's text.
Status apply_chat_template_kwargs(const Input& in, TrainConfig& cfg) {
  const std::string key = "chat_template_kwargs";
  if (!in.node) return bad(in, key, "a mapping: set it in the YAML file");
  cfg.chat_template_kwargs.clear();
  if (in.node->IsNull()) return Status::OK();
  if (!in.node->IsMap()) return bad(in, key, "expected a mapping such as {enable_thinking: false}");
  Json obj = Json::object();
  for (const auto& kv : *in.node) {
    const std::string k = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    const std::string where = mark_str(in.what, kv.second.Mark());
    if (v.IsNull()) {
      obj[k] = nullptr;
      continue;
    }
    if (!v.IsScalar())
      return InvalidArgument(Str() << where << ": " << key << "." << k << ": expected a single value (true/false, a number or text)");
    const std::string t = v.Scalar();
    const bool quoted = v.Tag() == "!";
    std::optional<bool> b = quoted ? std::nullopt : parse_bool(t);
    std::optional<int64_t> i = quoted ? std::nullopt : parse_integer<int64_t>(t);
    std::optional<double> d = quoted ? std::nullopt : parse_real(t);
    if (b && (t == "true" || t == "false" || t == "True" || t == "False")) obj[k] = *b;
    else if (i) obj[k] = *i;
    else if (d) obj[k] = *d;
    else obj[k] = t;
  }
  if (!obj.empty()) cfg.chat_template_kwargs = obj.dump();
  return Status::OK();
}

// special_tokens (axolotl): tokens the tokenizer has, as bos/eos/pad/unk (TrainConfig::SpecialTokens;
// checked against the tokenizer when it is loaded: train/train_data.h apply_special_tokens).
Status apply_special_tokens_key(const Input& in, TrainConfig& cfg) {
  const std::string key = "special_tokens";
  if (!in.node) return bad(in, key, "a mapping: set it in the YAML file");
  if (in.node->IsNull()) return Status::OK();
  if (!in.node->IsMap()) return bad(in, key, "expected a mapping such as {eos_token: \"<|im_end|>\"}");
  for (const auto& kv : *in.node) {
    const std::string k = kv.first.as<std::string>();
    const std::string where = mark_str(in.what, kv.first.Mark());
    if (!kv.second.IsScalar() || kv.second.Scalar().empty())
      return InvalidArgument(Str() << where << ": " << key << "." << k << ": expected a token");
    const std::string v = kv.second.Scalar();
    if (k == "bos_token") cfg.special_tokens.bos = v;
    else if (k == "eos_token") cfg.special_tokens.eos = v;
    else if (k == "pad_token") cfg.special_tokens.pad = v;
    else if (k == "unk_token") cfg.special_tokens.unk = v;
    else
      return Unimplemented(Str() << where << ": " << key << "." << k
                                 << ": only bos_token, eos_token, pad_token and unk_token are set here (to tokens the "
                                    "tokenizer has)");
  }
  return Status::OK();
}

Status apply_input(const std::string& key, const Input& in, TrainConfig& cfg) {
  Status st;
  if (key == "lr_scheduler_kwargs") return apply_lr_kwargs(in, cfg);
  if (key == "special_tokens") return apply_special_tokens_key(in, cfg);
  if (key == "chat_template_kwargs") return apply_chat_template_kwargs(in, cfg);
  if (key == "dpo_loss_type" && in.node) {  // TRL's loss_type: a name, or a list of them (axolotl's list[str])
    if (in.node->IsNull()) return Status::OK();  // TRL's default, sigmoid
    if (in.node->IsSequence()) {
      if (in.node->size() != 1 || !(*in.node)[0].IsScalar())
        return bad(in, "dpo_loss_type", "one loss type, or a list of one (TRL's weighted sums of several are not supported)");
      Input one = in;
      one.node = nullptr;
      one.scalar = (*in.node)[0].Scalar();
      return set_field(one, *find_field("dpo_loss_type"), cfg);
    }
  }
  if (check_variant_key(key, in, &st)) return st;
  const Field* f = find_field(canonical_key(key));
  if (!f) {
    ForeignValue fv{.scalar = in.scalar,
                    .is_null = is_null(in),
                    .is_collection = in.node && (in.node->IsSequence() || in.node->IsMap()),
                    .empty_collection = in.node && (in.node->IsSequence() || in.node->IsMap()) && in.node->size() == 0,
                    .where = in.where};
    if (apply_foreign_key(key, fv, cfg, &st)) return st;  // Note [foreign keys]
    return unknown_key(key, in.where);
  }
  return set_field(in, *f, cfg);
}

std::string yaml_base_dir(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  if (ec) return path_dirname(path);
  return abs.parent_path().string();
}

}  // namespace

StatusOr<TrainConfig> parse_train_config_yaml(const std::string& yaml_text, const std::string& what,
                                              const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(Str() << mark_str(what, e.mark) << ": malformed YAML: " << e.msg);
  }
  TrainConfig cfg;
  if (root.IsNull()) return cfg;
  if (!root.IsMap()) return InvalidArgument(Str() << what << ": expected a mapping of 'key: value' lines at the top level");
  try {
    std::set<std::string> seen;
    for (const auto& kv : root) {
      const std::string where = mark_str(what, kv.first.Mark());
      if (!kv.first.IsScalar()) return InvalidArgument(Str() << where << ": keys must be plain names");
      const std::string key = kv.first.Scalar();
      if (!seen.insert(foreign_key_slot(canonical_key(key))).second)
        return InvalidArgument(Str() << where << ": key '" << key << "' is set twice");
      Input in{&kv.second, kv.second.IsScalar() ? kv.second.Scalar() : "", where, base_dir, what};
      RETURN_IF_ERROR(apply_input(key, in, cfg));
    }
    // orpo_alpha is ORPO's beta where rl_beta is not written (axolotl: rl_beta first).
    if (seen.count("orpo_alpha") && cfg.orpo_alpha > 0 && !seen.count("rl_beta")) cfg.rl_beta = cfg.orpo_alpha;
  } catch (const YAML::Exception& e) {  // should not happen with the checks above; keep it inside
    return InvalidArgument(Str() << mark_str(what, e.mark) << ": " << e.msg);
  }
  return cfg;
}

Status apply_train_override(TrainConfig& cfg, const std::string& arg) {
  if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
    return InvalidArgument(Str() << "unexpected argument '" << arg << "' (overrides are --key=value)");
  }
  const size_t eq = arg.find('=');
  std::string key = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  std::replace(key.begin(), key.end(), '-', '_');
  Input in{nullptr, eq == std::string::npos ? "" : arg.substr(eq + 1), arg, "", ""};
  if (eq == std::string::npos) {
    const Field* f = find_field(canonical_key(key));
    if (f && !std::holds_alternative<bool TrainConfig::*>(f->member)) {
      return InvalidArgument(Str() << arg << ": key '" << key << "' needs a value (--" << key << "=...)");
    }
    in.scalar = "true";
  }
  return apply_input(key, in, cfg);
}

// revision_of_model: base_model's snapshot at that revision, once every key is read (the keys
// come in any order, and --base_model / --revision_of_model may override either).
Status resolve_model_revision(TrainConfig& cfg) {
  if (cfg.revision_of_model.empty()) return Status::OK();
  if (cfg.base_model_cache_id.empty())
    return InvalidArgument(Str() << "revision_of_model: '" << cfg.revision_of_model
                                 << "' applies to a Hugging Face model id, and base_model '" << cfg.base_model
                                 << "' is a local path");
  StatusOr<std::string> snap = hf_cache_snapshot(cfg.base_model_cache_id, HubRepoKind::kModel, cfg.revision_of_model);
  if (!snap.ok())
    return Status(snap.status().code(), Str() << "base_model " << cfg.base_model_cache_id << " at revision_of_model '"
                                              << cfg.revision_of_model << "': " << snap.status().message());
  cfg.base_model = *snap;
  cfg.base_model_hub_id.clear();
  const std::string head = "base_model " + cfg.base_model_cache_id + ": ";
  std::erase_if(cfg.notes, [&](const std::string& n) { return n.rfind(head, 0) == 0; });
  cfg.notes.push_back(Str() << head << "the Hugging Face cache's snapshot at revision " << cfg.revision_of_model << ", "
                            << *snap);
  return Status::OK();
}

// chat_template: jinja takes chat_template_jinja's text, and that text alone means jinja (axolotl's
// check_chat_template_config); beside another template it is not used, said in the banner.
Status resolve_jinja_template(TrainConfig& cfg) {
  if (cfg.chat_template == "jinja" && cfg.chat_template_jinja.empty())
    return InvalidArgument("chat_template: jinja needs chat_template_jinja (the template's text, or a file holding it)");
  if (!cfg.chat_template_jinja.empty() && cfg.chat_template.empty()) cfg.chat_template = "jinja";
  if (!cfg.chat_template_jinja.empty() && cfg.chat_template != "jinja")
    cfg.notes.push_back(Str() << "chat_template_jinja is not used: chat_template is " << cfg.chat_template);
  return Status::OK();
}

Status validate_train_config(const TrainConfig& cfg) {
  if (cfg.base_model.empty()) return InvalidArgument("missing required key 'base_model'");
  if (!cfg.base_model_hub_id.empty() && !file_exists(cfg.base_model) && !is_directory(cfg.base_model))
    return Status(StatusCode::kNotFound,
                  Str() << "base_model: " << hf_cache_snapshot(cfg.base_model_hub_id, HubRepoKind::kModel).status().message());
  if (cfg.datasets.empty()) return InvalidArgument("missing required key 'datasets' (a list of {path, type})");
  if (cfg.output_dir.empty()) return InvalidArgument("key 'output_dir' must not be empty");
  return Status::OK();
}

StatusOr<TrainConfig> load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(std::string text, read_file_to_string(path), "reading config " << path);
  ASSIGN_OR_RETURN(TrainConfig cfg, parse_train_config_yaml(text, path, yaml_base_dir(path)));
  for (const std::string& o : overrides) RETURN_IF_ERROR(apply_train_override(cfg, o));
  RETURN_IF_ERROR(resolve_model_revision(cfg), path);
  RETURN_IF_ERROR(resolve_jinja_template(cfg), path);
  RETURN_IF_ERROR(resolve_rl_dataset_types(cfg), path);
  RETURN_IF_ERROR(validate_train_config(cfg), path);
  return cfg;
}

std::string train_config_to_yaml(const TrainConfig& cfg) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const Field& f : fields()) {
    out << YAML::Key << f.name << YAML::Value;
    std::visit(
        [&](auto ptr) {
          using T = std::remove_cv_t<std::remove_reference_t<decltype(cfg.*ptr)>>;
          const T& v = cfg.*ptr;
          if constexpr (std::is_same_v<T, std::vector<DatasetSpec>>) {
            emit_dataset_list(out, v);
          } else if constexpr (std::is_same_v<T, std::vector<std::string>> || std::is_same_v<T, std::vector<int64_t>>) {
            out << YAML::Flow << v;
          } else if constexpr (std::is_same_v<T, double>) {
            char buf[64];
            auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back exactly
            out << std::string(buf, r.ptr);
          } else if constexpr (std::is_same_v<T, bool>) {
            out << (v ? "true" : "false");
          } else if constexpr (std::is_same_v<T, std::string>) {
            out << YAML::DoubleQuoted << v;
          } else {
            out << std::to_string(v);
          }
        },
        f.member);
  }
  const std::pair<const char*, double> kwargs[] = {{"num_cycles", cfg.lr_num_cycles}, {"lr_end", cfg.lr_end},
                                                   {"power", cfg.lr_power}, {"min_lr", cfg.min_lr},
                                                   {"timescale", static_cast<double>(cfg.lr_timescale)}};
  out << YAML::Key << "lr_scheduler_kwargs" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [k, v] : kwargs)
    if (v >= 0) out << YAML::Key << k << YAML::Value << v;
  out << YAML::EndMap;
  const std::pair<const char*, std::string> special[] = {{"bos_token", cfg.special_tokens.bos},
                                                         {"eos_token", cfg.special_tokens.eos},
                                                         {"pad_token", cfg.special_tokens.pad},
                                                         {"unk_token", cfg.special_tokens.unk}};
  out << YAML::Key << "special_tokens" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [k, v] : special)
    if (!v.empty()) out << YAML::Key << k << YAML::Value << v;
  out << YAML::EndMap;
  out << YAML::Key << "chat_template_kwargs" << YAML::Value << YAML::Flow << YAML::BeginMap;
  if (!cfg.chat_template_kwargs.empty()) {
    const Json kw = Json::parse(cfg.chat_template_kwargs);  // a local: items() refers into it
    for (const auto& [k, v] : kw.items()) {
      out << YAML::Key << k << YAML::Value;
      if (v.is_boolean()) out << v.get<bool>();
      else if (v.is_number_integer()) out << v.get<int64_t>();
      else if (v.is_number()) out << v.get<double>();
      else if (v.is_string()) out << YAML::DoubleQuoted << v.get<std::string>();
      else out << YAML::Null;
    }
  }
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::string> train_config_keys() {
  std::vector<std::string> out;
  for (const Field& f : fields()) out.push_back(f.name);
  out.push_back("lr_scheduler_kwargs");
  out.push_back("special_tokens");
  out.push_back("chat_template_kwargs");
  return out;
}


}  // namespace st
