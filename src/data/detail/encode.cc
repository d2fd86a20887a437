// The encode pipeline: added tokens (raw) -> normalizer -> added tokens (normalized) ->
// pre-tokenizer steps -> BPE per piece (cached). Normalizers and pre-tokenizers run on each
// stretch of text between added tokens separately, as in HF (so Prepend("▁") applies after
// every special token, and Metaspace's prepend_scheme "first" only to the stretch at offset 0).

#include <algorithm>
#include <atomic>

#include "data/detail/split_regex_impl.h"
#include "data/detail/tokenizer_impl.h"
#include "data/detail/unicode.h"

namespace st::tok {
namespace {

constexpr size_t kCacheMaxEntries = 1 << 18;
constexpr size_t kCacheMaxPiece = 128;

// This thread's level of the piece cache (tokenizer_impl.h Note [piece cache]): direct-mapped by
// the piece's hash, for the tokenizer whose uid is `owner` (another tokenizer starts it afresh).
constexpr size_t kThreadSlots = 4096;
struct ThreadCache {
  struct Slot {
    bool used = false;
    std::string piece;
    std::vector<int32_t> ids;
  };
  uint64_t owner = 0;
  std::vector<Slot> slots;
};
thread_local ThreadCache t_cache;

// Rust regex's Unicode \w (HF's single_word check: `\w$` before the match, `^\w` after it):
// Alphabetic, marks, Nd, Pc and the joiners U+200C/D. Oniguruma's bracketed \w is the same set
// less the joiners. Looks at the code point ending at `end` (before) or starting at `begin`.
bool word_cp(uint32_t cp) { return rx::is_word(cp, general_category(cp), false) || cp == 0x200C || cp == 0x200D; }
bool word_before(std::string_view s, size_t end) {
  if (end == 0) return false;
  size_t b = end - 1;
  while (b > 0 && end - b < 4 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80) --b;
  std::vector<uint32_t> cps = utf8_decode(s.substr(b, end - b));
  return !cps.empty() && word_cp(cps.back());
}
bool word_after(std::string_view s, size_t begin) {
  if (begin >= s.size()) return false;
  size_t n = 1;
  while (n < 4 && begin + n < s.size() && (static_cast<uint8_t>(s[begin + n]) & 0xC0) == 0x80) ++n;
  std::vector<uint32_t> cps = utf8_decode(s.substr(begin, n));
  return !cps.empty() && word_cp(cps[0]);
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

// Splits `text` on added tokens whose `normalized` flag equals `normalized`, as HF's
// AddedVocabulary::find_matches: the leftmost-longest non-overlapping matches of all contents
// (aho-corasick), each then checked and widened on its own. So a single_word match that fails
// its check is dropped without a shorter token being tried at its position, and matching
// resumes at the end of the match proper, not of the whitespace rstrip took: a token that starts
// with a space can still match there (its segment overlaps the previous one, as in HF).
void split_added(const TokenizerImpl& tk, bool normalized, std::string_view text, std::vector<Seg>* out) {
  const std::vector<AddedToken>& added = tk.added;  // longest first (finish())
  size_t start_offset = 0;  // first byte not yet emitted
  size_t i = 0;
  while (i < text.size()) {
    if (!tk.added_first[static_cast<uint8_t>(text[i])]) { ++i; continue; }
    const AddedToken* hit = nullptr;
    for (const AddedToken& t : added) {
      if (t.normalized == normalized && t.content[0] == text[i] && text.compare(i, t.content.size(), t.content) == 0) {
        hit = &t;
        break;
      }
    }
    if (!hit) { ++i; continue; }
    size_t b = i, e = i + hit->content.size();
    i = e;  // the next match is searched after this one, whatever becomes of it
    if (hit->single_word && (word_before(text, b) || word_after(text, e))) continue;
    // HF: max(start of the whitespace before, start_offset), i.e. never back into emitted text.
    if (hit->lstrip) b = b <= start_offset ? start_offset : b - ws_len_before(text, b, start_offset);
    if (hit->rstrip) e += ws_len_after(text, e);
    if (b > start_offset) out->push_back({text.substr(start_offset, b - start_offset), -1});
    out->push_back({{}, hit->id});
    start_offset = e;
  }
  if (start_offset < text.size()) out->push_back({text.substr(start_offset), -1});
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
// piece before every replacement char (SplitDelimiterBehavior::MergedWithNext). `lead`: see
// Note [lead]; "first" prepends when the piece starts at input offset 0 (lead > 0).
void metaspace(const PreStep& st, size_t& lead, std::string& p, std::vector<std::string_view>* out) {
  const std::string& rep = st.literal;
  if (p.find(' ') != std::string::npos) {
    lead += static_cast<size_t>(std::count(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(lead), ' ')) * (rep.size() - 1);
    p = replace_all(p, " ", rep);
  }
  bool prepend = st.prepend == PrependScheme::kAlways || (st.prepend == PrependScheme::kFirst && lead > 0);
  if (prepend && p.compare(0, rep.size(), rep) != 0) {
    p = rep + p;
    if (lead > 0) lead += rep.size();
  }
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
// `at0`: set when a match starts at offset 0.
std::string replace_regex(const std::string& s, const SplitPattern& re, const std::string& content, bool* at0) {
  std::vector<size_t> offs;
  const std::vector<uint32_t> cps = utf8_decode(s, &offs);
  std::string r;
  size_t done = 0;
  for (auto [a, b] : re.find_all(cps)) {
    if (a == 0) *at0 = true;
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

// Note [lead]: HF's Metaspace "first" prepends to every piece whose first char maps back to
// offset 0 of the input (offsets_original().0 == 0), and several normalized chars can: a
// Prepend's chars, the decomposition of the first char ("½" -> "1⁄2" under NFKD, each its own
// piece after Digits), a ByteLevel prefix space. `lead` counts the bytes at the start of a string
// that come from input offset 0 (0: none, e.g. after Strip removed a leading " " or a split removed
// the first chars); each step maps it to the bytes it produces from them, and a piece cut at
// offset o keeps lead - o of them. The normalizer steps are applied to the lead bytes alone; when
// that is not a prefix of the full result (NFC composing across the boundary, a match across it)
// the lead ends after the first char where the two differ (HF aligns a composed char with the
// union of its sources, so it starts at 0).
size_t char_len(std::string_view s) {
  size_t n = s.empty() ? 0 : 1;
  while (n < s.size() && n < 4 && (static_cast<uint8_t>(s[n]) & 0xC0) == 0x80) ++n;
  return n;
}

std::string TokenizerImpl::apply_norm(const NormStep& n, const std::string& r) const {
  bool at0 = false;
  switch (n.kind) {
    case NormStep::Kind::kNfc: return tok::nfc(r);
    case NormStep::Kind::kNfd: return tok::nfd(r);
    case NormStep::Kind::kNfkd: return tok::nfkd(r);
    case NormStep::Kind::kNfkc: return tok::nfkc(r);
    case NormStep::Kind::kLowercase: return tok::lowercase(r);
    case NormStep::Kind::kPrepend: return r.empty() ? r : n.text + r;
    case NormStep::Kind::kReplace: return n.regex ? replace_regex(r, *n.regex, n.content, &at0) : replace_all(r, n.text, n.content);
    case NormStep::Kind::kStrip: return strip_space(r, n.left, n.right);
    case NormStep::Kind::kStripAccents: return strip_marks(r);
  }
  return r;
}

std::string TokenizerImpl::normalize(std::string_view s, size_t* lead) const {
  size_t l = char_len(s);
  if (norm.empty() || (norm.size() == 1 && norm[0].kind == NormStep::Kind::kNfc && !lead)) {
    if (lead) *lead = l;
    return norm.empty() ? std::string(s) : tok::nfc(s);
  }
  std::string r(s);
  for (const NormStep& n : norm) {
    if (r.empty()) break;  // every step maps "" to ""
    std::string next = apply_norm(n, r);
    if (lead && l > 0) {
      if (n.kind == NormStep::Kind::kPrepend) {
        l += n.text.size();
      } else if (n.kind == NormStep::Kind::kStrip) {
        const size_t cut = n.left ? r.size() - strip_space(r, true, false).size() : 0;
        l = l > cut ? l - cut : 0;
      } else {
        const std::string head = apply_norm(n, r.substr(0, l));
        if (next.compare(0, head.size(), head) == 0) {
          l = head.size();
        } else {  // composed across the boundary: up to and including the char where they part
          size_t p = 0;
          while (p < head.size() && p < next.size() && head[p] == next[p]) ++p;
          while (p > 0 && p < next.size() && (static_cast<uint8_t>(next[p]) & 0xC0) == 0x80) --p;
          l = p + char_len(std::string_view(next).substr(p));
        }
      }
      l = std::min(l, next.size());
    }
    r.swap(next);
  }
  if (lead) *lead = l;
  return r;
}

void TokenizerImpl::pre_tokenize(std::string_view text, size_t lead, std::vector<std::string>* pieces) const {
  std::vector<std::string> next;
  std::vector<std::string_view> views;
  // Per piece: how many of its leading bytes come from input offset 0 (Note [lead]).
  std::vector<size_t> leads(1, lead), next_leads;
  pieces->assign(1, std::string(text));
  // After a ByteLevel step HF's later steps see the byte-mapped text (Falcon's Digits after
  // ByteLevel: U+00BC '¼', a mapped byte, is a digit there); so map, split, and map back at the end.
  bool mapped = false;
  for (size_t k = 0; k < steps.size(); ++k) {
    const PreStep& st = steps[k];
    const bool last = k + 1 == steps.size();
    if (st.kind == PreStep::Kind::kByteLevel && !st.use_regex && !st.add_prefix_space && (last || mapped)) continue;
    next.clear();
    next_leads.clear();
    for (size_t pi = 0; pi < pieces->size(); ++pi) {
      std::string& p = (*pieces)[pi];
      size_t& l = leads[pi];
      views.clear();
      if (st.kind == PreStep::Kind::kByteLevel && st.add_prefix_space && (p.empty() || p[0] != ' ')) {
        std::string q(1, ' ');  // not p.insert(0, ...): GCC 12 emits a bogus -Wrestrict there
        q += p;
        p.swap(q);
        if (l > 0) ++l;
      }
      switch (st.kind) {
        case PreStep::Kind::kSplitRegex: regex_split(st.regex, st.pattern.get(), p, st.behavior, st.invert, &views); break;
        case PreStep::Kind::kSplitLiteral: literal_split(st.literal, p, st.behavior, st.invert, &views); break;
        case PreStep::Kind::kDigits: digits_split(st.individual_digits, p, &views); break;
        case PreStep::Kind::kByteLevel:
          if (st.use_regex) regex_split(SplitRegex::kGpt2, p, &views);
          else views.push_back(p);
          break;
        case PreStep::Kind::kMetaspace: metaspace(st, l, p, &views); break;
      }
      for (std::string_view v : views) {
        const size_t o = static_cast<size_t>(v.data() - p.data());
        size_t vl = l > o ? std::min(l - o, v.size()) : 0;
        if (st.kind == PreStep::Kind::kByteLevel && !last && !mapped) {
          std::string m;
          size_t ml = 0;
          for (size_t i = 0; i < v.size(); ++i) {
            utf8_append(byte_to_unicode()[static_cast<uint8_t>(v[i])], &m);
            if (i + 1 == vl) ml = m.size();
          }
          vl = ml;
          next.push_back(std::move(m));
        } else {
          next.emplace_back(v);
        }
        next_leads.push_back(vl);
      }
    }
    if (st.kind == PreStep::Kind::kByteLevel && !last) mapped = true;
    pieces->swap(next);
    leads.swap(next_leads);
  }
  if (!mapped) return;
  for (std::string& p : *pieces) {
    std::string raw;
    for (uint32_t c : utf8_decode(p)) raw.push_back(static_cast<char>(unicode_to_byte(c)));
    p.swap(raw);
  }
}

uint64_t TokenizerImpl::next_uid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

void TokenizerImpl::bpe_cached(const std::string& p, std::vector<int32_t>* out) const {
  if (p.size() > kCacheMaxPiece) return bpe(p, out);
  const size_t h = std::hash<std::string>{}(p);
  ThreadCache& tc = t_cache;
  if (tc.owner != uid) {
    tc.owner = uid;
    tc.slots.assign(kThreadSlots, {});
  }
  ThreadCache::Slot& slot = tc.slots[h & (kThreadSlots - 1)];
  if (slot.used && slot.piece == p) {
    out->insert(out->end(), slot.ids.begin(), slot.ids.end());
    return;
  }
  CacheShard& shard = cache[(h >> 48) % kCacheShards];
  const size_t before = out->size();
  bool hit = false;
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(p);
    if (it != shard.map.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      hit = true;
    }
  }
  if (!hit) {
    bpe(p, out);
    std::lock_guard<std::mutex> lock(shard.mu);
    if (shard.map.size() >= kCacheMaxEntries / kCacheShards) shard.map.clear();
    shard.map.emplace(p, std::vector<int32_t>(out->begin() + before, out->end()));
  }
  slot.used = true;
  slot.piece = p;
  slot.ids.assign(out->begin() + before, out->end());
}

void TokenizerImpl::encode(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<Seg> raw;
  split_added(*this, false, text, &raw);
  std::vector<std::string> pieces;
  for (const Seg& s : raw) {
    if (s.id >= 0) { out->push_back(s.id); continue; }
    // Only the first raw segment starts at input offset 0; Note [lead] says how much of it does.
    size_t lead = 0;
    std::string normed = normalize(s.text, track_lead ? &lead : nullptr);
    if (s.text.data() != text.data()) lead = 0;
    std::vector<Seg> segs;
    split_added(*this, true, normed, &segs);
    for (const Seg& seg : segs) {
      if (seg.id >= 0) { out->push_back(seg.id); continue; }
      const size_t o = static_cast<size_t>(seg.text.data() - normed.data());
      pre_tokenize(seg.text, lead > o ? std::min(lead - o, seg.text.size()) : 0, &pieces);
      for (const std::string& p : pieces) bpe_cached(p, out);
    }
  }
}

}  // namespace st::tok
