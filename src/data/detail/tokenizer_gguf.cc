// TokenizerImpl from GGUF metadata: "gpt2" (byte-level BPE with merges) and "llama"
// (SentencePiece BPE with scores; Note [SentencePiece as BPE]).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "data/detail/tokenizer_json.h"
#include "data/detail/unicode.h"

namespace st::tok {
namespace {

const std::string kWhat = "GGUF tokenizer";
const std::string kSpace = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's space

// Note [duplicate GGUF tokens]: a "gpt2" vocabulary may list one string under two ids (GGUF has
// no rule against it). llama.cpp (token_to_id[text] = id, in id order) and transformers' GGUF
// converter ({token: id for id, token in enumerate(tokens)}) both encode it to the last id, and
// the tokenizer.json we export (a JSON object keyed by token) keeps the last too; so do we. Both
// ids still decode. SentencePiece vocabularies refuse duplicates (spm_from_gguf), as sentencepiece
// does when it loads a model.
StatusOr<std::shared_ptr<TokenizerImpl>> byte_level_from_gguf(const GgufTokenizerParts& p) {
  auto t = std::make_shared<TokenizerImpl>();
  RETURN_IF_ERROR(gguf_pre_tokenizer(p.pre, t.get(), kWhat));
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    int32_t type = p.token_types.empty() ? 1 : p.token_types[i];
    int32_t id = static_cast<int32_t>(i);
    if (type == 3 || type == 4) {
      AddedToken at;
      at.id = id;
      at.content = p.tokens[i];
      at.special = type == 3;
      at.normalized = type == 4;  // HF's default for non-special added tokens; GGUF has no flag
      RETURN_IF_ERROR(t->add_added(at, kWhat));
    } else {
      RETURN_IF_ERROR(t->add_vocab(p.tokens[i], id, kWhat, /*last_wins=*/true));
    }
  }
  for (size_t r = 0; r < p.merges.size(); ++r) {
    const std::string& s = p.merges[r];
    size_t sp = s.find(' ', 1);
    if (sp == std::string::npos) return Corruption(Str() << kWhat << ": merge " << r << " '" << s << "' is not 'a b'");
    RETURN_IF_ERROR(t->add_merge(s.substr(0, sp), s.substr(sp + 1), static_cast<int32_t>(r), kWhat));
  }
  if (p.add_bos && p.bos_id >= 0) t->prefix.push_back(p.bos_id);
  RETURN_IF_ERROR(t->finish(kWhat));
  return t;
}

// "<0xXX>" with two uppercase hex digits, as sentencepiece and llama.cpp write byte pieces.
bool is_byte_token(const std::string& s) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return s.size() == 6 && s.compare(0, 3, "<0x") == 0 && hex(s[3]) && hex(s[4]) && s[5] == '>';
}

// Note [SentencePiece as BPE]: sentencepiece's BPE encoder (bpe_model.cc) starts from the
// characters of the normalized text and repeatedly merges the adjacent pair whose concatenation
// is a vocab piece with the highest score, the leftmost pair on equal scores; a final symbol
// that is not a piece becomes its <0xXX> byte pieces. The merge engine does exactly that when
// every split (l, r) of every normal piece P = l + r, with l and r normal pieces, is a merge
// whose rank is P's position in the scores sorted high to low, equal scores sharing a rank
// (the engine breaks rank ties leftmost, as sentencepiece breaks score ties). Unused pieces
// (type 5), which sentencepiece merges and then splits again, are left out: never produced.
Status add_score_merges(const GgufTokenizerParts& p, TokenizerImpl* t) {
  std::vector<int32_t> normal;
  for (size_t i = 0; i < p.tokens.size(); ++i)
    if (p.token_types[i] == 1) normal.push_back(static_cast<int32_t>(i));
  std::stable_sort(normal.begin(), normal.end(), [&](int32_t a, int32_t b) { return p.scores[a] > p.scores[b]; });
  std::vector<int32_t> rank(p.tokens.size(), -1);
  for (size_t k = 0; k < normal.size(); ++k)
    rank[normal[k]] = k > 0 && p.scores[normal[k]] == p.scores[normal[k - 1]] ? rank[normal[k - 1]] : static_cast<int32_t>(k);
  auto normal_id = [&](std::string_view s) -> int32_t {
    auto it = t->bytes_to_id.find(std::string(s));
    return it != t->bytes_to_id.end() && p.token_types[it->second] == 1 ? it->second : -1;
  };
  for (int32_t id : normal) {
    const std::string& s = p.tokens[id];
    std::vector<size_t> offs;
    utf8_decode(s, &offs);
    for (size_t k = 1; k + 1 < offs.size(); ++k) {
      int32_t l = normal_id(std::string_view(s).substr(0, offs[k])), r = normal_id(std::string_view(s).substr(offs[k]));
      if (l < 0 || r < 0) continue;
      t->merges.emplace((static_cast<uint64_t>(l) << 32) | static_cast<uint32_t>(r), std::make_pair(rank[id], id));
    }
  }
  return Status::OK();
}

// Checks what sentencepiece itself would refuse or what we cannot encode with.
Status check_spm_parts(const GgufTokenizerParts& p) {
  const size_t n = p.tokens.size();
  if (p.token_types.size() != n)
    return Corruption(Str() << kWhat << ": tokenizer.ggml.token_type has " << p.token_types.size() << " entries for " << n
                            << " tokens (required for a 'llama' vocabulary)");
  if (p.scores.size() != n)
    return Corruption(Str() << kWhat << ": tokenizer.ggml.scores has " << p.scores.size() << " entries for " << n << " tokens");
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(p.scores[i]))
      return Corruption(Str() << kWhat << ": tokenizer.ggml.scores[" << i << "] = " << p.scores[i] << " is not finite");
    if (p.token_types[i] < 1 || p.token_types[i] > 6)
      return Corruption(Str() << kWhat << ": tokenizer.ggml.token_type[" << i << "] = " << p.token_types[i]);
    if (p.tokens[i].empty()) return Corruption(Str() << kWhat << ": tokenizer.ggml.tokens[" << i << "] is empty");
  }
  return Status::OK();
}

StatusOr<std::shared_ptr<TokenizerImpl>> spm_from_gguf(const GgufTokenizerParts& p) {
  RETURN_IF_ERROR(check_spm_parts(p));
  auto t = std::make_shared<TokenizerImpl>();
  t->model = ModelKind::kChars;
  t->byte_fallback = true;
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i), type = p.token_types[i];
    const std::string& s = p.tokens[i];
    if (type == 2 || type == 3 || type == 4) {
      AddedToken at;
      at.id = id;
      at.content = s;
      at.special = type != 4;
      RETURN_IF_ERROR(t->add_added(at, kWhat));
      if (type == 2) t->unk_id = id;
      continue;
    }
    if (type != 5 && t->bytes_to_id.count(s))
      return Corruption(Str() << kWhat << ": tokenizer.ggml.tokens[" << i << "] '" << s << "' duplicates token "
                              << t->bytes_to_id[s]);
    RETURN_IF_ERROR(t->add_vocab(s, id, kWhat));
    if (type == 5) t->bytes_to_id.erase(s);  // kept for decoding only
    if (type == 6 && !is_byte_token(s))
      return Corruption(Str() << kWhat << ": tokenizer.ggml.tokens[" << i << "] '" << s << "' has type 6 (byte) but is not <0xXX>");
  }
  RETURN_IF_ERROR(add_score_merges(p, t.get()));
  if (p.add_space_prefix) t->norm.push_back(norm_step(NormStep::Kind::kPrepend, kSpace));
  t->norm.push_back(norm_step(NormStep::Kind::kReplace, " ", kSpace));
  t->decoders.push_back({DecStep::Kind::kReplace, kSpace, " ", 0, 0, false});
  t->decoders.push_back({DecStep::Kind::kByteFallback, "", "", 0, 0, false});
  t->decoders.push_back({DecStep::Kind::kFuse, "", "", 0, 0, false});
  if (p.add_space_prefix) t->decoders.push_back({DecStep::Kind::kStrip, " ", "", 1, 0, false});
  if (p.add_bos && p.bos_id >= 0) t->prefix.push_back(p.bos_id);
  RETURN_IF_ERROR(t->finish(kWhat));
  for (int b = 0; b < 256; ++b) {
    if (t->fallback_id[b] >= 0 && p.token_types[t->fallback_id[b]] == 6) continue;
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    return Corruption(Str() << kWhat << ": tokenizer.ggml.tokens has no byte token (type 6) " << name
                            << " (SentencePiece byte fallback needs all 256)");
  }
  return t;
}

}  // namespace

StatusOr<std::shared_ptr<TokenizerImpl>> impl_from_gguf(const GgufTokenizerParts& p) {
  if (!p.token_types.empty() && p.token_types.size() != p.tokens.size())
    return Corruption(Str() << kWhat << ": " << p.token_types.size() << " token types for " << p.tokens.size() << " tokens");
  if (p.model == "gpt2") return byte_level_from_gguf(p);
  if (p.model == "llama") return spm_from_gguf(p);
  return Unimplemented(Str() << kWhat << ": tokenizer.ggml.model '" << p.model
                             << "' (supported: 'gpt2' byte-level BPE, 'llama' SentencePiece BPE)");
}

}  // namespace st::tok
