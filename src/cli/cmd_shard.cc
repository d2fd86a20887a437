// `streamtune shard MODEL [--out DIR] [--dtype bfloat16|float32] [--quant none|nf4|code12] [--cache-dir DIR] [--force]`:
// turns an HF checkpoint directory (or a .gguf file) into a layer store (store/sharder.h), or
// reports that an up-to-date one is already there.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "store/sharder.h"

namespace st {
namespace {

const char kShardUsage[] =
    "usage: streamtune shard MODEL [--out DIR] [--dtype bfloat16|float32] [--quant none|nf4|code12]\n"
    "                              [--cache-dir DIR] [--force]\n"
    "\n"
    "Splits MODEL (an HF checkpoint directory or a .gguf file) into a layer store: manifest.json,\n"
    "one layer_NNN.safetensors per decoder layer and extras.safetensors (embedding, final norm,\n"
    "lm_head). Default location: <cache>/stores/<fingerprint>-<dtype>, where <cache> is\n"
    "$XDG_CACHE_HOME/streamtune or ~/.cache/streamtune. An up-to-date store is reused; a changed\n"
    "source or dtype rebuilds it.\n"
    "\n"
    "  --out DIR        store directory (default: in the cache)\n"
    "  --dtype T        bfloat16 (default) or float32\n"
    "  --quant nf4      store the linears NF4-quantized (the QLoRA base, `adapter: qlora`)\n"
    "  --quant code12   store the linears losslessly in ~12 bits a weight (bfloat16 only; the store\n"
    "                   `stream_compress` trains from: ~24% fewer bytes to stream, the same bits)\n"
    "  --cache-dir DIR  cache root instead of the default\n"
    "  --force          rebuild even if the store is up to date\n";

int run_shard(const std::vector<std::string>& args) {
  StatusOr<ParsedArgs> a = parse_flags(args, {{"out"}, {"dtype"}, {"quant"}, {"cache-dir"}, {"force", false}});
  if (!a.ok() || a->positional.size() != 1) {
    std::fprintf(stderr, "streamtune: error: %s\n%s",
                 a.ok() ? "shard takes exactly one MODEL" : a.status().message().c_str(), kShardUsage);
    return kExitUsage;
  }
  std::string model = a->positional[0];
  if (!resolve_model_arg(&model)) return 1;
  ShardOptions o;
  StatusOr<DType> dt = dtype_from_user(a->get("dtype", "bfloat16"));
  if (!dt.ok() || (*dt != DType::kBF16 && *dt != DType::kF32)) {
    std::fprintf(stderr, "streamtune: error: --dtype must be bfloat16 or float32\n");
    return kExitUsage;
  }
  o.dtype = *dt;
  if (!parse_base_quant(a->get("quant", "none"), &o.quant)) {
    std::fprintf(stderr, "streamtune: error: --quant must be none, nf4 or code12\n");
    return kExitUsage;
  }
  o.out_dir = a->get("out");
  o.cache_dir = a->get("cache-dir");
  o.force = a->has("force");
  auto t0 = std::chrono::steady_clock::now();
  o.progress = [](int done, int total, const std::string& name) {
    std::fprintf(stderr, "\rshard: %d/%d files (%s)   ", done, total, name.c_str());
    if (done == total) std::fprintf(stderr, "\n");
  };
  StatusOr<ShardResult> r = shard_model_path(model, o);
  if (!r.ok()) return runtime_error(r.status());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const StoreManifest& m = r->manifest;
  uint64_t bytes = m.layer_bytes * static_cast<uint64_t>(m.num_layers) + m.extras_bytes;
  std::printf("%s\nstore: %s\n  %d layers x %llu bytes + extras %llu bytes (%s, %.2f GB)%s\n", r->reason.c_str(),
              r->dir.c_str(), m.num_layers, static_cast<unsigned long long>(m.layer_bytes),
              static_cast<unsigned long long>(m.extras_bytes), (std::string(dtype_name(m.dtype)) + (m.quant != BaseQuant::kNone ? std::string(", ") + base_quant_name(m.quant) : "")).c_str(), bytes / 1e9,
              r->reused ? "" : (" in " + std::to_string(secs).substr(0, 5) + " s").c_str());
  return kExitOk;
}

}  // namespace

int cmd_shard(int argc, char** argv) {
  return run_shard(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + argc));
}

extern const CommandSpec kCmdShard = {"shard", "split a model into a cached layer store for streaming",
                                      kShardUsage, run_shard};

}  // namespace st
