#include "io/hf_cache.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <yaml-cpp/yaml.h>

#include "core/file.h"

namespace st {
namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

bool hub_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

bool is_sep(char c) { return c == '-' || c == '_' || c == '.' || c == ' '; }

// Does a file or directory name name split `word`: equal to it, starting with it followed by a
// separator, ending with a separator and it (a directory), or holding it between separators.
bool names_split(const std::string& name, const std::string& word) {
  for (size_t at = name.find(word); at != std::string::npos; at = name.find(word, at + 1)) {
    const size_t end = at + word.size();
    const bool before = at == 0 || is_sep(name[at - 1]);
    const bool after = end == name.size() || is_sep(name[end]);
    if (before && after) return true;
  }
  return false;
}

bool path_names_any(const fs::path& rel, const std::vector<std::string>& words) {
  for (const fs::path& part : rel) {
    std::string s = part.string();
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const std::string& w : words)
      if (names_split(s, w)) return true;
  }
  return false;
}

}  // namespace

std::string dataset_builder(const std::string& filename) {
  if (filename.ends_with(".arrow")) return "arrow";  // not .arrow.gz
  std::string name = filename;
  if (name.size() > 3 && name.ends_with(".gz")) name.resize(name.size() - 3);
  if (name.ends_with(".jsonl") || name.ends_with(".json")) return "json";
  if (name.ends_with(".csv") || name.ends_with(".tsv")) return "csv";
  if (name.ends_with(".parquet")) return "parquet";
  if (name.ends_with(".txt")) return "text";
  return {};
}

bool dataset_file_name(const std::string& filename) {
  // datasets' own metadata files are JSON too.
  static const std::set<std::string> kMeta = {"dataset_infos.json", "dataset_info.json", "dataset_dict.json", "state.json"};
  std::string name = filename;
  if (name.size() > 3 && name.ends_with(".gz")) name.resize(name.size() - 3);
  const std::string builder = dataset_builder(filename);
  return !kMeta.count(name) && !builder.empty() && builder != "text";
}

std::string hf_hub_cache_dir() {
  if (std::string d = env("HF_HUB_CACHE"); !d.empty()) return d;
  if (std::string d = env("HUGGINGFACE_HUB_CACHE"); !d.empty()) return d;  // huggingface_hub's older name
  if (std::string d = env("HF_HOME"); !d.empty()) return path_join(d, "hub");
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return path_join(path_join(d, "huggingface"), "hub");
  return path_join(env("HOME"), ".cache/huggingface/hub");  // no HOME: relative to the working directory
}

bool looks_like_hub_id(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size() || s.find('/', slash + 1) != std::string::npos)
    return false;
  if (s[0] == '.' || s[slash + 1] == '.' || s.size() > 200) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '/' || hub_char(c); });
}

StatusOr<std::string> hf_cache_snapshot(const std::string& id, HubRepoKind kind, const std::string& revision) {
  const char* type = kind == HubRepoKind::kModel ? "model" : "dataset";
  const std::string hint = Str() << " (`huggingface-cli download " << (kind == HubRepoKind::kDataset ? "--repo-type dataset " : "")
                                 << (revision.empty() ? "" : "--revision " + revision + " ") << id
                                 << "` fetches it there; or give a local path)";
  if (!looks_like_hub_id(id)) return InvalidArgument(Str() << "'" << id << "' is not a Hugging Face " << type << " id");
  const size_t slash = id.find('/');
  const std::string folder = Str() << type << "s--" << id.substr(0, slash) << "--" << id.substr(slash + 1);
  const std::string repo = path_join(hf_hub_cache_dir(), folder), snaps = path_join(repo, "snapshots");
  if (!is_directory(snaps))
    return NotFound(Str() << "'" << id << "' is not a local path, and the Hugging Face cache has no " << type << " "
                          << id << " (looked for " << snaps << ")" << hint);
  if (!revision.empty()) {  // a branch or tag (refs/<name>) or a commit (snapshots/<hash>)
    const bool safe = revision.find("..") == std::string::npos && revision[0] != '/' && revision.size() < 256 &&
                      std::all_of(revision.begin(), revision.end(), [](char c) { return c == '/' || hub_char(c); });
    if (!safe) return InvalidArgument(Str() << "revision '" << revision << "' of " << id << " is not a branch, tag or commit name");
    std::string commit = revision;
    if (file_exists(path_join(repo, "refs/" + revision))) {
      ASSIGN_OR_RETURN(commit, read_file_to_string(path_join(repo, "refs/" + revision)));
      commit = trim(commit);
    }
    const std::string snap = path_join(snaps, commit);
    if (!commit.empty() && commit.find('/') == std::string::npos && is_directory(snap)) return snap;
    return NotFound(Str() << "revision '" << revision << "' of " << type << " " << id
                          << " is not in the Hugging Face cache (no refs/" << revision << " naming a snapshot, no snapshots/"
                          << revision << " in " << repo << ")" << hint);
  }
  if (file_exists(path_join(repo, "refs/main"))) {
    ASSIGN_OR_RETURN(std::string commit, read_file_to_string(path_join(repo, "refs/main")));
    commit = trim(commit);
    const std::string snap = path_join(snaps, commit);
    if (!commit.empty() && commit.find('/') == std::string::npos && is_directory(snap)) return snap;
  }
  std::vector<std::string> all;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(snaps, ec))
    if (e.is_directory(ec)) all.push_back(e.path().filename().string());
  std::sort(all.begin(), all.end());
  if (all.size() == 1) return path_join(snaps, all[0]);
  if (all.empty()) return NotFound(Str() << repo << ": no snapshot of " << id << " in the Hugging Face cache" << hint);
  Str list;
  for (const std::string& s : all) list << " " << s;
  return InvalidArgument(Str() << repo << ": " << all.size() << " snapshots of " << id
                               << " and no refs/main to choose one:" << list.str() << " -- give the snapshot's path");
}

namespace {

// README.md's YAML front matter, if any ("---\n...\n---"); a card whose front matter does not
// parse is refused (its configs would decide, and cannot be read).
StatusOr<std::optional<YAML::Node>> readme_front_matter(const std::string& snapshot) {
  const std::string path = path_join(snapshot, "README.md");
  if (!file_exists(path)) return std::optional<YAML::Node>();
  ASSIGN_OR_RETURN(std::string text, read_file_to_string(path));
  if (!text.starts_with("---")) return std::optional<YAML::Node>();
  const size_t end = text.find("\n---", 3);
  if (end == std::string::npos) return std::optional<YAML::Node>();
  try {
    YAML::Node n = YAML::Load(text.substr(3, end - 3));
    if (n.IsMap()) return std::optional<YAML::Node>(n);
    if (n.IsNull()) return std::optional<YAML::Node>();
    return InvalidArgument(Str() << path << ": the card's front matter is not a mapping -- give a data file's path");
  } catch (const YAML::Exception& e) {
    return InvalidArgument(Str() << path << ": the card's front matter does not parse (line " << e.mark.line + 1
                                 << "): " << e.msg << " -- give a data file's path");
  }
}

// A data_files value's globs: a string or a list of strings.
std::vector<std::string> globs_of(const YAML::Node& n) {
  std::vector<std::string> g;
  if (n.IsScalar()) g.push_back(n.Scalar());
  else if (n.IsSequence())
    for (const auto& e : n)
      if (e.IsScalar()) g.push_back(e.Scalar());
  return g;
}

// The globs of `split` in a config's data_files, and every split it names (for the message).
std::vector<std::string> split_globs(const YAML::Node& df, const std::string& split, std::vector<std::string>* splits) {
  if (df.IsScalar() || (df.IsSequence() && df.size() > 0 && df[0].IsScalar())) {  // train only
    splits->push_back("train");
    return split == "train" ? globs_of(df) : std::vector<std::string>{};
  }
  std::vector<std::string> out;
  if (df.IsSequence()) {
    for (const auto& e : df) {
      if (!e.IsMap() || !e["split"] || !e["path"]) continue;
      const std::string s = e["split"].as<std::string>("");
      splits->push_back(s);
      if (s == split) out = globs_of(e["path"]);
    }
  } else if (df.IsMap()) {
    for (const auto& kv : df) {
      const std::string s = kv.first.as<std::string>("");
      splits->push_back(s);
      if (s == split) out = globs_of(kv.second);
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  Str s;
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  return s.str();
}

// Split keywords of `datasets`' default data-file patterns, by split.
std::vector<std::string> split_words(const std::string& split) {
  if (split == "train") return {"train", "training"};
  if (split == "validation") return {"validation", "valid", "dev", "val"};
  if (split == "test") return {"test", "testing", "eval", "evaluation"};
  return {split};
}

}  // namespace

// A data_files glob (datasets / fsspec): '*' and '?' within one path component, '**' across them
// ("**/" zero or more whole directories). A card is hostile input, so this is a table over
// (pattern token, path position), never backtracking: O(pattern x path) time and memory.
bool hub_glob_match(std::string_view pat, std::string_view path) {
  enum Kind : uint8_t { kChar, kOne, kStar, kAny, kDirs };
  struct Tok {
    Kind kind;
    char c;
  };
  if (pat.size() > 4096 || path.size() > 4096) return false;
  std::vector<Tok> toks;
  for (size_t i = 0; i < pat.size(); ++i) {
    if (pat.compare(i, 3, "**/") == 0) toks.push_back({kDirs, 0}), i += 2;
    else if (pat.compare(i, 2, "**") == 0) toks.push_back({kAny, 0}), ++i;
    else if (pat[i] == '*') toks.push_back({kStar, 0});
    else if (pat[i] == '?') toks.push_back({kOne, 0});
    else toks.push_back({kChar, pat[i]});
  }
  const size_t n = path.size(), w = n + 1;
  std::vector<uint8_t> m((toks.size() + 1) * w, 0);  // m[i * w + j]: toks[i..] match path[j..]
  m[toks.size() * w + n] = 1;
  for (size_t i = toks.size(); i-- > 0;) {
    uint8_t* row = &m[i * w];
    const uint8_t* next = &m[(i + 1) * w];
    bool dirs = false;  // kDirs: some '/' at k >= j with next[k + 1]
    for (size_t j = w; j-- > 0;) {
      const bool more = j < n;
      switch (toks[i].kind) {
        case kChar: row[j] = more && path[j] == toks[i].c && next[j + 1]; break;
        case kOne: row[j] = more && path[j] != '/' && next[j + 1]; break;
        case kStar: row[j] = next[j] || (more && path[j] != '/' && row[j + 1]); break;
        case kAny: row[j] = next[j] || (more && row[j + 1]); break;
        case kDirs:
          dirs = dirs || (more && path[j] == '/' && next[j + 1]);
          row[j] = next[j] || dirs;
          break;
      }
    }
  }
  return m[0] != 0;
}

namespace {

// The files of `split` by the card's configs (Note [Hub dataset splits]). A node of an unexpected
// shape anywhere in them is refused, naming the card.
StatusOr<std::vector<fs::path>> card_split_files(const YAML::Node& configs, const std::vector<fs::path>& all,
                                                 const std::string& snapshot, const std::string& split,
                                                 const std::string& config_name) {
  std::vector<fs::path> out;
  try {
    // The card's configs decide, as in `datasets`: name, else the default one, else the only one.
    int pick = -1, at = 0;
    std::vector<std::string> names;
    for (const auto& c : configs) {
      const std::string n = c["config_name"] ? c["config_name"].as<std::string>("") : "default";
      names.push_back(n);
      const bool dflt = c["default"] && c["default"].as<bool>(false);
      if (config_name.empty() ? (dflt || (n == "default" && pick < 0)) : n == config_name) pick = at;
      ++at;
    }
    if (pick < 0 && config_name.empty() && configs.size() == 1) pick = 0;
    if (pick < 0)
      return InvalidArgument(Str() << snapshot << "/README.md: "
                                   << (config_name.empty() ? "several configs and no default; name one (name: ...): "
                                                           : "no config '" + config_name + "' (configs: ")
                                   << joined(names) << (config_name.empty() ? "" : ")"));
    const YAML::Node cfg = configs[pick];
    std::vector<std::string> splits;
    const std::vector<std::string> globs = cfg["data_files"] ? split_globs(cfg["data_files"], split, &splits) : std::vector<std::string>{};
    if (globs.empty())
      return InvalidArgument(Str() << snapshot << "/README.md: config '" << names[static_cast<size_t>(pick)]
                                   << "' has no split '" << split << "' (splits: " << joined(splits) << ")");
    for (const fs::path& f : all)
      for (const std::string& g : globs)
        if (hub_glob_match(g, f.generic_string())) {
          out.push_back(f);
          break;
        }
    if (out.empty())
      return InvalidArgument(Str() << snapshot << ": no file matches split '" << split << "' (" << joined(globs)
                                   << ") -- a partial download?");
  } catch (const YAML::Exception& e) {
    return InvalidArgument(Str() << snapshot << "/README.md: the card's configs are not as `datasets` writes them: " << e.msg);
  }
  return out;
}

}  // namespace

namespace {

// The regular files under `root` (links followed), relative to it, sorted; hidden entries (.git,
// .cache, .gitattributes) skipped with what is under them. At most kMaxListed: a pattern rooted
// at a home directory is refused, not walked for minutes.
constexpr size_t kMaxListed = 200000;

StatusOr<std::vector<fs::path>> list_tree(const std::string& root, const std::string& what) {
  std::vector<fs::path> all;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().starts_with(".")) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) all.push_back(fs::relative(it->path(), root, ec));
    if (all.size() > kMaxListed)
      return InvalidArgument(Str() << what << ": more than " << kMaxListed << " files under " << root
                                   << "; give a narrower path or pattern");
  }
  if (ec) return InvalidArgument(Str() << what << ": cannot list " << root << ": " << ec.message());
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace

StatusOr<std::vector<std::string>> resolve_data_files(const std::string& root, const std::vector<std::string>& patterns,
                                                      const std::string& what) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& f) {
    if (seen.insert(f).second) out.push_back(f);
  };
  for (const std::string& p : patterns) {
    if (p.empty()) return InvalidArgument(Str() << what << ": an empty data_files entry");
    const fs::path pp(p);
    // The leading components without '*' or '?': the directory the pattern is walked from.
    fs::path base = pp.is_absolute() ? fs::path("/") : fs::path(root), rest;
    bool glob = false;
    for (const fs::path& part : pp.relative_path()) {
      glob = glob || part.string().find_first_of("*?") != std::string::npos;
      (glob ? rest : base) /= part;
    }
    std::error_code ec;
    if (!glob) {
      if (!fs::is_regular_file(base, ec))
        return NotFound(Str() << what << ": data_files '" << p << "': no such file (" << base.string() << ")");
      add(base.lexically_normal().string());
      continue;
    }
    if (!fs::is_directory(base, ec))
      return NotFound(Str() << what << ": data_files '" << p << "': no directory " << base.string());
    ASSIGN_OR_RETURN(std::vector<fs::path> all, list_tree(base.string(), Str() << what << ": data_files '" << p << "'"));
    // Text files only when the pattern asks for them (a repo's LICENSE.txt is not data).
    const bool txt = dataset_builder(p) == "text";
    size_t matched = 0;
    for (const fs::path& f : all)
      if ((dataset_file_name(f.filename().string()) || txt) && hub_glob_match(rest.generic_string(), f.generic_string())) {
        add((base / f).lexically_normal().string());
        ++matched;
      }
    if (matched == 0)
      return NotFound(Str() << what << ": data_files '" << p << "': no dataset file (.jsonl, .json, .parquet, .csv, .tsv, "
                                       "or .gz of them, .arrow) matches under "
                            << base.string());
  }
  return out;
}

// `datasets` builds a split with one builder (load.py infer_module_for_data_files_list): every
// suffix of every name counted, the most common known one wins (draws: .parquet, .arrow, .jsonl,
// .json, .csv, then the alphabetically last), and only that builder's files are read.
std::vector<std::string> one_builder_files(std::vector<std::string> files) {
  auto lower = [](std::string e) {
    for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return e;
  };
  std::map<std::string, size_t> counts;
  for (const std::string& f : files) {
    const std::string n = fs::path(f).filename().string();
    for (size_t dot = n.find('.'); dot != std::string::npos; dot = n.find('.', dot + 1))
      ++counts[lower(n.substr(dot, n.find('.', dot + 1) - dot))];
  }
  auto rank = [](const std::pair<std::string, size_t>& c) {
    const std::string& e = c.first;
    return std::make_tuple(c.second, e == ".parquet", e == ".arrow", e == ".jsonl", e == ".json", e == ".csv", e);
  };
  std::vector<std::pair<std::string, size_t>> order(counts.begin(), counts.end());
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) { return rank(a) > rank(b); });
  std::string builder;
  for (const auto& c : order)
    if (c.first != ".gz" && !(builder = dataset_builder("f" + c.first)).empty()) break;
  if (!builder.empty())
    std::erase_if(files, [&](const std::string& f) { return dataset_builder(lower(fs::path(f).filename().string())) != builder; });
  return files;
}

StatusOr<std::vector<std::string>> hub_dataset_split_files(const std::string& snapshot, const std::string& split,
                                                           const std::string& config_name) {
  ASSIGN_OR_RETURN(std::vector<fs::path> all, list_tree(snapshot, snapshot));
  std::vector<fs::path> chosen;
  ASSIGN_OR_RETURN(std::optional<YAML::Node> fm, readme_front_matter(snapshot));
  const YAML::Node configs = fm ? (*fm)["configs"] : YAML::Node();
  if (configs && configs.IsSequence() && configs.size() > 0) {
    ASSIGN_OR_RETURN(chosen, card_split_files(configs, all, snapshot, split, config_name));
  } else {
    if (!config_name.empty())
      return InvalidArgument(Str() << snapshot << ": name '" << config_name << "' given, and the dataset card lists no configs");
    std::vector<fs::path> files;
    for (const fs::path& f : all)
      if (dataset_file_name(f.filename().string())) files.push_back(f);
    if (files.empty())
      return InvalidArgument(Str() << snapshot << ": no data files (.parquet, .jsonl, .json, .csv, .tsv, or .gz of them, .arrow) in the dataset snapshot");
    bool split_named = false;
    for (const fs::path& f : files) {
      const bool mine = path_names_any(f, split_words(split));
      split_named = split_named || mine || path_names_any(f, split_words("train")) ||
                    path_names_any(f, split_words("validation")) || path_names_any(f, split_words("test"));
      if (mine) chosen.push_back(f);
    }
    if (!split_named && split == "train") chosen = files;  // no split anywhere: every file is train
    if (chosen.empty())
      return InvalidArgument(Str() << snapshot << ": no file of split '" << split << "' -- give a file's path");
    std::set<std::string> dirs, tops;
    for (const fs::path& f : chosen) {
      dirs.insert(f.parent_path().generic_string());
      tops.insert(f.begin()->string());
    }
    const bool split_dirs = std::all_of(tops.begin(), tops.end(), [&](const std::string& t) {
      return t == "data" || path_names_any(fs::path(t), split_words(split));
    });
    if (dirs.size() > 1 && tops.size() > 1 && !split_dirs) {  // sibling configs (main/, socratic/)
      Str list;
      for (const std::string& d : dirs) list << " " << path_join(snapshot, d);
      return InvalidArgument(Str() << snapshot << ": files of split '" << split
                                   << "' in several configs of the dataset; give one directory as path:" << list.str());
    }
  }
  {
    std::vector<std::string> names;
    for (const fs::path& f : chosen) names.push_back(f.generic_string());
    names = one_builder_files(std::move(names));
    chosen.assign(names.begin(), names.end());
  }
  std::vector<std::string> out;
  for (const fs::path& f : chosen) {
    if (!dataset_file_name(f.filename().string()))
      return Unimplemented(Str() << path_join(snapshot, f.generic_string())
                                 << ": not a file streamtune reads (.parquet, .jsonl, .json, .csv, .tsv, or .gz of them, .arrow)");
    out.push_back(path_join(snapshot, f.generic_string()));
  }
  return out;
}

StatusOr<std::string> resolve_model_path(const std::string& given, std::string* note) {
  std::error_code ec;
  if (given.empty() || fs::exists(given, ec) || !looks_like_hub_id(given) || given.ends_with(".gguf")) return given;
  ASSIGN_OR_RETURN(std::string snap, hf_cache_snapshot(given, HubRepoKind::kModel));
  if (note) *note = Str() << given << ": the Hugging Face cache's snapshot " << snap;
  return snap;
}

}  // namespace st
