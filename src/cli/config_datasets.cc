#include "cli/config_datasets.h"

#include <algorithm>
#include <map>
#include <system_error>

#include "cli/suggest.h"
#include "data/preference.h"
#include "io/csv.h"
#include "io/hf_cache.h"

namespace st {
namespace {

using namespace cfg;  // NOLINT: cli/config_input.h's helpers, as in config_yaml.cc

// The single-sample types. The preference types are data/preference.h's (preference_types());
// axolotl's chat_template(.default, .argilla_chat) under rl is `preference` (resolve_rl_dataset_types).
const std::vector<std::string> kDatasetTypes = {"tokenized", "text", "prompt_completion", "alpaca", "messages", "sharegpt", "input_output"};

// Note [axolotl dataset keys]: besides {path, type}, an entry may carry axolotl's keys. type
// chat_template is our messages (rendered by the chat template), completion is text; the field
// names (field_messages, message_property_mappings / message_field_role / message_field_content,
// field) say where the records keep what the type reads; overlap_len is completion's (data/datasets.h
// Note [long texts]); type as a mapping is axolotl's user-defined format (data/prompt_format.h);
// chat_template (and the legacy conversation, FastChat's names we render) sets this entry's template;
// split and name choose a Hub dataset's or a saved DatasetDict's files, data_files name them
// (io/hf_cache.h resolve_data_files); ds_type and roles_to_train / train_on_eos at their defaults
// (the assistant's turns, each with its end of turn: what we train) are accepted; the rest is
// refused by name.
const std::vector<std::string> kDatasetKeys = {"path", "type", "field_messages", "message_property_mappings",
                                               "message_field_role", "message_field_content", "field", "split",
                                               "ds_type", "roles_to_train", "train_on_eos", "overlap_len", "data_files",
                                               "name", "revision", "chat_template", "chat_template_jinja", "conversation",
                                               "field_chosen", "field_rejected"};

Status check_dataset_entry(const Input& in, const std::string& key, const std::string& csv_where, const DatasetSpec& ds) {
  if (!csv_where.empty() && ds.files.empty() && !is_directory(ds.path) && csv_delimiter_for(ds.path) == 0)
    return InvalidArgument(Str() << csv_where << ": " << key << ".ds_type: csv, but '" << ds.path
                                 << "' is not named .csv or .tsv (a CSV file is known by its name; rename it)");
  if (!ds.field_text.empty() && ds.type != "text")
    return bad(in, key, Str() << "'field' names the text of type text/completion, not of type " << ds.type);
  if (ds.overlap_len > 0 && ds.type != "text")
    return bad(in, key, Str() << "'overlap_len' applies to type text/completion, not to type " << ds.type);
  const bool turns = ds.type == "messages" || ds.type == "sharegpt" || ds.type == "preference";
  if (!turns && (!ds.field_messages.empty() || !ds.field_role.empty() || !ds.field_content.empty()))
    return bad(in, key, Str() << "the message field names apply to types chat_template/messages and sharegpt, not " << ds.type);
  if ((!ds.field_chosen.empty() || !ds.field_rejected.empty()) && ds.type != "messages" && ds.type != "preference")
    return bad(in, key, Str() << "field_chosen / field_rejected apply to preference datasets (rl: dpo, ipo, orpo or simpo, with type "
                                 "chat_template), not to type " << ds.type);
  return Status::OK();
}

// Where an entry's records are, as its keys say (each with the position it was written at, for errors).
struct EntrySource {
  std::string path_given;                 // `path` as written
  std::string hub_id, hub_where;          // path named a Hub dataset the working tree lacks
  std::string split = "train", split_where;
  std::string config_name;                // `name`
  std::string revision, revision_where;   // of a Hub dataset
  std::string data_files_where;
  std::map<std::string, std::vector<std::string>> data_files;  // by split ("train" for a list)
  std::vector<std::string> data_files_splits;                 // in the order written
  std::string csv_where;                  // ds_type: csv
};

// axolotl's `path: json` (or csv, parquet, text) with data_files: the files are named by data_files alone.
bool builder_name(const std::string& p) { return p == "json" || p == "csv" || p == "parquet" || p == "text"; }

// An entry's data_files (io/hf_cache.h resolve_data_files): under a Hub dataset's snapshot (the
// card's splits then do not apply), a local directory, or, for `path: json|csv|parquet`, the
// config's directory. A list is the train split; {split: files} gives each split its own.
Status set_data_files(const Input& in, const std::string& key, const EntrySource& e, DatasetSpec& ds) {
  const std::string& where = e.data_files_where;
  const std::string& path_given = e.path_given;
  const std::string& hub_id = e.hub_id;
  const auto it = e.data_files.find(e.split);
  if (it == e.data_files.end())
    return InvalidArgument(Str() << where << ": " << key << ".data_files: no split '" << e.split << "' (given: "
                                 << join(e.data_files_splits) << ")");
  if (!e.config_name.empty())
    return InvalidArgument(Str() << where << ": " << key << ".data_files: give data_files or name, not both");
  std::string root;
  if (!hub_id.empty()) {
    StatusOr<std::string> snap = hf_cache_snapshot(hub_id, HubRepoKind::kDataset, e.revision);
    if (!snap.ok()) return InvalidArgument(Str() << where << ": " << key << ".path: " << snap.status().message());
    root = *snap;
  } else if (is_directory(ds.path)) {
    root = ds.path;
  } else if (builder_name(path_given) && !file_exists(ds.path)) {
    root = in.base_dir.empty() ? "." : in.base_dir;
  } else {
    return InvalidArgument(Str() << where << ": " << key << ".data_files: path '" << path_given
                                 << "' is a file; data_files choose files under a directory, a Hub dataset, or path: "
                                    "json | csv | parquet | text (the config's directory)");
  }
  StatusOr<std::vector<std::string>> files = resolve_data_files(root, it->second, Str() << where << ": " << key);
  if (!files.ok()) return InvalidArgument(files.status().message());
  ds.path = hub_id.empty() ? (builder_name(path_given) ? path_given : ds.path) : root;
  ds.files = *files;
  return Status::OK();
}

Status set_one_dataset(const Input& in, const YAML::Node& item, const std::string& key, DatasetSpec& ds) {
  if (item.IsScalar()) {  // "- data.jsonl": a path with the default type
    ds.path = resolve_path(item.Scalar(), in.base_dir);
    return Status::OK();
  }
  if (!item.IsMap()) return bad(in, key, "each entry must be a mapping {path, type} or a path");
  EntrySource e;
  std::string preset_type, preset_where, conversation, conversation_where;
  for (const auto& kv : item) {
    const std::string k = kv.first.Scalar();
    const std::string where = mark_str(in.what, kv.first.Mark());
    const YAML::Node& v = kv.second;
    auto refuse = [&](const std::string& why) {
      return Unimplemented(Str() << where << ": " << key << "." << k << ": " << why);
    };
    if (k == "message_property_mappings") {  // {role: <field>, content: <field>}
      if (!v.IsMap()) return InvalidArgument(Str() << where << ": " << key << "." << k << ": expected a mapping");
      for (const auto& m : v) {
        const std::string mk = m.first.Scalar();
        if (!m.second.IsScalar()) return InvalidArgument(Str() << where << ": " << key << "." << k << "." << mk << ": expected a string");
        if (mk == "role") ds.field_role = m.second.Scalar();
        else if (mk == "content") ds.field_content = m.second.Scalar();
        else return refuse(Str() << "mapping '" << mk << "' is not supported (role, content)");
      }
      continue;
    }
    if (k == "roles_to_train") {  // the assistant's turns are what we train
      if (!v.IsSequence()) return InvalidArgument(Str() << where << ": " << key << "." << k << ": expected a list");
      bool ok = v.size() > 0;
      for (const auto& r : v) ok = ok && r.IsScalar() && (r.Scalar() == "assistant" || r.Scalar() == "gpt");
      if (!ok) return refuse("only the assistant's turns are trained (roles_to_train: [assistant]; train_on_inputs: true trains all)");
      continue;
    }
    if (k == "type" && v.IsMap()) {  // axolotl's user-defined prompt format (data/prompt_format.h)
      PromptFormat& f = ds.format;
      f.on = true;
      ds.type = "user_defined";
      for (const auto& m : v) {
        const std::string mk = m.first.Scalar();
        const std::string mwhere = mark_str(in.what, m.first.Mark());
        if (!m.second.IsNull() && !m.second.IsScalar())
          return InvalidArgument(Str() << mwhere << ": " << key << ".type." << mk << ": expected a string");
        if (m.second.IsNull()) continue;  // axolotl's default (None)
        const std::string mv = m.second.Scalar();
        if (mk == "field_instruction") f.field_instruction = mv;
        else if (mk == "field_input") f.field_input = mv;
        else if (mk == "field_output") f.field_output = mv;
        else if (mk == "field_system") f.field_system = mv;
        else if (mk == "system_prompt") f.system_prompt = mv;
        else if (mk == "system_format") f.system_format = mv;
        else if (mk == "format") f.format = mv;
        else if (mk == "no_input_format") f.no_input_format = mv, f.has_no_input_format = true;
        else
          return InvalidArgument(Str() << mwhere << ": " << key << ".type: unknown key '" << mk
                                       << "' (field_instruction, field_input, field_output, field_system, system_prompt, "
                                          "system_format, format, no_input_format)");
      }
      RETURN_IF_ERROR(check_prompt_format(f, Str() << where << ": " << key << ".type"));
      continue;
    }
    if (k == "data_files") {  // a path or glob, a list of them, or {split: those}
      e.data_files_where = where;
      auto strings = [&](const YAML::Node& n, std::vector<std::string>* out) -> Status {
        if (n.IsScalar()) {
          out->push_back(n.Scalar());
          return Status::OK();
        }
        if (n.IsSequence() && n.size() > 0) {
          for (const auto& e : n) {
            if (!e.IsScalar()) return InvalidArgument(Str() << where << ": " << key << ".data_files: expected paths");
            out->push_back(e.Scalar());
          }
          return Status::OK();
        }
        return InvalidArgument(Str() << where << ": " << key << ".data_files: expected a path, a list of paths or {split: paths}");
      };
      if (v.IsMap()) {
        for (const auto& m : v) {
          e.data_files_splits.push_back(m.first.Scalar());
          std::vector<std::string> files;
          RETURN_IF_ERROR(strings(m.second, &files));
          e.data_files[m.first.Scalar()] = std::move(files);
        }
      } else {
        RETURN_IF_ERROR(strings(v, &e.data_files["train"]));
        e.data_files_splits.push_back("train");
      }
      continue;
    }
    if (!v.IsScalar()) return InvalidArgument(Str() << where << ": " << key << "." << k << ": expected a string");
    const std::string val = v.Scalar();
    if (k == "path") {
      e.path_given = val;
      ds.path = resolve_path(val, in.base_dir);
      // "org/name" that is not here: a Hugging Face dataset id (axolotl downloads those), read from
      // the local Hugging Face cache once split and name are known (below).
      if (looks_like_hub_id(val) && !dataset_file_name(val) && !file_exists(ds.path) && !is_directory(ds.path)) {
        e.hub_id = val;
        e.hub_where = where;
      }
    } else if (k == "split") {
      e.split = val;
      e.split_where = where;
    } else if (k == "name") {
      e.config_name = val;
    } else if (k == "conversation") {  // after the loop: its meaning depends on the type
      conversation = val;
      conversation_where = where;
    } else if (k == "chat_template") {  // this entry's template (axolotl's key)
      std::string t = lower(val);
      if (val.size() > 6 && val.ends_with(".jinja")) {
        t = resolve_path(val, in.base_dir);
      } else if (std::find(chat_template_names().begin(), chat_template_names().end(), t) == chat_template_names().end()) {
        return InvalidArgument(Str() << where << ": " << key << "." << k << ": '" << val << "' is not one of: "
                                     << join(chat_template_names()) << ", or a template file (*.jinja)");
      }
      // "" would mean the config's template; the tokenizer's own is asked for by name.
      ds.chat_template = t.empty() ? "tokenizer_default" : t;
    } else if (k == "chat_template_jinja") {  // this entry's template text (or its file), for chat_template: jinja
      RETURN_IF_ERROR(read_template_text({.scalar = val, .where = where, .base_dir = in.base_dir, .what = in.what},
                                         Str() << key << "." << k, &ds.chat_template_jinja));
    } else if (k == "revision") {  // of a Hub dataset in the cache
      e.revision = val;
      e.revision_where = where;
    } else if (k == "type") {
      ds.type = lower(val);
      ASSIGN_OR_RETURN(std::optional<PromptFormat> named, axolotl_prompt_strategy(ds.type, ""));
      if (named) {  // Note [axolotl prompt strategies]: a format, once conversation is known
        preset_type = ds.type;
        preset_where = where;
        ds.type = "user_defined";
        continue;
      }
      // axolotl's chat_template.argilla_chat (DPO): whole conversations in chosen / rejected, which
      // type preference reads as TRL's implicit prompt (data/preference.h).
      if (ds.type == "chat_template" || ds.type == "chat_template.default" || ds.type == "chat_template.argilla_chat")
        ds.type = "messages";
      if (ds.type == "completion") ds.type = "text";
      if (std::find(kDatasetTypes.begin(), kDatasetTypes.end(), ds.type) == kDatasetTypes.end() &&
          !is_preference_type(ds.type)) {
        return InvalidArgument(Str() << where << ": " << key << ".type: '" << val << "' is not one of: "
                                     << join(kDatasetTypes) << " (or axolotl's chat_template, completion; with rl "
                                     << join(preference_types()) << ")");
      }
    } else if (k == "field_messages") {
      ds.field_messages = val;
    } else if (k == "field_chosen") {
      ds.field_chosen = val;
    } else if (k == "field_rejected") {
      ds.field_rejected = val;
    } else if (k == "message_field_role") {
      ds.field_role = val;
    } else if (k == "message_field_content") {
      ds.field_content = val;
    } else if (k == "field") {
      ds.field_text = val;
    } else if (k == "overlap_len") {
      const std::optional<int64_t> n = parse_integer<int64_t>(val);
      if (!n || *n < 0 || *n > kMaxMicroBatchTokens)
        return InvalidArgument(Str() << where << ": " << key << ".overlap_len: '" << val << "' is not a token count >= 0");
      ds.overlap_len = *n;
    } else if (k == "ds_type") {
      const std::string t = lower(val);
      if (t != "json" && t != "jsonl" && t != "parquet" && t != "arrow" && t != "csv" && t != "text")
        return refuse(Str() << "'" << val << "' is not read (json, jsonl, parquet, arrow: told apart by their bytes; "
                                            "csv and text by the file name, .csv / .tsv and .txt)");
      if (t == "csv") e.csv_where = where;
    } else if (k == "train_on_eos") {
      if (lower(val) != "turn") return refuse(Str() << "'" << val << "': each trained turn keeps its end of turn (train_on_eos: turn)");
    } else {
      const bool axolotl = k == "shards" || k == "field_system" || k == "field_human" || k == "field_model" ||
                           k == "drop_system_message" || k == "preprocess_shards" || k == "trust_remote_code";
      if (axolotl) return refuse("is not supported (path, type and the field names are)");
      return InvalidArgument(Str() << where << ": unknown dataset key '" << k << "' in " << key
                                   << did_you_mean(k, kDatasetKeys) << " (known: " << join(kDatasetKeys) << ")");
    }
  }
  if (ds.path.empty()) return bad(in, key, "a dataset entry has no 'path'");
  if (!preset_type.empty()) {  // alpaca_chat's conversation is its prompt style
    StatusOr<std::optional<PromptFormat>> f = axolotl_prompt_strategy(preset_type, lower(conversation));
    if (!f.ok())
      return InvalidArgument(Str() << (conversation_where.empty() ? preset_where : conversation_where) << ": " << key
                                   << ": " << f.status().message());
    ds.format = **f;
  } else if (!conversation.empty()) {
    // The legacy sharegpt type's conversation: FastChat's names; the ones we render map to templates.
    std::string t = lower(conversation);
    if (t == "llama-3") t = "llama3";
    if (t != "chatml" && t != "llama3" && t != "mistral")
      return Unimplemented(Str() << conversation_where << ": " << key << ".conversation: '" << conversation
                                 << "': the conversation formats rendered here are chatml, llama-3 and mistral (or set "
                                    "chat_template)");
    if (ds.chat_template.empty()) ds.chat_template = t;
  }
  // axolotl reads an entry's chat_template_jinja with its chat_template only (extract_chat_template_args).
  if (ds.chat_template == "jinja" && ds.chat_template_jinja.empty())
    return bad(in, key, "an entry's chat_template: jinja needs its chat_template_jinja (the template's text or file)");
  if (!ds.chat_template_jinja.empty() && ds.chat_template.empty()) ds.chat_template = "jinja";
  if (!e.revision.empty() && e.hub_id.empty())
    return InvalidArgument(Str() << e.revision_where << ": " << key << ".revision: '" << e.revision
                                 << "' applies to a Hugging Face dataset id, and '" << e.path_given << "' is a local path");
  if (!e.data_files_splits.empty()) {
    RETURN_IF_ERROR(set_data_files(in, key, e, ds));
  } else if (!e.hub_id.empty()) {  // io/hf_cache.h Note [Hub dataset splits]
    StatusOr<std::string> snap = hf_cache_snapshot(e.hub_id, HubRepoKind::kDataset, e.revision);
    if (!snap.ok()) return InvalidArgument(Str() << e.hub_where << ": " << key << ".path: " << snap.status().message());
    StatusOr<std::vector<std::string>> files = hub_dataset_split_files(*snap, e.split, e.config_name);
    if (!files.ok()) return InvalidArgument(Str() << e.hub_where << ": " << key << ".path '" << e.hub_id << "': " << files.status().message());
    ds.path = *snap;
    ds.files = *files;
  } else if (is_directory(ds.path) && file_exists(path_join(ds.path, "dataset_dict.json"))) {
    // `datasets`' DatasetDict.save_to_disk: a directory a split (train/, test/), each a saved Dataset.
    if (!e.config_name.empty())
      return InvalidArgument(Str() << in.what << ": " << key << ".name: '" << e.config_name << "': " << ds.path
                                   << " is a saved DatasetDict, which has splits but no configurations");
    const std::string sub = path_join(ds.path, e.split);
    if (!is_directory(sub)) {
      std::vector<std::string> splits;
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(ds.path, ec))
        if (e.is_directory(ec)) splits.push_back(e.path().filename().string());
      std::sort(splits.begin(), splits.end());
      return InvalidArgument(Str() << (e.split_where.empty() ? in.what : e.split_where) << ": " << key << ": " << ds.path
                                   << " (a saved DatasetDict) has no split '" << e.split << "' (splits: " << join(splits) << ")");
    }
    ds.path = sub;
  } else if (e.split != "train") {
    return Unimplemented(Str() << e.split_where << ": " << key << ".split: '" << e.split
                               << "': a local dataset file has no splits (split: train; a Hub dataset id read from the "
                                  "Hugging Face cache has)");
  } else if (!e.config_name.empty()) {
    return Unimplemented(Str() << in.what << ": " << key << ".name: '" << e.config_name
                               << "' selects a configuration of a Hub dataset; a local path has none");
  }
  return check_dataset_entry(in, key, e.csv_where, ds);
}


}  // namespace

Status set_datasets(const Input& in, const std::string& key, std::vector<DatasetSpec>& dst) {
  if (!in.node) return bad(in, key, "is a list; set it in the YAML file, not on the command line");
  dst.clear();
  if (in.node->IsNull()) return Status::OK();
  if (!in.node->IsSequence()) return bad(in, key, "expected a list of {path, type} entries");
  for (const auto& item : *in.node) {
    DatasetSpec ds;
    RETURN_IF_ERROR(set_one_dataset(in, item, key, ds));
    dst.push_back(std::move(ds));
  }
  return Status::OK();
}

void emit_dataset_list(YAML::Emitter& out, const std::vector<DatasetSpec>& list) {
  out << YAML::BeginSeq;
  for (const DatasetSpec& d : list) {
    out << YAML::BeginMap << YAML::Key << "path" << YAML::Value << d.path << YAML::Key << "type";
    if (!d.format.preset.empty()) {  // an axolotl strategy by its name
      out << YAML::Value << d.format.preset;
      if (!d.format.preset_conversation.empty())
        out << YAML::Key << "conversation" << YAML::Value << d.format.preset_conversation;
    } else if (d.format.on) {  // as written: a mapping
      const PromptFormat& pf = d.format;
      out << YAML::Value << YAML::BeginMap;
      const std::pair<const char*, const std::string*> keys[] = {
          {"field_instruction", &pf.field_instruction}, {"field_input", &pf.field_input},
          {"field_output", &pf.field_output},           {"field_system", &pf.field_system},
          {"system_prompt", &pf.system_prompt},         {"system_format", &pf.system_format},
          {"format", &pf.format}};
      for (const auto& [k, v] : keys)
        if (!v->empty()) out << YAML::Key << k << YAML::Value << *v;
      if (pf.has_no_input_format) out << YAML::Key << "no_input_format" << YAML::Value << pf.no_input_format;
      out << YAML::EndMap;
    } else {
      out << YAML::Value << d.type;
    }
    if (!d.field_messages.empty()) out << YAML::Key << "field_messages" << YAML::Value << d.field_messages;
    if (!d.field_role.empty()) out << YAML::Key << "message_field_role" << YAML::Value << d.field_role;
    if (!d.field_content.empty())
      out << YAML::Key << "message_field_content" << YAML::Value << d.field_content;
    if (!d.field_text.empty()) out << YAML::Key << "field" << YAML::Value << d.field_text;
    if (!d.field_chosen.empty()) out << YAML::Key << "field_chosen" << YAML::Value << d.field_chosen;
    if (!d.field_rejected.empty()) out << YAML::Key << "field_rejected" << YAML::Value << d.field_rejected;
    if (d.overlap_len > 0) out << YAML::Key << "overlap_len" << YAML::Value << d.overlap_len;
    if (!d.chat_template.empty()) out << YAML::Key << "chat_template" << YAML::Value << d.chat_template;
    if (!d.chat_template_jinja.empty())
      out << YAML::Key << "chat_template_jinja" << YAML::Value << YAML::Literal << d.chat_template_jinja;
    if (!d.files.empty()) {  // a Hub split or data_files, resolved: read back as data_files
      out << YAML::Key << "data_files" << YAML::Value << YAML::BeginSeq;
      for (const std::string& f : d.files) out << f;
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

Status resolve_rl_dataset_types(TrainConfig& cfg) {
  const bool pref = !cfg.rl.empty();
  if (!pref && cfg.max_prompt_len > 0)
    cfg.notes.push_back("max_prompt_len applies to preference training (rl): no effect on this run");
  if (cfg.rl != "orpo" && cfg.orpo_alpha > 0) cfg.notes.push_back("orpo_alpha applies to rl: orpo: no effect on this run");
  if (!pref && cfg.rpo_alpha > 0) cfg.notes.push_back("rpo_alpha applies to rl: dpo and ipo: no effect on this run");
  for (auto* list : {&cfg.datasets, &cfg.eval_datasets}) {
    const char* key = list == &cfg.datasets ? "datasets" : "eval_datasets";
    for (DatasetSpec& d : *list) {
      if (pref && d.type == "messages") d.type = "preference";  // axolotl's chat_template(.default) under rl
      if (pref && !is_preference_type(d.type))
        return InvalidArgument(Str() << key << ": " << d.path << ": rl: " << cfg.rl << " trains on "
                                     << (cfg.rl == "kto" ? "{prompt, completion, label} examples" : "preference pairs")
                                     << ", and type " << d.type << " has none (types: chat_template, "
                                     << join(preference_types()) << ")");
      if (!pref && is_preference_type(d.type))
        return InvalidArgument(Str() << key << ": " << d.path << ": type " << d.type
                                     << " holds preference data: set rl (dpo, ipo, orpo, simpo or kto) to train on it");
      if (cfg.rl == "kto" && (!d.field_chosen.empty() || !d.field_rejected.empty()))
        return InvalidArgument(Str() << key << ": " << d.path << ": rl: kto reads one 'completion' and its 'label' a record; "
                                     << "field_chosen / field_rejected name the replies of pairs (rl: dpo, ipo, orpo, simpo)");
      if (!pref && (!d.field_chosen.empty() || !d.field_rejected.empty()))
        return InvalidArgument(Str() << key << ": " << d.path
                                     << ": field_chosen / field_rejected are read by preference training (rl)");
    }
  }
  return Status::OK();
}

}  // namespace st
