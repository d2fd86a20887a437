// `streamtune generate --model M [--adapter DIR] (--prompt TEXT | --chat) [options]`
// Greedy or sampled generation with a KV cache (model/decode.h), printing text as it is produced.
// M: an HF checkpoint dir (tokenizer.json next to it) or a .gguf file (tokenizer from its metadata).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cli/cli_args.h"
#include "core/file.h"
#include "core/json.h"
#include "data/chat_template.h"
#include "data/model_tokenizer.h"
#include "data/tokenizer.h"
#include "io/gguf_checkpoint.h"
#include "model/decode.h"
#include "model/load.h"
#include "model/lora.h"
#include "train/checkpoint.h"
#include "store/disk_store.h"
#include "store/host_memory.h"
#include "store/ram_store.h"
#include "store/sharder.h"
#include "stream/streamed_layer_source.h"

namespace st {
namespace {

// Base weights for decoding: the resident LoadedModel, or a layer store streamed through a pool.
struct DecodeWeights {
  ModelConfig config;
  ExtrasWeights extras;
  LayerSource* layers = nullptr;
  std::unique_ptr<LoadedModel> resident;
  std::unique_ptr<LayerStore> store;
  std::unique_ptr<StreamedLayerSource> streamed;
  Backend* be = nullptr;
  void* extras_dev = nullptr;
  ~DecodeWeights() {
    streamed.reset();
    if (extras_dev) be->free(extras_dev);
  }
};

// Every layer streamed from the cached store (sharded on first use), like `train` with a budget.
Status open_streamed(Backend* be, const std::string& model, const std::string& tier, int buffers, DType dtype,
                     DecodeWeights* w) {
  ShardOptions so;
  so.dtype = dtype;
  ASSIGN_OR_RETURN(ShardResult sr, shard_model_path(model, so), "preparing the layer store for " << model);
  w->be = be;
  w->config = sr.manifest.config;
  if (tier == "disk") {
    ASSIGN_OR_RETURN(w->store, DiskStore::open(sr.dir, be));
  } else {
    // store/host_memory.h Note [partial RAM store]: what does not fit the free RAM is read from disk.
    RamStoreOptions ro;
    const uint64_t budget = default_ram_budget(host_memory());
    ro.in_ram = choose_ram_layers(sr.manifest, budget, {});
    if (!ro.in_ram.empty())
      std::fprintf(stderr, "%s\n", describe_ram_layers(sr.manifest, sr.dir, ro.in_ram, {}, budget, "MemAvailable less a margin").c_str());
    ASSIGN_OR_RETURN(w->store, RamStore::open(sr.dir, be, ro));
  }
  StreamedSourceOptions o;
  o.num_slots = buffers;
  ASSIGN_OR_RETURN(w->streamed, StreamedLayerSource::create(be, w->store.get(), o));
  w->layers = w->streamed.get();
  ASSIGN_OR_RETURN(std::vector<char> host, extras_to_host(be, *w->store));
  ASSIGN_OR_RETURN(w->extras_dev, be->alloc(host.size()), "allocating the embedding/lm_head");
  be->copy_h2d(w->extras_dev, host.data(), host.size(), StreamId::kCompute);
  be->sync_stream(StreamId::kCompute);
  w->extras = extras_weights_view(make_extras_layout(w->config, dtype), w->extras_dev, w->config.tie_word_embeddings);
  std::fprintf(stderr, "streaming %lld layers from %s (%s) through %d buffer(s)\n",
               static_cast<long long>(w->config.num_layers), sr.dir.c_str(), tier.c_str(), w->streamed->num_slots());
  return Status::OK();
}

constexpr const char* kUsage =
    "usage: streamtune generate --model M [--adapter DIR] (--prompt TEXT | --prompts-file F | --chat) [options]\n"
    "\n"
    "  --model M            HF checkpoint directory or .gguf file\n"
    "  --adapter DIR        PEFT LoRA adapter to apply (adapter_config.json + adapter_model.safetensors)\n"
    "  --prompt TEXT        the prompt (with --chat: the user message)\n"
    "  --prompts-file F     one prompt per line (blank lines skipped), each generated independently\n"
    "                       with the model loaded once; prints '> PROMPT' before each answer\n"
    "  --chat               apply the model's chat template; without --prompt(s), read user lines from stdin\n"
    "  --system TEXT        system message for --chat\n"
    "  --chat-template T    the template --chat renders with: a name (chatml, llama3, qwen3, mistral, ...) or a\n"
    "                       .jinja file (default: the one saved with --adapter by train, else the model's own)\n"
    "  --chat-template-kwargs JSON  the template's extra variables, e.g. '{\"enable_thinking\": false}'\n"
    "  --max-new-tokens N   default 128\n"
    "  --temperature T      0 = greedy (default)\n"
    "  --top-p P            nucleus sampling mass (default 1.0)\n"
    "  --seed S             sampling seed (default 0)\n"
    "  --max-seq N          KV cache capacity in tokens (default 4096)\n"
    "  --device D           auto (default) | cpu | cuda\n"
    "  --stream S           off | ram | disk: stream every layer through a pool of device buffers from the\n"
    "                       cached layer store (default: off; a resident load that runs out of device\n"
    "                       memory falls back to ram)\n"
    "  --stream-buffers N   pool slots when streaming (default 2)\n"
    "  --dtype D            weights/activations: bfloat16 (default on cuda) | float32 (default on cpu)\n";

int usage(const std::string& msg) {
  std::fprintf(stderr, "streamtune: error: %s\nsee 'streamtune generate --help'\n", msg.c_str());
  return 2;
}
int fail(const Status& s) {
  std::fprintf(stderr, "streamtune: error: %s\n", s.message().c_str());
  return 1;
}

// The model's tokenizer (data/model_tokenizer.h); a GGUF end-of-turn token also stops generation.
StatusOr<Tokenizer> load_tokenizer(const std::string& path, std::set<int32_t>* stops) {
  int32_t eot = -1;
  ASSIGN_OR_RETURN(Tokenizer t, load_model_tokenizer(path, &eot));
  if (eot >= 0) stops->insert(eot);
  return t;
}

// --chat's template: --chat-template (a name or a .jinja file); else the one saved with the adapter
// (train saves the template it trained with beside the adapter: train/train_data.h
// save_train_tokenizer); else the model's own. --chat-template-kwargs: the Jinja variables.
StatusOr<ChatTemplate> chat_template_for(const ParsedArgs& a, Tokenizer* tok) {
  const std::string name = a.get("chat-template");
  const std::string dir = a.has("adapter") ? saved_tokenizer_dir(a.get("adapter")) : std::string();
  if (name.empty() && !dir.empty()) {
    ASSIGN_OR_RETURN(DirChatTemplate saved, read_dir_chat_template(dir));
    if (!saved.text.empty()) {
      std::fprintf(stderr, "chat template: %s (saved with the adapter)\n", saved.origin.c_str());
      tok->set_chat_template(saved.text, saved.origin);
      if (!saved.tool_use.empty()) tok->set_tool_use_template(saved.tool_use, saved.tool_use_origin);
    }
  }
  ASSIGN_OR_RETURN(ChatTemplate t, resolve_chat_template(name, *tok));
  if (a.has("chat-template-kwargs")) {
    ASSIGN_OR_RETURN(OrderedJson kw, parse_ordered_json(a.get("chat-template-kwargs"), "--chat-template-kwargs"));
    RETURN_IF_ERROR(set_chat_template_kwargs(&t, std::move(kw)));
  }
  return t;
}

struct Gen {
  Decoder* dec;
  const Tokenizer* tok;
  std::set<int32_t> stops;
  int64_t max_new;
  int64_t max_seq;  // the KV cache: generation stops there, as HF's does at max_length
  int64_t vocab;    // the model's vocab_size
  SamplingOptions sampling;
  std::mt19937_64 rng;
};

// Prefill `ids`, then sample until a stop token or max_new; prints text as it forms (a trailing
// incomplete UTF-8 sequence is held back until the next token completes it). Returns the text.
StatusOr<std::string> generate(Gen& g, const std::vector<int32_t>& ids) {
  if (ids.empty()) return InvalidArgument("the prompt is empty and the tokenizer adds no BOS: nothing to continue");
  for (int32_t id : ids)
    if (id < 0 || id >= g.vocab)
      return InvalidArgument(Str() << "the tokenizer gives id " << id << " ('" << g.tok->id_to_token(id)
                                   << "'), past the model's vocab_size " << g.vocab
                                   << ": the tokenizer does not belong to this model");
  ASSIGN_OR_RETURN(std::vector<float> logits, g.dec->forward(ids, LogitsFor::kLast));
  std::vector<int32_t> out;
  size_t printed = 0;
  for (int64_t i = 0; i < g.max_new; ++i) {
    const int32_t next = sample_token(logits, g.sampling, g.rng);
    if (g.stops.count(next)) break;
    out.push_back(next);
    const std::string text = g.tok->decode(out, SkipSpecial::kYes);
    const bool partial = text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
    if (!partial && text.size() > printed) {
      std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
      std::fflush(stdout);
      printed = text.size();
    }
    if (i + 1 == g.max_new) break;
    if (static_cast<int64_t>(ids.size() + out.size()) > g.max_seq) {
      std::fprintf(stderr, "\n(stopped after %zu tokens: the KV cache of --max-seq %lld is full)\n", out.size(),
                   static_cast<long long>(g.max_seq));
      break;
    }
    ASSIGN_OR_RETURN(logits, g.dec->forward(std::span<const int32_t>(&next, 1), LogitsFor::kLast));
  }
  const std::string text = g.tok->decode(out, SkipSpecial::kYes);
  if (text.size() > printed) std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
  std::printf("\n");
  std::fflush(stdout);
  return text;
}

// Single-turn or interactive chat: each turn re-renders the whole conversation (replies included)
// and prefills it anew, so the template decides every token of the history.
Status chat(Gen& g, const ChatTemplate& t, const std::string& system, const std::string& prompt, bool interactive) {
  std::vector<ChatMessage> msgs;
  if (!system.empty()) msgs.push_back({"system", system});
  std::string line = prompt;
  while (true) {
    if (interactive) {
      std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line)) return Status::OK();
      if (line.empty()) continue;
    }
    msgs.push_back({"user", line});
    ASSIGN_OR_RETURN(std::string text, render_generation_prompt(t, msgs));
    g.dec->reset();
    ASSIGN_OR_RETURN(std::string reply, generate(g, g.tok->encode(text, AddSpecial::kNo)));
    if (!interactive) return Status::OK();
    msgs.push_back({"assistant", reply});
  }
}

// One independent generation per non-empty line of `path` (the cache is reset between prompts).
Status run_prompts_file(Gen& g, const ChatTemplate* t, const std::string& system, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))  // a directory read as empty, /dev/zero as one endless line
    return InvalidArgument(Str() << "--prompts-file " << path << ": not a regular file");
  std::ifstream f(path);
  if (!f) return NotFound(Str() << "--prompts-file " << path << ": cannot open");
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::printf("> %s\n", line.c_str());
    std::fflush(stdout);
    g.dec->reset();
    Status s = t ? chat(g, *t, system, line, false) : generate(g, g.tok->encode(line, AddSpecial::kYes)).status();
    RETURN_IF_ERROR(s, "--prompts-file " << path << ":" << n);
  }
  return Status::OK();
}

int run(const ParsedArgs& a) {
  if (!a.has("model")) return usage("missing --model M");
  if (!a.has("prompt") && !a.has("prompts-file") && !a.has("chat")) {
    return usage("give --prompt TEXT, --prompts-file F or --chat");
  }
  if (a.has("prompt") && a.has("prompts-file")) return usage("--prompt and --prompts-file exclude each other");
  StatusOr<uint64_t> max_new = flag_u64(a, "max-new-tokens", 128), seed = flag_u64(a, "seed", 0),
                     max_seq = flag_u64(a, "max-seq", 4096);
  if (!max_new.ok()) return usage(max_new.status().message());
  if (!seed.ok()) return usage(seed.status().message());
  if (!max_seq.ok() || *max_seq == 0) return usage("--max-seq: expected a positive integer");
  float temperature = 0, top_p = 1;
  try {
    temperature = std::stof(a.get("temperature", "0"));
    top_p = std::stof(a.get("top-p", "1"));
  } catch (...) {
    return usage("--temperature / --top-p: expected numbers");
  }
  // Written so that NaN fails each test (it was accepted: session 23 audit).
  if (!(temperature >= 0) || !std::isfinite(temperature) || !(top_p > 0 && top_p <= 1))
    return usage("--temperature: a finite number >= 0; --top-p: a number in (0, 1]");
  const std::string dev = a.get("device", "auto");
  if (dev != "auto" && dev != "cpu" && dev != "cuda") return usage("--device: auto | cpu | cuda");
  const DeviceKind kind = dev == "cuda" || (dev == "auto" && cuda_available()) ? DeviceKind::kCuda : DeviceKind::kCpu;
  StatusOr<DType> dtype = dtype_from_user(a.get("dtype", kind == DeviceKind::kCuda ? "bfloat16" : "float32"));
  if (!dtype.ok()) return usage("--dtype: " + dtype.status().message());

  StatusOr<std::unique_ptr<Backend>> be = make_backend(kind);
  if (!be.ok()) return fail(be.status());
  StatusOr<std::unique_ptr<ModelSource>> src = open_model_source(a.get("model"));
  if (!src.ok()) return fail(src.status());
  Gen g;
  StatusOr<Tokenizer> tok = load_tokenizer(a.get("model"), &g.stops);
  if (!tok.ok()) return fail(tok.status());
  std::optional<ChatTemplate> tmpl;  // resolved before the weights load: a bad template fails fast
  if (a.has("chat")) {
    StatusOr<ChatTemplate> t = chat_template_for(a, &*tok);
    if (!t.ok()) return fail(t.status());
    tmpl = std::move(t).value();
  } else if (a.has("chat-template") || a.has("chat-template-kwargs")) {
    return usage("--chat-template and --chat-template-kwargs go with --chat");
  }
  const std::string tier = a.get("stream", "off");
  if (tier != "off" && tier != "ram" && tier != "disk") return usage("--stream: off | ram | disk");
  StatusOr<uint64_t> buffers = flag_u64(a, "stream-buffers", 2);
  if (!buffers.ok() || *buffers == 0 || *buffers > 64) return usage("--stream-buffers: expected 1..64");
  DecodeWeights w;
  Status loaded = Status::OK();
  if (tier == "off") {
    StatusOr<std::unique_ptr<LoadedModel>> lm = load_model_resident(be->get(), **src, *dtype);
    if (lm.ok()) {
      w.resident = std::move(lm).value();
      w.config = w.resident->config;
      w.extras = w.resident->extras;
      w.layers = w.resident->layers.get();
    } else if (lm.status().code() == StatusCode::kResourceExhausted) {
      std::fprintf(stderr, "the model does not fit in device memory (%s): streaming it from RAM instead\n",
                   lm.status().message().c_str());
      loaded = open_streamed(be->get(), a.get("model"), "ram", static_cast<int>(*buffers), *dtype, &w);
    } else {
      loaded = lm.status();
    }
  } else {
    loaded = open_streamed(be->get(), a.get("model"), tier, static_cast<int>(*buffers), *dtype, &w);
  }
  if (!loaded.ok()) return fail(loaded);
  std::unique_ptr<Lora> lora;
  if (a.has("adapter")) {
    StatusOr<LoraConfig> lc = read_peft_config(a.get("adapter"));
    if (!lc.ok()) return fail(lc.status());
    StatusOr<std::unique_ptr<Lora>> l = Lora::create(be->get(), w.config, *lc);
    if (!l.ok()) return fail(l.status().with_context(path_join(a.get("adapter"), "adapter_config.json")));
    lora = std::move(l).value();
    if (Status s = lora->load_peft(a.get("adapter")); !s.ok()) return fail(s);
  }
  StatusOr<std::unique_ptr<Decoder>> dec =
      Decoder::create(be->get(), w.config, w.extras, w.layers, lora.get(),
                      {.max_seq = static_cast<int64_t>(*max_seq), .max_chunk = 256, .act = *dtype});
  if (!dec.ok()) return fail(dec.status());

  g.dec = dec->get();
  g.tok = &*tok;
  g.max_new = static_cast<int64_t>(*max_new);
  g.max_seq = static_cast<int64_t>(*max_seq);
  g.vocab = w.config.vocab_size;
  g.sampling = {.temperature = temperature, .top_p = top_p};
  g.rng.seed(*seed);
  if (tok->eos_id() >= 0) g.stops.insert(tok->eos_id());
  for (int64_t id : w.config.eos_token_ids) g.stops.insert(static_cast<int32_t>(id));
  for (const char* s : {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>"}) {
    if (auto id = tok->token_to_id(s); id && a.has("chat")) g.stops.insert(*id);
  }
  Status st;
  if (a.has("prompts-file")) {
    st = run_prompts_file(g, tmpl ? &*tmpl : nullptr, a.get("system"), a.get("prompts-file"));
  } else if (tmpl) {
    st = chat(g, *tmpl, a.get("system"), a.get("prompt"), !a.has("prompt"));
  } else {
    st = generate(g, tok->encode(a.get("prompt"), AddSpecial::kYes)).status();
  }
  return st.ok() ? 0 : fail(st);
}

}  // namespace

// argv[0] is the subcommand name ("generate"); flags follow. 0 ok, 1 runtime error, 2 usage.
int cmd_generate(int argc, char** argv) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  for (const std::string& s : args) {
    if (s == "--help" || s == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  StatusOr<ParsedArgs> a = parse_flags(args, {{"model"}, {"adapter"}, {"prompt"}, {"prompts-file"}, {"chat", false}, {"system"}, {"chat-template"}, {"chat-template-kwargs"},
                                              {"max-new-tokens"}, {"temperature"}, {"top-p"}, {"seed"},
                                              {"max-seq"}, {"device"}, {"dtype"}, {"stream"}, {"stream-buffers"}});
  if (!a.ok()) return usage(a.status().message());
  if (!a->positional.empty()) return usage("unexpected argument '" + a->positional[0] + "'");
  if (!resolve_model_flag(&*a)) return 1;
  return run(*a);
}

}  // namespace st
