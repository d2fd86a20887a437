// ResidentLayerSource: every layer blob copied to backend memory once (one allocation of
// L x layout.bytes); acquire returns views, release is a no-op. The reference the streamed
// source (stream/) must match bit for bit (design.md §1).
//
// As a tripwire it checks that acquire() follows the visit sequence given to begin_step().
// Not thread-safe; owned by the trainer; the backend must outlive it.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/weights.h"

namespace st {

class ResidentLayerSource : public LayerSource {
 public:
  // Packs each layer from `ck` (converted to layout.dtype) through a host staging blob.
  static StatusOr<std::unique_ptr<ResidentLayerSource>> from_checkpoint(Backend* be, const ModelConfig& c,
                                                                        const LayerLayout& layout,
                                                                        const Checkpoint& ck);
  // From host blobs already in `layout` (one per layer, each layout.bytes), copied now.
  static StatusOr<std::unique_ptr<ResidentLayerSource>> from_host_blobs(Backend* be, const LayerLayout& layout,
                                                                        const std::vector<const void*>& blobs);
  ~ResidentLayerSource() override;

  void begin_step(const std::vector<int>& visits) override;
  LayerWeights acquire(int layer) override;
  void release(int layer) override;
  void end_step() override;

  const LayerLayout& layout() const { return layout_; }
  // Device pointer of layer l's blob.
  void* blob(int l) const { return static_cast<char*>(base_) + static_cast<size_t>(l) * layout_.bytes; }

 private:
  ResidentLayerSource(Backend* be, LayerLayout layout, int num_layers)
      : be_(be), layout_(std::move(layout)), num_layers_(num_layers) {}
  Status allocate();

  Backend* be_;
  LayerLayout layout_;
  int num_layers_;
  void* base_ = nullptr;
  std::vector<int> visits_;
  size_t next_visit_ = 0;
  int held_ = -1;
};

}  // namespace st
