// LaunchPlanCache: records a layer visit's ops into a backend launch plan and replays it
// (backend.h Note [launch plans]).
//
// Note [layer launch plans]: a decoder layer's forward or backward is ~30-70 small ops; on CUDA
// each costs a host launch (~3-5 us) and a gap on the device. The visit of layer l in a phase,
// with the same weights address, micro-batch shape and recompute mode, enqueues exactly the same
// ops with exactly the same arguments every step (every buffer comes from the planned arenas), so
// it is recorded once and replayed with one launch from then on. The bits are those of the eager
// ops: the same kernels run on the same pointers. What changes from micro-batch to micro-batch
// lives in device memory that the recorded ops read when they run: the tokens, positions and
// LoRA dropout seeds (LayerCtx::dropout_seed_slot; the ops take a DropoutSeed pointing there). A
// visit that would bake a changing host value into its arguments must pass recordable = false.
// A key is recorded on its SECOND sighting: the first runs eagerly, so every lazily built thing
// (cuDNN graphs, scratch growth, cuBLASLt heuristics) exists before recording starts. A failed recording
// switches plans off for the cache's life (the visit then runs eagerly) and says why once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace st {

class LaunchPlanCache {
 public:
  using Key = std::vector<uint64_t>;
  struct Stats {
    int64_t eager = 0;     // visits enqueued op by op
    int64_t recorded = 0;  // plans recorded (each is also replayed once at once)
    int64_t replayed = 0;  // visits enqueued as one replay (including those just recorded)
    uint64_t bytes = 0;    // device memory the plans kept hold
  };

  // recorder may be null (the backend has none): every visit runs eagerly. Plans hold device
  // memory (LaunchPlan::device_bytes): no plan is recorded once they hold max_bytes; keys seen
  // after that run eagerly (the plans kept stay: recording again and again would cost more than
  // it saves).
  LaunchPlanCache(PlanRecorder* recorder, uint64_t max_bytes) : rec_(recorder), max_bytes_(max_bytes) {}

  // Enqueues `ops` -- a function whose only effect is enqueueing compute-stream ops -- eagerly,
  // or from the plan recorded for `key` (Note [layer launch plans]).
  void run(const Key& key, bool recordable, const std::function<void()>& ops);

  const Stats& stats() const { return stats_; }
  bool active() const { return rec_ != nullptr && !failed_; }

 private:
  void eager(const std::function<void()>& ops);
  void fail(const std::string& why);
  void forget_unrecorded();  // drops first sightings (bounds the key map)
  static constexpr size_t kMaxKeys = 1 << 16;

  PlanRecorder* rec_;
  uint64_t max_bytes_;
  bool failed_ = false;
  std::map<Key, std::unique_ptr<LaunchPlan>> entries_;  // every key seen; the plan once recorded
  Stats stats_;
};

}  // namespace st
