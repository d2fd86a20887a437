#include "data/detail/unicode.h"

#include <algorithm>

namespace st::tok {
namespace {

struct CatRange {
  uint32_t lo, hi;
  uint8_t v;
};
struct DecompEntry {
  uint32_t cp;
  uint32_t off;
  uint8_t len;
};
struct ComposeEntry {
  uint32_t a, b, c;
};
struct FoldEntry {
  uint32_t cp, fold;
};
struct MultiFoldEntry {
  uint32_t cp, a, b, c;
};

#include "data/detail/unicode_tables.inc"

template <size_t N>
uint8_t range_lookup(const CatRange (&t)[N], uint32_t cp) {
  const CatRange* end = t + N;
  const CatRange* it = std::upper_bound(t, end, cp, [](uint32_t v, const CatRange& r) { return v < r.lo; });
  if (it == t) return 0;
  --it;
  return cp <= it->hi ? it->v : 0;
}

// Hangul syllable arithmetic (Unicode ch. 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint8_t ccc(uint32_t cp) { return cp < 0x300 ? 0 : range_lookup(kCccRanges, cp); }

void decompose(uint32_t cp, std::vector<uint32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out->push_back(kTBase + s % kTCount);
    return;
  }
  const DecompEntry* end = std::end(kDecomp);
  const DecompEntry* it =
      std::lower_bound(std::begin(kDecomp), end, cp, [](const DecompEntry& e, uint32_t v) { return e.cp < v; });
  if (it != end && it->cp == cp) {
    out->insert(out->end(), kDecompData + it->off, kDecompData + it->off + it->len);
  } else {
    out->push_back(cp);
  }
}

// A DecompEntry table's mapping of cp, appended to out; false if cp has none there.
template <size_t N, size_t M>
bool table_map(const DecompEntry (&t)[N], const uint32_t (&data)[M], uint32_t cp, std::vector<uint32_t>* out) {
  const DecompEntry* end = t + N;
  const DecompEntry* it = std::lower_bound(t, end, cp, [](const DecompEntry& e, uint32_t v) { return e.cp < v; });
  if (it == end || it->cp != cp) return false;
  out->insert(out->end(), data + it->off, data + it->off + it->len);
  return true;
}

// Full decomposition, compatibility mappings included when `compat` (NFKD of one code point).
void decompose_any(uint32_t cp, bool compat, std::vector<uint32_t>* out) {
  if (compat && table_map(kKDecomp, kKDecompData, cp, out)) return;
  decompose(cp, out);
}

// Returns the primary composite of (a, b) or 0.
uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const ComposeEntry* end = std::end(kCompose);
  const ComposeEntry* it = std::lower_bound(std::begin(kCompose), end, std::make_pair(a, b),
                                            [](const ComposeEntry& e, const std::pair<uint32_t, uint32_t>& v) {
                                              return e.a != v.first ? e.a < v.first : e.b < v.second;
                                            });
  return (it != end && it->a == a && it->b == b) ? it->c : 0;
}

}  // namespace

Cat category(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return cp < 'a' ? Cat::kLu : Cat::kLl;
    if (cp >= '0' && cp <= '9') return Cat::kN;
    return Cat::kOther;
  }
  return static_cast<Cat>(range_lookup(kCatRanges, cp));
}

Gc general_category(uint32_t cp) { return static_cast<Gc>(range_lookup(kGcRanges, cp)); }

uint32_t simple_fold(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  const FoldEntry* end = std::end(kFold);
  const FoldEntry* it =
      std::lower_bound(std::begin(kFold), end, cp, [](const FoldEntry& e, uint32_t v) { return e.cp < v; });
  return (it != end && it->cp == cp) ? it->fold : cp;
}

std::vector<uint32_t> case_orbit(uint32_t cp) {
  // Inverse of kFold, built once: fold target -> the code points folding to it.
  static const std::vector<FoldEntry> by_target = [] {
    std::vector<FoldEntry> v;
    for (const FoldEntry& e : kFold) v.push_back({e.fold, e.cp});
    std::sort(v.begin(), v.end(), [](const FoldEntry& a, const FoldEntry& b) {
      return a.cp != b.cp ? a.cp < b.cp : a.fold < b.fold;
    });
    return v;
  }();
  const uint32_t f = simple_fold(cp);
  std::vector<uint32_t> out{f};
  auto it = std::lower_bound(by_target.begin(), by_target.end(), f,
                             [](const FoldEntry& e, uint32_t v) { return e.cp < v; });
  for (; it != by_target.end() && it->cp == f; ++it) out.push_back(it->fold);
  return out;
}

bool any_folds_to_several(uint32_t lo, uint32_t hi) {
  const MultiFoldEntry* end = std::end(kMultiFold);
  const MultiFoldEntry* it =
      std::lower_bound(std::begin(kMultiFold), end, lo, [](const MultiFoldEntry& e, uint32_t v) { return e.cp < v; });
  return it != end && it->cp <= hi;
}

bool folds_to_several(uint32_t cp) { return any_folds_to_several(cp, cp); }

std::vector<uint32_t> multi_fold_chars() {
  std::vector<uint32_t> v;
  for (const MultiFoldEntry& e : kMultiFold) v.push_back(e.cp);
  return v;
}

const std::vector<std::vector<uint32_t>>& multi_folds() {
  static const std::vector<std::vector<uint32_t>> all = [] {
    std::vector<std::vector<uint32_t>> v;
    for (const MultiFoldEntry& e : kMultiFold) {
      std::vector<uint32_t> s{simple_fold(e.a), simple_fold(e.b)};
      if (e.c) s.push_back(simple_fold(e.c));
      v.push_back(std::move(s));
    }
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }();
  return all;
}

bool is_space(uint32_t cp) {
  if (cp < 0x80) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::vector<uint32_t> utf8_decode(std::string_view s, std::vector<size_t>* offs) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  if (offs) offs->clear();
  size_t i = 0;
  while (i < s.size()) {
    if (offs) offs->push_back(i);
    uint8_t c = static_cast<uint8_t>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    bool ok = n > 0 && i + n <= s.size();
    for (int k = 1; ok && k < n; ++k) {
      uint8_t d = static_cast<uint8_t>(s[i + k]);
      ok = (d & 0xC0) == 0x80;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Reject overlongs, surrogates and out-of-range values.
    if (ok && ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
               (cp >= 0xD800 && cp <= 0xDFFF)))
      ok = false;
    if (!ok) {
      out.push_back(0xFFFD);
      i += 1;
    } else {
      out.push_back(cp);
      i += n;
    }
  }
  if (offs) offs->push_back(s.size());
  return out;
}

void utf8_append(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool utf8_valid(std::string_view s) {
  std::vector<size_t> offs;
  std::vector<uint32_t> cps = utf8_decode(s, &offs);
  for (size_t i = 0; i < cps.size(); ++i)
    if (cps[i] == 0xFFFD && (offs[i + 1] - offs[i] != 3)) return false;
  return true;
}

namespace {

// NFC (or NFKC / NFD / NFKD) of a region that starts at a starter and ends before an unflagged
// char (for nfc(); the other forms pass the whole text).
void normalize_region(const std::vector<uint32_t>& cps, bool compat, bool compose, std::string* r) {
  // 1. Full canonical (or compatibility) decomposition.
  std::vector<uint32_t> d;
  for (uint32_t cp : cps) decompose_any(cp, compat, &d);
  // 2. Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < d.size();) {
    if (ccc(d[i]) == 0) { ++i; continue; }
    size_t j = i;
    while (j < d.size() && ccc(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j, [](uint32_t a, uint32_t b) { return ccc(a) < ccc(b); });
    i = j;
  }
  if (!compose) {
    for (uint32_t cp : d) utf8_append(cp, r);
    return;
  }
  // 3. Canonical composition: each char composes with the last starter unless blocked.
  std::vector<uint32_t> out;
  out.reserve(d.size());
  long starter = -1;
  int last_ccc = -1;  // -1: the starter is immediately before the current char
  for (uint32_t cp : d) {
    int c = ccc(cp);
    if (starter >= 0) {
      bool blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= c);
      if (!blocked) {
        uint32_t comp = compose_pair(out[starter], cp);
        if (comp) { out[starter] = comp; continue; }
      }
    }
    if (c == 0) { starter = static_cast<long>(out.size()); last_ccc = -1; }
    else { last_ccc = c; }
    out.push_back(cp);
  }
  for (uint32_t cp : out) utf8_append(cp, r);
}

}  // namespace

std::string nfc(std::string_view s) {
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; });
  if (ascii) return std::string(s);
  // Only regions around flagged chars (see kNfcFlag) can change. A region runs from the last
  // unflagged char (a starter that nothing before it composes with) to the next unflagged one.
  std::vector<size_t> offs;
  std::vector<uint32_t> cps = utf8_decode(s, &offs);
  std::string r;
  r.reserve(s.size());
  size_t done = 0;       // code points before `done` are emitted
  size_t last_safe = 0;  // index of the last unflagged code point at or after `done`
  std::vector<uint32_t> region;
  for (size_t i = 0; i < cps.size();) {
    if (cps[i] < 0x300 || !range_lookup(kNfcFlag, cps[i])) { last_safe = i++; continue; }
    size_t start = std::max(done, last_safe);
    size_t end = i;
    while (end < cps.size() && (cps[end] >= 0x300 && range_lookup(kNfcFlag, cps[end]))) ++end;
    r.append(s.substr(offs[done], offs[start] - offs[done]));
    region.assign(cps.begin() + start, cps.begin() + end);
    normalize_region(region, false, true, &r);
    done = end;
    last_safe = end;
    i = end;
  }
  r.append(s.substr(offs[done]));
  return r;
}

static std::string normalize_form(std::string_view s, bool compat, bool compose) {
  if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; })) return std::string(s);
  std::string r;
  r.reserve(s.size());
  normalize_region(utf8_decode(s), compat, compose, &r);
  return r;
}

std::string nfd(std::string_view s) { return normalize_form(s, false, false); }
std::string nfkd(std::string_view s) { return normalize_form(s, true, false); }
std::string nfkc(std::string_view s) { return normalize_form(s, true, true); }

std::string lowercase(std::string_view s) {
  std::string r;
  r.reserve(s.size());
  std::vector<uint32_t> m;
  for (uint32_t cp : utf8_decode(s)) {
    m.clear();
    if (cp < 0x80) {
      r.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    } else if (table_map(kLower, kLowerData, cp, &m)) {
      for (uint32_t c : m) utf8_append(c, &r);
    } else {
      utf8_append(cp, &r);
    }
  }
  return r;
}

}  // namespace st::tok

namespace st::tok {

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  while (i < s.size()) {
    uint8_t c = byte(i);
    if (c < 0x80) { out.push_back(static_cast<char>(c)); ++i; continue; }
    int n = (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    size_t k = 1;
    for (; n && static_cast<int>(k) < n && i + k < s.size(); ++k) {
      uint8_t d = byte(i + k);
      uint8_t lo = 0x80, hi = 0xBF;
      if (k == 1) {  // second byte ranges exclude overlongs, surrogates and > U+10FFFF
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
      }
      if (d < lo || d > hi) break;
    }
    if (n && static_cast<int>(k) == n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += k;  // skip the lead byte and the valid continuation prefix
    }
  }
  return out;
}

}  // namespace st::tok
