#include "data/detail/tokenizer_json.h"

namespace st::tok {
namespace {

std::string type_of(const Json& j) { return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : ""; }

bool flag(const Json& j, const char* key, bool dflt) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : dflt;
}

Status parse_normalizer(const Json& j, TokenizerImpl* t, const std::string& what) {
  if (j.is_null()) return Status::OK();
  std::string type = type_of(j);
  if (type == "NFC") { t->nfc = true; return Status::OK(); }
  if (type == "Sequence" && j.contains("normalizers") && j["normalizers"].is_array()) {
    for (const Json& n : j["normalizers"]) RETURN_IF_ERROR(parse_normalizer(n, t, what));
    return Status::OK();
  }
  return Unimplemented(Str() << what << ": normalizer '" << type << "' (only NFC is supported)");
}

Status parse_split(const Json& j, TokenizerImpl* t, const std::string& what) {
  std::string behavior = j.value("behavior", "");
  if (behavior != "Isolated" || flag(j, "invert", false))
    return Unimplemented(Str() << what << ": Split behavior '" << behavior << "' invert=" << flag(j, "invert", false)
                               << " (only Isolated, invert=false)");
  const Json& p = j.contains("pattern") ? j["pattern"] : Json();
  PreStep s;
  if (p.contains("Regex") && p["Regex"].is_string()) {
    s.kind = PreStep::Kind::kSplitRegex;
    ASSIGN_OR_RETURN(s.regex, split_regex_from_pattern(p["Regex"].get<std::string>()), what);
  } else if (p.contains("String") && p["String"].is_string()) {
    s.kind = PreStep::Kind::kSplitLiteral;
    s.literal = p["String"].get<std::string>();
  } else {
    return Corruption(Str() << what << ": Split without a Regex or String pattern");
  }
  t->steps.push_back(s);
  return Status::OK();
}

Status parse_pre(const Json& j, TokenizerImpl* t, const std::string& what) {
  if (j.is_null()) return Status::OK();
  std::string type = type_of(j);
  if (type == "Sequence" && j.contains("pretokenizers") && j["pretokenizers"].is_array()) {
    for (const Json& p : j["pretokenizers"]) RETURN_IF_ERROR(parse_pre(p, t, what));
    return Status::OK();
  }
  if (type == "Split") return parse_split(j, t, what);
  PreStep s;
  if (type == "Digits") {
    s.kind = PreStep::Kind::kDigits;
    s.individual_digits = flag(j, "individual_digits", false);
  } else if (type == "ByteLevel") {
    s.kind = PreStep::Kind::kByteLevel;
    s.add_prefix_space = flag(j, "add_prefix_space", true);
    s.use_regex = flag(j, "use_regex", true);
  } else {
    return Unimplemented(Str() << what << ": pre_tokenizer '" << type << "'");
  }
  t->steps.push_back(s);
  return Status::OK();
}

// Fills prefix/suffix from a TemplateProcessing "single" template.
Status parse_template(const Json& j, TokenizerImpl* t, const std::string& what) {
  if (!j.contains("single") || !j["single"].is_array()) return Corruption(Str() << what << ": TemplateProcessing without 'single'");
  bool seen_seq = false;
  for (const Json& item : j["single"]) {
    if (item.contains("Sequence")) { seen_seq = true; continue; }
    if (!item.contains("SpecialToken")) return Corruption(Str() << what << ": bad TemplateProcessing item " << item.dump());
    std::string name = item["SpecialToken"].value("id", "");
    const Json& sp = j.value("special_tokens", Json::object());
    if (!sp.contains(name) || !sp[name].contains("ids") || !sp[name]["ids"].is_array())
      return Corruption(Str() << what << ": TemplateProcessing special token '" << name << "' has no ids");
    for (const Json& id : sp[name]["ids"]) (seen_seq ? t->suffix : t->prefix).push_back(id.get<int32_t>());
  }
  return Status::OK();
}

Status parse_post(const Json& j, TokenizerImpl* t, const std::string& what) {
  if (j.is_null()) return Status::OK();
  std::string type = type_of(j);
  if (type == "ByteLevel") return Status::OK();
  if (type == "TemplateProcessing") return parse_template(j, t, what);
  if (type == "Sequence" && j.contains("processors") && j["processors"].is_array()) {
    for (const Json& p : j["processors"]) RETURN_IF_ERROR(parse_post(p, t, what));
    return Status::OK();
  }
  return Unimplemented(Str() << what << ": post_processor '" << type << "'");
}

Status parse_decoder(const Json& j, const std::string& what) {
  if (j.is_null()) return Status::OK();
  std::string type = type_of(j);
  if (type == "ByteLevel") return Status::OK();
  if (type == "Sequence" && j.contains("decoders") && j["decoders"].is_array()) {
    for (const Json& d : j["decoders"]) RETURN_IF_ERROR(parse_decoder(d, what));
    return Status::OK();
  }
  return Unimplemented(Str() << what << ": decoder '" << type << "' (only ByteLevel)");
}

bool empty_or_null(const Json& m, const char* key) {
  return !m.contains(key) || m[key].is_null() || (m[key].is_string() && m[key].get<std::string>().empty());
}

Status parse_model(const Json& m, TokenizerImpl* t, const std::string& what) {
  if (!m.is_object()) return Corruption(Str() << what << ": missing 'model'");
  std::string type = type_of(m);
  if (!type.empty() && type != "BPE") return Unimplemented(Str() << what << ": model type '" << type << "' (only BPE)");
  if (!empty_or_null(m, "continuing_subword_prefix") || !empty_or_null(m, "end_of_word_suffix") ||
      flag(m, "byte_fallback", false) || !(m.value("dropout", Json()).is_null() || m["dropout"] == 0))
    return Unimplemented(Str() << what << ": BPE with continuing_subword_prefix, end_of_word_suffix, byte_fallback or dropout");
  t->ignore_merges = flag(m, "ignore_merges", false);
  if (!m.contains("vocab") || !m["vocab"].is_object()) return Corruption(Str() << what << ": model.vocab is not an object");
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    if (!it.value().is_number_integer()) return Corruption(Str() << what << ": vocab entry '" << it.key() << "' is not an int");
    RETURN_IF_ERROR(t->add_vocab(it.key(), it.value().get<int32_t>(), what));
  }
  if (!m.contains("merges") || !m["merges"].is_array()) return Corruption(Str() << what << ": model.merges is not an array");
  int32_t rank = 0;
  for (const Json& e : m["merges"]) {
    std::string a, b;
    if (e.is_string()) {
      std::string s = e.get<std::string>();
      if (s.rfind("#version", 0) == 0) continue;
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return Corruption(Str() << what << ": merge " << rank << " '" << s << "' is not 'a b'");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return Corruption(Str() << what << ": merge " << rank << " is neither 'a b' nor [a, b]");
    }
    RETURN_IF_ERROR(t->add_merge(a, b, rank++, what));
  }
  return Status::OK();
}

bool has_byte_level(const TokenizerImpl& t) {
  for (const PreStep& s : t.steps)
    if (s.kind == PreStep::Kind::kByteLevel) return true;
  return false;
}

}  // namespace

StatusOr<std::shared_ptr<TokenizerImpl>> impl_from_json(const Json& j, const std::string& what) {
  auto t = std::make_shared<TokenizerImpl>();
  if (!j.is_object()) return Corruption(Str() << what << ": not a JSON object");
  RETURN_IF_ERROR(parse_model(j.value("model", Json()), t.get(), what));
  RETURN_IF_ERROR(parse_normalizer(j.value("normalizer", Json()), t.get(), what));
  RETURN_IF_ERROR(parse_pre(j.value("pre_tokenizer", Json()), t.get(), what));
  if (!has_byte_level(*t)) return Unimplemented(Str() << what << ": not a byte-level BPE (no ByteLevel pre_tokenizer)");
  RETURN_IF_ERROR(parse_post(j.value("post_processor", Json()), t.get(), what));
  RETURN_IF_ERROR(parse_decoder(j.value("decoder", Json()), what));
  for (const Json& a : j.value("added_tokens", Json::array())) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") || !a["content"].is_string())
      return Corruption(Str() << what << ": added_tokens entry without id/content: " << a.dump());
    AddedToken at;
    at.id = a["id"].get<int32_t>();
    at.content = a["content"].get<std::string>();
    at.special = flag(a, "special", false);
    at.lstrip = flag(a, "lstrip", false);
    at.rstrip = flag(a, "rstrip", false);
    at.single_word = flag(a, "single_word", false);
    at.normalized = flag(a, "normalized", !at.special);
    RETURN_IF_ERROR(t->add_added(at, what));
  }
  RETURN_IF_ERROR(t->finish(what));
  return t;
}

namespace {

Status gguf_pre(const std::string& pre, TokenizerImpl* t) {
  auto split = [&](SplitRegex r) { PreStep s; s.kind = PreStep::Kind::kSplitRegex; s.regex = r; t->steps.push_back(s); };
  PreStep bl;
  bl.kind = PreStep::Kind::kByteLevel;
  if (pre == "llama-bpe" || pre == "llama3") {
    split(SplitRegex::kLlama3);
    t->ignore_merges = true;
  } else if (pre == "qwen2") {
    t->nfc = true;
    split(SplitRegex::kQwen2);
  } else if (pre == "tekken") {
    split(SplitRegex::kTekken);
  } else if (pre == "smollm") {
    PreStep d;
    d.kind = PreStep::Kind::kDigits;
    d.individual_digits = true;
    t->steps.push_back(d);
    bl.use_regex = true;
  } else if (pre == "gpt2" || pre == "default" || pre.empty()) {
    bl.use_regex = true;
  } else {
    return Unimplemented(Str() << "GGUF tokenizer.ggml.pre '" << pre << "'");
  }
  t->steps.push_back(bl);
  return Status::OK();
}

}  // namespace

StatusOr<std::shared_ptr<TokenizerImpl>> impl_from_gguf(const GgufTokenizerParts& p) {
  const std::string what = "GGUF tokenizer";
  auto t = std::make_shared<TokenizerImpl>();
  RETURN_IF_ERROR(gguf_pre(p.pre, t.get()));
  if (!p.token_types.empty() && p.token_types.size() != p.tokens.size())
    return Corruption(Str() << what << ": " << p.token_types.size() << " token types for " << p.tokens.size() << " tokens");
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    int32_t type = p.token_types.empty() ? 1 : p.token_types[i];
    int32_t id = static_cast<int32_t>(i);
    if (type == 3 || type == 4) {
      AddedToken at;
      at.id = id;
      at.content = p.tokens[i];
      at.special = type == 3;
      at.normalized = type == 4;  // HF's default for non-special added tokens; GGUF has no flag
      RETURN_IF_ERROR(t->add_added(at, what));
    } else {
      RETURN_IF_ERROR(t->add_vocab(p.tokens[i], id, what));
    }
  }
  for (size_t r = 0; r < p.merges.size(); ++r) {
    const std::string& s = p.merges[r];
    size_t sp = s.find(' ', 1);
    if (sp == std::string::npos) return Corruption(Str() << what << ": merge " << r << " '" << s << "' is not 'a b'");
    RETURN_IF_ERROR(t->add_merge(s.substr(0, sp), s.substr(sp + 1), static_cast<int32_t>(r), what));
  }
  if (p.add_bos && p.bos_id >= 0) t->prefix.push_back(p.bos_id);
  RETURN_IF_ERROR(t->finish(what));
  return t;
}

}  // namespace st::tok
