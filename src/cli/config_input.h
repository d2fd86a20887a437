// What config_yaml.cc and config_datasets.cc share: where a value came from (a YAML node or a
// command-line override) and the small parsers every key uses. Internal to cli/ (namespace
// st::cfg, pulled into each file's unnamed namespace).
#pragma once

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/config_words.h"
#include "core/file.h"
#include "core/status.h"

namespace st::cfg {

// ---- where a value came from -----------------------------------------------------------------

// One value to assign: a YAML node (file) or an override string (command line).
struct Input {
  const YAML::Node* node = nullptr;  // null for overrides
  std::string scalar;                // the text (YAML scalar or override value)
  std::string where;                 // "cfg.yaml:12:3" or "--lr=3"
  std::string base_dir;              // for relative paths; "" = keep as written
  std::string what;                  // the YAML file name (for marks of nested nodes)
};

inline std::string mark_str(const std::string& what, const YAML::Mark& m) {
  return Str() << what << ":" << (m.line + 1) << ":" << (m.column + 1);
}

inline Status bad(const Input& in, const std::string& key, const std::string& problem) {
  return InvalidArgument(Str() << in.where << ": key '" << key << "': " << problem);
}

inline std::string lower(std::string s) { return ascii_lower(std::move(s)); }

inline std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + (s.empty() ? std::string("\"\"") : s);
  return out;
}

// ---- scalar parsing --------------------------------------------------------------------------

inline std::optional<bool> parse_bool(const std::string& s) { return parse_bool_word(s); }

template <typename T>
std::optional<T> parse_integer(const std::string& s) {
  T v{};
  const char* b = s.data();
  const char* e = b + s.size();
  if (b != e && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || b == e) return std::nullopt;
  return v;
}

inline std::optional<double> parse_real(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

inline std::string resolve_path(const std::string& p, const std::string& base_dir) {
  if (p.empty()) return p;
  if (p == "~" || p.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    if (home) return std::string(home) + p.substr(1);
  }
  if (p[0] == '/' || base_dir.empty()) return p;
  return std::filesystem::path(path_join(base_dir, p)).lexically_normal().string();
}

// axolotl's chat_template_jinja: a template's text, or the path of a file holding it (relative to
// the config; read now, so the run and its dataset fingerprints see the text).
inline Status read_template_text(const Input& in, const std::string& key, std::string* out) {
  const std::string v = in.scalar;
  const std::string path = resolve_path(v, in.base_dir);
  std::error_code ec;
  if (v.find('\n') == std::string::npos && v.find("{%") == std::string::npos && v.find("{{") == std::string::npos &&
      std::filesystem::is_regular_file(path, ec)) {
    StatusOr<std::string> text = read_file_to_string(path);
    if (!text.ok()) return bad(in, key, text.status().message());
    *out = *text;
    if (out->empty()) return bad(in, key, path + " is empty");
  } else {
    *out = v;  // "" = none
  }
  return Status::OK();
}

// chat_template's names (TrainConfig::chat_template, a dataset entry's chat_template): ours and
// axolotl's two for the tokenizer's own ("" is the tokenizer's too; a *.jinja path also works).
inline const std::vector<std::string>& chat_template_names() {
  static const std::vector<std::string> k = {"",
                                             "chatml",
                                             "qwen3",
                                             "qwen_25",
                                             "llama3",
                                             "mistral",
                                             "mistral_v1",
                                             "mistral_v3",
                                             "mistral_v2v3",
                                             "mistral_tekken",
                                             "mistral_v3_tekken",
                                             "alpaca",
                                             "jinja",
                                             "tokenizer_default",
                                             "tokenizer_default_fallback_chatml"};
  return k;
}

}  // namespace st::cfg
