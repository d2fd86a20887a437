// ThreadCommunicator (communicator.h): N ranks = N threads of this process.
//
// Note [thread collectives]: every collective is three phases separated by a group barrier:
//   1. each rank syncs its stream and copies its input into its host slot (d2h; plain copy on CPU);
//   2. each rank reduces ITS chunk of the elements, reading all slots in rank order 0..N-1
//      (the per-element f32 summation order is fixed: s = x0; s += x1; ...; s += x{N-1});
//   3. each rank copies the whole result back into its buffer (h2d) and syncs.
// The barrier is generation-counted and abortable, so a failed rank cannot hang the others.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "core/check.h"
#include "dist/communicator.h"

namespace st {
namespace {

class ThreadGroup {
 public:
  explicit ThreadGroup(std::vector<Backend*> backends)
      : backends_(std::move(backends)), slots_(backends_.size()), i64_(backends_.size()), f64_(backends_.size()) {}

  int size() const { return static_cast<int>(backends_.size()); }
  Backend* backend(int r) const { return backends_[r]; }
  std::vector<float>& slot(int r) { return slots_[r]; }
  std::vector<int64_t>& i64(int r) { return i64_[r]; }
  std::vector<double>& f64(int r) { return f64_[r]; }
  std::vector<float>& result() { return result_; }

  Status barrier() {
    std::unique_lock<std::mutex> lk(mu_);
    if (aborted_) return Cancelled("collective aborted: " + why_);
    const uint64_t gen = generation_;
    if (++arrived_ == size()) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return Status::OK();
    }
    cv_.wait(lk, [&] { return generation_ != gen || aborted_; });
    if (generation_ == gen) return Cancelled("collective aborted: " + why_);
    return Status::OK();
  }

  void abort(const std::string& why) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!aborted_) why_ = why;
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  std::vector<Backend*> backends_;
  std::vector<std::vector<float>> slots_;
  std::vector<std::vector<int64_t>> i64_;
  std::vector<std::vector<double>> f64_;
  std::vector<float> result_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string why_;
};

// Elements [begin, end) of rank r's share of n elements split into `parts` chunks.
std::pair<size_t, size_t> chunk_of(size_t n, int parts, int r) {
  const size_t per = (n + static_cast<size_t>(parts) - 1) / static_cast<size_t>(parts);
  const size_t b = std::min(n, per * static_cast<size_t>(r));
  return {b, std::min(n, b + per)};
}

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> g, int rank) : g_(std::move(g)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return g_->size(); }

  Status all_reduce_sum(float* buf, size_t count, StreamId stream) override {
    RETURN_IF_ERROR(stage_in(buf, count, stream));
    if (rank_ == 0) g_->result().resize(count);
    RETURN_IF_ERROR(g_->barrier());  // result sized, every slot filled
    auto [b, e] = chunk_of(count, world_size(), rank_);
    float* out = g_->result().data();
    for (size_t i = b; i < e; ++i) {
      float s = g_->slot(0)[i];
      for (int r = 1; r < world_size(); ++r) s += g_->slot(r)[i];
      out[i] = s;
    }
    RETURN_IF_ERROR(g_->barrier());  // result complete
    stage_out(g_->result().data(), buf, count, stream);
    return g_->barrier();  // nobody refills slots/result before everyone copied out
  }

  Status broadcast(float* buf, size_t count, int root, StreamId stream) override {
    CHECK(root >= 0 && root < world_size(), "broadcast root " << root);
    if (rank_ == root) RETURN_IF_ERROR(stage_in(buf, count, stream));
    RETURN_IF_ERROR(g_->barrier());
    if (rank_ != root) stage_out(g_->slot(root).data(), buf, count, stream);
    return g_->barrier();
  }

  Status all_reduce_sum_host(int64_t* v, size_t count) override { return host_sum(v, count, &ThreadGroup::i64); }
  Status all_reduce_sum_host(double* v, size_t count) override { return host_sum(v, count, &ThreadGroup::f64); }
  Status barrier() override { return g_->barrier(); }
  void abort(const std::string& why) override { g_->abort(Str() << "rank " << rank_ << ": " << why); }

 private:
  // Phase 1 of Note [thread collectives].
  Status stage_in(const float* buf, size_t count, StreamId stream) {
    Backend* be = g_->backend(rank_);
    std::vector<float>& slot = g_->slot(rank_);
    slot.resize(count);
    be->sync_stream(stream);
    be->copy_d2h(slot.data(), buf, count * sizeof(float), stream);
    be->sync_stream(stream);
    return Status::OK();
  }
  void stage_out(const float* host, float* buf, size_t count, StreamId stream) {
    Backend* be = g_->backend(rank_);
    be->copy_h2d(buf, host, count * sizeof(float), stream);
    be->sync_stream(stream);  // the host source is reused by the next collective
  }

  // Host sums: every rank sums all slots in rank order itself (tiny counts; no chunking).
  template <typename T>
  Status host_sum(T* v, size_t count, std::vector<T>& (ThreadGroup::*slot)(int)) {
    ((*g_).*slot)(rank_).assign(v, v + count);
    RETURN_IF_ERROR(g_->barrier());
    for (size_t i = 0; i < count; ++i) {
      T s = ((*g_).*slot)(0)[i];
      for (int r = 1; r < world_size(); ++r) s += ((*g_).*slot)(r)[i];
      v[i] = s;
    }
    return g_->barrier();
  }

  std::shared_ptr<ThreadGroup> g_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_thread_communicators(const std::vector<Backend*>& backends) {
  CHECK(!backends.empty(), "make_thread_communicators: no backends");
  auto g = std::make_shared<ThreadGroup>(backends);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < static_cast<int>(backends.size()); ++r)
    out.push_back(std::make_unique<ThreadCommunicator>(g, r));
  return out;
}

}  // namespace st
