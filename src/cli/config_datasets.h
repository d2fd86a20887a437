// The `datasets:` / `eval_datasets:` lists of a train config (cli/config_yaml.h): each entry a
// path or {path, type, ...} with axolotl's dataset keys, resolved here (Hub ids in the local
// cache, saved DatasetDicts, data_files) into DatasetSpecs; and back to YAML for --dry-run.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "cli/config_input.h"
#include "core/status.h"
#include "train/train_config.h"

namespace st {

// The list under `key` (in.node: its YAML node; an override string is refused: lists are set in
// the file) into *dst.
Status set_datasets(const cfg::Input& in, const std::string& key, std::vector<DatasetSpec>& dst);

// rl: dpo (train/preference_loss.h): every dataset's type becomes a preference type (axolotl's
// chat_template and chat_template.default are `preference` there) or is refused; without rl a
// preference type is refused (it has no single sequence to train on).
Status resolve_rl_dataset_types(TrainConfig& cfg);

// The list as set_datasets reads it back (a resolved Hub split or data_files as data_files).
void emit_dataset_list(YAML::Emitter& out, const std::vector<DatasetSpec>& list);

}  // namespace st
