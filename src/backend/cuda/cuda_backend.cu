// CudaBackend: memory, the three streams, events, and op dispatch (validation + launch).
// Kernels live in one file per op family (ops.h); GEMMs go through cuBLASLt (gemm.h).
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_streams.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/graph_recorder.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/profiler_impl.h"
#include "backend/dora_args.h"
#include "core/check.h"
#include "core/nf4.h"

namespace st {
namespace cuda {
namespace {

bool is_float(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// "bf16[512,896]": the profiler's shape key.
const char* dn(DType t) { return t == DType::kBF16 ? "bf16" : t == DType::kF32 ? "f32" : dtype_name(t); }
std::string shp(const Tensor& t) {
  std::string s = std::string(dn(t.dtype)) + "[";
  for (int i = 0; i < t.ndim; ++i) s += (i ? "," : "") + std::to_string(t.dim(i));
  return s + "]";
}

constexpr size_t kInitialScratchFloats = 1u << 20;

// Device memory the cuDNN attention may use as workspace beyond the planner's "attention backward
// scratch" (which it replaces): the planner's 64 MiB "workspaces" term minus GemmRunner's 32 MiB
// cuBLASLt workspace. Larger cuDNN workspaces keep the own kernels (never allocate past the plan).
constexpr size_t kCudnnExtraWorkspaceBytes = 32u << 20;

// Experiment hook: STREAMTUNE_CUDNN_WORKSPACE_MIB=N allows cuDNN workspaces up to N MiB regardless
// of the plan (for measuring cuDNN on shapes whose deterministic backward needs more than the plan
// holds). Unset: the planned limit.
size_t cudnn_workspace_override() {
  static const size_t v = [] {
    const char* e = std::getenv("STREAMTUNE_CUDNN_WORKSPACE_MIB");
    return e ? static_cast<size_t>(std::strtoull(e, nullptr, 10)) << 20 : size_t{0};
  }();
  return v;
}

// STREAMTUNE_ATTENTION=own keeps every attention on the backend's own kernels (A/B benches).
bool own_attention_forced() {
  static const bool forced = env_switch("STREAMTUNE_ATTENTION", "own", "cuDNN attention disabled");
  return forced;
}

class CudaBackend final : public Backend {
 public:
  // dev_ is initialised (and the device made current) before streams_ is constructed: the streams
  // must belong to this backend's device, not to whichever device was current (the second GPU's
  // streams used to be created on the first, and its memsets failed with "invalid argument").
  explicit CudaBackend(int dev) : dev_(select_device(dev)) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev_));
    name_ = prop.name;
    gemm_ = std::make_unique<GemmRunner>();
    grow_scratch(kInitialScratchFloats);
  }
  ~CudaBackend() override {
    bind();
    cudaDeviceSynchronize();
    gemm_.reset();
    cudnn_.reset();
    for (ScratchBuf& b : scratch_)
      if (b.p) cudaFree(b.p);
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string description() const override { return "cuda:" + std::to_string(dev_) + " " + name_; }

  // ---- memory ----
  StatusOr<void*> alloc(size_t bytes) override {
    bind();
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear the error so later calls do not see it
      return ResourceExhausted(Str() << "cudaMalloc(" << bytes << " bytes) on cuda:" << dev_ << " failed: "
                                     << cudaGetErrorString(e));
    }
    return p;
  }
  void free(void* p) override {
    bind();
    if (p) CUDA_CHECK(cudaFree(p));
  }
  bool memory_info(uint64_t* free_bytes, uint64_t* total_bytes) override {
    bind();
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    *free_bytes = f;
    *total_bytes = t;
    return true;
  }
  StatusOr<void*> alloc_host_pinned(size_t bytes) override {
    bind();
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return ResourceExhausted(Str() << "cudaHostAlloc(" << bytes << " bytes) failed: " << cudaGetErrorString(e));
    }
    return p;
  }
  void free_host_pinned(void* p) override {
    bind();
    if (p) CUDA_CHECK(cudaFreeHost(p));
  }
  Status register_host(void* p, size_t bytes) override {
    bind();
    const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return ResourceExhausted(Str() << "cudaHostRegister(" << bytes << " bytes) failed: " << cudaGetErrorString(e));
    }
    return Status();
  }
  void unregister_host(void* p) override {
    bind();
    if (p) CUDA_CHECK(cudaHostUnregister(p));
  }

  void copy_h2d(void* dst, const void* src, size_t bytes, StreamId s) override {
    bind();
    ProfScope prof(stream(s), "copy_h2d", [&] { return std::to_string(bytes >> 20) + "MiB"; });
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream(s)));
  }
  void copy_d2h(void* dst, const void* src, size_t bytes, StreamId s) override {
    bind();
    ProfScope prof(stream(s), "copy_d2h", [&] { return std::to_string(bytes) + "B"; });
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream(s)));
  }
  void copy_d2d(void* dst, const void* src, size_t bytes, StreamId s) override {
    bind();
    ProfScope prof(stream(s), "copy_d2d", [&] { return std::to_string(bytes) + "B"; });
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream(s)));
  }
  void memset_zero(void* dst, size_t bytes, StreamId s) override {
    bind();
    ProfScope prof(stream(s), "memset", [&] { return std::to_string(bytes) + "B"; });
    if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream(s)));
  }

  // ---- streams and events ----
  std::unique_ptr<Event> create_event() override {
    bind();
    return std::make_unique<CudaEvent>();
  }
  void record(Event& e, StreamId s) override { bind(); CUDA_CHECK(cudaEventRecord(ev(e), stream(s))); }
  void wait(StreamId s, Event& e) override { bind(); CUDA_CHECK(cudaStreamWaitEvent(stream(s), ev(e), 0)); }
  void sync_event(Event& e) override { bind(); CUDA_CHECK(cudaEventSynchronize(ev(e))); }
  bool event_done(Event& e) override {
    bind();
    const cudaError_t r = cudaEventQuery(ev(e));
    if (r == cudaErrorNotReady) return false;
    CUDA_CHECK(r);
    return true;
  }
  void sync_stream(StreamId s) override {
    bind();
    CUDA_CHECK(cudaStreamSynchronize(stream(s)));
    if (s == StreamId::kCompute) CUDA_CHECK(cudaStreamSynchronize(side_.get()));
  }
  void sync_all() override {
    bind();
    for (auto& s : streams_) CUDA_CHECK(cudaStreamSynchronize(s.get()));
    CUDA_CHECK(cudaStreamSynchronize(side_.get()));
  }

  // Note [side stream] (backend.h). STREAMTUNE_SIDE_STREAM=off keeps every op on the compute
  // stream (A/B benches; the bits are the same either way).
  static bool side_off() {
    static const bool off = env_switch("STREAMTUNE_SIDE_STREAM", "off", "side stream disabled");
    return off;
  }
  void side_begin() override {
    if (side_off()) return;
    CHECK(!side_active_, "side_begin: already on the side stream");
    bind();
    CUDA_CHECK(cudaEventRecord(fork_.get(), stream(StreamId::kCompute)));
    CUDA_CHECK(cudaStreamWaitEvent(side_.get(), fork_.get(), 0));
    side_active_ = true;
  }
  void side_end() override {
    if (side_off()) return;
    CHECK(side_active_, "side_end without side_begin");
    side_active_ = false;
    side_pending_ = true;
  }
  void side_join() override {
    CHECK(!side_active_, "side_join while on the side stream");
    if (!side_pending_) return;
    bind();
    CUDA_CHECK(cudaEventRecord(join_.get(), side_.get()));
    CUDA_CHECK(cudaStreamWaitEvent(stream(StreamId::kCompute), join_.get(), 0));
    side_pending_ = false;
  }

  // ---- ops ----
  void gemm(Tensor c, Tensor a, Tensor b, const GemmOpts& o) override {
    bind();
    ProfScope prof(compute(), "gemm", [&] { return std::string(dn(a.dtype)) + ">" + dn(c.dtype) + " " + std::to_string(c.rows()) + "x" + std::to_string(c.cols()) + "x" + std::to_string(o.trans_a == Trans::kYes ? a.rows() : a.cols()) + (o.trans_a == Trans::kYes ? " tA" : "") + (o.trans_b == Trans::kYes ? " tB" : "") + (o.accum == Accum::kAdd ? " +=" : ""); });
    CHECK(a.dtype == b.dtype && (a.dtype == DType::kF32 || a.dtype == DType::kBF16), "gemm: A/B dtype");
    CHECK(c.dtype == DType::kF32 || c.dtype == DType::kBF16, "gemm: C dtype");
    const bool ta = o.trans_a == Trans::kYes, tb = o.trans_b == Trans::kYes;
    const int64_t M = ta ? a.cols() : a.rows(), K = ta ? a.rows() : a.cols();
    const int64_t Kb = tb ? b.cols() : b.rows(), N = tb ? b.rows() : b.cols();
    CHECK(K == Kb && c.rows() == M && c.cols() == N,
          "gemm: shapes A " << a.shape_str() << " B " << b.shape_str() << " C " << c.shape_str());
    if (a.dtype == DType::kF32 && c.dtype != DType::kF32) grow_scratch(static_cast<size_t>(M * N));
    main_stream_only("gemm", "cuBLASLt's workspace");
    gemm_->run(c, a, b, o, compute(), scr().p, scr().floats);
  }
  void gemm_pair(Tensor c0, Tensor c1, Tensor a, Tensor b0, Tensor b1, Tensor bias0, Tensor bias1) override {
    bind();
    int64_t sb = 0, sc = 0, sbias = 0;
    if (!pair_layout(c0, c1, a, b0, b1, bias0, bias1, &sb, &sc, &sbias))
      return Backend::gemm_pair(c0, c1, a, b0, b1, bias0, bias1);  // two gemm calls
    ProfScope prof(compute(), "gemm_pair", [&] {
      return "2x " + std::to_string(c0.rows()) + "x" + std::to_string(c0.cols()) + "x" + std::to_string(a.cols()) +
             " tB";
    });
    main_stream_only("gemm", "cuBLASLt's workspace");
    gemm_->run_pair(c0, a, b0, bias0, sb, sc, sbias, compute());
  }
  // ---- LoRA (backend.h): tensor-core kernels for bf16 activations (lora_tc.cu), else lora_ops.cu ----
  void lora_down(Tensor t, Tensor x, Tensor a, float dropout_p, DropoutSeed seed) override {
    bind();
    ProfScope prof(compute(), "lora_down", [&] { return shp(x) + "x" + shp(a) + (dropout_p > 0 ? " drop" : ""); });
    check_lora(x, a, t, x.cols(), a.rows(), "lora_down x, A [r,in], t [N,r]");
    if (lora_tc_rowdot_ok(x, a.rows())) {
      grow_scratch(static_cast<size_t>(lora_tc_rowdot_scratch_floats(x.rows(), x.cols(), a.rows(), false)));
      return launch_lora_down_tc(t, x, a, dropout_p, seed, scr().p, compute());
    }
    grow_scratch(static_cast<size_t>(lora_scratch_floats(x.rows(), x.cols(), a.rows(), LoraScratchOp::kRowDot)));
    launch_lora_down(t, x, a, dropout_p, seed, scr().p, compute());
  }
  void lora_up(Tensor y, Tensor t, Tensor b, float scale) override {
    bind();
    ProfScope prof(compute(), "lora_up", [&] { return shp(y) + " r" + std::to_string(t.cols()); });
    check_lora(y, b, t, y.cols(), b.cols(), "lora_up y, B [out,r], t [N,r]", /*w_trans=*/true);
    if (lora_tc_update_ok(y, t, b.cols())) return launch_lora_up_tc(y, t, b, scale, compute());
    launch_lora_up(y, t, b, scale, compute());
  }
  void lora_grad_b(Tensor db, Tensor dy, Tensor t, float scale) override {
    bind();
    ProfScope prof(compute(), "lora_grad_b", [&] { return shp(dy) + " r" + std::to_string(t.cols()); });
    check_lora(dy, db, t, dy.cols(), db.cols(), "lora_grad_b dy, db [out,r], t [N,r]", /*w_trans=*/true);
    if (lora_tc_colsum_ok(dy, t.cols())) {
      grow_scratch(static_cast<size_t>(lora_tc_colsum_scratch_floats(dy.rows(), dy.cols(), t.cols())));
      return launch_lora_grad_b_tc(db, dy, t, scale, scr().p, compute());
    }
    grow_scratch(static_cast<size_t>(lora_scratch_floats(dy.rows(), dy.cols(), t.cols(), LoraScratchOp::kColSum)));
    launch_lora_grad_b(db, dy, t, scale, scr().p, compute());
  }
  void lora_dt(Tensor dt, Tensor dy, Tensor b, float scale) override {
    bind();
    ProfScope prof(compute(), "lora_dt", [&] { return shp(dy) + " r" + std::to_string(b.cols()); });
    check_lora(dy, b, dt, dy.cols(), b.cols(), "lora_dt dy, B [out,r], dt [N,r]", /*w_trans=*/true);
    if (lora_tc_rowdot_ok(dy, b.cols())) {
      grow_scratch(static_cast<size_t>(lora_tc_rowdot_scratch_floats(dy.rows(), dy.cols(), b.cols(), true)));
      return launch_lora_dt_tc(dt, dy, b, scale, scr().p, compute());
    }
    grow_scratch(static_cast<size_t>(lora_scratch_floats(dy.rows(), dy.cols(), b.cols(), LoraScratchOp::kRowDot)));
    launch_lora_dt(dt, dy, b, scale, scr().p, compute());
  }
  void lora_grad_a(Tensor da, Tensor dt, Tensor x, float dropout_p, DropoutSeed seed) override {
    bind();
    ProfScope prof(compute(), "lora_grad_a",
                   [&] { return shp(x) + " r" + std::to_string(dt.cols()) + (dropout_p > 0 ? " drop" : ""); });
    check_lora(x, da, dt, x.cols(), da.rows(), "lora_grad_a x, da [r,in], dt [N,r]");
    if (lora_tc_colsum_ok(x, dt.cols())) {
      grow_scratch(static_cast<size_t>(lora_tc_colsum_scratch_floats(x.rows(), x.cols(), dt.cols())));
      return launch_lora_grad_a_tc(da, dt, x, dropout_p, seed, scr().p, compute());
    }
    grow_scratch(static_cast<size_t>(lora_scratch_floats(x.rows(), x.cols(), dt.cols(), LoraScratchOp::kColSum)));
    launch_lora_grad_a(da, dt, x, dropout_p, seed, scr().p, compute());
  }
  void lora_dx(Tensor dx, Tensor dt, Tensor a, float dropout_p, DropoutSeed seed) override {
    bind();
    ProfScope prof(compute(), "lora_dx", [&] { return shp(dx) + " r" + std::to_string(a.rows()) + (dropout_p > 0 ? " drop" : ""); });
    check_lora(dx, a, dt, dx.cols(), a.rows(), "lora_dx dx, A [r,in], dt [N,r]");
    if (lora_tc_update_ok(dx, dt, a.rows())) return launch_lora_dx_tc(dx, dt, a, dropout_p, seed, compute());
    launch_lora_dx(dx, dt, a, dropout_p, seed, compute());
  }
  // ---- DoRA (backend.h): dora_ops.cu ----
  void dora_norm(Tensor norm, Tensor scale, Tensor w, Tensor a, Tensor b, Tensor mag, float s) override {
    bind();
    ProfScope prof(compute(), "dora_norm", [&] { return shp(w) + " r" + std::to_string(a.rows()); });
    const int64_t out = w.rows(), in = w.cols(), r = a.rows();
    dora_args::norm_args(norm, scale, w, a, b, mag);
    CHECK(w.dtype == DType::kF32 || w.dtype == DType::kBF16, "dora_norm W: f32 or bf16 expected, got " << shp(w));
    grow_scratch(static_cast<size_t>(dora_norm_scratch_floats(out, in, r)));
    launch_dora_norm(norm, scale, w, a, b, mag, s, scr().p, compute());
  }
  void dora_combine(Tensor y, Tensor scale, Tensor bias, Tensor residual) override {
    bind();
    ProfScope prof(compute(), "dora_combine", [&] {
      return shp(y) + (bias.empty() ? "" : " bias") + (residual.empty() ? "" : " res");
    });
    dora_args::combine_args(y, scale, bias, residual);
    launch_dora_combine(y, scale, bias, residual, compute());
  }
  void dora_backward(Tensor g, Tensor dmag, Tensor dy, Tensor v, Tensor scale, Tensor norm) override {
    bind();
    ProfScope prof(compute(), "dora_backward", [&] { return shp(dy); });
    dora_args::backward_args(g, dmag, dy, v, scale, norm);
    grow_scratch(static_cast<size_t>(dora_backward_scratch_floats(dy.rows(), dy.cols())));
    launch_dora_backward(g, dmag, dy, v, scale, norm, scr().p, compute());
  }
  void add_bias(Tensor y, Tensor bias) override {
    bind();
    ProfScope prof(compute(), "add_bias", [&] { return shp(y); });
    CHECK(bias.numel() == y.cols() && is_float(y.dtype) && is_float(bias.dtype), "add_bias");
    launch_add_bias(y, bias, compute());
  }
  void add(Tensor y, Tensor a, Tensor b) override {
    bind();
    ProfScope prof(compute(), "add", [&] { return shp(y) + "=" + shp(a) + "+" + shp(b); });
    CHECK(y.numel() == a.numel() && y.numel() == b.numel(), "add: numel");
    launch_add(y, a, b, compute());
  }
  void scale(Tensor y, Tensor x, float s) override {
    bind();
    ProfScope prof(compute(), "scale", [&] { return shp(y); });
    CHECK(y.numel() == x.numel(), "scale: numel");
    launch_scale(y, x, s, compute());
  }
  void convert(Tensor dst, Tensor src) override {
    bind();
    ProfScope prof(compute(), "convert", [&] { return shp(src) + ">" + shp(dst); });
    CHECK(dst.numel() == src.numel() && is_float(dst.dtype) && is_float(src.dtype), "convert");
    launch_convert(dst, src, compute());
  }
  void embedding(Tensor out, Tensor table, const int32_t* ids) override {
    bind();
    ProfScope prof(compute(), "embedding", [&] { return shp(out); });
    CHECK(out.cols() == table.cols(), "embedding: width");
    launch_embedding(out, table, ids, compute());
  }
  void rmsnorm(Tensor y, Tensor rstd, Tensor x, Tensor w, float eps) override {
    bind();
    ProfScope prof(compute(), "rmsnorm", [&] { return shp(x); });
    CHECK(y.numel() == x.numel() && w.numel() == x.cols() && rstd.numel() == x.rows() &&
              rstd.dtype == DType::kF32, "rmsnorm: shapes");
    launch_rmsnorm(y, rstd, x, w, eps, compute());
  }
  void rmsnorm_backward(Tensor dx, Tensor dy, Tensor x, Tensor w, Tensor rstd) override {
    bind();
    ProfScope prof(compute(), "rmsnorm_bwd", [&] { return shp(x); });
    CHECK(dx.numel() == x.numel() && dy.numel() == x.numel() && w.numel() == x.cols() &&
              rstd.numel() == x.rows(), "rmsnorm_backward: shapes");
    launch_rmsnorm_backward(dx, dy, x, w, rstd, compute());
  }
  void rmsnorm_backward_add(Tensor dx, Tensor dy, Tensor x, Tensor w, Tensor rstd, Tensor residual) override {
    bind();
    ProfScope prof(compute(), "rmsnorm_bwd_add", [&] { return shp(x); });
    CHECK(dx.numel() == x.numel() && dy.numel() == x.numel() && w.numel() == x.cols() &&
              rstd.numel() == x.rows() && residual.numel() == x.numel() && residual.data != dy.data,
          "rmsnorm_backward_add: shapes");
    launch_rmsnorm_backward(dx, dy, x, w, rstd, compute(), residual);
  }
  void rope(Tensor x, const int32_t* positions, Tensor inv_freq, bool inverse) override {
    bind();
    ProfScope prof(compute(), "rope", [&] { return shp(x); });
    CHECK(x.ndim == 3 && x.dim(2) % 2 == 0 && inv_freq.numel() == x.dim(2) / 2 && inv_freq.dtype == DType::kF32,
          "rope: x " << x.shape_str() << " inv_freq " << inv_freq.shape_str());
    launch_rope(x, positions, inv_freq, inverse, compute());
  }
  void rope_qk(Tensor q, Tensor k, const int32_t* positions, Tensor inv_freq, bool inverse) override {
    bind();
    {
      ProfScope prof(compute(), "rope_qk", [&] { return shp(q) + shp(k); });
      CHECK(q.ndim == 3 && k.ndim == 3 && q.dim(2) % 2 == 0 && inv_freq.numel() == q.dim(2) / 2 &&
                inv_freq.dtype == DType::kF32,
            "rope_qk: q " << q.shape_str() << " k " << k.shape_str() << " inv_freq " << inv_freq.shape_str());
      if (launch_rope_qk(q, k, positions, inv_freq, inverse, compute())) return;
    }
    Backend::rope_qk(q, k, positions, inv_freq, inverse);
  }
  void attention(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, const SeqLayout& L,
                 const AttnShape& s) override {
    bind();
    ProfScope prof(compute(), "attention", [&] { return shp(q) + shp(k); });
    main_stream_only("attention", "the cuDNN handle");
    check_attn(q, k, v, L, s);
    CHECK(out.numel() == q.numel() && lse.dtype == DType::kF32 && lse.numel() == L.batch * s.num_heads * L.seq,
          "attention: out/lse shapes");
    const Tensor all[] = {out, q, k, v};
    size_t ws = 0;
    if (use_cudnn(all, 4, lse, L, s, &ws)) {
      RaggedArrays ra;
      return cudnn_->forward(out, lse, q, k, v, L, s, scr().p, ragged_arrays(L, s, ws, &ra), compute());
    }
    launch_attention(out, lse, q, k, v, L, s, compute());
  }
  void attention_kv(Tensor o, Tensor q, Tensor k, Tensor v, int64_t q0, const AttnShape& s) override {
    bind();
    ProfScope prof(compute(), "attention_kv", [&] { return shp(q); });
    CHECK(s.num_heads > 0 && s.num_kv_heads > 0 && s.num_heads % s.num_kv_heads == 0 && s.head_dim > 0 &&
              o.numel() == q.numel() && q.numel() % (s.num_heads * s.head_dim) == 0 && k.dtype == v.dtype &&
              k.numel() == v.numel() && k.numel() % (s.num_kv_heads * s.head_dim) == 0 && q0 >= 0 &&
              q0 + q.numel() / (s.num_heads * s.head_dim) <= k.numel() / (s.num_kv_heads * s.head_dim),
          "attention_kv: q " << q.shape_str() << " k " << k.shape_str() << " q_start " << q0);
    launch_attention_kv(o, q, k, v, q0, s, compute());
  }
  // Note [fused attention workspace] (backend.h): whether cuDNN may run `tokens` tokens of shape s.
  bool fused_path(int64_t tokens, const AttnShape& s) {
    bind();
    return cudnn_ && cudnn_attention_enabled() && !own_attention_forced() && tokens != 0 && s.head_dim % 8 == 0 &&
           s.head_dim <= 256;
  }
  uint64_t planned_workspace(const SeqLayout& L, const AttnShape& s) {
    size_t ws = 0;
    std::string why;
    return cudnn_->plan(L, s, SIZE_MAX, /*build=*/true, &ws, &why) ? ws : 0;
  }
  uint64_t fused_attention_workspace(int64_t batch, int64_t seq, const AttnShape& s) override {
    return fused_path(batch * seq, s) ? planned_workspace(SeqLayout{batch, seq, nullptr, nullptr}, s) : 0;
  }
  uint64_t fused_attention_ragged_workspace(int64_t slots, int64_t bucket, const AttnShape& s) override {
    if (!fused_path(slots * bucket, s)) return 0;
    // A graph is keyed and built by its shape alone (attention_cudnn.cc key_of): the span arrays
    // are only read when it runs, so a layout that stands for the shape suffices here.
    static const int32_t kShapeOnly = 0;
    return planned_workspace({.batch = 1, .seq = bucket, .doc_ids = &kShapeOnly, .doc_spans = slots, .doc_slots = slots,
                              .max_doc_len = bucket, .doc_starts = &kShapeOnly, .doc_lens = &kShapeOnly},
                             s);
  }
  void set_fused_attention_allowance(uint64_t bytes) override { fused_allowance_ = bytes; }
  uint64_t fused_attention_min_workspace(int64_t batch, int64_t seq, const AttnShape& s) override {
    return fused_path(batch * seq, s) ? cudnn_->chunked_workspace(SeqLayout{batch, seq, nullptr, nullptr}, s) : 0;
  }
  void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out,
                          Tensor lse, const SeqLayout& L, const AttnShape& s) override {
    bind();
    ProfScope prof(compute(), "attention_bwd", [&] { return shp(q) + shp(k); });
    main_stream_only("attention", "the cuDNN handle");
    check_attn(q, k, v, L, s);
    CHECK(dq.numel() == q.numel() && dk.numel() == k.numel() && dv.numel() == v.numel() &&
              dout.numel() == q.numel() && out.numel() == q.numel(), "attention_backward: shapes");
    const Tensor all[] = {dq, dk, dv, dout, q, k, v, out};
    size_t ws = 0;
    if (use_cudnn(all, 8, lse, L, s, &ws)) {
      RaggedArrays ra;
      return cudnn_->backward(dq, dk, dv, dout, q, k, v, out, lse, L, s, scr().p, ragged_arrays(L, s, ws, &ra),
                              compute());
    }
    grow_scratch(static_cast<size_t>(attention_backward_scratch_floats(L, s)));
    launch_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, L, s, scr().p, compute());
  }
  void dequant_nf4(Tensor w, Tensor codes, Tensor absmax) override {
    bind();
    ProfScope prof(compute(), "dequant_nf4", [&] { return shp(w); });
    const int64_t n = w.numel();
    CHECK((w.dtype == DType::kBF16 || w.dtype == DType::kF32) && codes.dtype == DType::kU8 &&
              absmax.dtype == DType::kF32 && n % kNf4Block == 0 && codes.numel() * 2 == n &&
              absmax.numel() * kNf4Block == n,
          "dequant_nf4: w " << w.shape_str() << " codes " << codes.shape_str() << " absmax " << absmax.shape_str());
    CHECK(reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && reinterpret_cast<uintptr_t>(codes.data) % 4 == 0 &&
              reinterpret_cast<uintptr_t>(absmax.data) % 4 == 0,
          "dequant_nf4: misaligned operands");
    launch_dequant_nf4(w, codes, absmax, compute());
  }
  void decode_code12(Tensor w, Tensor body, Tensor aux) override {
    bind();
    ProfScope prof(compute(), "decode_code12", [&] { return shp(w); });
    launch_decode_code12(w, body, aux, compute());  // checks its operands
  }
  void swiglu(Tensor h, Tensor gate, Tensor up) override {
    bind();
    ProfScope prof(compute(), "swiglu", [&] { return shp(h); });
    CHECK(h.numel() == gate.numel() && h.numel() == up.numel(), "swiglu: numel");
    launch_swiglu(h, gate, up, compute());
  }
  void swiglu_backward(Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up) override {
    bind();
    ProfScope prof(compute(), "swiglu_bwd", [&] { return shp(dh); });
    CHECK(dgate.numel() == dh.numel() && dup.numel() == dh.numel() && gate.numel() == dh.numel() &&
              up.numel() == dh.numel(), "swiglu_backward: numel");
    launch_swiglu_backward(dgate, dup, dh, gate, up, compute());
  }
  void cross_entropy(Tensor logits, Tensor loss_sum, const int32_t* labels, float grad_scale) override {
    bind();
    ProfScope prof(compute(), "cross_entropy", [&] { return shp(logits); });
    CHECK(loss_sum.dtype == DType::kF32 && loss_sum.numel() >= 1, "cross_entropy: loss_sum");
    grow_scratch(static_cast<size_t>(logits.rows()));
    launch_cross_entropy(logits, loss_sum, labels, grad_scale, scr().p, compute());
  }
  void ce_chunk(Tensor logits, Tensor acc, Tensor m, Tensor s, Tensor target, const int32_t* labels,
                int64_t col0) override {
    bind();
    ProfScope prof(compute(), "ce_chunk", [&] { return shp(logits) + (acc.empty() ? "" : " train"); });
    const int64_t R = logits.rows();
    CHECK(is_float(logits.dtype), "ce_chunk: logits dtype " << dtype_name(logits.dtype));
    check_ce_state(m, s, target, R, "ce_chunk");
    CHECK(col0 >= 0, "ce_chunk: col0 " << col0);
    if (!acc.empty())
      CHECK(acc.dtype == DType::kF32 && acc.rows() == R, "ce_chunk: acc must be f32 [" << R << ", H], got "
                                                            << acc.shape_str());
    launch_ce_chunk(logits, acc, m, s, target, labels, col0, compute());
  }
  void ce_finish(Tensor dx, Tensor loss_sum, Tensor acc, Tensor m, Tensor s, Tensor target, Tensor w_label,
                 const int32_t* labels, float grad_scale, Tensor row_scale) override {
    bind();
    ProfScope prof(compute(), "ce_finish", [&] { return dx.empty() ? shp(m) : shp(dx); });
    const int64_t R = m.numel();
    check_ce_state(m, s, target, R, "ce_finish");
    CHECK(loss_sum.dtype == DType::kF32 && loss_sum.numel() >= 1, "ce_finish: loss_sum must be f32 [1]");
    if (!dx.empty()) {
      const int64_t H = dx.cols();
      CHECK(is_float(dx.dtype) && is_float(w_label.dtype), "ce_finish: dx / w_label dtype");
      CHECK(dx.rows() == R && acc.dtype == DType::kF32 && acc.rows() == R && acc.cols() == H &&
                w_label.rows() == R && w_label.cols() == H,
            "ce_finish: dx " << dx.shape_str() << ", acc (f32) " << acc.shape_str() << " and w_label "
                             << w_label.shape_str() << " must be [" << R << ", H]");
      CHECK(row_scale.empty() || (row_scale.dtype == DType::kF32 && row_scale.numel() == R),
            "ce_finish: row_scale must be f32 [" << R << "], got " << row_scale.shape_str());
    }
    launch_ce_finish(dx, loss_sum, acc, m, s, target, w_label, labels, grad_scale,
                     row_scale.empty() ? nullptr : row_scale.ptr<float>(), compute());
  }
  void dropout(Tensor y, Tensor x, float p, DropoutSeed seed) override {
    bind();
    ProfScope prof(compute(), "dropout", [&] { return shp(y); });
    CHECK(y.numel() == x.numel(), "dropout: numel");
    launch_dropout(y, x, p, seed, compute());
  }
  void add_uniform_noise(Tensor x, float magnitude, DropoutSeed seed) override {
    bind();
    ProfScope prof(compute(), "add_uniform_noise", [&] { return shp(x); });
    CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16, "add_uniform_noise: f32 or bf16");
    launch_uniform_noise(x, magnitude, seed, compute());
  }
  void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const AdamW& h) override {
    bind();
    ProfScope prof(compute(), "adamw", [&] { return shp(param); });
    CHECK(param.dtype == DType::kF32 && grad.dtype == DType::kF32 && m.dtype == DType::kF32 &&
              v.dtype == DType::kF32, "adamw: f32 only");
    CHECK(grad.numel() == param.numel() && m.numel() == param.numel() && v.numel() == param.numel() && h.step >= 1,
          "adamw: shapes/step");
    launch_adamw(param, grad, m, v, h, compute());
  }
  void sum_squares(Tensor out, Tensor x) override {
    bind();
    ProfScope prof(compute(), "sum_squares", [&] { return shp(x); });
    CHECK(out.dtype == DType::kF32 && x.dtype == DType::kF32, "sum_squares: f32 only");
    launch_sum_squares(out, x, scr().p, compute());
  }

  // Note [launch plans] (backend.h): CUDA graphs of the compute stream. Off with
  // STREAMTUNE_GRAPHS=off (A/B benches) and while the op profiler runs (it times every op).
  PlanRecorder* plan_recorder() override {
    static const bool off = env_switch("STREAMTUNE_GRAPHS", "off", "launch plans (CUDA graphs) disabled");
    if (off || profile_enabled()) return nullptr;
    return &recorder_;
  }

 private:
  cudaStream_t stream(StreamId s) const { return streams_[static_cast<int>(s)].get(); }
  // Ops whose resources belong to the compute stream refuse the side stream (Note [side stream]).
  void main_stream_only(const char* op, const char* resource) const {
    CHECK(!side_active_, op << " on the side stream (Note [side stream]): " << resource
                            << " is the compute stream's");
  }
  // The stream ops go to: the compute stream, or the side stream between side_begin and side_end.
  cudaStream_t compute() const { return side_active_ ? side_.get() : stream(StreamId::kCompute); }

  // CUDA's current device is per host thread: make sure this thread talks to our device. Asked of
  // the runtime every time (cheap): a cached value goes stale when anything else (another backend's
  // constructor, NCCL, a library) sets the device on this thread -- seen as cudaMemsetAsync
  // "invalid argument" on the second GPU of a 2-GPU data-parallel run.
  void bind() const {
    int current = -1;
    CUDA_CHECK(cudaGetDevice(&current));
    if (current != dev_) CUDA_CHECK(cudaSetDevice(dev_));
  }

  // Scratch (row losses, partial sums, f32 GEMM staging) is only used by the ops of one stream,
  // which run in order, so one buffer serves them all: the compute stream's, and the side stream's
  // own (Note [side stream]). It grows (rarely, at first use of a bigger shape).
  struct ScratchBuf {
    float* p = nullptr;
    size_t floats = 0;
  };
  ScratchBuf& scr() { return scratch_[side_active_ ? 1 : 0]; }
  void grow_scratch(size_t floats) {
    ScratchBuf& b = scr();
    if (floats <= b.floats) return;
    // A recorded plan may point at the scratch: growth bumps the epoch (older plans go stale), and
    // must not happen while recording (a plan is only recorded for a visit seen before, whose
    // ops already grew the scratch they need).
    CHECK(!recorder_.capturing(), "CUDA backend: scratch grew to " << floats << " floats while recording a plan");
    ++scratch_epoch_;
    if (b.p) {
      CUDA_CHECK(cudaStreamSynchronize(compute()));
      CUDA_CHECK(cudaFree(b.p));
    }
    CUDA_CHECK(cudaMalloc(&b.p, floats * sizeof(float)));
    b.floats = floats;
  }

  // Whether gemm_pair's operands form a strided batch of two: bf16 A/B, equal shapes, and the
  // second weight, output and bias at positive element offsets past the first (no overlap).
  static bool pair_layout(const Tensor& c0, const Tensor& c1, const Tensor& a, const Tensor& b0, const Tensor& b1,
                          const Tensor& bias0, const Tensor& bias1, int64_t* sb, int64_t* sc, int64_t* sbias) {
    auto offset = [](const Tensor& x1, const Tensor& x0, int64_t* out) {
      const ptrdiff_t d = static_cast<const char*>(x1.data) - static_cast<const char*>(x0.data);
      const auto e = static_cast<ptrdiff_t>(dtype_size(x0.dtype));
      if (x1.dtype != x0.dtype || d <= 0 || d % e != 0 || d / e < x0.numel()) return false;
      *out = d / e;
      return true;
    };
    if (a.dtype != DType::kBF16 || b0.dtype != a.dtype || c0.dtype != DType::kBF16) return false;
    if (b0.rows() != b1.rows() || b0.cols() != b1.cols() || b0.cols() != a.cols() || c0.rows() != a.rows() ||
        c0.cols() != b0.rows() || c1.rows() != c0.rows() || c1.cols() != c0.cols())
      return false;
    if (bias0.empty() != bias1.empty()) return false;
    if (!bias0.empty() && (bias0.dtype != c0.dtype || bias0.numel() != c0.cols() || bias1.numel() != c0.cols() ||
                           !offset(bias1, bias0, sbias)))
      return false;
    return offset(b1, b0, sb) && offset(c1, c0, sc);
  }

  // The LoRA ops' shared contract: act [N, C] f32/bf16; w f32 [r, C] (or [C, r] when w_trans);
  // rt f32 [N, r].
  static void check_lora(const Tensor& act, const Tensor& w, const Tensor& rt, int64_t C, int64_t r, const char* what,
                         bool w_trans = false) {
    const int64_t N = act.rows();
    CHECK((act.dtype == DType::kF32 || act.dtype == DType::kBF16) && w.dtype == DType::kF32 &&
              rt.dtype == DType::kF32 && act.numel() == N * C && w.numel() == C * r && rt.numel() == N * r &&
              rt.cols() == r && (w_trans ? w.rows() == C && w.cols() == r : w.rows() == r && w.cols() == C),
          what << ": got " << shp(act) << " " << shp(w) << " " << shp(rt));
  }

  // The DoRA ops' shapes: per-row / per-column vectors f32 [n]; activations float [rows, cols].
  static void check_ce_state(const Tensor& m, const Tensor& s, const Tensor& target, int64_t R, const char* op) {
    CHECK(m.dtype == DType::kF32 && s.dtype == DType::kF32 && target.dtype == DType::kF32 && m.numel() == R &&
              s.numel() == R && target.numel() == R,
          op << ": m, s, target must be f32 [" << R << "], got " << m.shape_str() << " " << s.shape_str() << " "
             << target.shape_str());
  }

  static void check_attn(Tensor q, Tensor k, Tensor v, const SeqLayout& L, const AttnShape& s) {
    CHECK(s.num_heads > 0 && s.num_kv_heads > 0 && s.num_heads % s.num_kv_heads == 0 && s.head_dim > 0,
          "attention: heads " << s.num_heads << "/" << s.num_kv_heads);
    const int64_t tokens = L.batch * L.seq;
    CHECK(q.numel() == tokens * s.num_heads * s.head_dim && k.numel() == tokens * s.num_kv_heads * s.head_dim &&
              v.numel() == k.numel(), "attention: q " << q.shape_str() << " k " << k.shape_str());
  }

  // Whether this attention (forward or backward) runs on cuDNN; when it does, scratch_ has grown
  // to the cuDNN workspace (*ws bytes). Past the tensors' dtype/alignment (the same for a forward
  // and its backward), the answer depends only on the shapes: cudnn_ caches it per shape, with
  // both graphs built together, so a forward and its backward always take the same path.
  // Packed documents go to cuDNN only as spans, with offsets that fit its int32 (attention_cudnn.cc
  // Note [ragged documents]); per-token doc_ids alone keep the own kernels.
  bool use_cudnn(const Tensor* ts, int n, const Tensor& lse, const SeqLayout& L, const AttnShape& s, size_t* ws) {
    if (!cudnn_ || !cudnn_attention_enabled() || own_attention_forced()) return false;
    if (L.doc_ids != nullptr &&
        (!is_ragged(L) || L.doc_slots < 1 ||
         L.batch * L.seq * s.num_heads * std::max<int64_t>(s.head_dim, 1) >= (int64_t{1} << 31)))
      return false;
    if (L.batch * L.seq == 0 || s.head_dim % 8 != 0 || s.head_dim > 256) return false;
    if (lse.dtype != DType::kF32 || reinterpret_cast<uintptr_t>(lse.data) % 16 != 0) return false;
    for (int i = 0; i < n; ++i)
      if (ts[i].dtype != DType::kBF16 || reinterpret_cast<uintptr_t>(ts[i].data) % 16 != 0) return false;
    const size_t planned =
        static_cast<size_t>(attention_backward_scratch_floats(L, s)) * sizeof(float) + kCudnnExtraWorkspaceBytes;
    const size_t limit = std::max({planned, static_cast<size_t>(fused_allowance_), cudnn_workspace_override()});
    std::string why;  // cudnn_ prints the decision once per shape
    // A shape seen for the first time is prepared now (Note [fused attention workspace]): that
    // first sighting runs eagerly (launch plans record from the second), so no capture sees it.
    if (!cudnn_->plan(L, s, limit, /*build=*/true, ws, &why)) return false;
    grow_scratch((*ws + ragged_bytes(L) + sizeof(float) - 1) / sizeof(float));
    return true;
  }

  // A ragged call's offsets (three int32 arrays of doc_slots + 1) after the cuDNN workspace.
  static size_t ragged_stride(const SeqLayout& L) { return (static_cast<size_t>(L.doc_slots) + 1 + 63) / 64 * 64; }
  static size_t ragged_offset(size_t ws) { return (ws + 255) / 256 * 256; }
  static size_t ragged_bytes(const SeqLayout& L) {
    return is_ragged(L) ? 256 + 3 * ragged_stride(L) * sizeof(int32_t) : 0;
  }
  // Fills them from the token offsets (enqueued before the cuDNN call that reads them); nullptr
  // for a dense call.
  const RaggedArrays* ragged_arrays(const SeqLayout& L, const AttnShape& s, size_t ws, RaggedArrays* ra) {
    if (!is_ragged(L)) return nullptr;
    int32_t* out = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(scr().p) + ragged_offset(ws));
    const int64_t stride = static_cast<int64_t>(ragged_stride(L));
    launch_document_offsets(out, stride, L.doc_starts, L.doc_slots + 1, static_cast<int32_t>(s.num_heads * s.head_dim),
                            static_cast<int32_t>(s.num_kv_heads * s.head_dim), static_cast<int32_t>(s.num_heads),
                            compute());
    ra->q_offsets = out;
    ra->kv_offsets = out + stride;
    ra->stats_offsets = out + 2 * stride;
    ra->lens = L.doc_lens;
    return ra;
  }

  static int select_device(int dev) {
    CUDA_CHECK(cudaSetDevice(dev));
    return dev;
  }

  int dev_;  // declared before streams_ (see the constructor)
  std::string name_;
  StreamOwner streams_[3];
  StreamOwner side_;                  // Note [side stream]
  CudaEvent fork_, join_;             // its fork and join (reused: each wait takes the last record)
  bool side_active_ = false;          // ops go to side_
  bool side_pending_ = false;         // side ops issued since the last join
  std::unique_ptr<GemmRunner> gemm_;
  ScratchBuf scratch_[2];             // [0] the compute stream's, [1] the side stream's
  uint64_t scratch_epoch_ = 0;                                    // bumped by grow_scratch
  GraphRecorder recorder_{streams_[0].get(), &scratch_epoch_};    // records the compute stream
  std::unique_ptr<CudnnAttention> cudnn_ = make_cudnn_attention();  // nullptr: built without cuDNN
  uint64_t fused_allowance_ = 0;  // Note [fused attention workspace] (backend.h): granted by the plan
};

}  // namespace
}  // namespace cuda

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: not an error for the caller
    return 0;
  }
  return n;
}

void cuda_device_info(int dev, int* major, int* minor, std::string* name) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  *major = prop.major;
  *minor = prop.minor;
  *name = prop.name;
}

StatusOr<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& opts) {
  const int n = cuda_device_count();
  if (n == 0) return NotFound("no CUDA GPU is visible (cudaGetDeviceCount found none)");
  if (opts.device_index < 0 || opts.device_index >= n)
    return NotFound(Str() << "CUDA device " << opts.device_index << " does not exist (" << n << " visible)");
  int major = 0, minor = 0;
  std::string name;
  cuda_device_info(opts.device_index, &major, &minor, &name);
  if (!cuda_capability_supported(major, minor))
    return Unimplemented(Str() << "CUDA device " << opts.device_index << " (" << name << ") has compute capability "
                                    << major << "." << minor << "; streamtune's CUDA kernels need 8.0 or newer "
                                    << "(Ampere, Ada, Hopper, Blackwell: bf16 tensor cores). Use device: cpu");
  return std::unique_ptr<Backend>(std::make_unique<cuda::CudaBackend>(opts.device_index));
}

}  // namespace st
