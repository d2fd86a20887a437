// cuDNN fused SDPA for training attention (see attention_cudnn.h). The only translation unit that
// includes the cuDNN frontend: its headers are heavy and CI compiles on 2 cores.
//
// Layout: our q [B*T, NH, D] is cuDNN's BSHD, i.e. logical dims [B, H, S, D] with strides
// [T*H*D, D, H*D, 1]; lse f32 [B, NH, T] is "Stats" [B, H, S, 1] with strides [H*T, T, 1, 1].
// Stats is the natural-log logsumexp of the scaled scores, the same quantity attention_tc saves.
#include "backend/cuda/attention_cudnn.h"

#include <atomic>

#if STREAMTUNE_HAVE_CUDNN

#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

#include "backend/cuda/graph_recorder.h"
#include "core/check.h"

#endif

namespace st::cuda {
namespace {
std::atomic<int64_t> g_cudnn_calls{0};
}  // namespace

int64_t cudnn_attention_calls() { return g_cudnn_calls.load(); }

bool& cudnn_attention_enabled() {
  static bool on = true;
  return on;
}

#if !STREAMTUNE_HAVE_CUDNN

std::unique_ptr<CudnnAttention> make_cudnn_attention() { return nullptr; }
bool cudnn_attention_built() { return false; }

#else

bool cudnn_attention_built() { return true; }

namespace {

namespace fe = cudnn_frontend;
using Graph = fe::graph::Graph;
using TensorAttr = fe::graph::Tensor_attributes;

// Tensor uids of the variant packs (shared by both graphs).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// (B, T, NH, KVH, D, scale bits, sliding window): everything a graph depends on.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, int64_t>;

Key key_of(const SeqLayout& L, const AttnShape& s) {
  uint32_t bits = 0;
  std::memcpy(&bits, &s.scale, sizeof bits);
  return {L.batch, L.seq, s.num_heads, s.num_kv_heads, s.head_dim, bits, effective_window(s, L.seq)};
}

std::string shape_str(const Key& k) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "B=%lld T=%lld NH=%lld KVH=%lld D=%lld", static_cast<long long>(std::get<0>(k)),
                static_cast<long long>(std::get<1>(k)), static_cast<long long>(std::get<2>(k)),
                static_cast<long long>(std::get<3>(k)), static_cast<long long>(std::get<4>(k)));
  std::string out = buf;
  if (std::get<6>(k) > 0) out += " window=" + std::to_string(std::get<6>(k));
  return out;
}

// A BSHD tensor [B, H, T, D] (logical) of `heads` heads.
std::shared_ptr<TensorAttr> bshd(Graph& g, const char* name, int64_t uid, int64_t B, int64_t T, int64_t H,
                                 int64_t D) {
  return g.tensor(TensorAttr()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({B, H, T, D})
                      .set_stride({T * H * D, D, H * D, 1})
                      .set_data_type(fe::DataType_t::BFLOAT16));
}
void mark_bshd_out(const std::shared_ptr<TensorAttr>& t, int64_t uid, int64_t B, int64_t T, int64_t H, int64_t D) {
  t->set_output(true).set_uid(uid).set_dim({B, H, T, D}).set_stride({T * H * D, D, H * D, 1}).set_data_type(
      fe::DataType_t::BFLOAT16);
}
std::shared_ptr<TensorAttr> stats_attr(int64_t B, int64_t T, int64_t H) {
  return std::make_shared<TensorAttr>(TensorAttr()
                                          .set_name("Stats")
                                          .set_uid(kStats)
                                          .set_dim({B, H, T, 1})
                                          .set_stride({H * T, T, 1, 1})
                                          .set_data_type(fe::DataType_t::FLOAT));
}

std::shared_ptr<Graph> new_graph() {
  auto g = std::make_shared<Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// validate -> operation graph -> heuristics (mode A) -> support -> plans. Empty string = ok.
std::string finish(Graph& g, cudnnHandle_t h, int64_t* ws) {
  auto step = [](fe::error_t e, const char* what) -> std::string {
    return e.is_good() ? std::string() : std::string(what) + ": " + e.get_message();
  };
  std::string err;
  if (!(err = step(g.validate(), "validate")).empty()) return err;
  if (!(err = step(g.build_operation_graph(h), "build_operation_graph")).empty()) return err;
  if (!(err = step(g.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans")).empty()) return err;
  if (!(err = step(g.check_support(), "check_support")).empty()) return err;
  if (!(err = step(g.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans")).empty()) return err;
  return step(g.get_workspace_size(*ws), "get_workspace_size");
}

std::string build_forward(const Key& k, cudnnHandle_t h, std::shared_ptr<Graph>* out, int64_t* ws) {
  const auto [B, T, NH, KVH, D, bits, window] = k;
  float scale = 0;
  std::memcpy(&scale, &bits, sizeof scale);
  auto g = new_graph();
  auto q = bshd(*g, "Q", kQ, B, T, NH, D), kk = bshd(*g, "K", kK, B, T, KVH, D), v = bshd(*g, "V", kV, B, T, KVH, D);
  auto opts = fe::graph::SDPA_attributes()
                  .set_name("st_sdpa")
                  .set_generate_stats(true)
                  .set_causal_mask(true)
                  .set_attn_scale(scale);
  // Sliding window: key j survives when j > t - window (cuDNN's diagonal band left bound).
  if (window > 0) opts.set_diagonal_band_left_bound(static_cast<int>(window));
  auto [o, stats] = g->sdpa(q, kk, v, opts);
  mark_bshd_out(o, kO, B, T, NH, D);
  stats->set_output(true).set_uid(kStats).set_dim({B, NH, T, 1}).set_stride({NH * T, T, 1, 1}).set_data_type(
      fe::DataType_t::FLOAT);
  std::string err = finish(*g, h, ws);
  if (err.empty()) *out = std::move(g);
  return err;
}

std::string build_backward(const Key& k, cudnnHandle_t h, std::shared_ptr<Graph>* out, int64_t* ws) {
  const auto [B, T, NH, KVH, D, bits, window] = k;
  float scale = 0;
  std::memcpy(&scale, &bits, sizeof scale);
  auto g = new_graph();
  auto q = bshd(*g, "Q", kQ, B, T, NH, D), kk = bshd(*g, "K", kK, B, T, KVH, D), v = bshd(*g, "V", kV, B, T, KVH, D);
  auto o = bshd(*g, "O", kO, B, T, NH, D), dout = bshd(*g, "dO", kDO, B, T, NH, D);
  auto stats = g->tensor(*stats_attr(B, T, NH));
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("st_sdpa_bwd")
                  .set_causal_mask(true)
                  .set_attn_scale(scale)
                  .set_deterministic_algorithm(true);  // the project's hard rule: same bytes -> same bits
  if (window > 0) opts.set_diagonal_band_left_bound(static_cast<int>(window));
  auto [dq, dk, dv] = g->sdpa_backward(q, kk, v, o, dout, stats, opts);
  mark_bshd_out(dq, kDQ, B, T, NH, D);
  mark_bshd_out(dk, kDK, B, T, KVH, D);
  mark_bshd_out(dv, kDV, B, T, KVH, D);
  std::string err = finish(*g, h, ws);
  if (err.empty()) *out = std::move(g);
  return err;
}

class CudnnAttentionImpl final : public CudnnAttention {
 public:
  ~CudnnAttentionImpl() override {
    plans_.clear();  // graphs before the handle they were built with
    if (handle_) cudnnDestroy(handle_);
  }

  bool plan(const SeqLayout& L, const AttnShape& s, size_t workspace_limit, bool build_missing,
            size_t* workspace_bytes, std::string* why) override {
    const Key key = key_of(L, s);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      if (!build_missing) {
        *why = "shape not planned";
        return false;
      }
      it = plans_.emplace(key, build(key)).first;
    }
    const Plan& p = it->second;
    if (!p.error.empty()) {
      *why = p.error;
      return false;
    }
    if (p.workspace > workspace_limit) {
      *why = "cuDNN workspace " + std::to_string(p.workspace) + " bytes > the " + std::to_string(workspace_limit) +
             " the plan grants attention";
      if (!it->second.told_limit && ++told_ <= kBuildLines)
        std::fprintf(stderr, "streamtune: attention %s keeps the own kernels: %s\n", shape_str(key).c_str(),
                     why->c_str());
      it->second.told_limit = true;
      return false;
    }
    *workspace_bytes = p.workspace;
    return true;
  }

  void forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, const SeqLayout& L, const AttnShape& s,
               void* workspace, cudaStream_t st) override {
    const Plan& p = plans_.at(key_of(L, s));
    std::unordered_map<int64_t, void*> pack = {{kQ, q.data}, {kK, k.data}, {kV, v.data},
                                               {kO, out.data}, {kStats, lse.data}};
    run(*p.fwd, pack, workspace, st, "forward");
  }

  void backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse,
                const SeqLayout& L, const AttnShape& s, void* workspace, cudaStream_t st) override {
    const Plan& p = plans_.at(key_of(L, s));
    std::unordered_map<int64_t, void*> pack = {{kQ, q.data},   {kK, k.data},      {kV, v.data},
                                               {kO, out.data}, {kStats, lse.data}, {kDO, dout.data},
                                               {kDQ, dq.data}, {kDK, dk.data},    {kDV, dv.data}};
    run(*p.bwd, pack, workspace, st, "backward");
  }

 private:
  struct Plan {
    std::shared_ptr<Graph> fwd, bwd;
    size_t workspace = 0;
    std::string error;  // non-empty: this shape keeps the backend's own kernels
    bool told_limit = false;  // the "workspace over the allowance" line was printed
  };

  // Both graphs or neither: a forward on cuDNN must be followed by a backward on cuDNN.
  Plan build(const Key& key) {
    Plan p;
    try {
      if (!handle_) {
        const cudnnStatus_t st = cudnnCreate(&handle_);
        if (st != CUDNN_STATUS_SUCCESS) {
          handle_ = nullptr;
          p.error = std::string("cudnnCreate: ") + cudnnGetErrorString(st);
        }
      }
      int64_t wf = 0, wb = 0;
      if (p.error.empty()) {
        std::string e = build_forward(key, handle_, &p.fwd, &wf);
        if (!e.empty()) p.error = "forward graph: " + e;
      }
      if (p.error.empty()) {
        std::string e = build_backward(key, handle_, &p.bwd, &wb);
        if (!e.empty()) p.error = "backward graph: " + e;
      }
      p.workspace = static_cast<size_t>(std::max<int64_t>(wf, wb));
    } catch (const std::exception& e) {
      p.error = std::string("cuDNN frontend threw: ") + e.what();
    }
    if (!p.error.empty()) p.fwd.reset(), p.bwd.reset();
    if (p.error.empty() && ++built_ <= kBuildLines)
      std::fprintf(stderr, "streamtune: attention %s: cuDNN %zu SDPA graphs built (workspace %zu bytes)%s\n",
                   shape_str(key).c_str(), cudnnGetVersion(), p.workspace,
                   built_ == kBuildLines ? "; further shapes are built as they come, quietly" : "");
    else if (!p.error.empty())
      std::fprintf(stderr, "streamtune: attention %s keeps the own kernels: %s\n", shape_str(key).c_str(),
                   p.error.c_str());
    return p;
  }

  void run(Graph& g, std::unordered_map<int64_t, void*>& pack, void* workspace, cudaStream_t st, const char* what) {
    const cudnnStatus_t ss = cudnnSetStream(handle_, st);
    CHECK(ss == CUDNN_STATUS_SUCCESS, "cudnnSetStream: " << cudnnGetErrorString(ss));
    fe::error_t e;
    try {
      e = g.execute(handle_, pack, workspace);
    } catch (const std::exception& x) {
      CHECK(false, "cuDNN SDPA " << what << " threw: " << x.what() << plan_hint());
    }
    CHECK(e.is_good(), "cuDNN SDPA " << what << " failed: " << e.get_message() << plan_hint());
    g_cudnn_calls.fetch_add(1);
  }

  cudnnHandle_t handle_ = nullptr;
  std::map<Key, Plan> plans_;
  static constexpr int kBuildLines = 3;  // "graphs built" lines printed; padded batches bring many shapes
  int built_ = 0, told_ = 0;
};

}  // namespace

std::unique_ptr<CudnnAttention> make_cudnn_attention() { return std::make_unique<CudnnAttentionImpl>(); }

#endif  // STREAMTUNE_HAVE_CUDNN

}  // namespace st::cuda
