#include "data/detail/tokenizer_json.h"

#include "data/detail/unicode.h"

namespace st::tok {
namespace {

std::string type_of(const Json& j) { return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : ""; }

bool flag(const Json& j, const char* key, bool dflt) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : dflt;
}

// A string field of a component; Corruption naming the component and the field otherwise.
StatusOr<std::string> str_field(const Json& j, const char* key, const std::string& where, const std::string& what) {
  if (!j.contains(key) || !j[key].is_string())
    return Corruption(Str() << what << ": " << where << ": '" << key << "' is missing or not a string");
  return j[key].get<std::string>();
}

// A token id as JSON holds it: an integer that fits an int32, or Corruption quoting the value as
// written (session 22 audit: 4294968796 was read as 1500 and silently took another token's place).
StatusOr<int32_t> token_id(const Json& v, const std::string& where, const std::string& what) {
  if (!v.is_number_integer()) return Corruption(Str() << what << ": " << where << ": id " << v.dump() << " is not an integer");
  if (v.is_number_unsigned() ? v.get<uint64_t>() > INT32_MAX : (v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX))
    return Corruption(Str() << what << ": " << where << ": id " << v.dump() << " is out of range");
  return static_cast<int32_t>(v.get<int64_t>());
}

// Replace's pattern: {"String": s} (a literal, non-empty) or {"Regex": r} (Unimplemented).
StatusOr<std::string> replace_pattern(const Json& j, const std::string& where, const std::string& what) {
  const Json& p = j.contains("pattern") ? j["pattern"] : Json();
  if (p.is_object() && p.contains("Regex"))
    return Unimplemented(Str() << what << ": " << where << " with a Regex pattern (only String)");
  if (!p.is_object() || !p.contains("String") || !p["String"].is_string() || p["String"].get<std::string>().empty())
    return Corruption(Str() << what << ": " << where << ": 'pattern' is not {\"String\": <non-empty string>}");
  return p["String"].get<std::string>();
}

// One Unicode char as UTF-8 (Metaspace's replacement, Strip's content).
StatusOr<std::string> one_char(const Json& j, const char* key, const std::string& where, const std::string& what) {
  ASSIGN_OR_RETURN(std::string c, str_field(j, key, where, what));
  if (!utf8_valid(c) || utf8_decode(c).size() != 1)
    return Corruption(Str() << what << ": " << where << ": '" << key << "' must be exactly one character, got '" << c << "'");
  return c;
}

Status parse_normalizer(const Json& j, TokenizerImpl* t, const std::string& what) {
  if (j.is_null()) return Status::OK();
  std::string type = type_of(j);
  NormStep n;
  static const std::pair<const char*, NormStep::Kind> kPlain[] = {
      {"NFC", NormStep::Kind::kNfc},   {"NFD", NormStep::Kind::kNfd},
      {"NFKC", NormStep::Kind::kNfkc}, {"NFKD", NormStep::Kind::kNfkd},
      {"Lowercase", NormStep::Kind::kLowercase}, {"StripAccents", NormStep::Kind::kStripAccents}};
  for (const auto& [name, kind] : kPlain)
    if (type == name) {
      n.kind = kind;
      t->norm.push_back(std::move(n));
      return Status::OK();
    }
  if (type == "Prepend") {
    n.kind = NormStep::Kind::kPrepend;
    ASSIGN_OR_RETURN(n.text, str_field(j, "prepend", "normalizer Prepend", what));
  } else if (type == "Replace") {
    n.kind = NormStep::Kind::kReplace;
    const Json& p = j.contains("pattern") ? j["pattern"] : Json();
    if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
      ASSIGN_OR_RETURN(n.regex, SplitPattern::compile(p["Regex"].get<std::string>()), what + ": normalizer Replace");
    } else {
      ASSIGN_OR_RETURN(n.text, replace_pattern(j, "normalizer Replace", what));
    }
    ASSIGN_OR_RETURN(n.content, str_field(j, "content", "normalizer Replace", what));
  } else if (type == "Strip") {
    n.kind = NormStep::Kind::kStrip;
    for (const char* key : {"strip_left", "strip_right"})
      if (j.contains(key) && !j[key].is_boolean())
        return Corruption(Str() << what << ": normalizer Strip: '" << key << "' is not a bool");
    n.left = flag(j, "strip_left", true);
    n.right = flag(j, "strip_right", true);
  } else if (type == "Sequence" && j.contains("normalizers") && j["normalizers"].is_array()) {
    for (const Json& m : j["normalizers"]) RETURN_IF_ERROR(parse_normalizer(m, t, what));
    return Status::OK();
  } else {
    return Unimplemented(Str() << what << ": normalizer '" << type
                               << "' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend, "
                                  "Replace, Sequence)");
  }
  t->norm.push_back(std::move(n));
  return Status::OK();
}

// Metaspace (pre-tokenizer or decoder): prepend_scheme "always"/"first"/"never", or the older
// add_prefix_space bool (true = always). Default always.
StatusOr<PrependScheme> prepend_scheme(const Json& j, const std::string& where, const std::string& what) {
  if (j.contains("prepend_scheme")) {
    std::string s = j["prepend_scheme"].is_string() ? j["prepend_scheme"].get<std::string>() : "";
    if (s == "always") return PrependScheme::kAlways;
    if (s == "first") return PrependScheme::kFirst;
    if (s == "never") return PrependScheme::kNever;
    return Corruption(Str() << what << ": " << where << ": 'prepend_scheme' must be \"always\", \"first\" or \"never\", got "
                            << j["prepend_scheme"].dump());
  }
  if (j.contains("add_prefix_space") && !j["add_prefix_space"].is_boolean())
    return Corruption(Str() << what << ": " << where << ": 'add_prefix_space' is not a bool");
  return flag(j, "add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
}

StatusOr<SplitBehavior> behavior_of(const Json& j, const std::string& where, const std::string& what) {
  ASSIGN_OR_RETURN(std::string name, str_field(j, "behavior", where, what));
  SplitBehavior b;
  if (!split_behavior_from_name(name, &b))
    return Corruption(Str() << what << ": " << where << ": 'behavior' '" << name
                            << "' is not Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous");
  return b;
}

// A Split step on a general pattern (one HF builds itself: Whitespace, Punctuation, ...).
Status add_general_split(const std::string& regex, SplitBehavior b, bool invert, TokenizerImpl* t,
                         const std::string& what) {
  PreStep s;
  s.kind = PreStep::Kind::kSplitRegex;
  s.regex = SplitRegex::kGeneral;
  ASSIGN_OR_RETURN(s.pattern, SplitPattern::compile(regex), what);
  s.behavior = b;
  s.invert = invert;
  t->steps.push_back(s);
  return Status::OK();
}

Status parse_split(const Json& j, TokenizerImpl* t, const std::string& what) {
  const std::string where = "pre_tokenizer Split";
  PreStep s;
  ASSIGN_OR_RETURN(s.behavior, behavior_of(j, where, what));
  if (j.contains("invert") && !j["invert"].is_boolean())
    return Corruption(Str() << what << ": " << where << ": 'invert' is not a bool");
  s.invert = flag(j, "invert", false);
  const Json& p = j.contains("pattern") ? j["pattern"] : Json();
  if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
    const std::string re = p["Regex"].get<std::string>();
    s.kind = PreStep::Kind::kSplitRegex;
    s.regex = split_regex_from_pattern(re);
    if (s.regex == SplitRegex::kGeneral) {
      ASSIGN_OR_RETURN(s.pattern, SplitPattern::compile(re), what + ": " + where);
    }
  } else if (p.is_object() && p.contains("String") && p["String"].is_string()) {
    s.kind = PreStep::Kind::kSplitLiteral;
    s.literal = p["String"].get<std::string>();
  } else {
    return Corruption(Str() << what << ": " << where << " without a Regex or String pattern");
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
  // HF's fixed-pattern pre-tokenizers, as the Split each amounts to. Punctuation: Rust's
  // is_ascii_punctuation or a Unicode P category, one character per match; Whitespace: the regex
  // HF uses; WhitespaceSplit: White_Space characters removed (Oniguruma's \s is the same set).
  if (type == "Punctuation") {
    SplitBehavior b = SplitBehavior::kIsolated;
    if (j.contains("behavior")) {
      ASSIGN_OR_RETURN(b, behavior_of(j, "pre_tokenizer Punctuation", what));
    }
    return add_general_split(R"([\p{P}!-/:-@\[-`{-~])", b, false, t, what);
  }
  if (type == "Whitespace") {
    // HF runs \w+|[^\w\s]+ on Rust's regex crate, whose \w is the Unicode Word property plus the
    // joiners U+200C/D: Oniguruma's \w inside brackets (is_word, bare = false) and those two.
    const std::string w = R"(\w\x{200C}\x{200D})";
    return add_general_split("[" + w + "]+|[^" + w + "\\s]+", SplitBehavior::kRemoved, true, t, what);
  }
  if (type == "WhitespaceSplit") return add_general_split(R"(\s)", SplitBehavior::kRemoved, false, t, what);
  if (type == "BertPreTokenizer") {
    // HF: split on char::is_whitespace (Removed), then every punctuation char isolated (ASCII
    // punctuation or a Unicode P category): WhitespaceSplit then Punctuation.
    RETURN_IF_ERROR(add_general_split(R"(\s)", SplitBehavior::kRemoved, false, t, what));
    return add_general_split(R"([\p{P}!-/:-@\[-`{-~])", SplitBehavior::kIsolated, false, t, what);
  }
  if (type == "CharDelimiterSplit") {
    ASSIGN_OR_RETURN(std::string d, one_char(j, "delimiter", "pre_tokenizer CharDelimiterSplit", what));
    PreStep s;
    s.kind = PreStep::Kind::kSplitLiteral;
    s.literal = d;
    s.behavior = SplitBehavior::kRemoved;
    t->steps.push_back(s);
    return Status::OK();
  }
  PreStep s;
  if (type == "Digits") {
    s.kind = PreStep::Kind::kDigits;
    s.individual_digits = flag(j, "individual_digits", false);
  } else if (type == "ByteLevel") {
    s.kind = PreStep::Kind::kByteLevel;
    s.add_prefix_space = flag(j, "add_prefix_space", true);
    s.use_regex = flag(j, "use_regex", true);
  } else if (type == "Metaspace") {
    // After ByteLevel, HF's BPE would look up the replacement char "▁" itself in a byte-level
    // vocab; our byte-level BPE works on the mapped-back bytes, where "▁" has no place.
    for (const PreStep& prev : t->steps)
      if (prev.kind == PreStep::Kind::kByteLevel)
        return Unimplemented(Str() << what << ": pre_tokenizer Metaspace after ByteLevel");
    s.kind = PreStep::Kind::kMetaspace;
    ASSIGN_OR_RETURN(s.literal, one_char(j, "replacement", "pre_tokenizer Metaspace", what));
    ASSIGN_OR_RETURN(s.prepend, prepend_scheme(j, "pre_tokenizer Metaspace", what));
    if (j.contains("split") && !j["split"].is_boolean())
      return Corruption(Str() << what << ": pre_tokenizer Metaspace: 'split' is not a bool");
    s.split = flag(j, "split", true);
  } else {
    return Unimplemented(Str() << what << ": pre_tokenizer '" << type << "'");
  }
  t->steps.push_back(s);
  return Status::OK();
}

// Wraps the ids so far (prefix ... suffix) in one more post-processor's special tokens: in a
// post_processor Sequence each one wraps the encoding the previous one produced.
void wrap(TokenizerImpl* t, const std::vector<int32_t>& pre, const std::vector<int32_t>& post) {
  t->prefix.insert(t->prefix.begin(), pre.begin(), pre.end());
  t->suffix.insert(t->suffix.end(), post.begin(), post.end());
}

// A TemplateProcessing "single" template: the SpecialToken items before and after $A.
Status parse_template(const Json& j, TokenizerImpl* t, const std::string& what) {
  if (!j.contains("single") || !j["single"].is_array()) return Corruption(Str() << what << ": TemplateProcessing without 'single'");
  bool seen_seq = false;
  std::vector<int32_t> pre, post;
  for (const Json& item : j["single"]) {
    if (item.contains("Sequence")) { seen_seq = true; continue; }
    if (!item.contains("SpecialToken")) return Corruption(Str() << what << ": bad TemplateProcessing item " << item.dump());
    const Json& st = item["SpecialToken"];
    if (!st.is_object() || !st.contains("id") || !st["id"].is_string())
      return Corruption(Str() << what << ": TemplateProcessing item " << item.dump() << " has no SpecialToken id string");
    const std::string name = st["id"].get<std::string>();
    const Json& sp = j.contains("special_tokens") ? j["special_tokens"] : Json::object();
    if (!sp.is_object() || !sp.contains(name) || !sp[name].is_object() || !sp[name].contains("ids") ||
        !sp[name]["ids"].is_array())
      return Corruption(Str() << what << ": TemplateProcessing special token '" << name << "' has no ids");
    for (const Json& id : sp[name]["ids"]) {
      ASSIGN_OR_RETURN(int32_t v, token_id(id, "TemplateProcessing special token '" + name + "'", what));
      (seen_seq ? post : pre).push_back(v);
    }
  }
  wrap(t, pre, post);
  return Status::OK();
}

// RobertaProcessing / BertProcessing: a single sequence becomes cls $A sep; each is ["token", id].
Status parse_cls_sep(const Json& j, const std::string& type, TokenizerImpl* t, const std::string& what) {
  int32_t ids[2];
  const char* keys[2] = {"cls", "sep"};
  for (int k = 0; k < 2; ++k) {
    const Json& v = j.contains(keys[k]) ? j[keys[k]] : Json();
    if (!v.is_array() || v.size() != 2 || !v[0].is_string())
      return Corruption(Str() << what << ": post_processor " << type << ": '" << keys[k] << "' is not [token, id]");
    ASSIGN_OR_RETURN(ids[k], token_id(v[1], "post_processor " + type + " '" + keys[k] + "'", what));
  }
  wrap(t, {ids[0]}, {ids[1]});
  return Status::OK();
}

Status parse_post(const Json& j, TokenizerImpl* t, const std::string& what) {
  if (j.is_null()) return Status::OK();
  std::string type = type_of(j);
  if (type == "ByteLevel") return Status::OK();
  if (type == "TemplateProcessing") return parse_template(j, t, what);
  if (type == "RobertaProcessing" || type == "BertProcessing") return parse_cls_sep(j, type, t, what);
  if (type == "Sequence" && j.contains("processors") && j["processors"].is_array()) {
    for (const Json& p : j["processors"]) RETURN_IF_ERROR(parse_post(p, t, what));
    return Status::OK();
  }
  return Unimplemented(Str() << what << ": post_processor '" << type << "'");
}

Status parse_decoder(const Json& j, TokenizerImpl* t, const std::string& what) {
  std::string type = type_of(j);
  DecStep d;
  if (type == "Sequence" && j.contains("decoders") && j["decoders"].is_array()) {
    for (const Json& e : j["decoders"]) RETURN_IF_ERROR(parse_decoder(e, t, what));
    return Status::OK();
  }
  if (type == "ByteLevel") {
    // On a SentencePiece-style vocab ByteLevel would remap "▁" tokens' chars as bytes: no real
    // model does that, and refusing keeps such a file from decoding to mojibake unnoticed.
    if (t->model == ModelKind::kChars)
      return Unimplemented(Str() << what << ": decoder 'ByteLevel' with a SentencePiece-style model (no ByteLevel pre_tokenizer)");
    d.kind = DecStep::Kind::kByteLevel;
  } else if (type == "Replace") {
    d.kind = DecStep::Kind::kReplace;
    ASSIGN_OR_RETURN(d.text, replace_pattern(j, "decoder Replace", what));
    ASSIGN_OR_RETURN(d.content, str_field(j, "content", "decoder Replace", what));
  } else if (type == "ByteFallback") {
    d.kind = DecStep::Kind::kByteFallback;
  } else if (type == "Fuse") {
    d.kind = DecStep::Kind::kFuse;
  } else if (type == "Strip") {
    d.kind = DecStep::Kind::kStrip;
    ASSIGN_OR_RETURN(d.text, one_char(j, "content", "decoder Strip", what));
    for (auto [key, dst] : {std::pair{"start", &d.start}, {"stop", &d.stop}}) {
      if (!j.contains(key) || !j[key].is_number_unsigned())
        return Corruption(Str() << what << ": decoder Strip: '" << key << "' is missing or not a non-negative integer");
      *dst = j[key].get<size_t>();
    }
  } else if (type == "Metaspace") {
    d.kind = DecStep::Kind::kMetaspace;
    ASSIGN_OR_RETURN(d.text, one_char(j, "replacement", "decoder Metaspace", what));
    ASSIGN_OR_RETURN(PrependScheme p, prepend_scheme(j, "decoder Metaspace", what));
    d.drop_first = p != PrependScheme::kNever;
  } else {
    return Unimplemented(Str() << what << ": decoder '" << type
                               << "' (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)");
  }
  t->decoders.push_back(std::move(d));
  return Status::OK();
}

bool empty_or_null(const Json& m, const char* key) {
  return !m.contains(key) || m[key].is_null() || (m[key].is_string() && m[key].get<std::string>().empty());
}

Status parse_model(const Json& m, TokenizerImpl* t, const std::string& what) {
  if (!m.is_object()) return Corruption(Str() << what << ": missing 'model'");
  std::string type = type_of(m);
  if (!type.empty() && type != "BPE") return Unimplemented(Str() << what << ": model type '" << type << "' (only BPE)");
  if (!empty_or_null(m, "continuing_subword_prefix") || !empty_or_null(m, "end_of_word_suffix") ||
      !(m.value("dropout", Json()).is_null() || m["dropout"] == 0))
    return Unimplemented(Str() << what << ": BPE with continuing_subword_prefix, end_of_word_suffix or dropout");
  t->byte_fallback = flag(m, "byte_fallback", false);
  t->fuse_unk = flag(m, "fuse_unk", false);
  t->ignore_merges = flag(m, "ignore_merges", false);
  if (!m.contains("vocab") || !m["vocab"].is_object()) return Corruption(Str() << what << ": model.vocab is not an object");
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    ASSIGN_OR_RETURN(int32_t id, token_id(it.value(), "vocab entry '" + it.key() + "'", what));
    RETURN_IF_ERROR(t->add_vocab(it.key(), id, what));
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
  if (!empty_or_null(m, "unk_token")) {
    if (!m["unk_token"].is_string()) return Corruption(Str() << what << ": model.unk_token is not a string");
    std::string unk = m["unk_token"].get<std::string>();
    auto it = t->bytes_to_id.find(unk);
    if (t->model == ModelKind::kChars) {
      if (it == t->bytes_to_id.end()) return Corruption(Str() << what << ": model.unk_token '" << unk << "' is not in model.vocab");
      t->unk_id = it->second;
    } else {
      t->byte_level_unk = true;
    }
  }
  return Status::OK();
}

// A byte-level vocab lacking some of the 256 byte chars: HF gives such a char the unk token or
// its <0xXX> fallback tokens (of the mapped char's UTF-8); our byte-level BPE only drops it, which
// matches HF when there is neither unk_token nor byte_fallback. Refused otherwise.
Status check_byte_level_alphabet(const TokenizerImpl& t, const std::string& what) {
  if (t.model != ModelKind::kByteLevel || (!t.byte_fallback && !t.byte_level_unk)) return Status::OK();
  for (int b = 0; b < 256; ++b)
    if (t.byte_id[b] < 0)
      return Unimplemented(Str() << what << ": byte-level BPE with " << (t.byte_fallback ? "byte_fallback" : "unk_token")
                                 << " and a vocab missing byte " << b << " of the ByteLevel alphabet");
  return Status::OK();
}

// Whether a pre_tokenizer (tree) contains ByteLevel: that makes the model byte-level; without
// it, BPE works on the characters of the text (SentencePiece style).
bool has_byte_level(const Json& pre) {
  if (type_of(pre) == "ByteLevel") return true;
  if (type_of(pre) == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array())
    for (const Json& p : pre["pretokenizers"])
      if (has_byte_level(p)) return true;
  return false;
}

}  // namespace

StatusOr<std::shared_ptr<TokenizerImpl>> impl_from_json(const Json& j, const std::string& what) {
  auto t = std::make_shared<TokenizerImpl>();
  if (!j.is_object()) return Corruption(Str() << what << ": not a JSON object");
  const Json pre = j.value("pre_tokenizer", Json());
  t->model = has_byte_level(pre) ? ModelKind::kByteLevel : ModelKind::kChars;
  RETURN_IF_ERROR(parse_model(j.value("model", Json()), t.get(), what));
  RETURN_IF_ERROR(parse_normalizer(j.value("normalizer", Json()), t.get(), what));
  RETURN_IF_ERROR(parse_pre(pre, t.get(), what));
  RETURN_IF_ERROR(parse_post(j.value("post_processor", Json()), t.get(), what));
  const Json dec = j.value("decoder", Json());
  if (dec.is_null()) {
    t->decoder_null = true;
  } else {
    RETURN_IF_ERROR(parse_decoder(dec, t.get(), what));
  }
  for (const Json& a : j.value("added_tokens", Json::array())) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") || !a["content"].is_string())
      return Corruption(Str() << what << ": added_tokens entry without id/content: " << a.dump());
    AddedToken at;
    ASSIGN_OR_RETURN(at.id, token_id(a["id"], "added_tokens entry '" + a["content"].get<std::string>() + "'", what));
    at.content = a["content"].get<std::string>();
    at.special = flag(a, "special", false);
    at.lstrip = flag(a, "lstrip", false);
    at.rstrip = flag(a, "rstrip", false);
    at.single_word = flag(a, "single_word", false);
    at.normalized = flag(a, "normalized", !at.special);
    RETURN_IF_ERROR(t->add_added(at, what));
  }
  RETURN_IF_ERROR(t->finish(what));
  RETURN_IF_ERROR(check_byte_level_alphabet(*t, what));
  return t;
}

Status parse_pre_tokenizer(const Json& j, TokenizerImpl* t, const std::string& what) { return parse_pre(j, t, what); }

}  // namespace st::tok
