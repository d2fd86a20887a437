// Python's str operations the templates call (case mapping, strip, split), on UTF-8 text.
#include "data/detail/jinja_text.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "data/detail/jinja_value.h"  // (fail, the limits, utf8_next)

namespace st::jinja {
namespace {

std::vector<uint32_t> decode(const std::string& s) {
  charge_work(4 * s.size());  // (decoding and mapping a character at a time is slow work)
  std::vector<uint32_t> out;
  for (size_t k = 0; k < s.size();) {
    const auto c = static_cast<unsigned char>(s[k]);
    size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (k + n > s.size()) n = 1;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t j = 1; j < n; ++j) cp = (cp << 6) | (static_cast<unsigned char>(s[k + j]) & 0x3f);
    out.push_back(cp);
    k += n;
  }
  return out;
}

void encode(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Scripts without case: their code points map to themselves.
bool caseless(uint32_t c) {
  return (c >= 0x0590 && c <= 0x0DFF) || (c >= 0x0E00 && c <= 0x0E7F) || (c >= 0x2000 && c <= 0x215F) ||
         (c >= 0x2190 && c <= 0x23FF) || (c >= 0x2500 && c <= 0x27BF) || (c >= 0x3000 && c <= 0x9FFF) ||
         (c >= 0xAC00 && c <= 0xD7AF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE00 && c <= 0xFE0F) ||
         (c >= 0xFF01 && c <= 0xFF20) || (c >= 0x1F000 && c <= 0x1FAFF) || (c >= 0xA0 && c <= 0xBF && c != 0xAA && c != 0xB5 && c != 0xBA) ||
         c == 0xD7 || c == 0xF7;
}

// Upper / lower pairs: ASCII, Latin-1, Greek, Cyrillic. 0 = no simple mapping known here.
uint32_t simple_map(uint32_t c, bool upper) {
  auto in = [&](uint32_t lo, uint32_t hi) { return c >= lo && c <= hi; };
  if (upper) {
    if (in('a', 'z') || (in(0xE0, 0xFE) && c != 0xF7) || (in(0x3B1, 0x3C9) && c != 0x3C2) || in(0x430, 0x44F)) return c - 0x20;
    if (in(0x450, 0x45F)) return c - 0x50;
    if (c == 0xFF) return 0x178;
    if (c == 0xB5) return 0x39C;
    if (c == 0x3C2) return 0x3A3;
    if (c == 0x3AC) return 0x386;
    if (in(0x3AD, 0x3AF)) return c - 0x25;
    if (c == 0x3CC) return 0x38C;
    if (in(0x3CD, 0x3CE)) return c - 0x3F;
  } else {
    if (in('A', 'Z') || (in(0xC0, 0xDE) && c != 0xD7) || (in(0x391, 0x3A9) && c != 0x3A2 && c != 0x3A3) || in(0x410, 0x42F)) return c + 0x20;
    if (in(0x400, 0x40F)) return c + 0x50;
    if (c == 0x178) return 0xFF;
    if (c == 0x386) return 0x3AC;
    if (in(0x388, 0x38A)) return c + 0x25;
    if (c == 0x38C) return 0x3CC;
    if (in(0x38E, 0x38F)) return c + 0x3F;
  }
  return 0;
}

// Whether c is a cased letter of the given case (for islower / isupper and title).
bool is_case(uint32_t c, bool upper) { return simple_map(c, !upper) != 0 || (!upper && c == 0xDF); }

void map_one(uint32_t c, bool upper, std::string* out) {
  if (c < 0x80 && !std::isalpha(static_cast<int>(c))) {
    *out += static_cast<char>(c);
    return;
  }
  if (upper && c == 0xDF) {
    *out += "SS";  // Python: 'ß'.upper() == 'SS'
    return;
  }
  if (const uint32_t m = simple_map(c, upper)) return encode(m, out);
  if (simple_map(c, !upper) || caseless(c) || (upper ? c == 0xDF : false)) return encode(c, out);
  if (!upper && c == 0xDF) return encode(c, out);
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", c);
  fail(std::string("case mapping of ") + buf + " is not supported (only ASCII, Latin-1, Greek and Cyrillic letters)");
}

}  // namespace

std::string py_case(const std::string& s, bool upper) {
  std::string out;
  for (uint32_t c : decode(s)) map_one(c, upper, &out);
  return out;
}

std::string py_capitalize(const std::string& s) {
  std::string out;
  const std::vector<uint32_t> cps = decode(s);
  for (size_t k = 0; k < cps.size(); ++k) map_one(cps[k], k == 0, &out);
  return out;
}

// jinja2's title filter: each chunk after a run of whitespace, '-', '(', '{', '[' or '<' gets its
// first character upper-cased and the rest lower-cased.
std::string jinja_title(const std::string& s) {
  std::string out;
  bool start = true;
  for (uint32_t c : decode(s)) {
    const bool sep = c == ' ' || (c >= '\t' && c <= '\r') || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      encode(c, &out);
      start = true;
      continue;
    }
    map_one(c, start, &out);
    start = false;
  }
  return out;
}

// Python's str.title(): a letter after a non-letter is upper-cased, others lower-cased.
std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (uint32_t c : decode(s)) {
    const bool cased = is_case(c, true) || is_case(c, false);
    map_one(c, !prev_cased, &out);
    prev_cased = cased;
  }
  return out;
}

bool py_is_case(const std::string& s, bool upper) {
  bool any = false;
  for (uint32_t c : decode(s)) {
    if (is_case(c, !upper)) return false;
    if (is_case(c, upper)) any = true;
    else if (c >= 0x80 && !caseless(c)) fail("islower / isupper of non-ASCII letters outside Latin-1, Greek and Cyrillic is not supported");
  }
  return any;
}

bool py_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right) {
  charge_work(s.size());
  if (!chars) {
    size_t b = 0, e = s.size();
    if (left) while (b < e && py_space(s[b])) ++b;
    if (right) while (e > b && py_space(s[e - 1])) --e;
    return s.substr(b, e - b);
  }
  // The characters to strip: one-byte ones in a table, others in a set (no splitting of s: a
  // 60 MB string is 60M strings).
  bool byte_in[256] = {};
  std::set<std::string> wide;
  for (size_t k = 0; k < chars->size(); k = utf8_next(*chars, k)) {
    if (utf8_next(*chars, k) == k + 1) byte_in[static_cast<unsigned char>((*chars)[k])] = true;
    else wide.insert(chars->substr(k, utf8_next(*chars, k) - k));
  }
  auto strip_at = [&](size_t k) {
    const size_t n = utf8_next(s, k) - k;
    return n == 1 ? byte_in[static_cast<unsigned char>(s[k])] : wide.count(s.substr(k, n)) > 0;
  };
  charge_work(chars->size());
  size_t b = 0;
  if (left) while (b < s.size() && strip_at(b)) b = utf8_next(s, b);
  size_t e = right ? b : s.size();  // right: the end of the last character kept
  if (right)
    for (size_t k = b; k < s.size(); k = utf8_next(s, k))
      if (!strip_at(k)) e = utf8_next(s, k);
  return s.substr(b, e - b);
}

std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit) {
  charge_work(s.size());
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("split(): empty separator");
    size_t pos = 0;
    for (size_t f; (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) && (f = s.find(*sep, pos)) != std::string::npos;) {
      check_items(out.size() + 2);  // (64 MB of ',' would be 64M strings, 2 GB)
      out.push_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.push_back(s.substr(pos));
    return out;
  }
  size_t k = 0;
  while (k < s.size()) {
    while (k < s.size() && py_space(s[k])) ++k;
    if (k == s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = s.size();
      while (e > k && py_space(s[e - 1])) --e;
      out.push_back(s.substr(k, e - k));
      break;
    }
    size_t e = k;
    while (e < s.size() && !py_space(s[e])) ++e;
    check_items(out.size() + 1);
    out.push_back(s.substr(k, e - k));
    k = e;
  }
  return out;
}

// Python's str.splitlines() (the line breaks of ASCII and the three of Unicode).
std::vector<std::string> py_splitlines(const std::string& s) {
  std::vector<std::string> out;
  for_each_line(s, [&](const std::string& line) {
    check_items(out.size() + 1);  // (64 MB of '\n' would be 64M strings, 2 GB)
    out.push_back(line);
  });
  return out;
}

void for_each_line(const std::string& s, const std::function<void(const std::string&)>& f) {
  charge_work(s.size());
  std::string line;
  for (size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    size_t skip = 0;
    if (c == '\r' && k + 1 < s.size() && s[k + 1] == '\n') skip = 1;
    else if (s.compare(k, 2, "\xc2\x85") == 0) skip = 1;
    else if (s.compare(k, 3, "\xe2\x80\xa8") == 0 || s.compare(k, 3, "\xe2\x80\xa9") == 0) skip = 2;
    if (skip || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= '\x1c' && c <= '\x1e')) {
      f(line);
      line.clear();
      k += skip;
    } else {
      line += c;
    }
  }
  if (!line.empty()) f(line);
}

// (The size is checked before each append: 'b' * 1000 with '' replaced by 60 MB is 60 GB.)
std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  charge_work(s.size());
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    int64_t n = 0;
    for (size_t k = 0; k <= s.size(); k = utf8_next(s, k)) {
      const size_t e = k < s.size() ? utf8_next(s, k) : k;
      const bool insert = count < 0 || n++ < count;
      check_size(out.size() + (insert ? to.size() : 0) + (e - k));
      if (insert) out += to;
      out.append(s, k, e - k);
      if (k == s.size()) break;
    }
    return out;
  }
  size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t f = s.find(from, pos);
    if (f == std::string::npos) break;
    check_size(out.size() + (f - pos) + to.size());
    out.append(s, pos, f - pos).append(to);
    pos = f + from.size();
  }
  check_size(out.size() + (s.size() - pos));
  return out.append(s, pos, std::string::npos);
}

}  // namespace st::jinja
