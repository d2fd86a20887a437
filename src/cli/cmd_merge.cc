// `streamtune merge --model M --adapter DIR --out DIR [--dtype D] [--force] [--max-shard-size S]`
// Folds a PEFT LoRA adapter into the base weights (train/merge.h) and writes an HF checkpoint.
#include <cstdio>
#include <string>
#include <vector>

#include "core/byte_size.h"
#include "cli/cli_args.h"
#include "cli/config_yaml.h"
#include "train/merge.h"

namespace st {
namespace {

constexpr const char* kUsage =
    "usage: streamtune merge --model M --adapter DIR --out DIR [options]\n"
    "\n"
    "Writes W' = W + (alpha/r) * B.A for every LoRA-adapted projection as a Hugging Face checkpoint\n"
    "(config.json, model.safetensors or shards + index, tokenizer files copied from an HF base or\n"
    "written from a GGUF base's vocabulary), or,\n"
    "for a .gguf base and an --out ending in .gguf, as one GGUF file for llama.cpp: metadata and every\n"
    "untouched tensor copied as they are (quantized stays quantized), the merged projections in --dtype.\n"
    "\n"
    "  --model M              base model: HF checkpoint directory or .gguf file\n"
    "  --adapter DIR          PEFT adapter directory\n"
    "  --out DIR|F.gguf       output directory, or a .gguf file (written atomically)\n"
    "  --dtype D              output dtype: bfloat16 | float16 | float32 (default: the base's; GGUF base:\n"
    "                         bfloat16; .gguf output: float16 for the merged projections)\n"
    "  --max-shard-size S     largest safetensors file, e.g. 2GB (default)\n"
    "  --force                replace an existing --out directory\n";

int usage(const std::string& msg) {
  std::fprintf(stderr, "streamtune: error: %s\nsee 'streamtune merge --help'\n", msg.c_str());
  return 2;
}

}  // namespace

// argv[0] is the subcommand name ("merge"); flags follow. 0 ok, 1 runtime error, 2 usage.
int cmd_merge(int argc, char** argv) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  for (const std::string& s : args) {
    if (s == "--help" || s == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  StatusOr<ParsedArgs> a =
      parse_flags(args, {{"model"}, {"adapter"}, {"out"}, {"dtype"}, {"max-shard-size"}, {"force", false}});
  if (!a.ok()) return usage(a.status().message());
  if (!a->positional.empty()) return usage("unexpected argument '" + a->positional[0] + "'");
  for (const char* f : {"model", "adapter", "out"}) {
    if (a->get(f).empty()) return usage(std::string("missing --") + f);
  }
  if (!resolve_model_flag(&*a)) return 1;
  MergeOptions o;
  o.overwrite = a->has("force");
  if (a->has("dtype")) {
    StatusOr<DType> d = dtype_from_user(a->get("dtype"));
    if (!d.ok()) return usage("--dtype: " + d.status().message());
    o.dtype = *d;
  }
  StatusOr<uint64_t> shard = parse_byte_size(a->get("max-shard-size", "2GB"));
  if (!shard.ok() || *shard == 0) return usage("--max-shard-size: expected a size such as 2GB");
  o.max_shard_bytes = *shard;
  StatusOr<MergeResult> r = merge_lora(a->get("model"), a->get("adapter"), a->get("out"), o);
  if (!r.ok()) {
    std::fprintf(stderr, "streamtune: error: %s\n", r.status().message().c_str());
    return r.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  for (const std::string& n : r->notes) std::printf("note: %s\n", n.c_str());
  std::printf("merged %lld projections into %s: %zu file(s), %.3f GB\n", static_cast<long long>(r->merged),
              a->get("out").c_str(), r->files.size(), static_cast<double>(r->bytes) / 1e9);
  return 0;
}

}  // namespace st
