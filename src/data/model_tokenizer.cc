#include "data/model_tokenizer.h"

#include <filesystem>

#include "core/file.h"
#include "core/json.h"
#include "core/utf8.h"
#include "data/detail/tokenizer_json.h"
#include "io/gguf_checkpoint.h"

namespace st {

namespace {

GgufTokenizerParts parts_of(GgufTokenizerData d) {
  GgufTokenizerParts p;
  p.model = d.model;
  p.tokens = std::move(d.tokens);
  p.merges = std::move(d.merges);
  p.token_types = std::move(d.token_types);
  p.scores = std::move(d.scores);
  p.pre = d.pre;
  p.bos_id = d.bos_id;
  p.eos_id = d.eos_id;
  p.pad_id = d.pad_id;
  p.add_bos = d.add_bos;
  p.add_space_prefix = d.add_space_prefix;
  p.chat_template = d.chat_template;
  return p;
}

}  // namespace

StatusOr<Tokenizer> gguf_file_tokenizer(const GgufFile& file, int32_t* eot_id) {
  if (eot_id) *eot_id = -1;
  ASSIGN_OR_RETURN(GgufTokenizerData d, read_gguf_tokenizer(file));  // errors name the file
  const int32_t eot = d.eot_id;
  ASSIGN_OR_RETURN(Tokenizer t, Tokenizer::from_gguf_parts(parts_of(std::move(d))), file.path());
  t.set_chat_template(t.chat_template(), file.path() + " tokenizer.chat_template");
  if (eot_id) *eot_id = eot;
  return t;
}

StatusOr<HfTokenizerFiles> gguf_hf_tokenizer_files(const GgufFile& file) {
  ASSIGN_OR_RETURN(GgufTokenizerData d, read_gguf_tokenizer(file));
  const GgufTokenizerParts p = parts_of(std::move(d));
  // The vocabulary must load as ours first: duplicates, bad merges and missing byte pieces are
  // refused there by name, so the files never hold a vocabulary that silently lost an entry.
  RETURN_IF_ERROR(Tokenizer::from_gguf_parts(p).status(), file.path());
  return tok::export_hf_tokenizer(p, file.path());
}

StatusOr<Tokenizer> load_model_tokenizer(const std::string& model_path, int32_t* eot_id) {
  if (eot_id) *eot_id = -1;
  if (is_directory(model_path)) return Tokenizer::from_dir(model_path);
  ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(model_path));
  return gguf_file_tokenizer(f, eot_id);
}

StatusOr<std::vector<std::string>> save_model_tokenizer(const std::string& model_path, const std::string& dir,
                                                        const std::string& chat_template) {
  std::vector<std::string> written;
  auto put = [&](const std::string& name, std::string_view text) -> Status {
    RETURN_IF_ERROR(write_file_atomic(path_join(dir, name), text), "saving the tokenizer");
    written.push_back(name);
    return Status::OK();
  };
  std::string config_text;  // tokenizer_config.json as it is to be written ("" = none)
  if (is_directory(model_path)) {
    for (const char* f : {"tokenizer.json", "tokenizer.model", "special_tokens_map.json", "added_tokens.json"}) {
      const std::string from = path_join(model_path, f);
      if (!file_exists(from)) continue;
      ASSIGN_OR_RETURN(std::string text, read_file_to_string(from));
      RETURN_IF_ERROR(put(f, text));
    }
    const std::string cfg = path_join(model_path, "tokenizer_config.json");
    if (file_exists(cfg)) {
      ASSIGN_OR_RETURN(config_text, read_file_to_string(cfg));
    }
    if (chat_template.empty()) {  // the base's own template files travel as they are
      const std::string side = path_join(model_path, "chat_template.jinja");
      if (file_exists(side)) {
        ASSIGN_OR_RETURN(std::string text, read_file_to_string(side));
        RETURN_IF_ERROR(put("chat_template.jinja", text));
      } else {  // an earlier run's (with a named template) would win over tokenizer_config.json's
        std::error_code ec;
        std::filesystem::remove(path_join(dir, "chat_template.jinja"), ec);
      }
      const std::string extras = path_join(model_path, "additional_chat_templates");
      if (is_directory(extras)) {
        RETURN_IF_ERROR(make_dirs(path_join(dir, "additional_chat_templates")));
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(extras, ec)) {
          if (e.path().extension() != ".jinja") continue;
          ASSIGN_OR_RETURN(std::string text, read_file_to_string(e.path().string()));
          RETURN_IF_ERROR(put("additional_chat_templates/" + e.path().filename().string(), text));
        }
        if (ec) return IOError(Str() << extras << ": " << ec.message());
      } else {
        std::error_code ec;
        std::filesystem::remove_all(path_join(dir, "additional_chat_templates"), ec);
      }
    }
  } else {
    ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(model_path));
    ASSIGN_OR_RETURN(HfTokenizerFiles files, gguf_hf_tokenizer_files(f));
    RETURN_IF_ERROR(put("tokenizer.json", files.tokenizer_json));
    config_text = files.tokenizer_config_json;
  }
  if (!chat_template.empty()) {
    if (!valid_utf8(chat_template)) return InvalidArgument("the chat template is not UTF-8 text");
    OrderedJson cfg = OrderedJson::object();
    if (!config_text.empty()) {
      ASSIGN_OR_RETURN(cfg, parse_ordered_json(config_text, path_join(model_path, "tokenizer_config.json")));
      if (!cfg.is_object()) return Corruption(Str() << model_path << ": tokenizer_config.json is not a JSON object");
    }
    cfg["chat_template"] = chat_template;
    config_text = cfg.dump(2) + "\n";
    RETURN_IF_ERROR(put("chat_template.jinja", chat_template));
    // A template of an earlier run's extras would be picked for calls with tools: none stay.
    std::error_code ec;
    std::filesystem::remove_all(path_join(dir, "additional_chat_templates"), ec);
  }
  if (!config_text.empty()) RETURN_IF_ERROR(put("tokenizer_config.json", config_text));
  return written;
}

}  // namespace st
