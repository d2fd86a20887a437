// Prefetcher: walks a step's visit sequence ahead of compute, loading layers into the
// LayerBufferPool on a copy stream (design.md §3).
//
// Note [prefetch rule]
// Compute is at visit c (the next to be acquired, or the one it holds); the prefetcher has issued
// every visit before p (p >= c). To issue visit p (layer l):
//   - if some slot's tag is l, it is a reuse hit (no copy); that slot will not be evicted before
//     p because its next use is <= p;
//   - otherwise pick a victim by Belady among the slots whose occupant is not needed in [c, p]:
//     the one needed furthest in the future (or never; empty slots first); ties to the lowest
//     slot index. If every occupant is needed in [c, p], wait: compute must release one first.
// Decisions are made on the compute thread only (in begin_step and release), so the load
// sequence is a pure function of (visits, slots, previous contents): deterministic and testable.
// Slot contents persist across steps (frozen weights): layer 0 at the end of a backward is a
// hit at the start of the next forward.
//
// Note [lent activation memory]
// A training step's activation memory is not all live all the time: layer l's saved region
// (model/layer.h Note [recompute]) is written by its forward and read by its backward, and is dead
// from the end of that backward to the next forward of l. Where a region holds a layer blob, the
// Model lends it (LayerSource::lend_regions) and the pool gains a "lent" slot over it, usable only
// in that window: it opens when compute releases a backward visit of its layer (its `free` event is
// recorded then, so copies wait for the backward's kernels) and closes at the next visit of that
// layer (any visit: a forward-only step closes it too, which is merely conservative). A fill into a
// lent slot is issued only for a visit before the slot's close, and a hit on it counts only before
// it (Belady's horizon), so when the window closes the slot is idle and its bytes are given back.
// Down a training step's backward the windows open one per visit, as fast as the backward needs
// loads, so with lent slots the prefetcher fills only empty slots ahead of compute and evicts
// (Belady, within the horizons) only for the visits compute needs within two, as the two-slot pool
// did. The backward then keeps every layer it loaded and the next forward finds all but one of
// them: L-1 loads a step instead of 2L-4. The forward runs with the link idle -- every region closes
// during it, so what the backward needs can only go to the own slots -- which bounds a step by
// L x f + head + max(L x b, (L-2) x c) (f, b: a layer's forward and backward compute, c: its copy;
// bench/RESULTS.md session 19: 7-36% shorter steps). Same bytes per visit, same kernels: the bits
// do not change; peak memory does not either (the regions exist anyway).
//
// Note [lent region spans]
// Where one saved region is smaller than a layer blob (fewer tokens, larger layers: 7B at 2048
// tokens keeps ~300 MB a layer against a 466 MB blob) the regions of k consecutive streamed layers,
// adjacent in the arena, make one lent slot (StreamedLayerSource::lend_regions). Its window is the
// intersection of theirs: it opens when the last of them dies (down the backward, the lowest
// layer's backward) and closes at the next visit of any of them (the lowest layer's forward) -- the
// same window as that lowest layer's own region, with k times the memory. L/k slots instead of L:
// the next forward finds about L/k of the layers the backward loaded and loads the rest itself,
// overlapping its compute (what a forward without lent slots does with all of them).
//
// Copies run on a copy thread standing in for the copy stream (CopyMode::kThread: CPU runs get
// real concurrency; disk reads never block compute's enqueue) or inline on the compute thread
// (kInline: for debugging, and CUDA RAM tiers where enqueueing is cheap). A failed load is
// sticky: later loads are skipped, every acquire returns the error, nothing hangs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "stream/layer_buffer_pool.h"
#include "store/layer_store.h"

namespace st {

// Belady victim for issuing visit p with compute at visit c (Note [prefetch rule]).
// slot_layers[s] is slot s's layer (-1 empty). horizon (optional, one per slot): the visit at which
// the slot's contents are lost (Note [lent activation memory]); a slot whose horizon is <= p cannot
// take the fill, and a use at or past the horizon counts as never. Returns the slot, or -1 if none
// may be evicted yet.
int belady_victim(const std::vector<int>& slot_layers, const std::vector<int>& visits, size_t c, size_t p,
                  const std::vector<size_t>& horizon = {});

enum class CopyMode { kThread, kInline };

struct PrefetchStats {
  int64_t visits = 0;
  int64_t loads = 0;
  int64_t reuse_hits = 0;
  int64_t bytes = 0;
  int64_t compute_wait_ns = 0;  // host-side time compute blocked in acquire
};

class Prefetcher {
 public:
  // pool, store and the backend behind them must outlive the prefetcher.
  Prefetcher(LayerBufferPool* pool, LayerStore* store, CopyMode mode);
  ~Prefetcher();  // drains and joins the copy thread
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // `visits`: the streamed layers in the order compute will acquire them. Starts loading.
  // backward (optional, one per visit): the visit is its layer's training backward, after which the
  // layer's lent region (if any) is free (Note [lent activation memory]).
  void begin_step(const std::vector<int>& visits, const std::vector<bool>& backward = {});
  // Pool slot `slot` (LayerBufferPool::add_lent_slot) spans the lent regions of layers first ..
  // first + layers - 1 (Note [lent region spans]); closed until a backward visit of each of them
  // has been released. Between steps only.
  void lend_slot(int slot, int first, int layers = 1);
  // The next visit must be `layer` (CHECK). Waits for its copy; returns the slot's device
  // pointer, or the (sticky) load error naming the file.
  StatusOr<void*> acquire(int layer);
  void release(int layer);
  // CHECKs every visit was consumed; returns the sticky error (OK if none).
  Status end_step();

  PrefetchStats stats() const;
  Status status() const;
  // Slot of the visit compute holds (valid between acquire and release, even after a failed load).
  int held_slot() const { return visit_slot_[c_]; }
  // Slot of each visit of the current step (for tests).
  const std::vector<int>& visit_slots() const { return visit_slot_; }

 private:
  struct Job {
    int slot;
    SlotTag tag;
  };
  void pump();
  size_t horizon(int slot) const;  // the visit at which the slot's contents are lost
  bool spans(int slot, int layer) const {
    return layer >= lent_first_[slot] && layer < lent_first_[slot] + lent_count_[slot];
  }
  void issue(int slot, int layer);
  void run_job(const Job& j);
  void copy_loop();
  std::vector<int> slot_layers() const;

  LayerBufferPool* pool_;
  LayerStore* store_;
  CopyMode mode_;
  std::vector<int> visits_;
  std::vector<int> visit_slot_;
  std::vector<SlotTag> visit_tag_;
  std::vector<bool> backward_;       // per visit (Note [lent activation memory])
  std::vector<int> lent_first_;      // per pool slot: the first layer whose region it spans, or -1
  std::vector<int> lent_count_;      // per pool slot: how many regions it spans (0: not lent)
  std::vector<bool> lent_open_;      // per pool slot: the regions are free for us now
  std::vector<bool> region_dead_;    // per layer: its last visit released was a backward
  size_t c_ = 0, p_ = 0;
  bool held_ = false;
  PrefetchStats stats_;

  mutable std::mutex mu_;  // guards queue_, stop_, error_
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  Status error_;
  std::thread thread_;
};

}  // namespace st
