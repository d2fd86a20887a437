#include "train/model_card.h"

#include <fstream>
#include <sstream>

#include "core/file.h"
#include "core/json.h"
#include "train/preference_loss.h"
#include "train/train_config.h"

namespace st {
namespace {

// The card's last line: a README.md holding it is ours to rewrite (the next run's numbers); one
// without it -- the user's, or ours edited with the line taken out -- is left alone.
constexpr const char* kMark = "<!-- written by streamtune train: the next run rewrites this file unless this line is removed -->";

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) {
    if (!s.empty()) s.append(", ");
    s.append(x);
  }
  return s;
}

// A YAML double-quoted scalar.
std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') { o += "\\n"; continue; }
    o += c;
  }
  return o + "\"";
}

struct Last {
  double loss = -1, eval_loss = -1;
  int64_t step = 0;
};

Last last_losses(const std::string& path) {
  Last l;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    StatusOr<Json> j = parse_json(line, path);
    if (!j.ok() || !j->is_object()) continue;
    if (j->contains("step") && (*j)["step"].is_number_integer()) l.step = std::max(l.step, (*j)["step"].get<int64_t>());
    if (j->contains("loss") && (*j)["loss"].is_number()) l.loss = (*j)["loss"].get<double>();
    if (j->contains("eval_loss") && (*j)["eval_loss"].is_number()) l.eval_loss = (*j)["eval_loss"].get<double>();
  }
  return l;
}

}  // namespace

std::string model_card_text(const TrainConfig& cfg, const std::string& metrics_jsonl) {
  const Last last = last_losses(metrics_jsonl);
  const std::string base = cfg.base_model_cache_id.empty() ? cfg.base_model : cfg.base_model_cache_id;
  std::ostringstream o;
  o << "---\n";
  if (!cfg.base_model_cache_id.empty()) o << "base_model: " << quoted(cfg.base_model_cache_id) << "\n";
  o << "library_name: peft\ntags:\n- " << (cfg.adapter == "qlora" ? "qlora" : "lora") << "\n"
    << (cfg.rl.empty() ? "" : "- " + cfg.rl + "\n") << "- streamtune\n---\n\n";  // the trainer's tag, as TRL's
  o << "# " << path_basename(cfg.output_dir) << "\n\n";
  o << "A " << (cfg.use_dora ? "DoRA" : cfg.adapter == "qlora" ? "QLoRA" : "LoRA") << " adapter for `" << base
    << "`, trained with streamtune";
  StatusOr<PreferenceConfig> pc = preference_config_from(cfg);
  const bool pref = !cfg.rl.empty() && pc.ok();
  if (pref)
    o << " by " << preference_loss_title(pc->loss)
      << (pc->loss == PreferenceLoss::kKto ? " on examples labelled desirable or undesirable" : " on preference pairs");
  o << ".\n\n";
  if (pref) o << "- " << preference_summary(*pc) << "\n";
  o << "- LoRA: r " << cfg.lora_r << ", alpha " << cfg.lora_alpha << ", dropout " << cfg.lora_dropout
    << (cfg.use_rslora ? ", rsLoRA" : "") << "; targets " << join(cfg.lora_target_modules) << "\n";
  std::vector<std::string> data;
  for (const DatasetSpec& d : cfg.datasets) data.push_back(Str() << "`" << path_basename(d.path) << "` (" << d.type << ")");
  o << "- data: " << join(data);
  if (!cfg.chat_template.empty()) o << "; chat template " << cfg.chat_template;
  o << "\n";
  o << "- training: " << last.step << " steps, micro-batch " << cfg.micro_batch_size << " x "
    << cfg.gradient_accumulation_steps << " accumulation, sequence_len " << cfg.sequence_len << ", learning rate "
    << cfg.learning_rate << " (" << cfg.lr_scheduler << "), " << cfg.dtype << "\n";
  if (last.loss >= 0) o << "- last logged train loss " << last.loss;
  if (last.eval_loss >= 0) o << (last.loss >= 0 ? ", " : "- ") << "eval loss " << last.eval_loss;
  if (last.loss >= 0 || last.eval_loss >= 0) o << " (metrics.jsonl has every step)\n";
  o << "\n## Use\n\n```python\nfrom peft import PeftModel\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
    << "base = AutoModelForCausalLM.from_pretrained(" << quoted(base) << ")\n"
    << "model = PeftModel.from_pretrained(base, \"path/to/this/directory\")\n"
    << "tokenizer = AutoTokenizer.from_pretrained(\"path/to/this/directory\")  # the chat template it was trained with\n"
    << "```\n\nor `streamtune generate --model BASE --adapter DIR --chat`, `streamtune merge --model BASE --adapter DIR "
       "--out MERGED`.\n\n" << kMark << "\n";
  return o.str();
}

StatusOr<bool> write_model_card(const TrainConfig& cfg) {
  const std::string path = path_join(cfg.output_dir, "README.md");
  if (file_exists(path)) {
    ASSIGN_OR_RETURN(std::string text, read_file_to_string(path));
    if (text.find(kMark) == std::string::npos) return false;
  }
  RETURN_IF_ERROR(write_file_atomic(path, model_card_text(cfg, path_join(cfg.output_dir, "metrics.jsonl"))));
  return true;
}

}  // namespace st
