// `streamtune init-model (--preset NAME | --config config.json) --out DIR [--seed N] [--dtype D]`
#include <cstdio>

#include "core/byte_size.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/config_yaml.h"
#include "model/init_model.h"
#include "model/presets.h"

namespace st {

extern const CommandSpec kCmdInitModel;

namespace {

constexpr const char* kUsage =
    "usage: streamtune init-model (--preset NAME | --config CONFIG.json) --out DIR [options]\n"
    "\n"
    "Writes a randomly initialised checkpoint in Hugging Face layout: config.json and\n"
    "model.safetensors (or ~2 GB shards + model.safetensors.index.json). Linear weights and biases\n"
    "~ normal(0, 0.02), norm weights 1; the bytes depend only on the config, dtype and seed.\n"
    "\n"
    "  --preset NAME          a built-in model shape (--list-presets shows them)\n"
    "  --config FILE          take the shapes from an HF config.json instead\n"
    "  --out DIR              output directory (created if missing)\n"
    "  --seed N               generator seed (default 0)\n"
    "  --dtype D              bfloat16 (default) | float16 | float32\n"
    "  --force                replace a checkpoint already in DIR\n"
    "  --threads N            generator threads (default: all cores)\n"
    "  --max-shard-size S     largest file, e.g. 2GB (default), 500MB\n"
    "  --list-presets         print the presets and exit\n";

int list_presets() {
  for (const ModelPresetInfo& p : model_preset_list()) {
    std::printf("%-14s %s\n", p.name.c_str(), p.summary.c_str());
  }
  return kExitOk;
}

int run(const std::vector<std::string>& args) {
  const CommandSpec& self = kCmdInitModel;
  StatusOr<ParsedArgs> a = parse_flags(args, {{"preset"}, {"config"}, {"out"}, {"seed"}, {"dtype"},
                                              {"force", false}, {"threads"}, {"max-shard-size"},
                                              {"list-presets", false}});
  if (!a.ok()) return usage_error(self, a.status().message());
  if (a->has("list-presets")) return list_presets();
  if (!a->positional.empty()) return usage_error(self, "unexpected argument '" + a->positional[0] + "'");
  if (a->has("preset") == a->has("config")) return usage_error(self, "give exactly one of --preset NAME or --config FILE");
  if (!a->has("out") || a->get("out").empty()) return usage_error(self, "missing --out DIR");

  InitModelOptions opts;
  StatusOr<uint64_t> seed = flag_u64(*a, "seed", 0);
  StatusOr<uint64_t> threads = flag_u64(*a, "threads", 0);
  StatusOr<DType> dtype = dtype_from_user(a->get("dtype", "bfloat16"));
  StatusOr<uint64_t> shard = parse_byte_size(a->get("max-shard-size", "2GB"));
  if (!seed.ok()) return usage_error(self, seed.status().message());
  if (!threads.ok()) return usage_error(self, threads.status().message());
  if (!dtype.ok()) return usage_error(self, "--dtype: " + dtype.status().message());
  if (!shard.ok() || *shard == 0) return usage_error(self, "--max-shard-size: expected a size such as 2GB");
  opts.seed = *seed;
  opts.threads = static_cast<int>(*threads);
  opts.dtype = *dtype;
  opts.max_shard_bytes = *shard;
  opts.overwrite = a->has("force");

  StatusOr<ModelConfig> cfg = a->has("preset") ? model_preset(a->get("preset")) : load_hf_config(a->get("config"));
  if (!cfg.ok()) {
    if (a->has("preset")) return usage_error(self, cfg.status().message());
    return runtime_error(cfg.status());
  }
  const std::string out = a->get("out");
  StatusOr<InitModelResult> r = init_model(*cfg, out, opts);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kInvalidArgument) return usage_error(self, r.status().message());
    return runtime_error(r.status());
  }
  if (r->stale_temps_removed > 0)
    std::printf("removed %d partial file(s) of an earlier, killed init-model from %s\n", r->stale_temps_removed,
                out.c_str());
  const double gb = static_cast<double>(r->bytes) / 1e9;
  std::printf("wrote %s: %lld params, %.3f GB (%s) in %zu file(s), %.2f s (%.2f GB/s)\n", out.c_str(),
              static_cast<long long>(r->params), gb, dtype_name(opts.dtype), r->files.size(), r->seconds,
              r->seconds > 0 ? gb / r->seconds : 0.0);
  return kExitOk;
}

}  // namespace

extern const CommandSpec kCmdInitModel = {"init-model", "write a randomly initialised HF checkpoint (presets or config.json)",
                                          kUsage, run};

}  // namespace st
