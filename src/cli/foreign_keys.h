// Other tools' config keys (axolotl, HF Trainer) in a streamtune YAML: an axolotl config should
// run here with what it means kept, not fail on its first wandb_project line.
//
// Note [foreign keys]: each known foreign key has one of three fates --
//   * no effect here (logging, hubs, attention/kernel backends, distribution launchers, gradient
//     checkpointing: the planner decides recompute, and the bits do not depend on it): accepted,
//     and the banner lists them so the user sees they did nothing;
//   * what we do anyway, or a mapping onto our keys (bf16 -> dtype, optimizer: adamw_torch,
//     save_strategy: epoch -> saves_per_epoch 1, ...): applied;
//   * a change to the training we do not build (group_by_length: true, lora_modules_to_save, new
//     special tokens, ...): refused by name.
// Any other key of axolotl's schema (axolotl_keys.inc, generated from it) left at its default --
// null, empty, false or an empty list -- is accepted and listed in the banner as left at its
// default; set to anything else it is refused by name as an axolotl setting not built here
// (rather than as an unknown key with a misleading suggestion). A key outside both stays an
// unknown key (a typo of ours gets its suggestion).
#pragma once

#include <string>

#include "core/status.h"
#include "train/train_config.h"

namespace st {

struct ForeignValue {
  std::string scalar;            // the scalar text ("" for a list / mapping / null)
  bool is_null = false;          // `key:` or `key: null` / `~`
  bool is_collection = false;    // a list or mapping
  bool empty_collection = false; // [] or {}
  std::string where;             // "cfg.yaml:12:1" or "--key=v", for messages
};

// True when `key` is a foreign key this table knows; then *st holds the outcome (OK, or an error
// naming the key and value) and `cfg` carries the effect (a note in cfg.notes for ignored keys).
bool apply_foreign_key(const std::string& key, const ForeignValue& v, TrainConfig& cfg, Status* st);

// The key whose "set twice" check a foreign key shares ("bf16" and "fp16" set dtype), else itself.
std::string foreign_key_slot(const std::string& key);

}  // namespace st
