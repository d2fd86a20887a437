// Shared by the merge tests: a CPU backend, temp paths, and a random adapter (non-zero B) for a
// config.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "backend/backend.h"
#include "core/check.h"
#include "model/lora.h"

namespace st {
namespace {

std::unique_ptr<Backend> cpu() {
  auto b = make_backend(DeviceKind::kCpu);
  CHECK(b.ok());
  return std::move(b).value();
}

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("st_merge_" + name + "_" + std::to_string(::getpid()))).string();
}

LoraConfig some_targets() {
  LoraConfig lc;
  lc.r = 4;
  lc.alpha = 12;
  for (LoraTarget t : {LoraTarget::kQ, LoraTarget::kV, LoraTarget::kO, LoraTarget::kDown}) {
    lc.targets[static_cast<int>(t)] = true;
  }
  return lc;
}

// Writes a random (non-zero B) adapter for `c` into dir.
void write_adapter(const ModelConfig& c, const LoraConfig& lc, const std::string& dir) {
  auto be = cpu();
  auto lora = Lora::create(be.get(), c, lc);
  CHECK(lora.ok());
  (*lora)->init(11);
  std::vector<float> p = (*lora)->params_to_host();
  std::mt19937_64 rng(4);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  for (int l = 0; l < c.num_layers; ++l)
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const auto tg = static_cast<LoraTarget>(t);
      if (!lc.has(tg)) continue;
      const int64_t out = lora_target_dims(c, tg).second;
      for (int64_t i = 0; i < out * lc.r; ++i) p[(*lora)->offset_b(l, tg) + i] = nd(rng);
    }
  (*lora)->params_from_host(p);
  Status s = (*lora)->save_peft(dir, "base");
  CHECK(s.ok(), s.message());
}

}  // namespace
}  // namespace st
