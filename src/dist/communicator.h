// Communicator: the collectives data parallelism needs (design.md §4 "Multi-GPU").
//
// One Communicator per replica (rank). Ranks of one group run concurrently, one thread each
// (one process per node, one thread per GPU); every rank of the group must call the same
// collectives in the same order with the same counts, or the group deadlocks.
//
// Two implementations:
//  * ThreadCommunicator: in-process, N threads, over any Backend. Buffers are staged through
//    host memory and reduced in rank order 0..N-1 (one fixed-order f32 sum per element), so
//    results are bit-identical run to run and on every rank. It is what CI tests, and a correct
//    (slow) fallback on a multi-GPU host without NCCL.
//  * NcclCommunicator: NCCL over the GPUs of one or more nodes (compiled only when CUDA + NCCL
//    are found). Ring/tree reduction order is NCCL's: identical on every rank, but a different
//    f32 summation order than a single device.
//
// Failure: when one rank fails it must call abort() on its communicator so the others stop
// waiting; every collective then returns Cancelled on every rank.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"

namespace st {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // buf[0..count) f32 in THIS rank's backend memory := sum over ranks of buf, in place. Ordered
  // after the work already enqueued on `stream`; later work on `stream` sees the result. May
  // block the host (ThreadCommunicator always does). Every rank gets the same bits.
  virtual Status all_reduce_sum(float* buf, size_t count, StreamId stream) = 0;
  // buf[0..count) on every rank := root's buf (backend memory; same stream semantics).
  virtual Status broadcast(float* buf, size_t count, int root, StreamId stream) = 0;
  // Host-memory sums (small control values: target counts, loss sums, checksums). Blocking.
  // Sums are taken in rank order; int64 sums are exact, f64 sums of values that are non-zero on
  // one rank only are exact.
  virtual Status all_reduce_sum_host(int64_t* v, size_t count) = 0;
  virtual Status all_reduce_sum_host(double* v, size_t count) = 0;
  // Returns when every rank has called barrier().
  virtual Status barrier() = 0;
  // Wakes every rank blocked in (or later entering) a collective with Cancelled. Thread-safe,
  // idempotent; `why` goes into the Cancelled message.
  virtual void abort(const std::string& why) = 0;
};

// N in-process ranks; backends[r] is rank r's backend (buffers passed to rank r's collectives
// live in its memory). The backends must outlive the communicators; the communicators share
// one group and may be destroyed in any order.
std::vector<std::unique_ptr<Communicator>> make_thread_communicators(const std::vector<Backend*>& backends);

// ---- NCCL ------------------------------------------------------------------------------------

// Where this process sits in a multi-node run. One process per node, one thread per local GPU:
// global rank = node_rank * local_gpus + local index, world = num_nodes * local_gpus.
struct DistEnv {
  int num_nodes = 1;     // WORLD_SIZE (torchrun), OMPI_COMM_WORLD_SIZE or PMI_SIZE (MPI launchers)
  int node_rank = 0;     // RANK, OMPI_COMM_WORLD_RANK or PMI_RANK
  int local_rank = 0;    // LOCAL_RANK (informational: one process per node uses every local GPU)
  std::string master_addr = "127.0.0.1";  // MASTER_ADDR: where node 0 serves the NCCL unique id
  int master_port = 29500;                // MASTER_PORT
};
// Reads the launcher variables above (absent = single node). InvalidArgument naming the variable
// when one is malformed or inconsistent (RANK >= WORLD_SIZE, port out of range).
StatusOr<DistEnv> dist_env_from_environment();

// True when this build has NCCL.
bool nccl_available();
// One NcclCommunicator per local GPU: rank node_rank*G + i on device devices[i] (G =
// devices.size()), backends[i] that device's backend. Single node: ncclCommInitAll-style init from
// one unique id made here. Multi-node: node 0 makes the id and serves it over TCP at
// MASTER_ADDR:MASTER_PORT (dist/rendezvous.h); the others fetch it. Sets NCCL_NVLS_ENABLE=0 (NVLink
// multicast off) before init. Unimplemented when this build has no NCCL. Blocks until
// every rank of every node has joined.
StatusOr<std::vector<std::unique_ptr<Communicator>>> make_nccl_communicators(const std::vector<int>& devices,
                                                                             const std::vector<Backend*>& backends,
                                                                             const DistEnv& env);

}  // namespace st
