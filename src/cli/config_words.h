// The words a config value is read from, shared by the key table (config_yaml.cc) and the other
// tools' keys (foreign_keys.cc): ASCII case folding and YAML-style booleans.
#pragma once

#include <cctype>
#include <optional>
#include <string>

namespace st {

inline std::string ascii_lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// true/yes/on/1 and false/no/off/0, any case; nullopt for anything else.
inline std::optional<bool> parse_bool_word(const std::string& s) {
  const std::string l = ascii_lower(s);
  if (l == "true" || l == "yes" || l == "on" || l == "1") return true;
  if (l == "false" || l == "no" || l == "off" || l == "0") return false;
  return std::nullopt;
}

}  // namespace st
