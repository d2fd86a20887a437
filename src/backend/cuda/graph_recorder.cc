#include "backend/cuda/graph_recorder.h"

#include "core/check.h"

namespace st::cuda {
namespace {

class GraphPlan final : public LaunchPlan {
 public:
  GraphPlan(cudaGraphExec_t exec, uint64_t epoch, uint64_t bytes) : exec_(exec), epoch_(epoch), bytes_(bytes) {}
  ~GraphPlan() override {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  GraphPlan(const GraphPlan&) = delete;
  GraphPlan& operator=(const GraphPlan&) = delete;
  cudaGraphExec_t exec() const { return exec_; }
  uint64_t epoch() const { return epoch_; }
  uint64_t device_bytes() const override { return bytes_; }

 private:
  cudaGraphExec_t exec_;
  uint64_t epoch_;
  uint64_t bytes_;
};

// Free device memory now (0 if the runtime cannot tell).
uint64_t free_bytes() {
  size_t f = 0, t = 0;
  if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return f;
}

// The error text of `e`, clearing it so that later calls do not report it again.
std::string consume(cudaError_t e, const char* what) {
  cudaGetLastError();
  return std::string(what) + ": " + cudaGetErrorString(e);
}

thread_local bool t_recording = false;

}  // namespace

bool recording_plan_on_this_thread() { return t_recording; }

bool GraphRecorder::begin_capture(std::string* why) {
  CHECK(!capturing_, "GraphRecorder: begin_capture while recording");
  const cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    *why = consume(e, "cudaStreamBeginCapture");
    return false;
  }
  capturing_ = true;
  t_recording = true;
  begin_epoch_ = *epoch_;
  return true;
}

std::unique_ptr<LaunchPlan> GraphRecorder::end_capture(std::string* why) {
  CHECK(capturing_, "GraphRecorder: end_capture without begin_capture");
  capturing_ = false;
  t_recording = false;
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(stream_, &graph);
  if (e != cudaSuccess || graph == nullptr) {
    *why = consume(e == cudaSuccess ? cudaErrorStreamCaptureInvalidated : e, "cudaStreamEndCapture");
    if (graph) cudaGraphDestroy(graph);
    return nullptr;
  }
  if (*epoch_ != begin_epoch_) {  // the backend replaced memory mid-recording (the caller CHECKs this)
    cudaGraphDestroy(graph);
    *why = "backend scratch was reallocated while recording";
    return nullptr;
  }
  // The device memory a plan holds is taken at instantiation and upload: measured around both
  // (nothing else allocates on this device meanwhile: arenas are allocated before training).
  const uint64_t before = free_bytes();
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiateWithFlags(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    *why = consume(e, "cudaGraphInstantiate");
    return nullptr;
  }
  e = cudaGraphUpload(exec, stream_);
  if (e != cudaSuccess) {
    cudaGraphExecDestroy(exec);
    *why = consume(e, "cudaGraphUpload");
    return nullptr;
  }
  const uint64_t after = free_bytes();
  return std::make_unique<GraphPlan>(exec, begin_epoch_, before > after ? before - after : 0);
}

bool GraphRecorder::replay(LaunchPlan& p) {
  auto* g = dynamic_cast<GraphPlan*>(&p);
  CHECK(g != nullptr, "GraphRecorder: plan was not recorded by the CUDA backend");
  if (g->epoch() != *epoch_) return false;
  const cudaError_t e = cudaGraphLaunch(g->exec(), stream_);
  CHECK(e == cudaSuccess, "cudaGraphLaunch: " << cudaGetErrorString(e));
  return true;
}

}  // namespace st::cuda
