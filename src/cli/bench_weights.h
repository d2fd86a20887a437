// Where `streamtune bench` gets its frozen base weights: a LayerStore either filled with random
// values in memory (--preset: no files written) or opened from a real checkpoint through the
// normal path (--model: shard -> RamStore / DiskStore).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "io/hf_config.h"
#include "store/layer_store.h"

namespace st {

// SyntheticStore: every layer blob and the extras blob in ONE host arena filled with random
// values (norm weights = 1), then pinned (fill-then-register, as RamStore does). The values
// depend only on (seed, byte offset), not on the thread count. Layer l's blob is at a 4096-aligned
// stride, like RamStore, so copies see the same alignment as a real run.
class SyntheticStore : public LayerStore {
 public:
  // `threads` 0 = all hardware threads. ResourceExhausted if the arena cannot be allocated.
  static StatusOr<std::unique_ptr<SyntheticStore>> create(Backend* be, const ModelConfig& c, DType dtype,
                                                          const std::string& source, bool pin, uint64_t seed,
                                                          int threads = 0, BaseQuant quant = BaseQuant::kNone);
  ~SyntheticStore() override;
  SyntheticStore(const SyntheticStore&) = delete;
  SyntheticStore& operator=(const SyntheticStore&) = delete;

  const StoreManifest& manifest() const override { return m_; }
  const std::string& dir() const override { return dir_; }
  const char* tier() const override { return "ram"; }
  size_t host_bytes() const override { return arena_bytes_; }
  Status load_layer(int layer, void* dst) override;
  Status load_extras(void* dst) override;

  const void* layer_host(int layer) const { return arena_ + static_cast<size_t>(layer) * stride_; }
  bool pinned() const { return pinned_; }
  double fill_seconds() const { return fill_seconds_; }

 private:
  SyntheticStore(Backend* be, StoreManifest m) : be_(be), m_(std::move(m)) {}
  void fill(uint64_t seed, int threads);
  void fill_code12_twin(uint64_t seed, int threads);

  Backend* be_;
  StoreManifest m_;
  std::string dir_ = "(memory)";
  char* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  size_t stride_ = 0;
  size_t extras_offset_ = 0;
  bool pinned_ = false;
  double fill_seconds_ = 0;
};

// Fills `n` bytes of `dst` (a blob of `dtype` elements) with small random values in
// +-[2^-13, 2^-5): finite, roughly std 0.01, so activations stay finite. Deterministic in
// (seed, first_element). Exposed for the test.
void fill_random_weights(void* dst, DType dtype, size_t n_elements, uint64_t seed, uint64_t first_element);

struct BenchWeights {
  std::unique_ptr<LayerStore> store;
  ModelConfig config;
  std::string source;     // "preset:qwen2.5-0.5b" | "hf:/path"
  std::string store_dir;  // sharded store directory (--model), "" for presets
  double setup_seconds = 0;  // fill (preset) or shard + load (model)
};

// --preset NAME: a SyntheticStore of the preset's shapes. pin: register with the backend.
// quant kNF4: random codes with a fixed block scale (timing only, like the random bf16 weights).
StatusOr<BenchWeights> synthetic_weights(Backend* be, const std::string& preset, DType dtype, BaseQuant quant,
                                         bool pin, uint64_t seed);
// --model PATH: shard (cached) to `dtype`, then open the tier: "disk" -> DiskStore, otherwise
// RamStore (pinned unless tier is "off").
StatusOr<BenchWeights> checkpoint_weights(Backend* be, const std::string& path, DType dtype, BaseQuant quant,
                                          const std::string& tier);


}  // namespace st
