// cuDNN fused SDPA for training attention (see attention_cudnn.h). The only translation unit that
// includes the cuDNN frontend: its headers are heavy and CI compiles on 2 cores.
//
// Layout: our q [B*T, NH, D] is cuDNN's BSHD, i.e. logical dims [B, H, S, D] with strides
// [T*H*D, D, H*D, 1]; lse f32 [B, NH, T] is "Stats" [B, H, S, 1] with strides [H*T, T, 1, 1].
// Stats is the natural-log logsumexp of the scaled scores, the same quantity attention_tc saves.
//
// Note [ragged documents]: packed rows (backend.h Note [document spans]) run as cuDNN's ragged
// ("THD") layout: every document span is a sequence of its own, the batch dimension is the span
// slots (the span count rounded up to even; slots past the spans have length 0), the sequence
// dimension a bucket of the longest span (model/layer.cc Note [packed attention allowance]), and each tensor's ragged offsets (element offsets of each span's first token,
// from the caller's token offsets) place the spans in our packed [B*T, H, D] buffers. Stats is
// ragged too, token-major ([B*T, NH], the lse buffer's size; not attention_tc's [B, NH, T] order,
// which nothing mixes: a shape takes one path for its forward and backward). A padding mask with
// the span lengths and the causal mask (top-left, per span) give each token exactly the keys of
// its document up to itself -- what the own kernels do with doc_ids, without walking the masked
// tiles at all. A sliding window is the same diagonal band as for dense rows, per span (every
// span's positions start at 0). max_total_seq_len (slots x bucket, a bound on the tokens) sizes cuDNN's ragged
// buffers, so the graph does not depend on the batch's length.
#include "backend/cuda/attention_cudnn.h"

#include <atomic>

#if STREAMTUNE_HAVE_CUDNN

#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
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

// Tensor uids of the variant packs (shared by both graphs); kR* are ragged offsets, kSeq* lengths.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV,
  kRQ, kRK, kRV, kRO, kRStats, kRDO, kRDQ, kRDK, kRDV, kSeqQ, kSeqKV
};

// (B, T, NH, KVH, D, scale bits, sliding window, ragged): everything a graph depends on. Ragged
// (Note [ragged documents]): B = span slots, T = the span length bucket, ragged = 1 (0 for the
// dense layout). The token count is not part of it: slots x bucket bounds it (each span fits its
// bucket), so batches of any length with the same slots and bucket share one graph.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, int64_t, int64_t>;

Key key_of(const SeqLayout& L, const AttnShape& s) {
  uint32_t bits = 0;
  std::memcpy(&bits, &s.scale, sizeof bits);
  if (is_ragged(L))
    return {L.doc_slots, document_seq_bucket(L), s.num_heads, s.num_kv_heads, s.head_dim, bits,
            effective_window(s, document_seq_bucket(L)), 1};
  return {L.batch, L.seq, s.num_heads, s.num_kv_heads, s.head_dim, bits, effective_window(s, L.seq), 0};
}

std::string shape_str(const Key& k) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "B=%lld T=%lld NH=%lld KVH=%lld D=%lld", static_cast<long long>(std::get<0>(k)),
                static_cast<long long>(std::get<1>(k)), static_cast<long long>(std::get<2>(k)),
                static_cast<long long>(std::get<3>(k)), static_cast<long long>(std::get<4>(k)));
  std::string out = buf;
  if (std::get<6>(k) > 0) out += " window=" + std::to_string(std::get<6>(k));
  if (std::get<7>(k) > 0) out += " ragged (B = span slots, T = their length bucket)";
  return out;
}

// An int32 [n, 1, 1, 1] tensor: ragged offsets (n = slots + 1) or span lengths (n = slots).
std::shared_ptr<TensorAttr> index_tensor(Graph& g, const std::string& name, int64_t uid, int64_t n) {
  return g.tensor(TensorAttr()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({n, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::INT32));
}

// A graph's tensor layout: dense BSHD, or ragged (Note [ragged documents]).
struct Dims {
  int64_t B, T, NH, KVH, D;
  float scale;
  int64_t window;
  bool ragged;
  int64_t max_tokens() const { return B * T; }  // a ragged graph's bound on the packed tokens
};

Dims dims_of(const Key& k) {
  const auto [B, T, NH, KVH, D, bits, window, ragged] = k;
  float scale = 0;
  std::memcpy(&scale, &bits, sizeof scale);
  return {B, T, NH, KVH, D, scale, window, ragged > 0};
}

// A BSHD tensor [B, H, T, D] (logical) of `heads` heads; ragged: placed by the offsets `ruid`.
void set_bshd(TensorAttr& t, int64_t uid, const Dims& d, int64_t H) {
  t.set_uid(uid).set_dim({d.B, H, d.T, d.D}).set_stride({d.T * H * d.D, d.D, H * d.D, 1}).set_data_type(
      fe::DataType_t::BFLOAT16);
}
std::shared_ptr<TensorAttr> bshd(Graph& g, const char* name, int64_t uid, int64_t ruid, const Dims& d, int64_t H) {
  auto t = g.tensor(TensorAttr().set_name(name));
  set_bshd(*t, uid, d, H);
  if (d.ragged) t->set_ragged_offset(index_tensor(g, std::string(name) + "_offsets", ruid, d.B + 1));
  return t;
}
void mark_bshd_out(Graph& g, const std::shared_ptr<TensorAttr>& t, int64_t uid, int64_t ruid, const Dims& d,
                   int64_t H) {
  set_bshd(*t, uid, d, H);
  t->set_output(true);
  if (d.ragged) t->set_ragged_offset(index_tensor(g, "out_offsets_" + std::to_string(uid), ruid, d.B + 1));
}
// Stats [B, NH, T, 1]: dense head-major (our lse [B, NH, T]); ragged token-major ([tokens, NH]).
void set_stats(Graph& g, TensorAttr& t, const Dims& d) {
  t.set_uid(kStats).set_dim({d.B, d.NH, d.T, 1}).set_data_type(fe::DataType_t::FLOAT);
  if (!d.ragged) {
    t.set_stride({d.NH * d.T, d.T, 1, 1});
    return;
  }
  t.set_stride({d.NH * d.T, 1, d.NH, 1}).set_ragged_offset(index_tensor(g, "stats_offsets", kRStats, d.B + 1));
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

// The masks both graphs share: causal (per span when ragged, with the span lengths as a padding
// mask), and a sliding window's left bound (key j survives when j > t - window).
template <class Attrs>
void set_masks(Graph& g, Attrs& a, const Dims& d) {
  a.set_causal_mask(true).set_attn_scale(d.scale);
  if (d.window > 0) a.set_diagonal_band_left_bound(static_cast<int>(d.window));
  if (d.ragged)
    a.set_padding_mask(true)
        .set_seq_len_q(index_tensor(g, "seq_len_q", kSeqQ, d.B))
        .set_seq_len_kv(index_tensor(g, "seq_len_kv", kSeqKV, d.B))
        .set_max_total_seq_len_q(d.max_tokens())
        .set_max_total_seq_len_kv(d.max_tokens());
}

std::string build_forward(const Key& k, cudnnHandle_t h, std::shared_ptr<Graph>* out, int64_t* ws) {
  const Dims d = dims_of(k);
  auto g = new_graph();
  auto q = bshd(*g, "Q", kQ, kRQ, d, d.NH), kk = bshd(*g, "K", kK, kRK, d, d.KVH), v = bshd(*g, "V", kV, kRV, d, d.KVH);
  auto opts = fe::graph::SDPA_attributes().set_name("st_sdpa").set_generate_stats(true);
  set_masks(*g, opts, d);
  auto [o, stats] = g->sdpa(q, kk, v, opts);
  mark_bshd_out(*g, o, kO, kRO, d, d.NH);
  stats->set_output(true);
  set_stats(*g, *stats, d);
  std::string err = finish(*g, h, ws);
  if (err.empty()) *out = std::move(g);
  return err;
}

std::string build_backward(const Key& k, cudnnHandle_t h, std::shared_ptr<Graph>* out, int64_t* ws) {
  const Dims d = dims_of(k);
  auto g = new_graph();
  auto q = bshd(*g, "Q", kQ, kRQ, d, d.NH), kk = bshd(*g, "K", kK, kRK, d, d.KVH), v = bshd(*g, "V", kV, kRV, d, d.KVH);
  auto o = bshd(*g, "O", kO, kRO, d, d.NH), dout = bshd(*g, "dO", kDO, kRDO, d, d.NH);
  auto stats = g->tensor(TensorAttr().set_name("Stats"));
  set_stats(*g, *stats, d);
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("st_sdpa_bwd")
                  .set_deterministic_algorithm(true);  // the project's hard rule: same bytes -> same bits
  set_masks(*g, opts, d);
  auto [dq, dk, dv] = g->sdpa_backward(q, kk, v, o, dout, stats, opts);
  mark_bshd_out(*g, dq, kDQ, kRDQ, d, d.NH);
  mark_bshd_out(*g, dk, kDK, kRDK, d, d.KVH);
  mark_bshd_out(*g, dv, kDV, kRDV, d, d.KVH);
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
               void* workspace, const RaggedArrays* ragged, cudaStream_t st) override {
    const Plan& p = plans_.at(key_of(L, s));
    std::unordered_map<int64_t, void*> pack = {{kQ, q.data}, {kK, k.data}, {kV, v.data},
                                               {kO, out.data}, {kStats, lse.data}};
    add_ragged(pack, L, ragged, {kRQ, kRO}, {kRK, kRV});
    run(*p.fwd, pack, workspace, st, "forward");
  }

  void backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse,
                const SeqLayout& L, const AttnShape& s, void* workspace, const RaggedArrays* ragged,
                cudaStream_t st) override {
    const Plan& p = plans_.at(key_of(L, s));
    std::unordered_map<int64_t, void*> pack = {{kQ, q.data},   {kK, k.data},      {kV, v.data},
                                               {kO, out.data}, {kStats, lse.data}, {kDO, dout.data},
                                               {kDQ, dq.data}, {kDK, dk.data},    {kDV, dv.data}};
    add_ragged(pack, L, ragged, {kRQ, kRO, kRDO, kRDQ}, {kRK, kRV, kRDK, kRDV});
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

  // A ragged call's offsets and lengths into the variant pack (Note [ragged documents]).
  static void add_ragged(std::unordered_map<int64_t, void*>& pack, const SeqLayout& L, const RaggedArrays* r,
                         std::initializer_list<int64_t> q_uids, std::initializer_list<int64_t> kv_uids) {
    CHECK(is_ragged(L) == (r != nullptr), "cuDNN attention: ragged arrays without document spans, or the reverse");
    if (r == nullptr) return;
    auto ptr = [](const int32_t* p) { return const_cast<void*>(static_cast<const void*>(p)); };
    for (int64_t u : q_uids) pack[u] = ptr(r->q_offsets);
    for (int64_t u : kv_uids) pack[u] = ptr(r->kv_offsets);
    pack[kRStats] = ptr(r->stats_offsets);
    pack[kSeqQ] = ptr(r->lens);
    pack[kSeqKV] = ptr(r->lens);
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
