// Training config from YAML (axolotl-style: keys are TrainConfig field names) plus
// `--key=value` command-line overrides, validated before anything runs.
//
// Errors name the file and line (malformed YAML: line and column), the key, and what was
// expected; an unknown key gets the closest known key as a suggestion. LoRA variants we do not
// implement (DoRA, rsLoRA, VeRA, PiSSA/OLoRA init, ...) are refused by name with Unimplemented
// instead of being silently ignored. Relative paths in the YAML resolve against the YAML file's
// directory; relative paths in overrides stay relative to the working directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "train/train_config.h"

namespace st {

// Parses YAML text. `what` names the source in messages (the file path); relative paths are
// resolved against `base_dir` ("" = leave them as written). Does not check required keys.
StatusOr<TrainConfig> parse_train_config_yaml(const std::string& yaml_text, const std::string& what,
                                              const std::string& base_dir);

// Applies one command-line override: `arg` is "--key=value" (or "--flag" for a bool = true).
// Dashes in the key are read as underscores. List keys other than lora_target_modules (comma
// form) cannot be overridden.
Status apply_train_override(TrainConfig& cfg, const std::string& arg);

// Cross-key checks after all sources are applied (required keys present, ...).
Status validate_train_config(const TrainConfig& cfg);

// Reads `path`, applies `overrides` in order, validates.
StatusOr<TrainConfig> load_train_config(const std::string& path, const std::vector<std::string>& overrides);

// The config as YAML, every key, in the order of train_config_keys(); parses back to `cfg`.
std::string train_config_to_yaml(const TrainConfig& cfg);

// Every accepted key (the TrainConfig field names).
std::vector<std::string> train_config_keys();


}  // namespace st
