// The encode pipeline: added tokens (raw) -> normalizer -> added tokens (normalized) ->
// pre-tokenizer steps -> BPE per piece (cached). Normalizers and pre-tokenizers run on each
// stretch of text between added tokens separately, as in HF (so Prepend("▁") applies after
// every special token, and Metaspace's prepend_scheme "first" only to the stretch at offset 0).
#include <cctype>

#include "data/detail/tokenizer_impl.h"
#include "data/detail/unicode.h"

namespace st::tok {
namespace {

constexpr size_t kCacheMaxEntries = 1 << 18;
constexpr size_t kCacheMaxPiece = 128;

bool is_word_byte(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  return c >= 0x80 || std::isalnum(c) || c == '_';
}

// Byte length of the Unicode whitespace run ending at `end` (not crossing `floor`).
size_t ws_len_before(std::string_view s, size_t end, size_t floor) {
  std::vector<size_t> offs;
  std::vector<uint32_t> cps = utf8_decode(s.substr(floor, end - floor), &offs);
  size_t k = cps.size();
  while (k > 0 && is_space(cps[k - 1])) --k;
  return end - (floor + offs[k]);
}

// Byte length of the Unicode whitespace run starting at `begin`.
size_t ws_len_after(std::string_view s, size_t begin) {
  size_t e = begin;
  while (e < s.size()) {
    size_t n = 1;
    while (n < 4 && e + n < s.size() && (static_cast<uint8_t>(s[e + n]) & 0xC0) == 0x80) ++n;
    std::vector<uint32_t> cp = utf8_decode(s.substr(e, n));
    if (cp.size() != 1 || !is_space(cp[0])) break;
    e += n;
  }
  return e - begin;
}

// A piece of text or an added token id (id >= 0).
struct Seg {
  std::string_view text;
  int32_t id = -1;
};

// Splits `text` on added tokens whose `normalized` flag equals `normalized` (leftmost-longest).
void split_added(const TokenizerImpl& tk, bool normalized, std::string_view text, std::vector<Seg>* out) {
  const std::vector<AddedToken>& added = tk.added;
  size_t start = 0;  // first byte not yet emitted
  size_t i = 0;
  while (i < text.size()) {
    if (!tk.added_first[static_cast<uint8_t>(text[i])]) { ++i; continue; }
    const AddedToken* hit = nullptr;
    for (const AddedToken& t : added) {
      if (t.normalized != normalized || t.content[0] != text[i] || text.compare(i, t.content.size(), t.content) != 0)
        continue;
      size_t e = i + t.content.size();
      if (t.single_word && ((i > 0 && is_word_byte(text, i - 1)) || (e < text.size() && is_word_byte(text, e))))
        continue;
      hit = &t;
      break;
    }
    if (!hit) { ++i; continue; }
    size_t b = i, e = i + hit->content.size();
    if (hit->lstrip) b -= ws_len_before(text, b, start);
    if (hit->rstrip) e += ws_len_after(text, e);
    if (b > start) out->push_back({text.substr(start, b - start), -1});
    out->push_back({{}, hit->id});
    start = i = e;
  }
  if (start < text.size()) out->push_back({text.substr(start), -1});
}

// HF Replace with a String pattern: every non-overlapping occurrence, left to right.
std::string replace_all(std::string_view s, const std::string& pat, const std::string& with) {
  std::string r;
  size_t i = 0;
  for (size_t j; (j = s.find(pat, i)) != std::string_view::npos; i = j + pat.size()) {
    r.append(s.substr(i, j - i));
    r += with;
  }
  r.append(s.substr(i));
  return r;
}

// HF Metaspace pre-tokenizer on one piece: ' ' -> replacement, the prepend, then (split) a new
// piece before every replacement char (SplitDelimiterBehavior::MergedWithNext).
void metaspace(const PreStep& st, bool at_start, std::string& p, std::vector<std::string_view>* out) {
  const std::string& rep = st.literal;
  if (p.find(' ') != std::string::npos) p = replace_all(p, " ", rep);
  bool prepend = st.prepend == PrependScheme::kAlways || (st.prepend == PrependScheme::kFirst && at_start);
  if (prepend && p.compare(0, rep.size(), rep) != 0) p = rep + p;
  if (!st.split) { out->push_back(p); return; }
  std::string_view v(p);
  size_t begin = 0;
  for (size_t j = v.find(rep, 1); j != std::string_view::npos; j = v.find(rep, j + rep.size())) {
    if (j > begin) out->push_back(v.substr(begin, j - begin));
    begin = j;
  }
  if (begin < v.size()) out->push_back(v.substr(begin));
}

// HF's Replace normalizer with a Regex: every match (onig's find_iter) becomes `content`.
std::string replace_regex(const std::string& s, const SplitPattern& re, const std::string& content) {
  std::vector<size_t> offs;
  const std::vector<uint32_t> cps = utf8_decode(s, &offs);
  std::string r;
  size_t done = 0;
  for (auto [a, b] : re.find_all(cps)) {
    r.append(s, done, offs[a] - done);
    r += content;
    done = offs[b];
  }
  r.append(s, done, std::string::npos);
  return r;
}

// HF's Strip normalizer: White_Space code points off either end.
std::string strip_space(const std::string& s, bool left, bool right) {
  std::vector<size_t> offs;
  const std::vector<uint32_t> cps = utf8_decode(s, &offs);
  size_t a = 0, b = cps.size();
  while (left && a < b && is_space(cps[a])) ++a;
  while (right && b > a && is_space(cps[b - 1])) --b;
  return s.substr(offs[a], offs[b] - offs[a]);
}

// HF's StripAccents: combining marks dropped (run it after NFD / NFKD to take accents off).
std::string strip_marks(const std::string& s) {
  std::vector<size_t> offs;
  const std::vector<uint32_t> cps = utf8_decode(s, &offs);
  std::string r;
  for (size_t i = 0; i < cps.size(); ++i) {
    const Gc g = general_category(cps[i]);
    if (g != Gc::kMn && g != Gc::kMc && g != Gc::kMe) r.append(s, offs[i], offs[i + 1] - offs[i]);
  }
  return r;
}

}  // namespace

std::string TokenizerImpl::normalize(std::string_view s) const {
  if (norm.empty()) return std::string(s);
  if (norm.size() == 1 && norm[0].kind == NormStep::Kind::kNfc) return tok::nfc(s);
  std::string r(s);
  for (const NormStep& n : norm) {
    switch (n.kind) {
      case NormStep::Kind::kNfc: r = tok::nfc(r); break;
      case NormStep::Kind::kNfd: r = tok::nfd(r); break;
      case NormStep::Kind::kNfkd: r = tok::nfkd(r); break;
      case NormStep::Kind::kNfkc: r = tok::nfkc(r); break;
      case NormStep::Kind::kLowercase: r = tok::lowercase(r); break;
      case NormStep::Kind::kPrepend: if (!r.empty()) r = n.text + r; break;
      case NormStep::Kind::kReplace: r = n.regex ? replace_regex(r, *n.regex, n.content) : replace_all(r, n.text, n.content); break;
      case NormStep::Kind::kStrip: r = strip_space(r, n.left, n.right); break;
      case NormStep::Kind::kStripAccents: r = strip_marks(r); break;
    }
  }
  return r;
}

void TokenizerImpl::pre_tokenize(std::string_view text, bool at_start, std::vector<std::string>* pieces) const {
  std::vector<std::string> next;
  std::vector<std::string_view> views;
  pieces->assign(1, std::string(text));
  // After a ByteLevel step HF's later steps see the byte-mapped text (Falcon's Digits after
  // ByteLevel: U+00BC '¼', a mapped byte, is a digit there); so map, split, and map back at the end.
  bool mapped = false;
  for (size_t k = 0; k < steps.size(); ++k) {
    const PreStep& st = steps[k];
    const bool last = k + 1 == steps.size();
    if (st.kind == PreStep::Kind::kByteLevel && !st.use_regex && !st.add_prefix_space && (last || mapped)) continue;
    next.clear();
    for (std::string& p : *pieces) {
      views.clear();
      if (st.kind == PreStep::Kind::kByteLevel && st.add_prefix_space && (p.empty() || p[0] != ' ')) {
        std::string q(1, ' ');  // not p.insert(0, ...): GCC 12 emits a bogus -Wrestrict there
        q += p;
        p.swap(q);
      }
      switch (st.kind) {
        case PreStep::Kind::kSplitRegex: regex_split(st.regex, st.pattern.get(), p, st.behavior, st.invert, &views); break;
        case PreStep::Kind::kSplitLiteral: literal_split(st.literal, p, st.behavior, st.invert, &views); break;
        case PreStep::Kind::kDigits: digits_split(st.individual_digits, p, &views); break;
        case PreStep::Kind::kByteLevel:
          if (st.use_regex) regex_split(SplitRegex::kGpt2, p, &views);
          else views.push_back(p);
          break;
        case PreStep::Kind::kMetaspace: metaspace(st, at_start && &p == &(*pieces)[0], p, &views); break;
      }
      for (std::string_view v : views) {
        if (st.kind == PreStep::Kind::kByteLevel && !last && !mapped) {
          std::string m;
          for (unsigned char b : v) utf8_append(byte_to_unicode()[b], &m);
          next.push_back(std::move(m));
        } else {
          next.emplace_back(v);
        }
      }
    }
    if (st.kind == PreStep::Kind::kByteLevel && !last) mapped = true;
    pieces->swap(next);
  }
  if (!mapped) return;
  for (std::string& p : *pieces) {
    std::string raw;
    for (uint32_t c : utf8_decode(p)) raw.push_back(static_cast<char>(unicode_to_byte(c)));
    p.swap(raw);
  }
}

void TokenizerImpl::encode(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<Seg> raw;
  split_added(*this, false, text, &raw);
  std::vector<std::string> pieces;
  for (const Seg& s : raw) {
    if (s.id >= 0) { out->push_back(s.id); continue; }
    std::string normed = normalize(s.text);
    std::vector<Seg> segs;
    split_added(*this, true, normed, &segs);
    for (const Seg& seg : segs) {
      if (seg.id >= 0) { out->push_back(seg.id); continue; }
      // Metaspace "first": only the text that starts at offset 0 of the input.
      const bool at_start = s.text.data() == text.data() && seg.text.data() == normed.data();
      pre_tokenize(seg.text, at_start, &pieces);
      for (const std::string& p : pieces) {
        if (p.size() > kCacheMaxPiece) { bpe(p, out); continue; }
        {
          std::lock_guard<std::mutex> lock(cache_mu);
          auto it = cache.find(p);
          if (it != cache.end()) { out->insert(out->end(), it->second.begin(), it->second.end()); continue; }
        }
        size_t before = out->size();
        bpe(p, out);
        std::lock_guard<std::mutex> lock(cache_mu);
        if (cache.size() >= kCacheMaxEntries) cache.clear();
        cache.emplace(p, std::vector<int32_t>(out->begin() + before, out->end()));
      }
    }
  }
}

}  // namespace st::tok
