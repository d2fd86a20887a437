// Python's str operations on UTF-8 text for the Jinja interpreter (jinja_text.cc). Case mapping
// covers ASCII, Latin-1, Greek and Cyrillic letters and passes caseless scripts (CJK, Hangul,
// Arabic, Hebrew, Indic, emoji, punctuation) through; any other code point fails (jinja::Error)
// rather than be left unmapped where Python would map it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace st::jinja {

std::string py_case(const std::string& s, bool upper);  // str.upper() / str.lower()
std::string py_capitalize(const std::string& s);
std::string py_title(const std::string& s);    // str.title()
std::string jinja_title(const std::string& s);  // the `title` filter (jinja2's own rule)
bool py_is_case(const std::string& s, bool upper);  // str.isupper() / str.islower()
bool py_space(char c);
// str.strip / lstrip / rstrip; chars null: whitespace (ASCII).
std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit); sep null: runs of whitespace. maxsplit < 0: no limit.
std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> py_splitlines(const std::string& s);
// Calls f with each line py_splitlines gives, without keeping them (indent of a 1M-line text).
void for_each_line(const std::string& s, const std::function<void(const std::string&)>& f);
std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);

}  // namespace st::jinja
