// `streamtune train CONFIG.yaml [--key=value ...]`
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "cli/config_yaml.h"
#include "cli/run_train.h"
#include "train/train_data.h"

namespace st {

extern const CommandSpec kCmdTrain;

namespace {

constexpr const char* kUsage =
    "usage: streamtune train CONFIG.yaml [--key=value ...] [--dry-run] [--preview-data[=N]] [--plan]\n"
    "\n"
    "Fine-tunes a LoRA adapter as configured by CONFIG.yaml (keys: see README.md, 'Config').\n"
    "Any key can be overridden on the command line with --key=value (dashes or underscores);\n"
    "lora_target_modules takes a comma list (--lora_target_modules=q_proj,v_proj); datasets can only\n"
    "be set in the file. Relative paths in the file are relative to the file's directory.\n"
    "\n"
    "  --dry-run   validate the config, print every resolved setting as YAML, and exit\n"
    "  --preview-data[=N]  tokenize the datasets, print their counts and the first N samples (default 3)\n"
    "              as text with the trained tokens between \u27e6 and \u27e7, and exit (no weights are loaded)\n"
    "  --plan      print the memory plan on this device (layers resident / streamed, recompute, the\n"
    "              budget's terms) from the model's config alone, and exit: nothing is loaded or\n"
    "              built; exit 1 with what would fit when the config does not fit\n"
    "\n"
    "exit status: 0 done, 1 training failed, 2 bad arguments or config\n";

int run(const std::vector<std::string>& args) {
  std::string config_path;
  std::vector<std::string> overrides;
  bool dry_run = false, plan = false;
  int preview = 0;
  for (const std::string& a : args) {
    if (a == "--dry-run" || a == "--dry_run" || a == "--print-config") {
      dry_run = true;
    } else if (a == "--plan") {
      plan = true;
    } else if (a == "--preview-data" || a == "--preview_data") {
      preview = 3;
    } else if (a.rfind("--preview-data=", 0) == 0 || a.rfind("--preview_data=", 0) == 0) {
      const std::string v = a.substr(a.find('=') + 1);
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 1000000)
        return usage_error(kCmdTrain, "--preview-data=N: N must be a positive integer, got '" + v + "'");
      preview = static_cast<int>(n);
    } else if (a.rfind("--", 0) == 0) {
      overrides.push_back(a);
    } else if (config_path.empty()) {
      config_path = a;
    } else {
      return usage_error(kCmdTrain, "unexpected argument '" + a + "' (one CONFIG.yaml; overrides are --key=value)");
    }
  }
  if (config_path.empty()) return usage_error(kCmdTrain, "missing CONFIG.yaml");
  StatusOr<TrainConfig> cfg = load_train_config(config_path, overrides);
  if (!cfg.ok()) return usage_error(kCmdTrain, cfg.status().message());
  if (dry_run) {
    std::fputs(train_config_to_yaml(*cfg).c_str(), stdout);
    return kExitOk;
  }
  if (plan) {
    Status s = plan_train(*cfg);
    if (!s.ok()) return runtime_error(s);
    return kExitOk;
  }
  if (preview > 0) {
    Status s = preview_train_data(*cfg, preview, stdout);
    if (!s.ok()) return runtime_error(s);
    return kExitOk;
  }
  Status s = run_train(*cfg);
  if (!s.ok()) return runtime_error(s);
  return kExitOk;
}

}  // namespace

extern const CommandSpec kCmdTrain = {"train", "fine-tune a LoRA adapter from a YAML config", kUsage, run};

}  // namespace st
