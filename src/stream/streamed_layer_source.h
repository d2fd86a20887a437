// StreamedLayerSource: model/weights.h's LayerSource over a LayerStore tier (RAM or disk).
//
// Layers the planner keeps resident are copied to one device buffer at construction and served
// from it; the rest go through a LayerBufferPool + Prefetcher. Same bytes, same views, same
// kernels as ResidentLayerSource: losses must be bit-identical (design.md §1).
//
// Note [resident code12 layers]: with a code12 store (model/weights.h Note [code12 base layout])
// the resident layers are decoded once, at construction, into the dense bf16 layout: their visits
// then decode nothing (a resident visit would otherwise pay ~3.5 bytes of device traffic a weight,
// 8-18% of a resident step: bench/RESULTS.md session 17), while streamed layers keep moving the
// coded bytes. The decode is lossless, so the views hold the same weights either way; the planner
// counts resident layers at their dense size (stream/planner.h).
//
// Errors: LayerSource::acquire cannot return a Status. A failed load (IOError/Corruption naming
// the file) is sticky: acquire then returns views of the slot (stale bytes), nothing blocks, and
// status() / end_step_status() report the error. The trainer must check status() after
// end_step() and discard the step if it is not OK.
//
// Not thread-safe (the compute thread drives it); the backend and store must outlive it.
#pragma once

#include <memory>
#include <vector>

#include "model/weights.h"
#include "stream/prefetcher.h"

namespace st {

struct StreamedSourceOptions {
  int num_slots = 2;                 // pool buffers (capped at the number of streamed layers)
  std::vector<int> resident_layers;  // kept on the device, never streamed
  // STREAMTUNE_SYNC_DEBUG=1 in the environment forces kInline (copies on the compute thread).
  CopyMode copy_mode = CopyMode::kThread;
};

class StreamedLayerSource : public LayerSource {
 public:
  static StatusOr<std::unique_ptr<StreamedLayerSource>> create(Backend* be, LayerStore* store,
                                                                const StreamedSourceOptions& opts);
  ~StreamedLayerSource() override;

  void begin_step(const std::vector<int>& visits) override;
  void begin_training_step(const std::vector<int>& visits, const std::vector<bool>& backward) override;
  // Streamed layers' regions become lent pool slots, alone where one holds a blob, else k adjacent
  // regions of consecutive layers together (stream/prefetcher.h Notes [lent activation memory],
  // [lent region spans]); once: a later call must offer the same regions (CHECK), and the
  // memory must outlive this source. STREAMTUNE_LEND_ACTIVATIONS=0 in the environment declines
  // every region (for A/B timing).
  void lend_regions(const std::vector<LentRegion>& regions) override;
  int lent_slots() const { return lent_slots_; }
  LayerWeights acquire(int layer) override;
  void release(int layer) override;
  void end_step() override;

  Status status() const;
  bool loads_layers() const override { return pool_ != nullptr; }  // a layer streams
  PrefetchStats stats() const;
  const LayerLayout& layout() const { return layout_; }
  int num_slots() const { return pool_ ? pool_->num_slots() : 0; }
  bool is_resident(int layer) const { return resident_index_[layer] >= 0; }

 private:
  StreamedLayerSource(Backend* be, LayerStore* store, LayerLayout layout, LayerLayout resident_layout)
      : be_(be), store_(store), layout_(std::move(layout)), resident_layout_(std::move(resident_layout)) {}
  Status load_resident(const std::vector<int>& layers);
  void decode_resident(void* coded, void* dense);  // enqueued on compute

  Backend* be_;
  LayerStore* store_;
  LayerLayout layout_;           // the store's blobs (pool slots)
  LayerLayout resident_layout_;  // the resident buffer's: layout_, or its dense twin (Note [resident code12 layers])
  std::vector<int> resident_index_;  // per layer: index into the resident buffer, or -1
  void* resident_ = nullptr;
  std::unique_ptr<LayerBufferPool> pool_;
  std::unique_ptr<Prefetcher> prefetcher_;
  bool lent_ = false;
  std::vector<LentRegion> offered_;  // the first lend_regions call's (the only set allowed)
  int lent_slots_ = 0;
  Status error_;
};

}  // namespace st
