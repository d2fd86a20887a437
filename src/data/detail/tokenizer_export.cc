// HF tokenizer files for a GGUF vocabulary (tokenizer_json.h export_hf_tokenizer): the
// tokenizer.json the HF tokenizer it was converted from would hold -- for "gpt2" the byte-level
// BPE with the pre-tokenizer its tokenizer.ggml.pre names (gguf_pre.cc), for "llama" the
// SentencePiece-style BPE of transformers' LlamaConverter (Prepend + Replace, byte fallback, merges
// from the scores as Note [SentencePiece as BPE] derives them) -- and a tokenizer_config.json
// (special tokens, chat template).
#include <algorithm>

#include "data/detail/tokenizer_json.h"
#include "data/detail/unicode.h"

namespace st::tok {
namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

int32_t type_of(const GgufTokenizerParts& p, size_t i) { return p.token_types.empty() ? 1 : p.token_types[i]; }

Json added_tokens(const GgufTokenizerParts& p) {
  Json a = Json::array();
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    const int32_t t = type_of(p, i);
    if (t != 2 && t != 3 && t != 4) continue;  // unknown, control, user-defined
    a.push_back({{"id", static_cast<int64_t>(i)}, {"content", p.tokens[i]}, {"single_word", false},
                 {"lstrip", false}, {"rstrip", false}, {"normalized", t == 4}, {"special", t != 4}});
  }
  return a;
}

Json bos_template(const GgufTokenizerParts& p) {
  const std::string bos = p.tokens[static_cast<size_t>(p.bos_id)];
  Json sp = {{"SpecialToken", {{"id", bos}, {"type_id", 0}}}};
  auto seq = [](const char* id) { return Json{{"Sequence", {{"id", id}, {"type_id", 0}}}}; };
  return {{"type", "TemplateProcessing"},
          {"single", Json::array({sp, seq("A")})},
          {"pair", Json::array({sp, seq("A"), sp, seq("B")})},
          {"special_tokens", {{bos, {{"id", bos}, {"ids", {p.bos_id}}, {"tokens", {bos}}}}}}};
}

// Note [SentencePiece as BPE] (tokenizer_gguf.cc), as an ordered merge list: for each normal piece
// by score, high to low, every split into two normal pieces.
Json spm_merges(const GgufTokenizerParts& p) {
  std::unordered_map<std::string, int32_t> normal;
  for (size_t i = 0; i < p.tokens.size(); ++i)
    if (type_of(p, i) == 1) normal.emplace(p.tokens[i], static_cast<int32_t>(i));
  std::vector<int32_t> order;
  for (const auto& [s, id] : normal) order.push_back(id);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return p.scores[a] != p.scores[b] ? p.scores[a] > p.scores[b] : a < b;
  });
  Json m = Json::array();
  for (int32_t id : order) {
    const std::string& s = p.tokens[static_cast<size_t>(id)];
    std::vector<size_t> offs;
    utf8_decode(s, &offs);
    for (size_t k = 1; k + 1 < offs.size(); ++k) {
      const std::string l = s.substr(0, offs[k]), r = s.substr(offs[k]);
      if (normal.count(l) && normal.count(r)) m.push_back(Json::array({l, r}));
    }
  }
  return m;
}

}  // namespace

StatusOr<HfTokenizerFiles> export_hf_tokenizer(const GgufTokenizerParts& p, const std::string& what) {
  if (p.bos_id >= static_cast<int64_t>(p.tokens.size()) || p.eos_id >= static_cast<int64_t>(p.tokens.size()))
    return Corruption(Str() << what << ": bos/eos id outside the vocabulary");
  Json vocab = Json::object();
  for (size_t i = 0; i < p.tokens.size(); ++i) vocab[p.tokens[i]] = static_cast<int64_t>(i);
  Json model = {{"type", "BPE"}, {"dropout", nullptr}, {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr}, {"vocab", vocab}};
  Json tj = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added_tokens(p)}};
  int32_t unk = -1;
  if (p.model == "gpt2") {
    ASSIGN_OR_RETURN(GgufPreRecipe r, gguf_pre_recipe(p.pre, what));
    Json merges = Json::array();
    for (const std::string& mg : p.merges) {
      const size_t sp = mg.find(' ', 1);
      if (sp == std::string::npos) return Corruption(Str() << what << ": merge '" << mg << "' is not 'a b'");
      merges.push_back(Json::array({mg.substr(0, sp), mg.substr(sp + 1)}));
    }
    model["unk_token"] = nullptr;
    model["fuse_unk"] = false;
    model["byte_fallback"] = false;
    model["ignore_merges"] = r.ignore_merges;
    model["merges"] = merges;
    tj["normalizer"] = r.nfc ? Json{{"type", "NFC"}} : Json();
    tj["pre_tokenizer"] = r.pre;
    tj["post_processor"] = p.add_bos && p.bos_id >= 0
                               ? bos_template(p)
                               : Json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                                      {"use_regex", false}};
    tj["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  } else if (p.model == "llama") {
    if (p.scores.size() != p.tokens.size()) return Corruption(Str() << what << ": scores and tokens differ in length");
    for (size_t i = 0; i < p.tokens.size(); ++i)
      if (type_of(p, i) == 2) unk = static_cast<int32_t>(i);
    model["unk_token"] = unk >= 0 ? Json(p.tokens[static_cast<size_t>(unk)]) : Json();
    model["fuse_unk"] = true;
    model["byte_fallback"] = true;
    model["ignore_merges"] = false;
    model["merges"] = spm_merges(p);
    Json norm = Json::array();
    if (p.add_space_prefix) norm.push_back({{"type", "Prepend"}, {"prepend", kSpace}});
    norm.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}});
    tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", norm}};
    tj["pre_tokenizer"] = nullptr;
    tj["post_processor"] = p.add_bos && p.bos_id >= 0 ? bos_template(p) : Json();
    Json dec = Json::array({{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                            {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
    if (p.add_space_prefix) dec.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    tj["decoder"] = {{"type", "Sequence"}, {"decoders", dec}};
  } else {
    return Unimplemented(Str() << what << ": tokenizer.ggml.model '" << p.model << "' (gpt2, llama)");
  }
  tj["model"] = model;
  Json cfg = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"add_bos_token", p.add_bos}, {"add_eos_token", false},
              {"clean_up_tokenization_spaces", false}};
  auto name = [&](int32_t id) { return p.tokens[static_cast<size_t>(id)]; };
  if (p.bos_id >= 0) cfg["bos_token"] = name(p.bos_id);
  if (p.eos_id >= 0) cfg["eos_token"] = name(p.eos_id);
  if (p.pad_id >= 0 && p.pad_id < static_cast<int64_t>(p.tokens.size())) cfg["pad_token"] = name(p.pad_id);
  if (unk >= 0) cfg["unk_token"] = name(unk);
  if (!p.chat_template.empty()) cfg["chat_template"] = p.chat_template;
  // JSON holds UTF-8 only: a token (or template) that is not valid UTF-8 is damage in the GGUF,
  // named here rather than thrown by dump() (which aborted `merge`: session 23 audit).
  for (size_t i = 0; i < p.tokens.size(); ++i)
    if (!utf8_valid(p.tokens[i]))
      return Corruption(Str() << what << ": tokenizer.ggml.tokens[" << i << "] is not valid UTF-8");
  try {
    return HfTokenizerFiles{tj.dump(1) + "\n", cfg.dump(2) + "\n"};
  } catch (const Json::exception& e) {
    return Corruption(Str() << what << ": the tokenizer cannot be written as JSON: " << e.what());
  }
}

}  // namespace st::tok
