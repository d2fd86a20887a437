// Named model configurations: tiny test models and the real shapes of the supported families,
// so `streamtune init-model --preset NAME` can write a random checkpoint of any size without a
// download (benchmarks, planner tests).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "io/hf_config.h"

namespace st {

struct ModelPresetInfo {
  std::string name;     // "qwen2.5-7b"
  std::string summary;  // "Qwen/Qwen2.5-7B shapes (7.6B params)"
};

// The config for `name` (case-insensitive), or NotFound listing the known presets.
StatusOr<ModelConfig> model_preset(const std::string& name);
// All presets, in a stable order (tiny ones first).
std::vector<ModelPresetInfo> model_preset_list();

}  // namespace st
