// `streamtune bench (--model DIR | --preset NAME) [--seq S] [--batch B] [--steps N] [--warmup W]
//   [--stream off|ram|disk] [--stream-buffers n] [--lora-r R] [--targets q_proj,v_proj]
//   [--vram-budget SIZE] [--device auto|cpu|cuda] [--dtype bfloat16|float32] [--json]`
// Full training steps on synthetic tokens; prints the roofline figures of design.md §5.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/bench_run.h"
#include "cli/cli_args.h"
#include "core/json.h"
#include "dist/run_train_dp.h"
#include "train/train_config.h"

namespace st {

namespace {

constexpr const char* kBenchUsage =
    "usage: streamtune bench (--model DIR | --preset NAME) [--seq S] [--batch B] [--doc-len N]\n"
    "         [--prompt-len N] [--steps N] [--warmup W] [--stream off|ram|disk] [--stream-buffers n]\n"
    "         [--lora-r R] [--targets q_proj,v_proj] [--dora] [--vram-budget SIZE] [--device auto|cpu|cuda]\n"
    "         [--dtype bfloat16|float32] [--quant none|nf4|code12] [--seed N] [--no-ceilings] [--json]\n"
    "\n"
    "Runs full LoRA training steps (forward, lm_head + cross-entropy, backward with per-layer\n"
    "recompute, AdamW) on seeded random tokens and reports tok/s, median step time, TFLOP/s\n"
    "(seed convention, and with causal attention), the bf16 GEMM ceiling and pinned host->device\n"
    "link measured in the same run, bytes streamed per step, exposed copy time, compute fraction,\n"
    "VRAM and host store size.\n"
    "  --preset NAME     random weights of a named shape, in memory (no files; see init-model)\n"
    "  --model DIR       a real checkpoint (HF dir or .gguf), sharded and loaded as `train` does\n"
    "  --stream          off (default): every layer resident; ram/disk: stream every layer\n"
    "                    through the pool, or as the planner decides when --vram-budget is given\n"
    "  --offload-embeddings auto|true|false\n"
    "                    keep the embedding + lm_head in host memory and stream the lm_head in\n"
    "                    vocabulary chunks (auto: the planner decides; needs --stream ram|disk)\n"
    "  --recompute auto|full|attention|none\n"
    "                    what the backward recomputes: full = per-layer checkpointing (the peers'\n"
    "                    setting), attention = keep attention outputs, none = keep every\n"
    "                    activation; auto (default): the planner's choice, as `train` makes it\n"
    "  --dtype           default: bfloat16 on CUDA, float32 on CPU\n"
    "  --grad-accum G    G micro-batches a step (tok/s counts all of them; default 1)\n"
    "  --doc-len N       pack each row with N-token documents, as sample_packing does (attention\n"
    "                    stays inside each document; default 0: one document a row)\n"
    "  --prompt-len N    the first N tokens of each document (or row) are not trained on, as a\n"
    "                    prompt with train_on_inputs false (tok/s still counts every token)\n"
    "  --layer-major auto|true|false\n"
    "                    hold several micro-batches and load each streamed layer once for them\n"
    "                    (auto: the planner's choice; without --vram-budget, all G at once)\n"
    "  --devices N       data parallel over N devices of this node (needs --model; one shared RAM\n"
    "                    store, LoRA gradients all-reduced each step; --grad-accum is per device):\n"
    "                    step time and tok/s over all devices, and per device\n"
    "  --quant nf4       the QLoRA base: the seven linears stored as NF4 (a quarter of the bytes to\n"
    "                    stream), dequantized per layer before their GEMMs (default: none)\n"
    "  --quant code12    the seven linears coded losslessly in ~12 bits a weight (bf16 only: ~24%\n"
    "                    fewer bytes to stream, the same bits), decoded per layer before their GEMMs\n"
    "  --dora            DoRA on the targets (a magnitude vector per output row; PEFT's use_dora)\n"
    "  --lora-dropout P  LoRA dropout on the adapter's input (default 0)\n"
    "  defaults: --seq 512 --batch 1 --steps 10 --warmup 3 --stream-buffers 2 --lora-r 16\n"
    "            (alpha 2r) --targets q_proj,v_proj\n";

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

int usage(const std::string& msg) {
  std::fprintf(stderr, "streamtune: error: %s\n%s", msg.c_str(), kBenchUsage);
  return 2;
}

// Flags -> options; InvalidArgument names the flag.
StatusOr<BenchOptions> bench_options(const ParsedArgs& a) {
  BenchOptions o;
  o.model_dir = a.get("model");
  o.preset = a.get("preset");
  if (o.model_dir.empty() == o.preset.empty()) return InvalidArgument("give exactly one of --model or --preset");
  if (!a.positional.empty()) return InvalidArgument("unexpected argument '" + a.positional[0] + "'");
  ASSIGN_OR_RETURN(uint64_t seq, flag_u64(a, "seq", 512));
  ASSIGN_OR_RETURN(uint64_t batch, flag_u64(a, "batch", 1));
  ASSIGN_OR_RETURN(uint64_t doc_len, flag_u64(a, "doc-len", 0));
  ASSIGN_OR_RETURN(uint64_t prompt_len, flag_u64(a, "prompt-len", 0));
  ASSIGN_OR_RETURN(uint64_t steps, flag_u64(a, "steps", 10));
  ASSIGN_OR_RETURN(uint64_t warmup, flag_u64(a, "warmup", 3));
  ASSIGN_OR_RETURN(uint64_t bufs, flag_u64(a, "stream-buffers", 2));
  ASSIGN_OR_RETURN(uint64_t r, flag_u64(a, "lora-r", 16));
  ASSIGN_OR_RETURN(o.seed, flag_u64(a, "seed", 0));
  if (seq < 2 || seq > (1u << 20)) return InvalidArgument("--seq must be in [2, 1048576]");
  if (batch < 1 || batch > 4096) return InvalidArgument("--batch must be in [1, 4096]");
  if (steps < 1 || steps > 100000) return InvalidArgument("--steps must be in [1, 100000]");
  if (warmup > 100000) return InvalidArgument("--warmup must be at most 100000");
  if (bufs < 1 || bufs > 1024) return InvalidArgument("--stream-buffers must be in [1, 1024]");
  if (r < 1 || r > 4096) return InvalidArgument("--lora-r must be in [1, 4096]");
  o.seq = static_cast<int64_t>(seq);
  o.batch = static_cast<int64_t>(batch);
  if (doc_len > seq) return InvalidArgument("--doc-len must be at most --seq");
  o.doc_len = static_cast<int64_t>(doc_len);
  if (prompt_len >= (doc_len > 0 ? doc_len : seq))
    return InvalidArgument("--prompt-len must be less than the document (--doc-len, else --seq)");
  o.prompt_len = static_cast<int64_t>(prompt_len);
  o.steps = static_cast<int>(steps);
  o.warmup = static_cast<int>(warmup);
  o.stream_buffers = static_cast<int>(bufs);
  o.lora_r = static_cast<int64_t>(r);
  o.stream = a.get("stream", "off");
  if (o.stream != "off" && o.stream != "ram" && o.stream != "disk")
    return InvalidArgument("--stream must be off, ram or disk (got '" + o.stream + "')");
  if (o.stream == "disk" && !o.preset.empty())
    return InvalidArgument("--stream disk needs --model (a preset lives in memory; shard one with init-model)");
  if (a.has("targets")) o.targets = split_commas(a.get("targets"));
  if (o.targets.empty()) return InvalidArgument("--targets is empty");
  o.dora = a.has("dora");
  if (a.has("lora-dropout")) {
    char* end = nullptr;
    const std::string v = a.get("lora-dropout");
    o.lora_dropout = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(o.lora_dropout >= 0 && o.lora_dropout < 1))
      return InvalidArgument("--lora-dropout must be in [0, 1) (got '" + v + "')");
  }
  o.vram_budget = a.get("vram-budget");
  if (a.has("offload-embeddings")) o.offload_embeddings = a.get("offload-embeddings");
  if (a.has("recompute")) o.recompute = a.get("recompute");
  o.device = a.get("device", "auto");
  o.dtype = a.get("dtype", "auto");
  ASSIGN_OR_RETURN(uint64_t ga, flag_u64(a, "grad-accum", 1));
  if (ga < 1 || ga > 1024) return InvalidArgument("--grad-accum must be in [1, 1024]");
  o.grad_accum = static_cast<int>(ga);
  o.layer_major = a.get("layer-major", "auto");
  if (o.layer_major != "auto" && o.layer_major != "true" && o.layer_major != "false")
    return InvalidArgument("--layer-major must be auto, true or false (got '" + o.layer_major + "')");
  if (!parse_base_quant(a.get("quant", "none"), &o.quant))
    return InvalidArgument("--quant must be none, nf4 or code12 (got '" + a.get("quant") + "')");
  o.ceilings = !a.has("no-ceilings");
  return o;
}

// `--devices N` (dist/run_train_dp.h bench_data_parallel): the train-time data-parallel assembly
// on seeded synthetic windows. Prints one JSON line (--json) or a short summary.
int run_bench_devices(const ParsedArgs& a, const BenchOptions& o) {
  if (o.model_dir.empty()) return usage("--devices needs --model DIR (the replicas share one sharded store)");
  TrainConfig c;
  c.base_model = o.model_dir;
  c.devices = a.get("devices");
  c.device = o.device;
  if (o.dtype != "auto") c.dtype = o.dtype;
  c.adapter = o.quant == BaseQuant::kNF4 ? "qlora" : "lora";
  c.lora_r = o.lora_r;
  c.lora_alpha = o.lora_alpha > 0 ? o.lora_alpha : 2.0 * static_cast<double>(o.lora_r);
  c.lora_target_modules = o.targets;
  c.use_dora = o.dora;
  c.lora_dropout = o.lora_dropout;
  c.micro_batch_size = o.batch;
  c.sequence_len = o.seq;
  c.gradient_accumulation_steps = o.grad_accum;
  c.stream = o.stream;
  c.stream_buffers = o.stream_buffers;
  c.vram_budget = o.vram_budget;
  c.offload_embeddings = o.offload_embeddings;
  c.recompute = o.recompute;
  c.layer_major = o.layer_major;
  c.seed = o.seed;
  const DeviceKind kind = o.device == "cpu" || (o.device == "auto" && !cuda_available()) ? DeviceKind::kCpu
                                                                                        : DeviceKind::kCuda;
  StatusOr<int> n = resolve_devices(c.devices, kind);
  if (!n.ok()) return usage(n.status().message());
  StatusOr<DpBenchResult> r = bench_data_parallel(c, *n, o.steps, o.warmup);
  if (!r.ok()) {
    std::fprintf(stderr, "streamtune: error: bench: %s\n", r.status().message().c_str());
    return r.status().code() == StatusCode::kInvalidArgument || r.status().code() == StatusCode::kNotFound ? 2 : 1;
  }
  Json j = {{"model", o.model_dir},       {"seq", o.seq},
            {"batch", o.batch},           {"grad_accum", o.grad_accum},
            {"devices", r->replicas},     {"world_size", r->world_size},
            {"tokens_per_step", r->tokens_per_step}, {"step_ms", r->step_ms_median},
            {"tok_s", r->tok_s},          {"tok_s_per_device", r->tok_s_per_device},
            {"loss_first", r->loss_first}, {"loss_last", r->loss_last},
            {"stream", o.stream},         {"quant", base_quant_name(o.quant)}};
  if (a.has("json")) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("bench: %s, %d device(s) (world %d), %lld tokens a step\n  step (median) %.2f ms, %.1f tok/s "
                "(%.1f per device), loss %.4f -> %.4f\n",
                o.model_dir.c_str(), r->replicas, r->world_size, static_cast<long long>(r->tokens_per_step),
                r->step_ms_median, r->tok_s, r->tok_s_per_device, r->loss_first, r->loss_last);
  }
  return 0;
}

}  // namespace

// argv[0] is the subcommand name ("bench"); flags follow. Returns 0 ok, 1 runtime error, 2 usage.
int cmd_bench(int argc, char** argv) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  for (const std::string& s : args) {
    if (s == "--help" || s == "-h") {
      std::fputs(kBenchUsage, stdout);
      return 0;
    }
  }
  StatusOr<ParsedArgs> a = parse_flags(
      args, {{"model"}, {"preset"}, {"seq"}, {"batch"}, {"steps"}, {"warmup"}, {"stream"}, {"stream-buffers"},
             {"lora-r"}, {"targets"}, {"dora", false}, {"lora-dropout"}, {"vram-budget"}, {"offload-embeddings"}, {"recompute"}, {"device"}, {"dtype"}, {"quant"}, {"grad-accum"}, {"doc-len"}, {"prompt-len"}, {"layer-major"}, {"devices"}, {"seed"}, {"no-ceilings", false},
             {"json", false}});
  if (!a.ok()) return usage(a.status().message());
  if (!resolve_model_flag(&*a)) return 1;
  StatusOr<BenchOptions> o = bench_options(*a);
  if (!o.ok()) return usage(o.status().message());
  if (a->has("devices")) return run_bench_devices(*a, *o);
  StatusOr<BenchResult> r = run_bench(*o);
  if (!r.ok()) {
    std::fprintf(stderr, "streamtune: error: bench: %s\n", r.status().message().c_str());
    return r.status().code() == StatusCode::kInvalidArgument || r.status().code() == StatusCode::kNotFound ? 2 : 1;
  }
  if (a->has("json")) {
    std::printf("%s\n", bench_result_json(*r).dump().c_str());
  } else {
    std::fputs(bench_result_text(*r).c_str(), stdout);
  }
  return 0;
}

}  // namespace st
