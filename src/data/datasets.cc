#include "data/datasets.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <new>
#include <optional>
#include <random>
#include <system_error>
#include <thread>

#include "core/file.h"
#include "core/json.h"
#include "core/utf8.h"
#include "data/batch.h"
#include "data/preference.h"
#include "io/arrow.h"
#include "io/csv.h"
#include "io/hf_cache.h"
#include "io/parquet.h"

namespace st {
namespace detail {

StatusOr<std::string> string_field(const OrderedJson& j, const char* key, const std::string& what) {
  if (!j.is_object() || !j.contains(key)) return InvalidArgument(Str() << what << ": missing field '" << key << "'");
  if (j[key].is_null()) return InvalidArgument(Str() << what << ": field '" << key << "' is empty (null)");
  if (!j[key].is_string()) return InvalidArgument(Str() << what << ": field '" << key << "' is not a string");
  return j[key].get<std::string>();
}

}  // namespace detail

namespace {

StatusOr<std::string> field(const OrderedJson& j, const char* key, const std::string& what) {
  return detail::string_field(j, key, what);
}

void append(Sample* s, const std::vector<int32_t>& ids, bool trained) {
  s->input_ids.insert(s->input_ids.end(), ids.begin(), ids.end());
  for (int32_t id : ids) s->labels.push_back(trained ? id : kIgnoreIndex);
}

void append_eos(Sample* s, const Tokenizer& tok) {
  if (tok.eos_id() >= 0) append(s, {tok.eos_id()}, true);
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

namespace detail {

// Note [chat tokenization]: a conversation is tokenized as ONE string, the text the template
// renders, as HF's apply_chat_template(tokenize=True), axolotl and TRL do. Tokenizing segment by
// segment is not the same wherever a merge crosses a segment border, or where a SentencePiece
// tokenizer would prepend its "▁" to a segment that is not the start of the text (Llama-2 /
// Mistral: "[/INST]Hello" has no space before "Hello"). The loss mask comes from the borders where
// the trained flag changes: the tokens before border p are those that the tokens of text[0, p)
// share with the whole string's (longest common prefix); a token straddling p goes with the text
// after it. Only flag changes cost an extra encode (about two a turn).
Sample tokenize_chat(const std::vector<ChatSegment>& segs, const Tokenizer& tok, bool all) {
  std::string text;
  for (const ChatSegment& g : segs) text += g.text;
  Sample s;
  s.input_ids = tok.encode(text);
  s.labels.assign(s.input_ids.size(), kIgnoreIndex);
  size_t pos = 0, start = 0;  // byte offset of the current run; its first token
  for (size_t i = 0; i < segs.size(); ++i) {
    const bool trained = all || segs[i].trained;
    pos += segs[i].text.size();
    const bool last = i + 1 == segs.size();
    if (!last && (all || segs[i + 1].trained) == trained) continue;
    size_t end = last ? s.input_ids.size() : common_prefix(tok.encode(std::string_view(text).substr(0, pos)), s.input_ids);
    end = std::max(end, start);
    if (trained)
      for (size_t t = start; t < end; ++t) s.labels[t] = s.input_ids[t];
    start = end;
  }
  return s;
}

}  // namespace detail

namespace {

using detail::tokenize_chat;

// A conversation through the chat template, counting a system message the template leaves out.
StatusOr<Sample> render_and_tokenize(const ChatTemplate& chat, const std::vector<ChatMessage>& msgs,
                                     const std::vector<std::string>& tools, const Tokenizer& tok, bool all,
                                     const std::string& what, DatasetStats* stats) {
  ASSIGN_OR_RETURN(std::vector<ChatSegment> segs, render_chat(chat, msgs, what, tools));
  if (stats && mistral_drops_system(chat, msgs)) ++stats->system_dropped;
  return tokenize_chat(segs, tok, all);
}

// An assistant turn's tool_calls as OpenAI and the Qwen templates write them: a list of
// {"function": {"name", "arguments"}} (or {"name", "arguments"} directly); arguments any JSON value.
StatusOr<std::vector<ToolCall>> tool_calls_of(const OrderedJson& m, const std::string& what) {
  std::vector<ToolCall> calls;
  if (!m.contains("tool_calls") || m["tool_calls"].is_null()) return calls;
  if (!m["tool_calls"].is_array()) return InvalidArgument(Str() << what << ": 'tool_calls' is not a list");
  for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
    const std::string w = Str() << what << ": tool_calls[" << k << "]";
    const OrderedJson* c = &m["tool_calls"][k];
    if (c->is_object() && c->contains("function")) c = &(*c)["function"];
    if (!c->is_object()) return InvalidArgument(Str() << w << " is not an object");
    ASSIGN_OR_RETURN(std::string name, field(*c, "name", w));
    if (!c->contains("arguments")) return InvalidArgument(Str() << w << ": missing field 'arguments'");
    const OrderedJson& args = (*c)["arguments"];
    ToolCall call{name, python_json_dumps(args), ""};
    call.arguments_text = args.is_string() ? args.get<std::string>() : call.arguments_json;
    calls.push_back(std::move(call));
  }
  return calls;
}

}  // namespace

// An assistant turn with tool calls may have a null or absent content.
StatusOr<ChatMessage> detail::chat_message(const OrderedJson& m, const std::string& what) {
  ASSIGN_OR_RETURN(std::string role, field(m, "role", what));
  ASSIGN_OR_RETURN(std::vector<ToolCall> calls, tool_calls_of(m, what));
  std::string content;
  if (calls.empty() || (m.contains("content") && !m["content"].is_null())) {
    ASSIGN_OR_RETURN(content, field(m, "content", what));
  }
  return ChatMessage(std::move(role), std::move(content), std::move(calls));
}

namespace {

// messages: [{"role", "content", "tool_calls"?}], and "tools"? (a list of JSON schemas) for the
// templates that render tools.
StatusOr<Sample> from_messages(const OrderedJson& j, const Tokenizer& tok, const ChatTemplate& chat, bool all,
                               const std::string& what, DatasetStats* stats) {
  if (!j.is_object() || !j.contains("messages")) return InvalidArgument(Str() << what << ": missing field 'messages'");
  if (!j["messages"].is_array()) return InvalidArgument(Str() << what << ": 'messages' is not a list");
  std::vector<ChatMessage> msgs;
  for (size_t i = 0; i < j["messages"].size(); ++i) {
    ASSIGN_OR_RETURN(ChatMessage m, detail::chat_message(j["messages"][i], Str() << what << ": message " << i));
    msgs.push_back(std::move(m));
  }
  std::vector<std::string> tools;
  if (j.contains("tools") && !j["tools"].is_null()) {
    if (!j["tools"].is_array()) return InvalidArgument(Str() << what << ": 'tools' is not a list");
    for (const OrderedJson& t : j["tools"]) tools.push_back(python_json_dumps(t));
  }
  return render_and_tokenize(chat, msgs, tools, tok, all, what, stats);
}

// ShareGPT: {"conversations": [{"from": "system"|"human"|"gpt", "value": s}]} (as axolotl and
// FastChat write it; "user"/"assistant" are taken too), rendered through the chat template exactly
// as the same "messages" record would be.
StatusOr<Sample> from_sharegpt(const OrderedJson& j, const Tokenizer& tok, const ChatTemplate& chat, bool all,
                               const std::string& what, DatasetStats* stats) {
  if (!j.is_object() || !j.contains("conversations"))
    return InvalidArgument(Str() << what << ": missing field 'conversations'");
  if (!j["conversations"].is_array()) return InvalidArgument(Str() << what << ": 'conversations' is not a list");
  std::vector<ChatMessage> msgs;
  for (size_t i = 0; i < j["conversations"].size(); ++i) {
    const OrderedJson& m = j["conversations"][i];
    std::string w = Str() << what << ": conversations[" << i << "]";
    // Some exports write {"role", "content"} inside "conversations": taken as well.
    const bool rc = m.is_object() && !m.contains("from") && m.contains("role");
    ASSIGN_OR_RETURN(std::string from, field(m, rc ? "role" : "from", w));
    ASSIGN_OR_RETURN(std::string value, field(m, rc ? "content" : "value", w));
    std::string role;
    if (from == "system") role = "system";
    else if (from == "human" || from == "user") role = "user";
    else if (from == "gpt" || from == "assistant") role = "assistant";
    else
      return InvalidArgument(Str() << w << ": unknown speaker 'from': '" << from
                                   << "' (expected system, human/user or gpt/assistant)");
    msgs.push_back({role, value});
  }
  return render_and_tokenize(chat, msgs, {}, tok, all, what, stats);
}

// Template-free (axolotl's input_output): {"segments": [{"text": s, "label": bool}]}. The texts are
// joined as they are -- no BOS or EOS is added, the record carries the model's special tokens in
// its text -- and tokenized as one string (Note [chat tokenization]); label true segments are trained.
StatusOr<Sample> from_segments(const OrderedJson& j, const Tokenizer& tok, bool all, const std::string& what) {
  if (!j.is_object() || !j.contains("segments")) return InvalidArgument(Str() << what << ": missing field 'segments'");
  if (!j["segments"].is_array()) return InvalidArgument(Str() << what << ": 'segments' is not a list");
  std::vector<ChatSegment> segs;
  for (size_t i = 0; i < j["segments"].size(); ++i) {
    const OrderedJson& m = j["segments"][i];
    std::string w = Str() << what << ": segments[" << i << "]";
    ASSIGN_OR_RETURN(std::string text, field(m, "text", w));
    if (!m.contains("label") || !m["label"].is_boolean())
      return InvalidArgument(Str() << w << ": 'label' must be true (trained) or false");
    segs.push_back({std::move(text), m["label"].get<bool>()});
  }
  if (segs.empty()) return InvalidArgument(Str() << what << ": 'segments' is empty");
  return tokenize_chat(segs, tok, all);
}

// Alpaca: {"instruction": s, "input"?: s, "output": s} in the Stanford Alpaca prompt (as axolotl's
// `type: alpaca`); an absent, null or empty input takes the prompt without an Input section.
// Trained like prompt_completion: the output and EOS.
StatusOr<std::pair<std::string, std::string>> alpaca_prompt(const OrderedJson& j, const std::string& what) {
  ASSIGN_OR_RETURN(std::string instruction, field(j, "instruction", what));
  ASSIGN_OR_RETURN(std::string output, field(j, "output", what));
  std::string input;
  if (j.contains("input") && !j["input"].is_null()) {
    ASSIGN_OR_RETURN(input, field(j, "input", what));
  }
  std::string prompt;
  if (input.empty()) {
    prompt = "Below is an instruction that describes a task. Write a response that appropriately completes the "
             "request.\n\n### Instruction:\n" + instruction + "\n\n### Response:\n";
  } else {
    prompt = "Below is an instruction that describes a task, paired with an input that provides further context. "
             "Write a response that appropriately completes the request.\n\n### Instruction:\n" + instruction +
             "\n\n### Input:\n" + input + "\n\n### Response:\n";
  }
  return std::make_pair(std::move(prompt), std::move(output));
}

StatusOr<Sample> from_tokenized(const OrderedJson& j, int64_t vocab, const std::string& what) {
  if (!j.is_object() || !j.contains("input_ids")) return InvalidArgument(Str() << what << ": missing field 'input_ids'");
  auto ints = [&](const char* key, bool allow_ignore) -> StatusOr<std::vector<int32_t>> {
    const OrderedJson& a = j[key];
    if (!a.is_array()) return InvalidArgument(Str() << what << ": '" << key << "' is not a list");
    std::vector<int32_t> v;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_number_integer()) return InvalidArgument(Str() << what << ": " << key << "[" << i << "] is not an integer");
      // An unsigned value past INT64_MAX would read as negative (2^64-1 as -1): quote it as written.
      const bool huge = a[i].is_number_unsigned() && a[i].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
      int64_t x = huge ? INT64_MAX : a[i].get<int64_t>();
      if (!(allow_ignore && x == kIgnoreIndex) && (x < 0 || x >= vocab))
        return InvalidArgument(Str() << what << ": " << key << "[" << i << "] = " << a[i].dump()
                                     << " is outside the vocabulary [0, " << vocab << ")");
      v.push_back(static_cast<int32_t>(x));
    }
    return v;
  };
  Sample s;
  ASSIGN_OR_RETURN(s.input_ids, ints("input_ids", false));
  if (j.contains("labels") && !j["labels"].is_null()) {  // null: a Parquet row without labels
    ASSIGN_OR_RETURN(s.labels, ints("labels", true));
    if (s.labels.size() != s.input_ids.size())
      return InvalidArgument(Str() << what << ": " << s.labels.size() << " labels for " << s.input_ids.size() << " input_ids");
  } else {
    s.labels = s.input_ids;
  }
  return s;
}

bool needs_chat_template(const std::string& type) { return type == "messages" || type == "sharegpt"; }

}  // namespace

StatusOr<ChatTemplate> detail::dataset_chat_template(const std::string& type, const std::string& name, const Tokenizer& tok,
                                                     const DatasetOptions& opt) {
  // axolotl's fixed-format DPO strategies write their template by hand, whatever the tokenizer's.
  if (const std::string fixed = preference_fixed_template(type); !fixed.empty()) return resolve_chat_template(fixed, tok);
  if (!needs_chat_template(type) && type != "preference") return ChatTemplate{};
  ASSIGN_OR_RETURN(ChatTemplate chat, resolve_chat_template(name, tok));
  if (!opt.chat_template_kwargs.empty()) {
    ASSIGN_OR_RETURN(OrderedJson kw, parse_ordered_json(opt.chat_template_kwargs, "chat_template_kwargs"));
    RETURN_IF_ERROR(set_chat_template_kwargs(&chat, std::move(kw)));
  }
  return chat;
}

namespace {

StatusOr<Sample> tokenize_json(const std::string& type, const OrderedJson& j, const Tokenizer& tok, const ChatTemplate* chat,
                               const DatasetOptions& opt, const std::string& what, DatasetStats* stats,
                               const PromptFormat* format = nullptr) {
  Sample s;
  bool all = opt.train_on_inputs;
  auto prompt_completion = [&](const std::string& prompt, const std::string& completion) {
    append(&s, tok.encode(prompt, AddSpecial::kYes), all);
    append(&s, tok.encode(completion), true);
    append_eos(&s, tok);
  };
  if (needs_chat_template(type) && !chat) return Internal(Str() << type << " dataset without a chat template");
  if (type == "text") {
    ASSIGN_OR_RETURN(std::string text, field(j, "text", what));
    append(&s, tok.encode(text, AddSpecial::kYes), true);
    append_eos(&s, tok);
  } else if (type == "prompt_completion") {
    ASSIGN_OR_RETURN(std::string prompt, field(j, "prompt", what));
    ASSIGN_OR_RETURN(std::string completion, field(j, "completion", what));
    prompt_completion(prompt, completion);
  } else if (type == "alpaca") {
    ASSIGN_OR_RETURN(auto pc, alpaca_prompt(j, what));
    prompt_completion(pc.first, pc.second);
  } else if (type == "user_defined") {
    if (!format || !format->on) return Internal(Str() << what << ": a user_defined dataset without its format");
    ASSIGN_OR_RETURN(auto pc, user_defined_prompt(j, *format, what));
    prompt_completion(pc.first, pc.second);
  } else if (type == "messages") {
    ASSIGN_OR_RETURN(s, from_messages(j, tok, *chat, all, what, stats));
  } else if (type == "sharegpt") {
    ASSIGN_OR_RETURN(s, from_sharegpt(j, tok, *chat, all, what, stats));
  } else if (type == "input_output") {
    ASSIGN_OR_RETURN(s, from_segments(j, tok, all, what));
  } else if (type == "tokenized") {
    int64_t vocab = opt.vocab_size > 0 ? opt.vocab_size : tok.vocab_size();
    ASSIGN_OR_RETURN(s, from_tokenized(j, vocab, what));
    if (all) s.labels = s.input_ids;
  } else if (is_preference_type(type)) {
    return InvalidArgument(Str() << what << ": type " << type << " gives two samples a record (a preference pair); "
                                 << "tokenize_preference_record reads it");
  } else {
    return InvalidArgument(Str() << "dataset type '" << type
                                 << "': expected text, prompt_completion, alpaca, messages, sharegpt, input_output, "
                                    "tokenized or a preference type (preference, chatml.intel, ...)");
  }
  RETURN_IF_ERROR(detail::finish_sample(&s, tok, opt, type != "tokenized", what));
  return s;
}

}  // namespace

Status detail::finish_sample(Sample* s, const Tokenizer& tok, const DatasetOptions& opt, bool check_vocab,
                             const std::string& what) {
  if (!s->labels.empty()) s->labels[0] = kIgnoreIndex;
  // A tokenizer with more tokens than the model has embedding rows (a mismatched tokenizer.json or
  // added tokens the model was never resized for): refused here, naming the record and the token,
  // not by a device-side range check at the first step.
  if (opt.vocab_size > 0 && check_vocab)
    for (int32_t id : s->input_ids)
      if (id < 0 || id >= opt.vocab_size)
        return InvalidArgument(Str() << what << ": the tokenizer gives id " << id << " ('" << tok.id_to_token(id)
                                     << "'), past the model's vocab_size " << opt.vocab_size
                                     << ": the tokenizer does not belong to this model, or the model needs resizing");
  return Status::OK();
}

namespace {

// A record as for_each_record hands it over: parsed, or the raw text of a JSON Lines line that
// the tokenizing thread parses (Note [parallel tokenization]: parsing is ~10% of the work).
struct Record {
  OrderedJson j;
  std::string_view raw;  // non-empty: parse this (it points into the file or its inflated text)
};

bool is_gzip(std::string_view text) {
  return text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b;
}

// Calls fn(record, what) for each record of a dataset file: JSON Lines (one object a line, blank
// lines skipped; what = "PATH line N"; handed over raw), or one JSON array of objects (what =
// "PATH record N"), as alpaca_data.json and many exported datasets are. Told apart by the first
// non-blank byte. A Parquet file (starting "PAR1") gives one record a row (what = "PATH row N"),
// and so does a .csv / .tsv file past its header (what = "PATH line N": io/csv.h) and an Arrow IPC
// file (.arrow, as `datasets` saves them: "PATH row N"); a .txt file gives {"text": line} a line.
// A gzip file (1f 8b: .jsonl.gz, .json.gz, even .parquet.gz) is inflated by the caller
// (load_dataset), which says so with `inflated`.
constexpr size_t kMaxGunzipBytes = size_t{16} << 30;

// A .txt file as `datasets`' text builder reads it: each line a record {"text": line}, lines ended
// by "\n", "\r\n" or "\r" (other Unicode breaks stay in the text), empty lines kept as "" (a
// text sample with nothing to train, counted as dropped), no record after a final line break.
template <class Fn>
Status for_each_text_line(const std::string& path, std::string_view text, Fn& fn) {
  size_t pos = 0;
  for (int64_t line_no = 1; pos < text.size(); ++line_no) {
    size_t e = text.find_first_of("\r\n", pos);
    if (e == std::string::npos) e = text.size();
    const std::string_view line = text.substr(pos, e - pos);
    pos = e + (e + 1 < text.size() && text[e] == '\r' && text[e + 1] == '\n' ? 2 : 1);
    const std::string what = Str() << path << " line " << line_no;
    if (!valid_utf8(line)) return InvalidArgument(Str() << what << ": not valid UTF-8");
    OrderedJson j = OrderedJson::object();
    j["text"] = std::string(line);
    RETURN_IF_ERROR(fn(Record{std::move(j), {}}, what));
  }
  return Status::OK();
}

template <class Fn>
Status for_each_record(const std::string& path, std::string_view text, Fn fn, bool inflated) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 BOM (Windows editors write one)
  // A damaged .parquet (its head overwritten) would otherwise be read as JSON Lines of binary.
  const bool parquet_name = !inflated && path.size() > 8 && path.compare(path.size() - 8, 8, ".parquet") == 0;
  if (text.starts_with("PAR1") || (parquet_name && !is_gzip(text))) {
    ASSIGN_OR_RETURN(ParquetFile pq, ParquetFile::from_bytes(text, path));
    return pq.for_each_row([&](const OrderedJson& row, int64_t i) { return fn(Record{row, {}}, Str() << path << " row " << i + 1); });
  }
  const bool arrow_name = !inflated && path.ends_with(".arrow");
  if (looks_like_arrow(text) || arrow_name) {  // io/arrow.h Note [Arrow IPC]: datasets' save_to_disk files
    return for_each_arrow_row(text, path, [&](OrderedJson&& row, int64_t i) {
      return fn(Record{std::move(row), {}}, Str() << path << " row " << i + 1);
    });
  }
  if (is_gzip(text)) return InvalidArgument(Str() << path << ": gzip inside gzip; decompress it first");
  if (dataset_builder(path) == "text") return for_each_text_line(path, text, fn);
  if (const char delim = csv_delimiter_for(path); delim != 0) {  // io/csv.h Note [CSV as datasets reads it]
    return for_each_csv_record(text, delim, path, [&](OrderedJson&& j, int64_t line) {
      return fn(Record{std::move(j), {}}, Str() << path << " line " << line);
    });
  }
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    ASSIGN_OR_RETURN(OrderedJson arr, parse_ordered_json(text, path + " (a JSON array of records)"));
    if (!arr.is_array()) return InvalidArgument(Str() << path << ": expected a JSON array of records");
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string what = Str() << path << " record " << i + 1;
      if (!arr[i].is_object()) return InvalidArgument(Str() << what << ": not a JSON object");
      RETURN_IF_ERROR(fn(Record{std::move(arr[i]), {}}, what));
    }
    return Status::OK();
  }
  size_t pos = 0;
  for (int64_t line_no = 1; pos < text.size(); ++line_no) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    const std::string_view line(text.data() + pos, e - pos);
    pos = e + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    RETURN_IF_ERROR(fn(Record{{}, line}, Str() << path << " line " << line_no));
  }
  return Status::OK();
}

}  // namespace

StatusOr<Sample> tokenize_record(const std::string& type, const std::string& line, const Tokenizer& tok,
                                 const ChatTemplate* chat, const DatasetOptions& opt, const std::string& what) {
  ASSIGN_OR_RETURN(OrderedJson j, parse_ordered_json(line, what));
  return tokenize_json(type, j, tok, chat, opt, what, nullptr);
}

namespace {

// The dataset files directly in `dir` (io/hf_cache.h dataset_file_name: .jsonl, .json, .parquet,
// .csv, .tsv, each optionally .gz, and .arrow, not `datasets`' metadata JSON), sorted by name, of
// one format (io/hf_cache.h one_builder_files); InvalidArgument when none.
StatusOr<std::vector<std::string>> dataset_files_in(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    if (dataset_file_name(e.path().filename().string())) files.push_back(e.path().string());
  }
  if (ec) return InvalidArgument(Str() << dir << ": cannot list the directory: " << ec.message());
  if (files.empty())
    return InvalidArgument(Str() << dir << ": a directory without dataset files (.jsonl, .json, .parquet, .csv, .tsv, or .gz of them, .arrow)");
  std::sort(files.begin(), files.end());
  return one_builder_files(std::move(files));  // data.csv beside data.jsonl: one of them, as `datasets`
}

}  // namespace

namespace {

// The record with its fields under the names its type reads (RecordFields).
StatusOr<OrderedJson> remap_fields(const OrderedJson& j, const std::string& type, const RecordFields& f,
                                   const std::string& what) {
  if (!j.is_object()) return InvalidArgument(Str() << what << ": not a JSON object");
  OrderedJson r = j;
  auto take = [&](const std::string& from, const char* to) -> Status {
    if (from.empty() || from == to) return Status::OK();
    if (!j.contains(from)) return InvalidArgument(Str() << what << ": missing field '" << from << "'");
    r[to] = j[from];
    return Status::OK();
  };
  const bool sharegpt = type == "sharegpt";
  const char* list_key = sharegpt ? "conversations" : "messages";
  RETURN_IF_ERROR(take(f.text, "text"));
  RETURN_IF_ERROR(take(f.messages, list_key));
  if ((!f.role.empty() || !f.content.empty()) && r.contains(list_key) && r[list_key].is_array()) {
    for (size_t i = 0; i < r[list_key].size(); ++i) {
      OrderedJson& m = r[list_key][i];
      if (!m.is_object()) continue;  // the type's reader names the bad turn
      const OrderedJson orig = m;
      for (const auto& [from, to] : {std::pair{f.role, sharegpt ? "from" : "role"},
                                     std::pair{f.content, sharegpt ? "value" : "content"}}) {
        if (from.empty() || from == to) continue;
        if (!orig.contains(from))
          return InvalidArgument(Str() << what << ": " << list_key << " " << i << ": missing field '" << from << "'");
        m[to] = orig[from];
      }
    }
  }
  return r;
}

}  // namespace

namespace {

// Note [parallel tokenization] batches: at most this many records, or this much text, at once.
constexpr size_t kBatchRecords = 1024;
constexpr size_t kBatchBytes = size_t{32} << 20;
constexpr size_t kBigRecordBytes = size_t{1} << 20;  // tokenized alone

int tokenize_threads(const DatasetOptions& opt) {
  if (opt.threads > 0) return opt.threads;
  return static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 64));
}

// fn(i) for i in [0, n) on up to `threads` threads (this one included), each taking the next
// index as it finishes one.
void parallel_for(size_t n, int threads, const std::function<void(size_t)>& fn) {
  const size_t t = std::min(n, static_cast<size_t>(std::max(threads, 1)));
  if (t <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  try {
    for (size_t k = 1; k < t; ++k) pool.emplace_back(work);
  } catch (const std::system_error&) {  // out of threads (a ulimit): the ones started do the rest
  }
  work();
  for (std::thread& th : pool) th.join();
}

// The bytes of the strings in a record (what tokenizing it reads), keys included.
size_t json_text_bytes(const OrderedJson& j) {
  if (j.is_string()) return j.get_ref<const std::string&>().size();
  size_t n = 0;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) n += it.key().size() + json_text_bytes(it.value());
  else if (j.is_array())
    for (const OrderedJson& e : j) n += json_text_bytes(e);
  return n;
}

// A long text's windows (Note [long texts]) to emit(Sample&&), in order; returns how many.
template <class Emit>
int64_t split_windows(const Sample& s, int64_t seq, int64_t overlap, Emit emit) {
  const int64_t n = static_cast<int64_t>(s.input_ids.size());
  int64_t w = 0;
  for (int64_t start = 0;; start += seq - overlap, ++w) {
    const int64_t end = std::min(start + seq, n);
    Sample win;
    win.window = static_cast<int32_t>(std::min<int64_t>(w, INT32_MAX));
    win.input_ids.assign(s.input_ids.begin() + start, s.input_ids.begin() + end);
    win.labels.assign(s.labels.begin() + start, s.labels.begin() + end);
    const int64_t context = w == 0 ? 1 : std::max<int64_t>(overlap, 1);  // trained in the window before
    std::fill(win.labels.begin(), win.labels.begin() + std::min(context, end - start), kIgnoreIndex);
    emit(std::move(win));
    if (end == n) return w + 1;
  }
}

// A preference record's two samples, chosen then rejected (data/preference.h), checked as every sample is.
StatusOr<std::vector<Sample>> tokenize_pair(const OrderedJson& j, const std::string& what, const DatasetSource& src,
                                            const Tokenizer& tok, const ChatTemplate& chat, const DatasetOptions& opt,
                                            DatasetStats* stats) {
  ASSIGN_OR_RETURN(PreferencePair p, tokenize_preference(src.type, j, src.fields, tok, chat, what, &stats->system_dropped));
  RETURN_IF_ERROR(detail::finish_sample(&p.chosen, tok, opt, true, what));
  RETURN_IF_ERROR(detail::finish_sample(&p.rejected, tok, opt, true, what));
  std::vector<Sample> v;
  v.reserve(2);
  v.push_back(std::move(p.chosen));
  v.push_back(std::move(p.rejected));
  return v;
}

// One record to its samples on a tokenizing thread (Note [parallel tokenization]): one, or a
// preference record's two; parsed here if it came raw; an exception becomes the record's error
// (no handler above a worker thread).
StatusOr<std::vector<Sample>> tokenize_one(Record& rec, const std::string& what, const DatasetSource& src,
                                           const Tokenizer& tok, const ChatTemplate& chat, const DatasetOptions& opt,
                                           DatasetStats* stats) {
  try {
    if (!rec.raw.empty()) {
      ASSIGN_OR_RETURN(rec.j, parse_ordered_json(rec.raw, what));
    }
    std::vector<Sample> v(1);
    if (is_preference_type(src.type) && opt.unpaired) {  // data/preference.h Note [unpaired records]
      ASSIGN_OR_RETURN(v[0], tokenize_unpaired(src.type, rec.j, src.fields, tok, chat, what, &stats->system_dropped));
      RETURN_IF_ERROR(detail::finish_sample(&v[0], tok, opt, true, what));
      return v;
    }
    if (is_preference_type(src.type)) return tokenize_pair(rec.j, what, src, tok, chat, opt, stats);
    if (!src.fields.any()) {
      ASSIGN_OR_RETURN(v[0], tokenize_json(src.type, rec.j, tok, &chat, opt, what, stats, &src.format));
      return v;
    }
    ASSIGN_OR_RETURN(OrderedJson r, remap_fields(rec.j, src.type, src.fields, what));
    ASSIGN_OR_RETURN(v[0], tokenize_json(src.type, r, tok, &chat, opt, what, stats, &src.format));
    return v;
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(Str() << what << ": out of memory tokenizing the record");
  } catch (const std::exception& e) {
    return Internal(Str() << what << ": " << e.what());
  }
}

}  // namespace

Status load_dataset(const DatasetSource& src, const Tokenizer& tok, const DatasetOptions& opt,
                    std::vector<Sample>* out, DatasetStats* stats) {
  if (!is_directory(src.path) && !file_exists(src.path))
    return NotFound(Str() << src.path << ": no such file or directory");
  if (opt.sequence_len < 2) return InvalidArgument(Str() << "sequence_len " << opt.sequence_len << " is too small");
  if (src.overlap_len != 0 && src.type != "text")
    return InvalidArgument(Str() << src.path << ": overlap_len applies to type text (completion), not " << src.type);
  if (src.overlap_len < 0 || src.overlap_len >= opt.sequence_len)
    return InvalidArgument(Str() << src.path << ": overlap_len " << src.overlap_len << " must be >= 0 and below sequence_len "
                                 << opt.sequence_len);
  ASSIGN_OR_RETURN(ChatTemplate chat,
                   detail::dataset_chat_template(src.type, src.chat_template.empty() ? opt.chat_template : src.chat_template,
                                                 tok, opt),
                   src.path);
  if (is_directory(src.path)) {
    // A downloaded dataset folder (the Hub's data/train-00000-of-00003.parquet shards): every
    // dataset file in it, in name order.
    ASSIGN_OR_RETURN(std::vector<std::string> files, dataset_files_in(src.path));
    for (const std::string& f : files) {
      DatasetSource one = src;
      one.path = f;
      RETURN_IF_ERROR(load_dataset(one, tok, opt, out, stats));
    }
    return Status::OK();
  }
  // Mapped, not read: a Parquet file is decoded a row group at a time straight from the mapping.
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(src.path));
  std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  std::string plain;  // an inflated gzip file: raw records point into it until the last batch is done
  const bool inflated = is_gzip(text);
  if (inflated) {
    RETURN_IF_ERROR(gunzip_file(text, src.path, kMaxGunzipBytes, &plain));
    text = plain;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  Clock::time_point last = t0;
  int64_t records = 0;
  // A sample with something to train on is kept and counted; the rest are counted as dropped.
  auto keep = [&](Sample&& s) {
    const int64_t targets = std::count_if(s.labels.begin(), s.labels.end(), [](int32_t l) { return l != kIgnoreIndex; });
    if (targets == 0) {
      ++stats->dropped_no_targets;
      return;
    }
    ++stats->samples;
    stats->tokens += static_cast<int64_t>(s.input_ids.size());
    stats->target_tokens += targets;
    out->push_back(std::move(s));
  };
  auto cut = [&](Sample& s) {
    if (static_cast<int64_t>(s.input_ids.size()) <= opt.sequence_len) return false;
    s.input_ids.resize(opt.sequence_len);
    s.labels.resize(opt.sequence_len);
    return true;
  };
  auto has_targets = [](const Sample& s) {
    return std::any_of(s.labels.begin(), s.labels.end(), [](int32_t l) { return l != kIgnoreIndex; });
  };
  // Note [pair truncation]: a prompt past max_prompt_len keeps its end; labels[0] stays ignored
  // (the kept prompt is at least one token, and a prompt is never trained).
  auto cut_prompt = [&](Sample& s) {
    if (opt.max_prompt_len <= 0) return false;
    const auto first = std::find_if(s.labels.begin(), s.labels.end(), [](int32_t l) { return l != kIgnoreIndex; });
    const int64_t prompt = first - s.labels.begin();
    if (prompt <= opt.max_prompt_len) return false;
    const int64_t drop = prompt - opt.max_prompt_len;
    s.input_ids.erase(s.input_ids.begin(), s.input_ids.begin() + drop);
    s.labels.erase(s.labels.begin(), s.labels.begin() + drop);
    return true;
  };
  // A preference pair: both sequences cut to sequence_len, both kept or neither (Note [pair truncation]).
  auto place_pair = [&](Sample&& chosen, Sample&& rejected) {
    const bool prompt_c = cut_prompt(chosen), prompt_r = cut_prompt(rejected);
    const bool cut_c = cut(chosen), cut_r = cut(rejected);
    if (prompt_c || prompt_r || cut_c || cut_r) ++stats->truncated;
    if (!has_targets(chosen) || !has_targets(rejected)) {
      ++stats->dropped_no_targets;
      return;
    }
    ++stats->pairs;
    keep(std::move(chosen));
    keep(std::move(rejected));
  };
  // An unpaired (KTO) example: cut as a pair's sequence is (Note [pair truncation]).
  auto place_unpaired = [&](Sample&& s) {
    const bool prompt = cut_prompt(s), end = cut(s);
    if (prompt || end) ++stats->truncated;
    if (!has_targets(s)) {
      ++stats->dropped_no_targets;
      return;
    }
    ++(s.kto > 0 ? stats->desirable : stats->undesirable);
    keep(std::move(s));
  };
  // A tokenized record into the samples: a long text split (Note [long texts]), else truncated.
  auto place = [&](Sample&& s) {
    const int64_t n = static_cast<int64_t>(s.input_ids.size());
    if (n > opt.sequence_len && src.type == "text") {
      ++stats->split;
      stats->windows += split_windows(s, opt.sequence_len, src.overlap_len, keep);
      return;
    }
    if (cut(s)) ++stats->truncated;
    keep(std::move(s));
  };
  // Note [parallel tokenization]: records are read in order on this thread (a JSON Lines line
  // raw, an array's or Parquet file's records parsed) and parsed and tokenized in batches on every
  // core; each record's samples and counts are its own, and they are placed in record order, so the
  // samples, the counts and the first error reported are those of a one-thread run whatever the
  // thread count (tests/data/datasets_test.cc ParallelLoadMatchesOneThread).
  const int threads = tokenize_threads(opt);
  std::vector<std::pair<Record, std::string>> batch;  // (record, what)
  size_t batch_bytes = 0;                             // their text
  auto flush = [&]() -> Status {
    std::vector<std::optional<StatusOr<std::vector<Sample>>>> res(batch.size());
    std::vector<int64_t> system_dropped(batch.size(), 0);
    parallel_for(batch.size(), threads, [&](size_t i) {
      auto& [rec, what] = batch[i];
      DatasetStats one;
      res[i] = tokenize_one(rec, what, src, tok, chat, opt, &one);
      rec = Record{};  // its memory back now, not at the batch's end
      system_dropped[i] = one.system_dropped;
    });
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!res[i]->ok()) return res[i]->status();
      stats->system_dropped += system_dropped[i];
      std::vector<Sample>& v = **res[i];
      if (is_preference_type(src.type) && opt.unpaired) place_unpaired(std::move(v[0]));
      else if (is_preference_type(src.type)) place_pair(std::move(v[0]), std::move(v[1]));
      else place(std::move(v[0]));
    }
    batch.clear();
    batch_bytes = 0;
    if (opt.progress && Clock::now() - last > std::chrono::seconds(2)) {
      last = Clock::now();
      opt.progress(src.path, records, false);
    }
    return Status::OK();
  };
  Status st = for_each_record(src.path, text, [&](Record&& r, const std::string& what) -> Status {
    ++records;
    // A big record is tokenized alone: encoding takes ~40x its text in memory for a while, and
    // a batch's records are encoded at once.
    const size_t bytes = r.raw.empty() ? json_text_bytes(r.j) : r.raw.size();
    if (bytes > kBigRecordBytes && !batch.empty()) RETURN_IF_ERROR(flush());
    batch.emplace_back(std::move(r), what);
    batch_bytes += bytes;
    if (batch.size() >= kBatchRecords || batch_bytes >= kBatchBytes || bytes > kBigRecordBytes) return flush();
    return Status::OK();
  }, inflated);
  if (st.ok() && !batch.empty()) st = flush();
  if (st.ok() && opt.progress && last != t0) opt.progress(src.path, records, true);
  return st;
}

StatusOr<TrainValSplit> split_train_val(std::vector<Sample> all, double val_set_size, uint64_t seed) {
  TrainValSplit r;
  // Groups: a record's samples (a split text's windows: Note [long texts]; a preference pair's
  // chosen and rejected) go to one side.
  std::vector<int64_t> group_start;
  for (size_t i = 0; i < all.size(); ++i)
    if (i == 0 || (all[i].window == 0 && all[i].pair != 2)) group_start.push_back(static_cast<int64_t>(i));
  const int64_t n = static_cast<int64_t>(group_start.size());
  if (val_set_size < 0) return InvalidArgument(Str() << "val_set_size " << val_set_size << " is negative");
  int64_t k = val_set_size < 1 ? static_cast<int64_t>(val_set_size * n + 0.5) : static_cast<int64_t>(val_set_size);
  if (val_set_size > 0 && k == 0) k = 1;
  if (k >= n && k > 0)
    return InvalidArgument(Str() << "val_set_size " << val_set_size << " leaves no training samples (" << n
                                 << (n == static_cast<int64_t>(all.size()) ? " samples)" : " records)"));
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng() % static_cast<uint64_t>(i + 1)]);
  std::vector<uint8_t> is_val(n, 0);
  for (int64_t i = 0; i < k; ++i) is_val[perm[i]] = 1;
  for (int64_t g = 0; g < n; ++g) {
    const int64_t end = g + 1 < n ? group_start[g + 1] : static_cast<int64_t>(all.size());
    for (int64_t i = group_start[g]; i < end; ++i) (is_val[g] ? r.val : r.train).push_back(std::move(all[i]));
  }
  return r;
}

}  // namespace st
