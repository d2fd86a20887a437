// Internals of the op profiler (profiler.h) for cuda_backend.cu: the global collector and the
// per-op RAII scope. Events are recycled through a pool; pending ones are resolved in batches.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <string>
#include <utility>

#include "backend/cuda/profiler.h"

namespace st::cuda {

class Profiler {
 public:
  static Profiler& get();
  bool enabled() const { return enabled_; }
  // Records a start event on `s`; returns its pool index.
  int begin(cudaStream_t s);
  // Records the end event and queues (key, start, end, host_ms) for resolution.
  void end(int start, cudaStream_t s, std::string key, double host_ms);
  void reset();
  std::string report(double steps, double step_wall_ms);

 private:
  Profiler();
  struct Pending;
  void flush();
  bool enabled_ = false;
  struct State;
  State* st_;
};

// Brackets one op. `detail` (a callable returning std::string) is only called when profiling.
class ProfScope {
 public:
  template <class F>
  ProfScope(cudaStream_t s, const char* kind, F&& detail) {
    Profiler& p = Profiler::get();
    if (!p.enabled()) return;
    s_ = s;
    key_ = std::string(kind) + " " + std::forward<F>(detail)();
    start_ = p.begin(s);
    t0_ = std::chrono::steady_clock::now();
  }
  ~ProfScope() {
    if (start_ < 0) return;
    const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
    Profiler::get().end(start_, s_, std::move(key_), host_ms);
  }
  ProfScope(const ProfScope&) = delete;
  ProfScope& operator=(const ProfScope&) = delete;

 private:
  cudaStream_t s_ = nullptr;
  std::string key_;
  int start_ = -1;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace st::cuda
