// LayerBufferPool: n device buffers ("slots"), each holding one layer blob (design.md §3).
//
// Note [slot lifecycle]
//   issuer (compute thread):   begin_fill(s, layer)  -> new tag (layer, generation); CHECKs the
//                              slot is not held by compute (early-overwrite tripwire)
//   copy side (copy thread):   copy_wait_free(s)     -> kH2D waits on the slot's `free` event
//                              ... store->load_layer(layer, data(s)) on kH2D ...
//                              finish_fill(s, tag, status) -> records `ready` on kH2D, publishes
//   compute (compute thread):  acquire(s, tag)       -> host waits until that fill is published,
//                              kCompute waits on `ready`, CHECKs the slot holds `tag`
//                              ... kernels read data(s) ...
//                              release(s)            -> records `free` on kCompute
// The host-side publish/wait (a mutex + condition variable) orders the event record/wait calls
// across threads; the events order the device work. On the CPU backend copies are synchronous,
// so the publish happens after the bytes are in place: the host wait is the real dependency.
//
// Lent slots (stream/prefetcher.h Note [lent activation memory]): add_lent_slot adds a slot over
// memory the pool does not own; open_lent(s) records its `free` event on kCompute (the region's
// last reader was just enqueued there) and empties it; close_lent(s) empties it again when its
// owner is about to write the region. The prefetcher decides when; the pool only keeps the tags.
//
// Thread safety: begin_fill/acquire/release/open_lent/close_lent from one (compute) thread;
// copy_wait_free and finish_fill from one (copy) thread. Counters are read after the step.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"

namespace st {

struct SlotTag {
  int layer = -1;          // -1: empty
  uint64_t generation = 0; // unique per fill over the pool's life
  bool operator==(const SlotTag& o) const { return layer == o.layer && generation == o.generation; }
};

class LayerBufferPool {
 public:
  // Allocates `num_slots` device buffers of `slot_bytes` each (ResourceExhausted naming the
  // slot) plus their events. The backend must outlive the pool.
  static StatusOr<std::unique_ptr<LayerBufferPool>> create(Backend* be, int num_slots, size_t slot_bytes);
  ~LayerBufferPool();
  LayerBufferPool(const LayerBufferPool&) = delete;
  LayerBufferPool& operator=(const LayerBufferPool&) = delete;

  // A slot over `data` (at least slot_bytes(), not freed by the pool), closed: returns its index.
  // Only while no copy is in flight (between steps): the slot table may move.
  int add_lent_slot(void* data);
  bool lent(int s) const { return slots_[s].lent; }
  void open_lent(int s);   // compute thread: the region is free once kCompute reaches this point
  void close_lent(int s);  // compute thread: the region's owner takes it back (slot must be idle)

  int num_slots() const { return static_cast<int>(slots_.size()); }
  size_t slot_bytes() const { return slot_bytes_; }
  void* data(int s) const { return slots_[s].data; }
  SlotTag tag(int s) const;
  bool held(int s) const;

  // Issuer side. Tripwire: CHECK-fails if the slot is held by compute.
  SlotTag begin_fill(int s, int layer);
  // Copy side.
  void copy_wait_free(int s);
  void finish_fill(int s, SlotTag tag, const Status& status);
  // Compute side. Returns the fill's status (a failed load is reported, never waited on forever).
  Status acquire(int s, SlotTag expect);
  void release(int s);

  // Nanoseconds the compute thread spent blocked in acquire (host-side measure).
  int64_t compute_wait_ns() const { return compute_wait_ns_; }

 private:
  struct Slot {
    void* data = nullptr;
    SlotTag tag;
    uint64_t published = 0;  // generation of the last finished fill
    Status fill_status;
    bool held = false;
    bool lent = false;  // memory owned by someone else (Note [lent activation memory])
    std::unique_ptr<Event> ready, free;
  };
  explicit LayerBufferPool(Backend* be) : be_(be) {}
  void empty_lent(Slot& slot);  // a new empty tag, published (mu_ held)

  Backend* be_;
  size_t slot_bytes_ = 0;
  std::vector<Slot> slots_;
  uint64_t next_generation_ = 1;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t compute_wait_ns_ = 0;
};

}  // namespace st
