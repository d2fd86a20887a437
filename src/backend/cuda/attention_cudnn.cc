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
//
// Note [chunked backward]: cuDNN's deterministic backward (9.14-9.19 on Hopper) keeps dP in a
// workspace of ~2 bytes per (batch, head, query, key) -- 17 GB for Llama-3-8B at 16k tokens, 481
// GB for Qwen2.5-0.5B at 128k -- which a small card cannot grant. Past what the plan grants, the
// backward runs in query chunks of kChunkRows: chunk [q0, q1) against the keys [0, q1) it sees
// (bottom-right causal; one graph for every full chunk through a padding mask whose kv length is
// q1, one more for a shorter last chunk). Each chunk's dQ rows are complete; its dK/dV for keys
// [0, q1) are partial, written to bf16 staging and summed in f32, chunk by chunk in order, then
// rounded once: deterministic, the dP workspace kChunkRows / T of the full one plus 12 bytes per
// key-head element for the sums. The forward stays one call (its workspace is small). The chunk
// size is fixed, so the bits depend only on the shape and whether the full workspace was granted.
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
#include "backend/cuda/ops.h"
#include "core/check.h"

#endif

namespace st::cuda {
namespace {
std::atomic<int64_t> g_cudnn_calls{0}, g_chunked_calls{0};
}  // namespace

int64_t cudnn_attention_calls() { return g_cudnn_calls.load(); }
int64_t cudnn_chunked_backward_calls() { return g_chunked_calls.load(); }

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
  // A chunk graph (Note [chunked backward]): sq query rows of the T-row buffers against all T key
  // rows, masked by a padding mask (kv length = the chunk's end) and bottom-right causal. 0: sq = T.
  int64_t sq = 0;
  int64_t max_tokens() const { return B * T; }  // a ragged graph's bound on the packed tokens
  bool chunk() const { return sq > 0; }
  int64_t rows(bool query) const { return chunk() && query ? sq : T; }  // logical S of a query-side / key-side tensor
};

Dims dims_of(const Key& k) {
  const auto [B, T, NH, KVH, D, bits, window, ragged] = k;
  float scale = 0;
  std::memcpy(&scale, &bits, sizeof scale);
  return {B, T, NH, KVH, D, scale, window, ragged > 0};
}

// A BSHD tensor [B, H, S, D] (logical) of `heads` heads in a [B, T, H, D] buffer (S = T, or a
// chunk's query rows for the query-side tensors); ragged: placed by the offsets `ruid`.
void set_bshd(TensorAttr& t, int64_t uid, const Dims& d, int64_t H) {
  const bool query = uid == kQ || uid == kO || uid == kDO || uid == kDQ;
  t.set_uid(uid).set_dim({d.B, H, d.rows(query), d.D}).set_stride({d.T * H * d.D, d.D, H * d.D, 1}).set_data_type(
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
// Stats [B, NH, S, 1]: dense head-major (our lse [B, NH, T]); ragged token-major ([tokens, NH]).
void set_stats(Graph& g, TensorAttr& t, const Dims& d) {
  t.set_uid(kStats).set_dim({d.B, d.NH, d.rows(true), 1}).set_data_type(fe::DataType_t::FLOAT);
  if (d.chunk()) {  // packed (cuDNN < 9.26 wants a non-ragged Stats packed): a copy of the chunk's rows
    t.set_stride({d.NH * d.sq, d.sq, 1, 1});
    return;
  }
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
  if (d.chunk()) {  // Note [chunked backward]: rows [q1 - sq, q1) of a sequence of q1 keys
    a.set_causal_mask_bottom_right(true)
        .set_padding_mask(true)
        .set_seq_len_q(index_tensor(g, "seq_len_q", kSeqQ, d.B))
        .set_seq_len_kv(index_tensor(g, "seq_len_kv", kSeqKV, d.B));
  } else {
    a.set_causal_mask(true);
  }
  a.set_attn_scale(d.scale);
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

std::string build_backward(const Key& k, cudnnHandle_t h, std::shared_ptr<Graph>* out, int64_t* ws, int64_t sq = 0) {
  Dims d = dims_of(k);
  d.sq = sq;
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
    Plan& p = it->second;
    if (!p.error.empty()) {
      *why = p.error;
      return false;
    }
    p.chunked_now = false;
    if (p.workspace > workspace_limit && std::get<7>(key) == 0) {  // dense: Note [chunked backward]
      build_chunks(key, &p);
      if (p.chunk_error.empty() && p.chunk_workspace <= workspace_limit) {
        p.chunked_now = true;
        if (!p.told_chunked && ++told_ <= kBuildLines)
          std::fprintf(stderr, "streamtune: attention %s: backward in %lld query chunks of %lld (workspace %zu bytes; "
                       "the whole one, %zu, is more than the %zu the plan grants)\n", shape_str(key).c_str(),
                       static_cast<long long>(p.chunks), static_cast<long long>(kChunkRows), p.chunk_workspace,
                       p.workspace, workspace_limit);
        p.told_chunked = true;
        *workspace_bytes = p.chunk_workspace;
        return true;
      }
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

  size_t chunked_workspace(const SeqLayout& L, const AttnShape& s) override {
    if (is_ragged(L)) return 0;
    size_t ws = 0;
    std::string why;
    if (!plan(L, s, SIZE_MAX, /*build=*/true, &ws, &why)) return 0;
    const Key key = key_of(L, s);
    Plan& p = plans_.at(key);
    build_chunks(key, &p);
    return p.chunk_error.empty() ? p.chunk_workspace : 0;
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
    if (p.chunked_now) return backward_chunked(p, key_of(L, s), dq, dk, dv, dout, q, k, v, out, lse, workspace, st);
    std::unordered_map<int64_t, void*> pack = {{kQ, q.data},   {kK, k.data},      {kV, v.data},
                                               {kO, out.data}, {kStats, lse.data}, {kDO, dout.data},
                                               {kDQ, dq.data}, {kDK, dk.data},    {kDV, dv.data}};
    add_ragged(pack, L, ragged, {kRQ, kRO, kRDO, kRDQ}, {kRK, kRV, kRDK, kRDV});
    run(*p.bwd, pack, workspace, st, "backward");
  }

 private:
  struct Plan {
    std::shared_ptr<Graph> fwd, bwd;
    size_t workspace = 0, fwd_workspace = 0;
    std::string error;  // non-empty: this shape keeps the backend's own kernels
    bool told_limit = false;  // the "workspace over the allowance" line was printed
    // Note [chunked backward]: built on first need; chunk_error non-empty = no chunked path.
    bool chunks_built = false, chunked_now = false, told_chunked = false;
    std::shared_ptr<Graph> chunk_bwd, last_bwd;  // full chunks; the shorter last one (or null)
    int64_t chunks = 0, last_rows = 0;
    size_t chunk_workspace = 0, chunk_cudnn = 0;  // all of it; cuDNN's part (the rest: f32 sums, staging)
    std::string chunk_error;
    std::shared_ptr<int32_t> lens;  // device [chunks][2][B]: each chunk's query rows, then its key rows
  };

  static void cuda_ok(cudaError_t e, const char* what) { CHECK(e == cudaSuccess, what << ": " << cudaGetErrorString(e)); }
  static constexpr int64_t kChunkRows = 1024;  // query rows a chunk (Note [chunked backward])
  static size_t align256(size_t n) { return (n + 255) / 256 * 256; }
  static size_t staging_bytes(const Dims& d) {
    const size_t kv = static_cast<size_t>(d.B * d.T * d.KVH * d.D);
    return 2 * align256(kv * sizeof(float)) + 2 * align256(kv * 2) +
           align256(static_cast<size_t>(d.B * d.NH * kChunkRows) * sizeof(float));
  }

  // The chunk graphs and their length arrays for a dense key whose full graphs are built.
  void build_chunks(const Key& key, Plan* p) {
    if (p->chunks_built) return;
    p->chunks_built = true;
    const Dims d = dims_of(key);
    p->chunks = (d.T + kChunkRows - 1) / kChunkRows;
    p->last_rows = d.T - (p->chunks - 1) * kChunkRows;
    if (p->chunks < 2) {
      p->chunk_error = "one chunk";
      return;
    }
    try {
      int64_t wc = 0, wl = 0;
      std::string e = build_backward(key, handle_, &p->chunk_bwd, &wc, kChunkRows);
      if (e.empty() && p->last_rows != kChunkRows) e = build_backward(key, handle_, &p->last_bwd, &wl, p->last_rows);
      if (!e.empty()) {
        p->chunk_error = "chunked backward graph: " + e;
        std::fprintf(stderr, "streamtune: attention %s: no chunked backward: %s\n", shape_str(key).c_str(), e.c_str());
        return;
      }
      p->chunk_cudnn = align256(static_cast<size_t>(std::max({static_cast<int64_t>(p->fwd_workspace), wc, wl})));
      p->chunk_workspace = p->chunk_cudnn + staging_bytes(d);
    } catch (const std::exception& x) {
      p->chunk_error = std::string("cuDNN frontend threw: ") + x.what();
      return;
    }
    std::vector<int32_t> lens(static_cast<size_t>(p->chunks * 2 * d.B));
    for (int64_t c = 0; c < p->chunks; ++c) {
      const int64_t rows = c + 1 == p->chunks ? p->last_rows : kChunkRows;
      for (int64_t b = 0; b < d.B; ++b) {
        lens[static_cast<size_t>((2 * c) * d.B + b)] = static_cast<int32_t>(rows);
        lens[static_cast<size_t>((2 * c + 1) * d.B + b)] = static_cast<int32_t>(c * kChunkRows + rows);
      }
    }
    int32_t* dev = nullptr;
    cuda_ok(cudaMalloc(&dev, lens.size() * sizeof(int32_t)), "cudaMalloc (chunk lengths)");
    p->lens = std::shared_ptr<int32_t>(dev, [](int32_t* x) { cudaFree(x); });
    cuda_ok(cudaMemcpy(dev, lens.data(), lens.size() * sizeof(int32_t), cudaMemcpyHostToDevice), "cudaMemcpy (chunk lengths)");
  }

  // Note [chunked backward]: chunk c's dQ rows straight into dq; its dK/dV (keys [0, q1)) into the
  // bf16 staging, added to the f32 sums in chunk order; the sums rounded into dk/dv once.
  void backward_chunked(const Plan& p, const Key& key, Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k,
                        Tensor v, Tensor out, Tensor lse, void* workspace, cudaStream_t st) {
    const Dims d = dims_of(key);
    const int64_t per_b = d.T * d.KVH * d.D, kv = d.B * per_b, qrow = d.NH * d.D;
    char* base = static_cast<char*>(workspace);
    size_t off = p.chunk_cudnn;
    auto carve = [&](size_t bytes) {
      void* x = base + off;
      off += align256(bytes);
      return x;
    };
    float* sum_k = static_cast<float*>(carve(kv * sizeof(float)));
    float* sum_v = static_cast<float*>(carve(kv * sizeof(float)));
    void* stage_k = carve(kv * 2);
    void* stage_v = carve(kv * 2);
    float* stats = static_cast<float*>(carve(static_cast<size_t>(d.B * d.NH * kChunkRows) * sizeof(float)));
    cuda_ok(cudaMemsetAsync(sum_k, 0, kv * sizeof(float), st), "cudaMemsetAsync (dK sums)");
    cuda_ok(cudaMemsetAsync(sum_v, 0, kv * sizeof(float), st), "cudaMemsetAsync (dV sums)");
    auto at = [](const Tensor& t, int64_t elems) {
      return static_cast<void*>(static_cast<char*>(t.data) + elems * static_cast<int64_t>(dtype_size(t.dtype)));
    };
    for (int64_t c = 0; c < p.chunks; ++c) {
      const int64_t q0 = c * kChunkRows, rows = c + 1 == p.chunks ? p.last_rows : kChunkRows;
      // The chunk's lse rows of every (batch, head) -- rows of T floats in [B*NH, T] -- packed.
      cuda_ok(cudaMemcpy2DAsync(stats, static_cast<size_t>(rows) * sizeof(float), static_cast<float*>(lse.data) + q0,
                                static_cast<size_t>(d.T) * sizeof(float), static_cast<size_t>(rows) * sizeof(float),
                                static_cast<size_t>(d.B * d.NH), cudaMemcpyDeviceToDevice, st),
              "cudaMemcpy2DAsync (chunk lse)");
      std::unordered_map<int64_t, void*> pack = {
          {kQ, at(q, q0 * qrow)},     {kK, k.data},          {kV, v.data},           {kO, at(out, q0 * qrow)},
          {kStats, stats},      {kDO, at(dout, q0 * qrow)}, {kDQ, at(dq, q0 * qrow)}, {kDK, stage_k},
          {kDV, stage_v},             {kSeqQ, p.lens.get() + 2 * c * d.B}, {kSeqKV, p.lens.get() + (2 * c + 1) * d.B}};
      run(rows == kChunkRows ? *p.chunk_bwd : *p.last_bwd, pack, base, st, "chunked backward", /*count=*/false);
      const int64_t n = (q0 + rows) * d.KVH * d.D;  // the keys this chunk's queries see
      for (int64_t b = 0; b < d.B; ++b) {
        const Tensor sk(sum_k + b * per_b, DType::kF32, {n}), sv(sum_v + b * per_b, DType::kF32, {n});
        launch_add(sk, sk, Tensor(static_cast<char*>(stage_k) + b * per_b * 2, DType::kBF16, {n}), st);
        launch_add(sv, sv, Tensor(static_cast<char*>(stage_v) + b * per_b * 2, DType::kBF16, {n}), st);
      }
    }
    launch_convert(Tensor(dk.data, DType::kBF16, {kv}), Tensor(sum_k, DType::kF32, {kv}), st);
    launch_convert(Tensor(dv.data, DType::kBF16, {kv}), Tensor(sum_v, DType::kF32, {kv}), st);
    g_cudnn_calls.fetch_add(1);
    g_chunked_calls.fetch_add(1);
  }

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
      p.fwd_workspace = static_cast<size_t>(wf);
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

  // count: one of the calls cudnn_attention_calls() counts (a chunked backward counts once).
  void run(Graph& g, std::unordered_map<int64_t, void*>& pack, void* workspace, cudaStream_t st, const char* what,
           bool count = true) {
    const cudnnStatus_t ss = cudnnSetStream(handle_, st);
    CHECK(ss == CUDNN_STATUS_SUCCESS, "cudnnSetStream: " << cudnnGetErrorString(ss));
    fe::error_t e;
    try {
      e = g.execute(handle_, pack, workspace);
    } catch (const std::exception& x) {
      CHECK(false, "cuDNN SDPA " << what << " threw: " << x.what() << plan_hint());
    }
    CHECK(e.is_good(), "cuDNN SDPA " << what << " failed: " << e.get_message() << plan_hint());
    if (count) g_cudnn_calls.fetch_add(1);
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
