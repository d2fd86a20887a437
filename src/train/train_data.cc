#include "train/train_data.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <span>

#include "data/chat_template.h"
#include "data/model_tokenizer.h"

namespace st {
namespace {

DatasetSource dataset_source(const DatasetSpec& d) {
  return {d.path, d.type,
          {.messages = d.field_messages, .role = d.field_role, .content = d.field_content, .text = d.field_text,
           .chosen = d.field_chosen, .rejected = d.field_rejected},
          d.overlap_len, d.format, effective_chat_template(d.chat_template, d.chat_template_jinja)};
}

// load_dataset's errors mostly name the file and line already; the context is added only where
// they do not (a dataset path printed twice read as two files).
Status load_one(const DatasetSpec& d, const Tokenizer& tok, const DatasetOptions& o, std::vector<Sample>* out,
                DatasetStats* stats) {
  if (!d.files.empty()) {  // a Hub dataset's train split, file by file
    for (const std::string& f : d.files) {
      DatasetSpec one = d;
      one.path = f;
      one.files.clear();
      RETURN_IF_ERROR(load_one(one, tok, o, out, stats));
    }
    return Status::OK();
  }
  Status s = load_dataset(dataset_source(d), tok, o, out, stats);
  if (s.ok() || s.message().find(d.path) != std::string::npos) return s;
  return s.with_context("dataset " + d.path);
}

Status load_all(const std::vector<DatasetSpec>& specs, const Tokenizer& tok, const DatasetOptions& o,
                std::vector<Sample>* out, DatasetStats* stats) {
  for (const DatasetSpec& d : specs) {
    RETURN_IF_ERROR(load_one(d, tok, o, out, stats));
  }
  return Status::OK();
}

DatasetOptions dataset_options(const TrainConfig& cfg, int64_t vocab_size) {
  DatasetOptions o;
  o.sequence_len = cfg.sequence_len;
  o.max_prompt_len = cfg.max_prompt_len;
  o.unpaired = cfg.rl == "kto";  // data/preference.h Note [unpaired records]
  o.train_on_inputs = cfg.train_on_inputs;
  o.chat_template = effective_chat_template(cfg.chat_template, cfg.chat_template_jinja);
  o.chat_template_kwargs = cfg.chat_template_kwargs;
  o.vocab_size = vocab_size;
  o.threads = static_cast<int>(cfg.dataset_processes);
  // Big dataset files take a while to tokenize: say how far it got (a rewritten line on a
  // terminal, a line every ~2 s in a log).
  o.progress = [tty = isatty(fileno(stderr)) != 0](const std::string& path, int64_t records, bool done) {
    if (tty) std::fprintf(stderr, "\rtokenizing %s: %lld records%s", path.c_str(), static_cast<long long>(records),
                          done ? "\n" : "        ");
    else std::fprintf(stderr, "tokenizing %s: %lld records%s\n", path.c_str(), static_cast<long long>(records),
                      done ? " (done)" : "");
  };
  return o;
}

// The ids of one sample as text, trained runs between the markers.
std::string marked_text(const Tokenizer& tok, const Sample& s) {
  std::string out;
  size_t i = 0;
  while (i < s.input_ids.size()) {
    const bool trained = s.labels[i] != kIgnoreIndex;
    size_t j = i;
    while (j < s.input_ids.size() && (s.labels[j] != kIgnoreIndex) == trained) ++j;
    const std::string text = tok.decode(std::span<const int32_t>(s.input_ids.data() + i, j - i));
    out += trained ? "\u27e6" + text + "\u27e7" : text;
    i = j;
  }
  return out;
}

// The base model's tokenizer with the config's special_tokens applied.
StatusOr<Tokenizer> train_tokenizer(const TrainConfig& cfg) {
  ASSIGN_OR_RETURN(Tokenizer tok, load_model_tokenizer(cfg.base_model), "loading the tokenizer of " << cfg.base_model);
  RETURN_IF_ERROR(apply_special_tokens(cfg.special_tokens, &tok));
  return tok;
}

}  // namespace

Status apply_special_tokens(const TrainConfig::SpecialTokens& st, Tokenizer* tok) {
  auto id_of = [&](const char* key, const std::string& token) -> StatusOr<int32_t> {
    const std::optional<int32_t> id = tok->token_to_id(token);
    if (!id)
      return Unimplemented(Str() << "special_tokens." << key << ": '" << token
                                 << "' is not a token of this tokenizer; adding tokens (which resizes the embeddings) "
                                    "is not supported");
    return *id;
  };
  int32_t bos = tok->bos_id(), eos = tok->eos_id(), pad = tok->pad_id();
  if (!st.bos.empty()) {
    ASSIGN_OR_RETURN(int32_t id, id_of("bos_token", st.bos));
    if (id != bos)
      return Unimplemented(Str() << "special_tokens.bos_token: '" << st.bos << "': changing the tokenizer's bos_token ("
                                 << (bos >= 0 ? "'" + tok->id_to_token(bos) + "'" : std::string("none"))
                                 << ") is not supported (what its post-processor adds differs between HF classes)");
  }
  if (!st.eos.empty()) {
    ASSIGN_OR_RETURN(eos, id_of("eos_token", st.eos));
  }
  if (!st.pad.empty()) {
    ASSIGN_OR_RETURN(pad, id_of("pad_token", st.pad));
  }
  if (!st.unk.empty()) {
    RETURN_IF_ERROR(id_of("unk_token", st.unk).status());
  }
  tok->set_special_ids(bos, eos, pad);
  return Status::OK();
}

namespace {

// The Jinja text of the config's chat_template for the saved tokenizer; "" keeps the base's own.
StatusOr<std::string> trained_template_text(const TrainConfig& cfg, const Tokenizer& tok) {
  const std::string name = effective_chat_template(cfg.chat_template, cfg.chat_template_jinja);
  const bool own = name.empty() || name == "tokenizer_default" ||
                   (name == "tokenizer_default_fallback_chatml" && !tok.chat_template().empty());
  if (own) return std::string();
  ASSIGN_OR_RETURN(ChatTemplate t, resolve_chat_template(name, tok));
  return chat_template_jinja_text(t);
}

}  // namespace

std::string save_train_tokenizer(const TrainConfig& cfg, const Tokenizer* loaded) {
  StatusOr<Tokenizer> tok = loaded ? StatusOr<Tokenizer>(*loaded) : train_tokenizer(cfg);
  if (!tok.ok()) return "not saved: " + tok.status().message();
  StatusOr<std::string> text = trained_template_text(cfg, *tok);
  std::string note;
  if (!text.ok()) {
    note = Str() << "; its chat template is the base's (" << text.status().message() << ")";
    text = std::string();
  }
  StatusOr<std::vector<std::string>> files = save_model_tokenizer(cfg.base_model, cfg.output_dir, *text);
  if (!files.ok()) return "not saved: " + files.status().message();
  if (files->empty()) return "not saved: " + cfg.base_model + " has no tokenizer files";
  const std::string what = text->empty() ? std::string("the base's chat template") : "chat_template " + cfg.chat_template;
  return Str() << "saved to " << cfg.output_dir << " (" << files->size() << " files, " << what << ")" << note;
}

Status preview_train_data(const TrainConfig& cfg, int n, std::FILE* out) {
  if (cfg.datasets.empty()) return InvalidArgument("datasets: at least one {path, type} is required");
  ASSIGN_OR_RETURN(Tokenizer tok, train_tokenizer(cfg));
  const DatasetOptions o = dataset_options(cfg, 0);
  for (const DatasetSpec& d : cfg.datasets) {
    std::vector<Sample> samples;
    DatasetStats st;
    RETURN_IF_ERROR(load_one(d, tok, o, &samples, &st));
    std::fprintf(out, "dataset %s (%s): %lld samples (%lld tokens, %lld trained), %lld truncated to %lld, %lld dropped with no trained token left\n",
                 d.path.c_str(), d.format.preset.empty() ? d.type.c_str() : d.format.preset.c_str(),
                 static_cast<long long>(st.samples), static_cast<long long>(st.tokens),
                 static_cast<long long>(st.target_tokens), static_cast<long long>(st.truncated),
                 static_cast<long long>(cfg.sequence_len), static_cast<long long>(st.dropped_no_targets));
    if (st.split > 0)
      std::fprintf(out, "  %lld text(s) longer than %lld tokens split into %lld windows (overlap %lld)\n",
                   static_cast<long long>(st.split), static_cast<long long>(cfg.sequence_len),
                   static_cast<long long>(st.windows), static_cast<long long>(d.overlap_len));
    if (st.system_dropped > 0)
      std::fprintf(out, "  %lld conversation(s) lose their system message to the template (Mistral v3/tekken, as HF's: "
                        "only a conversation ending with a user message carries it)\n",
                   static_cast<long long>(st.system_dropped));
    for (int k = 0; k < n && k < static_cast<int>(samples.size()); ++k) {
      const Sample& s = samples[static_cast<size_t>(k)];
      const auto trained = std::count_if(s.labels.begin(), s.labels.end(), [](int32_t l) { return l != kIgnoreIndex; });
      const char* label = s.kto > 0 ? ", desirable (KTO)" : s.kto < 0 ? ", undesirable (KTO)" : "";
      std::fprintf(out, "--- sample %d: %zu tokens, %lld trained%s (between \u27e6 and \u27e7)\n%s\n", k + 1,
                   s.input_ids.size(), static_cast<long long>(trained), label, marked_text(tok, s).c_str());
    }
  }
  return Status::OK();
}

bool needs_tokenizer(const TrainConfig& c) {
  for (const auto* list : {&c.datasets, &c.eval_datasets})
    for (const DatasetSpec& d : *list)
      if (d.type != "tokenized") return true;
  return false;
}

StatusOr<TrainData> load_train_data(const TrainConfig& cfg, const ModelConfig& mc) {
  if (cfg.datasets.empty()) return InvalidArgument("datasets: at least one {path, type} is required");
  Tokenizer tok;
  if (needs_tokenizer(cfg)) {
    ASSIGN_OR_RETURN(tok, train_tokenizer(cfg));
  }
  const DatasetOptions o = dataset_options(cfg, mc.vocab_size);
  TrainData td;
  std::vector<Sample> all;
  RETURN_IF_ERROR(load_all(cfg.datasets, tok, o, &all, &td.stats));
  if (all.empty()) {
    // Say why: a prompt longer than sequence_len is cut before its answer and the sample dropped.
    const DatasetStats& st = td.stats;
    std::string paths;
    for (const DatasetSpec& d : cfg.datasets) paths += (paths.empty() ? "" : ", ") + d.path;
    if (st.dropped_no_targets == 0)
      return InvalidArgument(Str() << "the training datasets (" << paths << ") hold no records");
    return InvalidArgument(Str() << "the training datasets (" << paths << ") hold no sample with a trained token: all "
                                 << st.dropped_no_targets << " record(s) were dropped with nothing left to train on; "
                                 << "raise sequence_len (" << cfg.sequence_len
                                 << ", prompts longer than it lose their answer) or check train_on_inputs / the loss mask");
  }
  std::vector<Sample> eval;
  if (cfg.val_set_size > 0) {
    ASSIGN_OR_RETURN(TrainValSplit split, split_train_val(std::move(all), cfg.val_set_size, cfg.seed));
    all = std::move(split.train);
    eval = std::move(split.val);
  }
  DatasetStats eval_stats;
  RETURN_IF_ERROR(load_all(cfg.eval_datasets, tok, o, &eval, &eval_stats));
  // Positions restart in every sample (packed or not), so the longest sample sets the largest one.
  for (const std::vector<Sample>* set : {&all, &eval}) {
    size_t longest = 0;
    for (const Sample& smp : *set) longest = std::max(longest, smp.input_ids.size());
    RETURN_IF_ERROR(check_rope_positions(mc, static_cast<int64_t>(longest), set == &all ? "a training sample" : "an eval sample"));
  }
  td.train = std::make_shared<std::vector<Sample>>(std::move(all));
  if (!eval.empty()) td.eval = std::make_shared<std::vector<Sample>>(std::move(eval));
  td.pad_id = tok.pad_id() >= 0 ? tok.pad_id() : (tok.eos_id() >= 0 ? tok.eos_id() : 0);
  if (needs_tokenizer(cfg)) td.tokenizer = std::move(tok);
  return td;
}

bool padding_free_on(const TrainConfig& cfg) {
  if (!cfg.rl.empty()) return false;  // a pair's rows stay rows (DataLoader pairs)
  return cfg.padding_free == "true" || (cfg.padding_free == "auto" && cfg.micro_batch_size > 1 && !cfg.sample_packing);
}

LoaderOptions loader_options(const TrainConfig& cfg, int32_t pad_id, bool train, Backend& be) {
  LoaderOptions lo;
  lo.padding_free = padding_free_on(cfg);
  lo.sequence_len = cfg.sequence_len;
  lo.micro_batch_size = cfg.micro_batch_size;
  lo.sample_packing = cfg.sample_packing;
  // micro_batch_size pairs (KTO: examples, each with its KL sequence): 2 x that many rows (micro_batch_rows)
  lo.pairs = !cfg.rl.empty() && cfg.rl != "kto";
  lo.kto = cfg.rl == "kto";
  constexpr int64_t kAutoPadMultiple = 64;
  // By device kind, not by whether plans are on: STREAMTUNE_GRAPHS=off must not change the bits.
  lo.pad_to_multiple_of = cfg.pad_to_multiple_of > 0 ? cfg.pad_to_multiple_of
                                                     : (be.kind() == DeviceKind::kCuda ? kAutoPadMultiple : 1);
  lo.shuffle = train && cfg.shuffle;
  lo.seed = cfg.seed;
  lo.pad_id = pad_id;
  return lo;
}

}  // namespace st
