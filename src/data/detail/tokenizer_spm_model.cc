// The tokenizer.json that transformers builds from a directory holding tokenizer.model (a
// sentencepiece BPE model) and no tokenizer.json -- Note [tokenizer.model as transformers reads it].
//
// Note [tokenizer.model as transformers reads it]: transformers 5.x (checked on 5.17 and 5.24)
// builds a LlamaTokenizer from tokenizer.model by its own recipe, not sentencepiece's:
//   * model: BPE over the pieces in id order (no unk token; fuse_unk, byte_fallback), its merges
//     generated from the vocabulary alone (tokenization_utils_base.generate_merges): every split
//     l + r of every piece P with l and r pieces too (of any type), ordered by P's id, then by
//     the length of l in code points;
//   * added tokens: the control pieces (special) and the user-defined ones (not special), and the
//     unk/bos/eos tokens, none normalized;
//   * no normalizer; a Metaspace pre-tokenizer (split false) whose prepend scheme is "first"
//     ("always" with `legacy: true`, "never" with `add_prefix_space: false`);
//   * the decoder Replace("▁", " "), ByteFallback, Fuse, and Strip(1 leading space) when a space is
//     prepended; a TemplateProcessing adding bos and eos where add_bos_token / add_eos_token are
//     true (both default false in 5.x; Llama-2's tokenizer_config.json sets add_bos_token).
// The proto's own normalizer (its precompiled charsmap, add_dummy_prefix,
// remove_extra_whitespaces) is not consulted by that recipe, so it is not here either: ids match
// transformers' (tests/data/tokenizer_spm_model_test.cc, fixtures from
// tools/tok/make_spm_model_fixture.py), which is what a user training with HF saw. transformers 4.x
// gave a legacy tokenizer a Prepend + Replace normalizer instead; that differs only where a
// stretch of text between added tokens starts with a space.
#include <algorithm>

#include "data/detail/tokenizer_json.h"
#include "data/detail/unicode.h"

namespace st::tok {
namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// transformers' generate_merges(vocab): see the Note.
Json generate_merges(const SpmModel& m, const std::unordered_map<std::string, int32_t>& vocab) {
  Json merges = Json::array();
  std::vector<size_t> offs;
  for (const SpmPiece& p : m.pieces) {
    offs.clear();
    utf8_decode(p.piece, &offs);  // offs[k]: byte offset of code point k; offs.back() = size
    for (size_t k = 1; k + 1 < offs.size(); ++k) {  // ascending length of l
      std::string l = p.piece.substr(0, offs[k]), r = p.piece.substr(offs[k]);
      if (vocab.count(l) && vocab.count(r)) merges.push_back(Json::array({std::move(l), std::move(r)}));
    }
  }
  return merges;
}

Json special(const std::string& s, int32_t id) { return {{"id", s}, {"ids", {id}}, {"tokens", {s}}}; }

}  // namespace

StatusOr<std::string> spm_llama_tokenizer_json(const SpmModel& m, const SpmLlamaOptions& o, const std::string& what) {
  if (m.model_type != SpmModel::kBpe)
    return Unimplemented(Str() << what << ": a sentencepiece " << spm_model_type_name(m.model_type)
                               << " model; only BPE models (Llama, Mistral) are read -- convert it to tokenizer.json with transformers");
  if (m.treat_whitespace_as_suffix)
    return Unimplemented(Str() << what << ": trainer_spec.treat_whitespace_as_suffix is set (transformers' Llama recipe puts the space first)");
  std::unordered_map<std::string, int32_t> vocab;
  Json vocab_json = Json::object();
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    const std::string& s = m.pieces[i].piece;
    if (!utf8_valid(s)) return Corruption(Str() << what << ": pieces[" << i << "] is not valid UTF-8");
    vocab.emplace(s, static_cast<int32_t>(i));
    vocab_json[s] = static_cast<int64_t>(i);
  }
  auto id_of = [&](const std::string& s, const char* key) -> StatusOr<int32_t> {
    auto it = vocab.find(s);
    if (it == vocab.end())
      return Corruption(Str() << what << ": " << key << " '" << s << "' is not a piece of the model");
    return it->second;
  };
  // Added tokens in id order: the control and user-defined pieces, and the class's special tokens.
  std::vector<std::pair<int32_t, bool>> added;  // id, special
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    const int32_t t = m.pieces[i].type;
    if (t == SpmPiece::kControl || t == SpmPiece::kUserDefined) added.emplace_back(static_cast<int32_t>(i), t == SpmPiece::kControl);
  }
  int32_t bos = -1, eos = -1;
  for (auto [s, key, out] : {std::tuple<const std::string&, const char*, int32_t*>{o.unk, "unk_token", nullptr},
                             {o.bos, "bos_token", &bos}, {o.eos, "eos_token", &eos}}) {
    if (s.empty()) continue;
    ASSIGN_OR_RETURN(int32_t id, id_of(s, key));
    if (out) *out = id;
    auto at = std::find_if(added.begin(), added.end(), [&](const auto& a) { return a.first == id; });
    if (at == added.end()) added.emplace_back(id, true);
    else at->second = true;
  }
  std::sort(added.begin(), added.end());
  Json added_json = Json::array();
  for (auto [id, sp] : added)
    added_json.push_back({{"id", id}, {"content", m.pieces[static_cast<size_t>(id)].piece}, {"single_word", false},
                          {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", sp}});

  Json model = {{"type", "BPE"},          {"dropout", nullptr},  {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},       {"byte_fallback", true}, {"ignore_merges", false},
                {"vocab", vocab_json},    {"merges", generate_merges(m, vocab)}};
  const char* scheme = !o.add_prefix_space ? "never" : o.legacy ? "always" : "first";
  Json dec = Json::array({{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                          {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
  if (o.add_prefix_space) dec.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  Json single = Json::array(), tokens = Json::object();
  auto push_special = [&](int32_t id) {
    const std::string& s = m.pieces[static_cast<size_t>(id)].piece;
    single.push_back({{"SpecialToken", {{"id", s}, {"type_id", 0}}}});
    tokens[s] = special(s, id);
  };
  if (o.add_bos) {
    if (bos < 0) return InvalidArgument(Str() << what << ": add_bos_token is true and there is no bos_token");
    push_special(bos);
  }
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (o.add_eos) {
    if (eos < 0) return InvalidArgument(Str() << what << ": add_eos_token is true and there is no eos_token");
    push_special(eos);
  }
  Json tj = {{"version", "1.0"},
             {"truncation", nullptr},
             {"padding", nullptr},
             {"added_tokens", added_json},
             {"normalizer", nullptr},
             {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", scheme}, {"split", false}}},
             {"post_processor", {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", tokens}}},
             {"decoder", {{"type", "Sequence"}, {"decoders", dec}}},
             {"model", model}};
  return tj.dump();
}

}  // namespace st::tok
