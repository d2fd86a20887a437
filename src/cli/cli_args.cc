#include "cli/cli_args.h"

#include <charconv>
#include <cstdio>

#include "cli/suggest.h"
#include "io/hf_cache.h"

namespace st {

std::string ParsedArgs::get(const std::string& name, const std::string& def) const {
  auto it = flags.find(name);
  return it == flags.end() ? def : it->second;
}

StatusOr<ParsedArgs> parse_flags(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs) {
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a.rfind("--", 0) != 0) {
      out.positional.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const FlagSpec* spec = nullptr;
    std::vector<std::string> names;
    for (const FlagSpec& s : specs) {
      names.push_back(s.name);
      if (name == s.name) spec = &s;
    }
    if (!spec) return InvalidArgument(Str() << "unknown option '--" << name << "'" << did_you_mean(name, names, "--"));
    if (out.has(name)) return InvalidArgument(Str() << "option '--" << name << "' given twice");
    if (!spec->takes_value) {
      if (eq != std::string::npos) return InvalidArgument(Str() << "option '--" << name << "' takes no value");
      out.flags[name] = "true";
    } else if (eq != std::string::npos) {
      out.flags[name] = a.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      out.flags[name] = args[++i];
    } else {
      return InvalidArgument(Str() << "option '--" << name << "' needs a value");
    }
  }
  return out;
}

namespace {

// *path resolved by resolve_model_path; the note (labelled "--flag " when from a flag) and any
// error go to stderr, and false means the command should exit 1.
bool resolve_noted(std::string* path, const std::string& label) {
  std::string note;
  StatusOr<std::string> r = resolve_model_path(*path, &note);
  if (!r.ok()) {
    std::fprintf(stderr, "streamtune: error: %s\n", r.status().message().c_str());
    return false;
  }
  if (!note.empty()) std::fprintf(stderr, "note: %s%s\n", label.c_str(), note.c_str());
  *path = *r;
  return true;
}

}  // namespace

bool resolve_model_arg(std::string* path) { return resolve_noted(path, ""); }

bool resolve_model_flag(ParsedArgs* a) {
  for (const char* flag : {"model", "adapter"})
    if (a->has(flag) && !resolve_noted(&a->flags[flag], std::string("--") + flag + " ")) return false;
  return true;
}

StatusOr<uint64_t> flag_u64(const ParsedArgs& a, const std::string& name, uint64_t def) {
  if (!a.has(name)) return def;
  const std::string s = a.get(name);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) {
    return InvalidArgument(Str() << "option '--" << name << "': expected a non-negative integer, got '" << s << "'");
  }
  return v;
}

}  // namespace st
