// `streamtune evaluate CONFIG.yaml [--adapter DIR] [--no-base] [--key=value ...]`: axolotl's
// `evaluate` -- the eval loss of the base and of the trained adapter on the config's eval data.
#include <cstdio>

#include "cli/commands.h"
#include "cli/config_yaml.h"
#include "cli/run_train.h"

namespace st {

extern const CommandSpec kCmdEvaluate;

namespace {

constexpr const char* kUsage =
    "usage: streamtune evaluate CONFIG.yaml [--adapter DIR] [--no-base] [--key=value ...]\n"
    "\n"
    "The mean loss per target token (and its perplexity) on the config's eval data -- val_set_size's\n"
    "split or eval_datasets / test_datasets, else the training datasets -- of the base model and of\n"
    "the adapter, tokenized and masked as `train` does, with no dropout. Nothing is written.\n"
    "\n"
    "  --adapter DIR  the adapter to evaluate (default: lora_model_dir, else output_dir's adapter when\n"
    "                 there is one); its LoRA settings must be the config's (r, alpha, targets)\n"
    "  --no-base      skip the base model's loss (one pass instead of two)\n"
    "\n"
    "exit status: 0 done, 1 evaluation failed, 2 bad arguments or config\n";

int run(const std::vector<std::string>& args) {
  std::string config_path;
  std::vector<std::string> overrides;
  EvaluateOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--adapter") {
      if (i + 1 >= args.size()) return usage_error(kCmdEvaluate, "--adapter needs a directory");
      o.adapter = args[++i];
    } else if (a.rfind("--adapter=", 0) == 0) {
      o.adapter = a.substr(10);
      if (o.adapter.empty()) return usage_error(kCmdEvaluate, "--adapter needs a directory");
    } else if (a == "--no-base" || a == "--no_base") {
      o.base = false;
    } else if (a.rfind("--", 0) == 0) {
      overrides.push_back(a);
    } else if (config_path.empty()) {
      config_path = a;
    } else {
      return usage_error(kCmdEvaluate, "unexpected argument '" + a + "' (one CONFIG.yaml; overrides are --key=value)");
    }
  }
  if (config_path.empty()) return usage_error(kCmdEvaluate, "missing CONFIG.yaml");
  StatusOr<TrainConfig> cfg = load_train_config(config_path, overrides);
  if (!cfg.ok()) return usage_error(kCmdEvaluate, cfg.status().message());
  Status s = run_evaluate(*cfg, o);
  if (!s.ok()) return runtime_error(s);
  return kExitOk;
}

}  // namespace

extern const CommandSpec kCmdEvaluate = {"evaluate", "eval loss and perplexity of the base and the adapter on a config's data",
                                         kUsage, run};

}  // namespace st
