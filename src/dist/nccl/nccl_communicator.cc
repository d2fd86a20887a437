// NcclCommunicator (communicator.h). Compiled only when CUDA + NCCL are found (CMakeLists.txt
// adds this file and defines ST_HAVE_NCCL). NOT RUN in CI: no multi-GPU machine there.
//
// Note [nccl ordering]: Backend does not expose its native cudaStream_t, so a collective cannot
// be enqueued on the caller's stream. Instead: the host syncs `stream` (everything before the
// collective is done), runs NCCL on the communicator's own stream, and waits for it (polling, so
// abort() can break a wait on a dead peer). Correct, but it serialises compute and communication;
// overlapping the all-reduce with the backward needs Backend::native_stream(StreamId) (reported).
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/check.h"
#include "dist/communicator.h"
#include "dist/rendezvous.h"

namespace st {
namespace {

constexpr int kRendezvousTimeoutMs = 300000;

#define ST_NCCL_RETURN(expr)                                                                              \
  do {                                                                                                   \
    ncclResult_t st_r_ = (expr);                                                                         \
    if (st_r_ != ncclSuccess) return Internal(Str() << #expr << ": " << ncclGetErrorString(st_r_));      \
  } while (0)
#define ST_CUDA_RETURN(expr)                                                                              \
  do {                                                                                                   \
    cudaError_t st_e_ = (expr);                                                                          \
    if (st_e_ != cudaSuccess) return Internal(Str() << #expr << ": " << cudaGetErrorString(st_e_));      \
  } while (0)

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int world, int device, Backend* be)
      : comm_(comm), rank_(rank), world_(world), dev_(device), be_(be) {
    CHECK(cudaSetDevice(dev_) == cudaSuccess);
    CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking) == cudaSuccess);
  }
  ~NcclCommunicator() override {
    cudaSetDevice(dev_);
    if (aborted_.load()) {
      ncclCommAbort(comm_);
    } else {
      ncclCommDestroy(comm_);
    }
    if (scratch_) cudaFree(scratch_);
    cudaStreamDestroy(s_);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  Status all_reduce_sum(float* buf, size_t count, StreamId stream) override {
    RETURN_IF_ERROR(enter(stream));
    ST_NCCL_RETURN(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm_, s_));
    return wait();
  }
  Status broadcast(float* buf, size_t count, int root, StreamId stream) override {
    RETURN_IF_ERROR(enter(stream));
    ST_NCCL_RETURN(ncclBroadcast(buf, buf, count, ncclFloat32, root, comm_, s_));
    return wait();
  }
  Status all_reduce_sum_host(int64_t* v, size_t count) override { return host_sum(v, count, ncclInt64); }
  Status all_reduce_sum_host(double* v, size_t count) override { return host_sum(v, count, ncclFloat64); }
  Status barrier() override {
    int64_t one = 1;
    return host_sum(&one, 1, ncclInt64);
  }
  void abort(const std::string& why) override {
    why_ = why;  // benign race: only read after aborted_ is seen
    aborted_.store(true);
  }

 private:
  Status enter(StreamId stream) {
    if (aborted_.load()) return Cancelled("collective aborted: " + why_);
    ST_CUDA_RETURN(cudaSetDevice(dev_));
    be_->sync_stream(stream);  // Note [nccl ordering]
    return Status::OK();
  }
  // Polls the NCCL stream; abort() or an asynchronous NCCL error ends the wait.
  Status wait() {
    for (;;) {
      const cudaError_t q = cudaStreamQuery(s_);
      if (q == cudaSuccess) return Status::OK();
      if (q != cudaErrorNotReady) return Internal(Str() << "NCCL stream on cuda:" << dev_ << ": " << cudaGetErrorString(q));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress)
        return Internal(Str() << "NCCL rank " << rank_ << ": " << ncclGetErrorString(async));
      if (aborted_.load()) {
        ncclCommAbort(comm_);
        return Cancelled("collective aborted: " + why_);
      }
      std::this_thread::yield();
    }
  }
  template <typename T>
  Status host_sum(T* v, size_t count, ncclDataType_t type) {
    RETURN_IF_ERROR(enter(StreamId::kCompute));
    const size_t bytes = count * sizeof(T);
    if (bytes > scratch_bytes_) {
      if (scratch_) cudaFree(scratch_);
      scratch_ = nullptr;
      ST_CUDA_RETURN(cudaMalloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
    }
    ST_CUDA_RETURN(cudaMemcpyAsync(scratch_, v, bytes, cudaMemcpyHostToDevice, s_));
    ST_NCCL_RETURN(ncclAllReduce(scratch_, scratch_, count, type, ncclSum, comm_, s_));
    ST_CUDA_RETURN(cudaMemcpyAsync(v, scratch_, bytes, cudaMemcpyDeviceToHost, s_));
    return wait();
  }

  ncclComm_t comm_;
  int rank_, world_, dev_;
  Backend* be_;
  cudaStream_t s_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::atomic<bool> aborted_{false};
  std::string why_;
};

// The unique id of this run: made on node 0 (and served to the others), fetched elsewhere.
StatusOr<ncclUniqueId> exchange_unique_id(const DistEnv& env, std::unique_ptr<RendezvousServer>* server) {
  ncclUniqueId id;
  if (env.node_rank == 0) {
    ST_NCCL_RETURN(ncclGetUniqueId(&id));
    if (env.num_nodes > 1) {
      ASSIGN_OR_RETURN(*server, RendezvousServer::listen(env.master_port), "MASTER_PORT " << env.master_port);
    }
    return id;
  }
  ASSIGN_OR_RETURN(std::string blob, rendezvous_fetch(env.master_addr, env.master_port, kRendezvousTimeoutMs));
  if (blob.size() != sizeof(id.internal))
    return Corruption(Str() << "rendezvous: node 0 sent " << blob.size() << " bytes, expected an NCCL unique id of "
                            << sizeof(id.internal));
  std::memcpy(id.internal, blob.data(), sizeof(id.internal));
  return id;
}

}  // namespace

bool nccl_available() { return true; }

StatusOr<std::vector<std::unique_ptr<Communicator>>> make_nccl_communicators(const std::vector<int>& devices,
                                                                             const std::vector<Backend*>& backends,
                                                                             const DistEnv& env) {
  if (devices.empty() || devices.size() != backends.size())
    return InvalidArgument("make_nccl_communicators: one backend per device is required");
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);  // NVLink multicast off (the lent machines require it)
  std::unique_ptr<RendezvousServer> server;
  ASSIGN_OR_RETURN(ncclUniqueId id, exchange_unique_id(env, &server));
  // Node 0 serves the id while its own ranks join (ncclCommInitRank blocks until all have).
  Status served;
  std::thread serve_thread;
  if (server) {
    const std::string blob(id.internal, sizeof(id.internal));
    serve_thread = std::thread([&] { served = server->serve(blob, env.num_nodes - 1, kRendezvousTimeoutMs); });
  }
  const int g = static_cast<int>(devices.size()), world = env.num_nodes * g;
  std::vector<ncclComm_t> comms(devices.size());
  ncclResult_t r = ncclGroupStart();
  for (int i = 0; i < g && r == ncclSuccess; ++i) {
    cudaSetDevice(devices[i]);
    r = ncclCommInitRank(&comms[i], world, id, env.node_rank * g + i);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (serve_thread.joinable()) serve_thread.join();
  if (r != ncclSuccess || end != ncclSuccess)
    return Internal(Str() << "ncclCommInitRank (node " << env.node_rank << ", " << g << " GPUs, world " << world
                          << "): " << ncclGetErrorString(r != ncclSuccess ? r : end));
  RETURN_IF_ERROR(served, "serving the NCCL unique id");
  std::vector<std::unique_ptr<Communicator>> out;
  for (int i = 0; i < g; ++i)
    out.push_back(std::make_unique<NcclCommunicator>(comms[i], env.node_rank * g + i, world, devices[i], backends[i]));
  return out;
}

}  // namespace st
