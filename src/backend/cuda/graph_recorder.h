// The CUDA backend's PlanRecorder (backend.h Note [launch plans]): stream capture of the compute
// stream into a CUDA graph, instantiated once and replayed with cudaGraphLaunch.
//
// Capture is thread-local (cudaStreamCaptureModeThreadLocal): a copy thread or another GPU's
// thread keeps issuing its own work while one thread records. Replays check `epoch`, a counter
// the backend bumps whenever memory that recorded ops may point at is replaced (its shared
// scratch buffer grows): a plan recorded under an older epoch is stale and is not launched.
// Plain C++ over the CUDA runtime API.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime.h>

#include "backend/backend.h"

namespace st::cuda {

// True between begin_capture and end_capture on this thread: error messages then say how to run
// without plans (a failing call inside a recording aborts like any CUDA error).
bool recording_plan_on_this_thread();
inline const char* plan_hint() {
  return recording_plan_on_this_thread()
             ? " (while recording a layer launch plan: STREAMTUNE_GRAPHS=off runs the layers op by op)"
             : "";
}

class GraphRecorder final : public PlanRecorder {
 public:
  GraphRecorder(cudaStream_t stream, const uint64_t* epoch) : stream_(stream), epoch_(epoch) {}
  bool begin_capture(std::string* why) override;
  std::unique_ptr<LaunchPlan> end_capture(std::string* why) override;
  bool replay(LaunchPlan& p) override;
  bool capturing() const { return capturing_; }

 private:
  cudaStream_t stream_;
  const uint64_t* epoch_;
  bool capturing_ = false;
  uint64_t begin_epoch_ = 0;
};

}  // namespace st::cuda
