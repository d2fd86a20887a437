#include "data/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "core/file.h"
#include "core/json.h"
#include "core/utf8.h"
#include "data/detail/tokenizer_json.h"
#include "data/detail/unicode.h"

namespace st {

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(const Tokenizer&) = default;
Tokenizer& Tokenizer::operator=(const Tokenizer&) = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

StatusOr<Tokenizer> Tokenizer::from_json(std::string_view json_text, const std::string& what) {
  ASSIGN_OR_RETURN(Json j, parse_json(json_text, what));
  Tokenizer t;
  // Every field is type-checked where it is read (tokenizer_json_fuzz_test); this catch is the
  // backstop that keeps a missed one a Status naming the file rather than the process's end.
  try {
    ASSIGN_OR_RETURN(t.impl_, tok::impl_from_json(j, what));
  } catch (const Json::exception& e) {
    return Corruption(Str() << what << ": unexpected JSON shape: " << e.what());
  }
  if (t.impl_->prefix.size() == 1) t.bos_ = t.impl_->prefix[0];
  return t;
}


namespace {

// bos_token / eos_token / pad_token in tokenizer_config.json: a string or {"content": ...}; absent
// or null is "none". Anything else is refused naming the file and key (session 22 audit: a number
// there was dropped silently, and the run trained without an EOS).
StatusOr<std::string> config_token(const Json& cfg, const char* key, const std::string& path) {
  if (!cfg.contains(key) || cfg[key].is_null()) return std::string();
  const Json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return Corruption(Str() << path << ": '" << key << "' is " << v.dump() << ", not a token string or {\"content\": ...}");
}

// tokenizer_config.json's chat_template: a string, or [{"name": ..., "template": ...}, ...] of which
// `name` is taken ("default" is the string form's).
std::string config_template(const Json& cfg, const std::string& name = "default") {
  if (!cfg.contains("chat_template")) return "";
  const Json& v = cfg["chat_template"];
  if (v.is_string()) return name == "default" ? v.get<std::string>() : "";
  if (v.is_array())
    for (const Json& e : v)
      if (e.is_object() && e.contains("name") && e["name"].is_string() && e["name"].get<std::string>() == name &&
          e.contains("template") && e["template"].is_string())
        return e["template"].get<std::string>();
  return "";
}

// Note [chat template files]: transformers (4.47 on) saves a tokenizer's chat template as
// chat_template.jinja beside tokenizer_config.json and named extras as
// additional_chat_templates/NAME.jinja; when any of those files is there, they replace
// tokenizer_config.json's chat_template whole (its _from_pretrained). chat_template.jinja is the
// "default" template; apply_chat_template renders with "default" unless asked for another by name
// (or for "tool_use" in a call with tools), so "default" is what we render. Without one (extras
// only) the tokenizer has no template to render, as HF then has none to pick. Each file must be
// UTF-8 (Python reads it so); anything else is refused naming the file.
struct SidecarTemplates {
  bool any = false;
  std::string text, origin;  // the default template and its file; "" when there is none
  std::string tool_use, tool_use_origin;
};

StatusOr<SidecarTemplates> read_sidecar_templates(const std::string& dir) {
  SidecarTemplates s;
  auto read = [&](const std::string& path) -> StatusOr<std::string> {
    ASSIGN_OR_RETURN(std::string text, read_file_to_string(path), "chat template file");
    if (!valid_utf8(text)) return Corruption(Str() << path << ": not UTF-8 text (a chat template file is read as UTF-8)");
    return text;
  };
  const std::string main = path_join(dir, "chat_template.jinja");
  if (file_exists(main)) {
    ASSIGN_OR_RETURN(s.text, read(main));
    s.any = true;
    s.origin = main;
  }
  const std::string extras = path_join(dir, "additional_chat_templates");
  if (is_directory(extras)) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(extras, ec)) {
      if (e.path().extension() != ".jinja") continue;
      s.any = true;
      // A named "default" here is the default too (transformers keys both by name; the later wins).
      if (e.path().stem() == "default") {
        ASSIGN_OR_RETURN(s.text, read(e.path().string()));
        s.origin = e.path().string();
      } else if (e.path().stem() == "tool_use") {
        ASSIGN_OR_RETURN(s.tool_use, read(e.path().string()));
        s.tool_use_origin = e.path().string();
      }
    }
    if (ec) return IOError(Str() << extras << ": " << ec.message());
  }
  return s;
}

// A flag of tokenizer_config.json: absent or null keeps `*v`; anything but a bool is refused.
Status config_bool(const Json& cfg, const char* key, const std::string& path, bool* v) {
  if (!cfg.contains(key) || cfg[key].is_null()) return Status::OK();
  if (!cfg[key].is_boolean()) return Corruption(Str() << path << ": '" << key << "' is " << cfg[key].dump() << ", not true or false");
  *v = cfg[key].get<bool>();
  return Status::OK();
}

// A directory with tokenizer.model and no tokenizer.json: the LlamaTokenizer transformers builds
// from it (data/detail/tokenizer_spm_model.cc Note [tokenizer.model as transformers reads it]),
// configured by tokenizer_config.json as transformers configures it.
StatusOr<Tokenizer> from_spm_model(const std::string& path, const Json& cfg, const std::string& cfg_path) {
  tok::SpmLlamaOptions o;
  if (cfg.contains("tokenizer_class") && !cfg["tokenizer_class"].is_null()) {
    if (!cfg["tokenizer_class"].is_string())
      return Corruption(Str() << cfg_path << ": 'tokenizer_class' is " << cfg["tokenizer_class"].dump() << ", not a string");
    const std::string cls = cfg["tokenizer_class"].get<std::string>();
    if (cls != "LlamaTokenizer" && cls != "LlamaTokenizerFast")
      return Unimplemented(Str() << path << ": " << cfg_path << " names tokenizer_class '" << cls
                                 << "'; a tokenizer.model is read as transformers' LlamaTokenizer (Llama, Mistral), and other "
                                    "classes build other pipelines -- save the tokenizer as tokenizer.json with transformers");
  }
  RETURN_IF_ERROR(config_bool(cfg, "legacy", cfg_path, &o.legacy));
  RETURN_IF_ERROR(config_bool(cfg, "add_prefix_space", cfg_path, &o.add_prefix_space));
  RETURN_IF_ERROR(config_bool(cfg, "add_bos_token", cfg_path, &o.add_bos));
  RETURN_IF_ERROR(config_bool(cfg, "add_eos_token", cfg_path, &o.add_eos));
  for (auto [key, out] : {std::pair<const char*, std::string*>{"unk_token", &o.unk}, {"bos_token", &o.bos}, {"eos_token", &o.eos}}) {
    if (!cfg.contains(key)) continue;
    ASSIGN_OR_RETURN(*out, config_token(cfg, key, cfg_path));  // null: none
  }
  ASSIGN_OR_RETURN(SpmModel m, read_spm_model(path));
  ASSIGN_OR_RETURN(std::string json, tok::spm_llama_tokenizer_json(m, o, path));
  ASSIGN_OR_RETURN(Tokenizer t, Tokenizer::from_json(json, path));
  auto id = [&](const std::string& s) { return s.empty() ? -1 : t.token_to_id(s).value_or(-1); };
  t.set_special_ids(id(o.bos), id(o.eos), -1);
  return t;
}

}  // namespace

namespace {

// The templates of `dir` given its tokenizer_config.json already parsed (`cfg`, null when absent).
StatusOr<DirChatTemplate> dir_chat_template(const std::string& dir, const Json* cfg) {
  DirChatTemplate out;
  const std::string cfg_path = path_join(dir, "tokenizer_config.json");
  if (cfg) {
    const Json& c = *cfg;
    if (c.contains("chat_template") && !c["chat_template"].is_null() && !c["chat_template"].is_string() &&
        !c["chat_template"].is_array())
      return Corruption(Str() << cfg_path << ": 'chat_template' is neither a string nor a list of named templates");
    out.text = config_template(c);
    out.origin = cfg_path + " chat_template";
    out.tool_use = config_template(c, "tool_use");
    out.tool_use_origin = cfg_path + " chat_template 'tool_use'";
  }
  ASSIGN_OR_RETURN(SidecarTemplates side, read_sidecar_templates(dir));
  if (side.any) {  // Note [chat template files]
    out.text = std::move(side.text);
    out.origin = side.origin.empty() ? path_join(dir, "additional_chat_templates") : side.origin;
    out.tool_use = std::move(side.tool_use);
    out.tool_use_origin = std::move(side.tool_use_origin);
  }
  if (out.tool_use.empty()) out.tool_use_origin.clear();
  return out;
}

}  // namespace

StatusOr<DirChatTemplate> read_dir_chat_template(const std::string& dir) {
  const std::string cfg_path = path_join(dir, "tokenizer_config.json");
  if (!file_exists(cfg_path)) return dir_chat_template(dir, nullptr);
  ASSIGN_OR_RETURN(Json cfg, read_json_file(cfg_path));
  if (!cfg.is_object()) return Corruption(Str() << cfg_path << ": not a JSON object");
  return dir_chat_template(dir, &cfg);
}

StatusOr<Tokenizer> Tokenizer::from_file(const std::string& path) {
  // A sentencepiece model alone: transformers' defaults for everything tokenizer_config.json sets.
  if (path.size() >= 6 && path.compare(path.size() - 6, 6, ".model") == 0) return from_spm_model(path, Json::object(), "");
  ASSIGN_OR_RETURN(std::string text, read_file_to_string(path));
  return from_json(text, path);
}

StatusOr<Tokenizer> Tokenizer::from_dir(const std::string& dir) {
  const std::string cfg_path = path_join(dir, "tokenizer_config.json");
  const bool have_cfg = file_exists(cfg_path);
  Json cfg = Json::object();
  if (have_cfg) {
    ASSIGN_OR_RETURN(cfg, read_json_file(cfg_path));
    if (!cfg.is_object()) return Corruption(Str() << cfg_path << ": not a JSON object");
  }
  std::string vocab_path = path_join(dir, "tokenizer.json");
  Tokenizer t;
  if (!file_exists(vocab_path) && file_exists(path_join(dir, "tokenizer.model"))) {
    vocab_path = path_join(dir, "tokenizer.model");
    ASSIGN_OR_RETURN(t, from_spm_model(vocab_path, cfg, cfg_path));
  } else if (!file_exists(vocab_path)) {
    return NotFound(Str() << dir << " holds neither tokenizer.json nor tokenizer.model");
  } else {
    ASSIGN_OR_RETURN(t, from_file(vocab_path));
  }
  if (have_cfg) {
    // BOS and EOS must name tokens of tokenizer.json (HF would append a new token to the vocab, one
    // the model has no embedding row for); an unknown pad token keeps the default, as padding is
    // masked out of the loss whichever id it has.
    auto id_of = [&](const char* key, int32_t dflt, bool must_exist) -> StatusOr<int32_t> {
      ASSIGN_OR_RETURN(std::string tok, config_token(cfg, key, cfg_path));
      if (tok.empty()) return dflt;
      auto id = t.token_to_id(tok);
      if (id) return *id;
      if (must_exist)
        return Corruption(Str() << cfg_path << ": '" << key << "' is \"" << tok << "\", which is not a token of "
                                << vocab_path);
      return dflt;
    };
    ASSIGN_OR_RETURN(t.bos_, id_of("bos_token", t.bos_, true));
    ASSIGN_OR_RETURN(t.eos_, id_of("eos_token", t.eos_, true));
    ASSIGN_OR_RETURN(t.pad_, id_of("pad_token", t.pad_, false));
  }
  ASSIGN_OR_RETURN(DirChatTemplate ct, dir_chat_template(dir, have_cfg ? &cfg : nullptr));
  if (!ct.origin.empty()) {
    t.chat_template_ = std::move(ct.text);
    t.chat_template_origin_ = std::move(ct.origin);
    t.tool_use_ = std::move(ct.tool_use);
    t.tool_use_origin_ = std::move(ct.tool_use_origin);
  }
  std::string gen_path = path_join(dir, "generation_config.json");
  if (t.eos_ < 0 && file_exists(gen_path)) {
    ASSIGN_OR_RETURN(Json gen, read_json_file(gen_path));
    const Json& e = gen.value("eos_token_id", Json());
    const Json& first = e.is_array() && !e.empty() ? e[0] : e;
    if (first.is_number_integer()) {
      if (first.is_number_unsigned() ? first.get<uint64_t>() >= static_cast<uint64_t>(t.vocab_size())
                                     : (first.get<int64_t>() < 0 || first.get<int64_t>() >= t.vocab_size()))
        return Corruption(Str() << gen_path << ": 'eos_token_id' " << first.dump() << " is not a token id (vocab "
                                << t.vocab_size() << ")");
      t.eos_ = static_cast<int32_t>(first.get<int64_t>());
    }
  }
  return t;
}

StatusOr<Tokenizer> Tokenizer::from_gguf_parts(const GgufTokenizerParts& parts) {
  Tokenizer t;
  ASSIGN_OR_RETURN(t.impl_, tok::impl_from_gguf(parts));
  t.bos_ = parts.bos_id;
  t.eos_ = parts.eos_id;
  t.pad_ = parts.pad_id;
  t.chat_template_ = parts.chat_template;
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, AddSpecial add) const {
  std::vector<int32_t> ids;
  if (!impl_) return ids;
  if (add == AddSpecial::kYes) ids = impl_->prefix;
  impl_->encode(text, &ids);
  if (add == AddSpecial::kYes) ids.insert(ids.end(), impl_->suffix.begin(), impl_->suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, SkipSpecial skip) const {
  // HF runs every token, added ones included, through the decoder chain (decode.cc).
  if (!impl_) return std::string();
  return impl_->decode_chars(ids, skip == SkipSpecial::kYes);
}

int64_t Tokenizer::vocab_size() const { return impl_ ? static_cast<int64_t>(impl_->id_to_str.size()) : 0; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (!impl_ || token.empty()) return std::nullopt;
  auto it = impl_->str_to_id.find(std::string(token));
  if (it == impl_->str_to_id.end()) return std::nullopt;
  return it->second;
}

const std::string& Tokenizer::id_to_token(int32_t id) const {
  static const std::string kEmpty;
  if (!impl_ || id < 0 || static_cast<size_t>(id) >= impl_->id_to_str.size()) return kEmpty;
  return impl_->id_to_str[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return impl_ && id >= 0 && static_cast<size_t>(id) < impl_->id_special.size() && impl_->id_special[id];
}

int32_t Tokenizer::bos_id() const { return bos_; }
int32_t Tokenizer::eos_id() const { return eos_; }
int32_t Tokenizer::pad_id() const { return pad_; }
const std::string& Tokenizer::chat_template() const { return chat_template_; }
void Tokenizer::set_special_ids(int32_t bos, int32_t eos, int32_t pad) {
  bos_ = bos;
  eos_ = eos;
  pad_ = pad;
}
void Tokenizer::set_chat_template(std::string tmpl, std::string origin) {
  chat_template_ = std::move(tmpl);
  chat_template_origin_ = std::move(origin);
  tool_use_.clear();  // it belonged to the templates replaced
  tool_use_origin_.clear();
}

}  // namespace st
