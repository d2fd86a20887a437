#include "backend/cuda/graph_recorder.h"

#include "core/check.h"

namespace st::cuda {
namespace {

class GraphPlan final : public LaunchPlan {
 public:
  GraphPlan(cudaGraphExec_t exec, uint64_t epoch) : exec_(exec), epoch_(epoch) {}
  ~GraphPlan() override {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  GraphPlan(const GraphPlan&) = delete;
  GraphPlan& operator=(const GraphPlan&) = delete;
  cudaGraphExec_t exec() const { return exec_; }
  uint64_t epoch() const { return epoch_; }

 private:
  cudaGraphExec_t exec_;
  uint64_t epoch_;
};

// The error text of `e`, clearing it so that later calls do not report it again.
std::string consume(cudaError_t e, const char* what) {
  cudaGetLastError();
  return std::string(what) + ": " + cudaGetErrorString(e);
}

}  // namespace

bool GraphRecorder::begin_capture(std::string* why) {
  CHECK(!capturing_, "GraphRecorder: begin_capture while recording");
  const cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    *why = consume(e, "cudaStreamBeginCapture");
    return false;
  }
  capturing_ = true;
  begin_epoch_ = *epoch_;
  return true;
}

std::unique_ptr<LaunchPlan> GraphRecorder::end_capture(std::string* why) {
  CHECK(capturing_, "GraphRecorder: end_capture without begin_capture");
  capturing_ = false;
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
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiateWithFlags(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    *why = consume(e, "cudaGraphInstantiate");
    return nullptr;
  }
  return std::make_unique<GraphPlan>(exec, begin_epoch_);
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
