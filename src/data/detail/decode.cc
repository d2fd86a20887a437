// Decoding, as HF's Tokenizer::decode: ids -> token strings (added tokens included, `special`
// ones dropped on request) -> the decoder chain -> concatenation. Each decoder maps the list of
// strings to a new list (HF decode_chain). Without a decoder HF joins the tokens with " ".
#include <string>
#include <vector>

#include "data/detail/tokenizer_impl.h"
#include "data/detail/unicode.h"

namespace st::tok {
namespace {

using Tokens = std::vector<std::string>;

std::string replace_all(const std::string& s, const std::string& pat, const std::string& with) {
  std::string r;
  size_t i = 0;
  for (size_t j; (j = s.find(pat, i)) != std::string::npos; i = j + pat.size()) {
    r.append(s, i, j - i);
    r += with;
  }
  r.append(s, i);
  return r;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "<0xXX>" -> XX. The two chars are parsed like Rust's u8::from_str_radix(_, 16): hex digits of
// either case, or '+' and one digit.
int byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  if (t[3] == '+' && lo >= 0) return lo;
  return hi >= 0 && lo >= 0 ? hi * 16 + lo : -1;
}

// ByteFallback: runs of byte tokens become their UTF-8 string, or one U+FFFD per byte when the
// run is not valid UTF-8 as a whole.
Tokens fallback_bytes(Tokens in) {
  Tokens out;
  std::string run;
  size_t run_len = 0;
  auto flush = [&] {
    if (run_len == 0) return;
    if (utf8_valid(run)) out.push_back(run);
    else for (size_t i = 0; i < run_len; ++i) out.emplace_back("\xEF\xBF\xBD");
    run.clear();
    run_len = 0;
  };
  for (std::string& t : in) {
    int b = byte_token(t);
    if (b >= 0) {
      run.push_back(static_cast<char>(b));
      ++run_len;
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  return out;
}

// Strip: up to `start` leading and `stop` trailing copies of one char, per token.
void strip(const DecStep& d, Tokens& toks) {
  const uint32_t c = utf8_decode(d.text)[0];
  for (std::string& t : toks) {
    std::vector<size_t> offs;
    std::vector<uint32_t> cps = utf8_decode(t, &offs);
    size_t b = 0, e = cps.size();
    while (b < d.start && b < e && cps[b] == c) ++b;
    for (size_t i = 0; i < d.stop && e > b && cps[e - 1] == c; ++i) --e;
    t = t.substr(offs[b], offs[e] - offs[b]);
  }
}

// Metaspace decoder: the replacement char becomes ' ', except in token 0 where it vanishes
// when the encoder prepends (prepend_scheme always/first).
void metaspace(const DecStep& d, Tokens& toks) {
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = replace_all(toks[i], d.text, i == 0 && d.drop_first ? "" : " ");
}

// ByteLevel decoder: each token becomes the bytes its chars stand for in GPT-2's byte map, or its
// own UTF-8 when some char is outside the map (added tokens like "a b" or "😀"); all of them are
// concatenated and read as lossy UTF-8 once, so bytes of neighbouring tokens can join.
void byte_level(Tokens& toks) {
  std::string bytes, mapped;
  for (const std::string& t : toks) {
    mapped.clear();
    bool all = true;
    for (uint32_t cp : utf8_decode(t)) {
      int b = unicode_to_byte(cp);
      if (b < 0) { all = false; break; }
      mapped.push_back(static_cast<char>(b));
    }
    bytes += all ? mapped : t;
  }
  toks.assign(1, utf8_lossy(bytes));
}

}  // namespace

std::string TokenizerImpl::decode_chars(std::span<const int32_t> ids, bool skip_special) const {
  Tokens toks;
  toks.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_str.size() || id_to_str[id].empty()) continue;
    if (skip_special && id_special[id]) continue;
    toks.push_back(id_to_str[id]);
  }
  for (const DecStep& d : decoders) {
    switch (d.kind) {
      case DecStep::Kind::kReplace:
        for (std::string& t : toks) t = replace_all(t, d.text, d.content);
        break;
      case DecStep::Kind::kByteFallback: toks = fallback_bytes(std::move(toks)); break;
      case DecStep::Kind::kFuse: {
        std::string all;
        for (const std::string& t : toks) all += t;
        toks.assign(1, std::move(all));
        break;
      }
      case DecStep::Kind::kStrip: strip(d, toks); break;
      case DecStep::Kind::kMetaspace: metaspace(d, toks); break;
      case DecStep::Kind::kByteLevel: byte_level(toks); break;
    }
  }
  // A byte-level vocabulary built from GGUF parts has no decoder list: ByteLevel is implied.
  if (model == ModelKind::kByteLevel && decoders.empty() && !decoder_null) byte_level(toks);
  std::string out;
  for (size_t i = 0; i < toks.size(); ++i) {
    if (i > 0 && decoder_null) out += ' ';
    out += toks[i];
  }
  return out;
}

}  // namespace st::tok
