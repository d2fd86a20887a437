// Models and datasets named by their Hugging Face Hub id ("Qwen/Qwen2.5-0.5B", as axolotl configs
// name them) found in the local Hugging Face cache, so a config written for the Hub trains offline
// on what `huggingface-cli download` / transformers / datasets already fetched.
//
// Note [Hugging Face cache]: huggingface_hub keeps repo `org/name` of type T under
//   $HF_HUB_CACHE (else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
//   ~/.cache/huggingface/hub) / {T}s--org--name /
//       refs/main            the commit the default branch pointed to when last downloaded
//       snapshots/<commit>/  the repo's files at that commit (links into blobs/)
// A name is resolved only when it is not a local path and has the shape of a Hub id (one '/',
// both parts of letters, digits, '-', '_', '.'), to refs/main's snapshot, else to the only
// snapshot; several snapshots and no refs/main is refused (naming them), as is a snapshot without
// the files a model or a dataset needs. Nothing is ever downloaded.
//
// Note [Hub dataset splits]: which files of a dataset snapshot are the split a config asks for
// (axolotl's `split`, default train; `name`: the config). Where the dataset card (README.md's YAML
// front matter) lists `configs`, they decide, as in `datasets`: the named config, else the one
// marked default, else the one named "default", else the only one; its `data_files` (a glob, a
// list, a list of {split, path}, or {split: path}) give the split's files, '*' within a path
// component and '**' across them. Without configs, `datasets`' default patterns: a file or
// directory name equal to a split word, starting with it followed by one of "-_. ", or holding
// it between such separators names that split (train: train, training; validation: validation,
// valid, dev, val; test: test, testing, eval, evaluation; any other split: its own name); with
// no split named anywhere every data file (.parquet, .jsonl, .json, .csv, .tsv, optionally .gz;
// .arrow) is train.
// Files of a split spread over sibling directories that do not name it (configs such as main/
// and socratic/) are not mixed: that is refused, naming the directories. Files are read in path
// order; a chosen file of another format (.txt, .xlsx) is refused by name. Files of several
// formats (train.csv beside train.jsonl) give one format's only, chosen as `datasets` chooses the
// split's one builder (the most common extension; draws: parquet, arrow, jsonl, json, csv).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace st {

enum class HubRepoKind { kModel, kDataset };

std::string hf_hub_cache_dir();
// "org/name" with the characters the Hub allows.
bool looks_like_hub_id(const std::string& s);
// The snapshot directory of `id` in the cache (Note [Hugging Face cache]); NotFound saying where
// it looked and how to download it.
// `revision` (axolotl's dataset key): a branch or tag the cache has under refs/, or a commit
// hash under snapshots/; "" = refs/main as above.
StatusOr<std::string> hf_cache_snapshot(const std::string& id, HubRepoKind kind, const std::string& revision = "");
// The data files of `split` under a dataset snapshot, in path order (Note [Hub dataset splits]);
// config_name: the dataset card's config (axolotl's `name`), "" for its default.
StatusOr<std::vector<std::string>> hub_dataset_split_files(const std::string& snapshot, const std::string& split,
                                                           const std::string& config_name);

// A dataset entry's data_files (axolotl / `datasets`): each pattern a file path, or a glob ('*',
// '?' within a component, '**' across them) matching the dataset files under it; relative ones
// from `root` (a snapshot, a directory, the config's directory); a glob takes .txt files only when
// it ends in .txt (or .txt.gz). In pattern order, each glob's
// matches in path order, a file once. NotFound for a path that is not there or a glob matching
// nothing, naming the pattern and `what`.
StatusOr<std::vector<std::string>> resolve_data_files(const std::string& root, const std::vector<std::string>& patterns,
                                                      const std::string& what);

// The files of one format among `files` (paths), as `datasets` chooses a split's one builder: the
// most common extension (json/jsonl and csv/tsv each one builder; draws: parquet, arrow, jsonl,
// json, csv). Order kept.
std::vector<std::string> one_builder_files(std::vector<std::string> files);

// The `datasets` builder that reads a file by its name: "json" (.json, .jsonl), "csv" (.csv, .tsv),
// "parquet", "arrow", "text" (.txt); each but arrow also gzipped; "" for any other name.
std::string dataset_builder(const std::string& filename);

// A data file by its name: .parquet, .jsonl, .json, .csv, .tsv, optionally .gz, or .arrow (not `datasets`' metadata JSON).
bool dataset_file_name(const std::string& filename);

// A dataset card's data_files glob against a snapshot-relative path ('/'-separated): '*' and '?'
// within a component, '**' across them, "**/" zero or more directories; linear-time in each.
bool hub_glob_match(std::string_view pattern, std::string_view path);

// A --model argument or base_model as given: itself when it exists; else, for a Hub id the cache
// holds, its snapshot directory (with *note saying so); else NotFound naming both places.
StatusOr<std::string> resolve_model_path(const std::string& given, std::string* note = nullptr);

}  // namespace st
