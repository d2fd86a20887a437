// The CUDA backend's owners of streams and events (cuda_backend.cu), apart from its op dispatch.
#pragma once

#include <cuda_runtime.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "core/check.h"

namespace st::cuda {

// Move-only owner of a non-blocking stream.
class StreamOwner {
 public:
  StreamOwner() { CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~StreamOwner() {
    if (s_) cudaStreamDestroy(s_);
  }
  StreamOwner(StreamOwner&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  StreamOwner(const StreamOwner&) = delete;
  StreamOwner& operator=(const StreamOwner&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// An ordering event (timing disabled: cheaper record/wait).
class CudaEvent final : public Event {
 public:
  CudaEvent() { CUDA_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming)); }
  ~CudaEvent() override {
    if (e_) cudaEventDestroy(e_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// The CUDA event behind a backend Event (one this backend created).
inline cudaEvent_t ev(Event& e) {
  auto* ce = dynamic_cast<CudaEvent*>(&e);
  CHECK(ce != nullptr, "event was not created by the CUDA backend");
  return ce->get();
}

}  // namespace st::cuda
