// Backend: the seam between the model code and a device (design.md §2, §4).
//
// One interface, two peers: backend/cpu (the reference: plain loops + OpenBLAS, f32 math) and
// backend/cuda (kernels + cuBLASLt). Model code only sees this header and never includes a
// device header.
//
// Conventions for every op below:
//  * Tensors are contiguous row-major views (core/tensor.h). `data` is memory of this backend
//    (host memory for CPU, device memory for CUDA) unless the parameter says "host".
//  * Activations are [tokens, features] with tokens = B*T (batch-major). Float tensors may be
//    f32 or bf16 (storage); math is f32 (accumulate in f32, round once on store).
//  * Ops enqueue on the compute stream and do not block the host, unless stated.
//  * Deterministic: the same inputs give the same bits, run after run (no order-dependent
//    atomics). Bit-identical streaming and exact resume rely on this.
//  * Outputs never alias inputs unless the op says "in place".
//  * Ops CHECK shapes and dtypes (programmer errors), they do not return Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/dropout_seed.h"
#include "core/status.h"
#include "core/tensor.h"

namespace st {

enum class DeviceKind { kCpu, kCuda };
const char* device_kind_name(DeviceKind k);

enum class StreamId { kCompute = 0, kH2D = 1, kD2H = 2 };

// An ordering event (no timing). Created by Backend::create_event; owned by the caller.
class Event {
 public:
  virtual ~Event() = default;
};

enum class Trans { kNo, kYes };
enum class Accum { kOverwrite, kAdd };  // C = op   |   C += op

struct GemmOpts {
  Trans trans_a = Trans::kNo;
  Trans trans_b = Trans::kNo;
  float alpha = 1.0f;
  Accum accum = Accum::kOverwrite;
  // Optional bias [N] added to every row before the one rounding to C's dtype (on CUDA a cuBLASLt
  // epilogue when bias and C share a dtype: one launch instead of two).
  Tensor bias = Tensor();
  // Optional residual [M,N] in C's dtype (may be C itself): C = alpha·op(A)op(B) + residual (+ bias),
  // one rounding. Not with Accum::kAdd (that is residual = C).
  Tensor residual = Tensor();
};

// Position and document layout of a micro-batch; all arrays are backend memory, [B*T] int32.
struct SeqLayout {
  int64_t batch = 1;    // B
  int64_t seq = 0;      // T (padded length)
  const int32_t* positions = nullptr;  // RoPE position of each token (restarts per packed document)
  // Document id of each token; attention is causal *and* restricted to equal ids. nullptr means
  // one document per row. Padding tokens may carry any id (their outputs are never used).
  const int32_t* doc_ids = nullptr;
  // Note [document spans]: with doc_ids the caller may also give the documents as spans of the
  // flattened B*T tokens (each a run of equal ids within a row), which lets a backend run every
  // document as a sequence of its own (CUDA: cuDNN's ragged layout) instead of masking per token.
  // doc_spans spans (host), padded to doc_slots = document_slots(doc_spans) entries: doc_starts
  // [doc_slots + 1] token offsets (entries past doc_spans = B*T), doc_lens [doc_slots] (0 past
  // doc_spans); max_doc_len the longest span. Both arrays backend memory. Without them
  // (doc_starts == nullptr) backends use doc_ids alone; the bits may differ between the two ways.
  int64_t doc_spans = 0, doc_slots = 0, max_doc_len = 0;
  const int32_t* doc_starts = nullptr;
  const int32_t* doc_lens = nullptr;
};

// The slot count for n document spans: n rounded up to even (a run sees few distinct shapes; a
// ragged layout's cost and workspace follow slots x bucket, so the rounding stays fine).
inline int64_t document_slots(int64_t n) { return n <= 1 ? 1 : (n + 1) / 2 * 2; }
// The sequence length a ragged layout is shaped for: the longest span rounded up to a multiple of
// 128, at most T.
inline int64_t document_seq_bucket(const SeqLayout& L) {
  const int64_t s = (L.max_doc_len + 127) / 128 * 128;
  return s < 128 ? 128 : s < L.seq ? s : L.seq;
}

struct AttnShape {
  int64_t num_heads = 0;     // NH
  int64_t num_kv_heads = 0;  // KVH, NH % KVH == 0 (GQA: head h reads kv head h / (NH/KVH))
  int64_t head_dim = 0;      // D
  float scale = 0.0f;        // usually 1/sqrt(D)
  // Sliding window W (Mistral, windowed Qwen layers): query t sees key j only when t - W < j <= t
  // (and, as always, j in t's document). 0 = every earlier key. A window >= the sequence masks
  // nothing; backends then run their full causal path (effective_window).
  int64_t window = 0;
};
// The window that masks anything for queries against `kv_len` keys (0 = none).
inline int64_t effective_window(const AttnShape& s, int64_t kv_len) {
  return s.window > 0 && s.window < kv_len ? s.window : 0;
}

// Note [launch plans]: a backend may record the ops a caller enqueues on the compute stream into a
// plan (CUDA: a stream-captured CUDA graph) and replay it later with one launch, instead of paying
// the per-op launch cost again. Recorded ops do not run; a replay runs them with the arguments
// they had when recorded -- the same device pointers, shapes and scalars -- so the same kernels
// produce the same bits as the eager calls. model/launch_plans.h decides what is recorded.
class LaunchPlan {
 public:
  virtual ~LaunchPlan() = default;
  // Device memory the plan holds (measured when recorded; 0 when the backend cannot tell).
  virtual uint64_t device_bytes() const { return 0; }
};
class PlanRecorder {
 public:
  virtual ~PlanRecorder() = default;
  // Starts recording (false + *why when it cannot: the ops must then be enqueued eagerly).
  virtual bool begin_capture(std::string* why) = 0;
  // Ends recording: the plan, or nullptr + *why when recording failed (none of the recorded ops
  // ran: the caller enqueues them again, eagerly).
  virtual std::unique_ptr<LaunchPlan> end_capture(std::string* why) = 0;
  // Enqueues the plan on the compute stream. False (nothing enqueued) when the plan went stale:
  // memory it recorded was since replaced (CUDA: the backend's scratch grew); record it again.
  virtual bool replay(LaunchPlan& p) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string description() const = 0;  // "cpu (16 threads, OpenBLAS)", "cuda:0 NVIDIA H200"

  // ---- memory ---------------------------------------------------------------------------
  // Device memory. Arenas are carved out of a few big allocations made before training starts;
  // allocation inside a step is a bug. Returns ResourceExhausted on OOM (never aborts).
  virtual StatusOr<void*> alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  // Host memory the device can copy from asynchronously (pinned on CUDA; plain on CPU).
  // ResourceExhausted if pinning fails: the caller falls back to pageable memory loudly.
  virtual StatusOr<void*> alloc_host_pinned(size_t bytes) = 0;
  virtual void free_host_pinned(void* p) = 0;
  // Free and total device memory in bytes; false when the backend cannot tell (CPU).
  virtual bool memory_info(uint64_t* free_bytes, uint64_t* total_bytes) {
    (void)free_bytes;
    (void)total_bytes;
    return false;
  }
  // Pin an existing host range (cudaHostRegister); no-op on CPU.
  virtual Status register_host(void* p, size_t bytes) = 0;
  virtual void unregister_host(void* p) = 0;

  // Copies enqueued on `stream`. Host pointers must stay valid until the copy completes.
  virtual void copy_h2d(void* dst, const void* host_src, size_t bytes, StreamId stream) = 0;
  virtual void copy_d2h(void* host_dst, const void* src, size_t bytes, StreamId stream) = 0;
  virtual void copy_d2d(void* dst, const void* src, size_t bytes, StreamId stream) = 0;
  virtual void memset_zero(void* dst, size_t bytes, StreamId stream) = 0;

  // ---- streams and events ------------------------------------------------------------------
  virtual std::unique_ptr<Event> create_event() = 0;
  virtual void record(Event& e, StreamId stream) = 0;
  virtual void wait(StreamId stream, Event& e) = 0;   // stream waits for e (host does not block)
  virtual void sync_event(Event& e) = 0;              // host blocks until e has fired
  virtual bool event_done(Event& e) = 0;              // poll, non-blocking
  virtual void sync_stream(StreamId stream) = 0;      // host blocks until stream is idle
  virtual void sync_all() = 0;

  // Note [side stream]: ops issued between side_begin() and side_end() go to a second compute
  // stream. They start after every compute op issued before side_begin() and may overlap the
  // compute ops issued after it, until side_join() makes the compute stream wait for them. The
  // caller guarantees the two sides share no written memory in between (side ops get their own
  // backend scratch), so the results -- bits included -- are those of issuing everything in order.
  // Used for the LoRA weight gradients and down-projections, which are small latency-bound
  // kernels off the layer's critical path (model/layer.cc). Inside a launch plan the fork and the
  // join become graph edges. Backends that run ops on the call (CPU) ignore all three.
  virtual void side_begin() {}
  virtual void side_end() {}
  virtual void side_join() {}

  // ---- ops ---------------------------------------------------------------------------------
  // C[M,N] (=|+=) alpha * op(A) · op(B) (+ residual[M,N]) (+ bias[N] per row). op(A) is [M,K], op(B)
  // is [K,N]. A and B must have the same dtype (f32 or bf16); C may be f32 or bf16. f32 accumulation.
  virtual void gemm(Tensor c, Tensor a, Tensor b, const GemmOpts& o) = 0;
  // c0 = a·b0ᵀ (+ bias0) and c1 = a·b1ᵀ (+ bias1): two products sharing A whose weights have one
  // shape (gate/up, k/v), in one launch where the backend can -- CUDA: a strided batch of two when
  // b1, c1 and bias1 sit at fixed offsets after b0, c0 and bias0 (measured: +2-4% a step on small
  // models, neutral on 3B/8B shapes, RESULTS session 6). Biases are both given or both empty.
  virtual void gemm_pair(Tensor c0, Tensor c1, Tensor a, Tensor b0, Tensor b1, Tensor bias0, Tensor bias1) {
    gemm(c0, a, b0, {.trans_b = Trans::kYes, .bias = bias0});
    gemm(c1, a, b1, {.trans_b = Trans::kYes, .bias = bias1});
  }

  // ---- LoRA (model/layer.cc: the low-rank path of a targeted linear) -------------------------
  // Fused skinny products for a rank-r adapter, so the layer never stages bf16 activations into
  // f32 copies nor runs latency-bound f32 GEMMs. Shared contract:
  //   A f32 [r, in], B f32 [out, r]; t / dt f32 [N, r]; da f32 [r, in]; db f32 [out, r];
  //   activations x [N, in], y / dy [N, out], dx [N, in]: f32 or bf16, any mix.
  //   Math in f32 from the stored values; each output element is rounded once, on store.
  //   Deterministic: every reduction (over in, r, out or N) runs in a fixed order, no atomics.
  //   No output aliases an input (y and dx are updated in place, as stated).
  // lora_down and lora_grad_a read x dropped out: drop(x) is exactly what Backend::dropout(·,
  // dropout_p, seed) would store in a tensor of x's dtype (element i = n*in + j: dropout_rng.h,
  // then rounded to x's dtype), formed as x is read, never staged; dropout_p <= 0: x itself.
  // t[N,r] = drop(x) · Aᵀ  (overwrites t).
  virtual void lora_down(Tensor t, Tensor x, Tensor a, float dropout_p, DropoutSeed seed) = 0;
  // y[N,out] += scale · t · Bᵀ, in place: y is read, the sum formed in f32, rounded once.
  virtual void lora_up(Tensor y, Tensor t, Tensor b, float scale) = 0;
  // The two gradient ops round like C + (alpha·A·B): g = rnd(g + rnd(scale · rnd(sum))), so
  // accumulating into g gives the bits of computing into a zeroed buffer and adding it afterwards
  // (dist/data_parallel.h Note [exact reduction]).
  // db[out,r] += scale · dyᵀ · t  (the sum over N in a fixed order).
  virtual void lora_grad_b(Tensor db, Tensor dy, Tensor t, float scale) = 0;
  // dt[N,r] = scale · dy · B  (overwrites dt).
  virtual void lora_dt(Tensor dt, Tensor dy, Tensor b, float scale) = 0;
  // da[r,in] += dtᵀ · drop(x)  (the sum over N in a fixed order).
  virtual void lora_grad_a(Tensor da, Tensor dt, Tensor x, float dropout_p, DropoutSeed seed) = 0;
  // dx[N,in] += mask(dt · A), in place, where mask is exactly dropout(·, dropout_p, seed) applied to
  // the f32 product [N, in] (element i = n*in + j: dropout_rng.h, bit-identical to Backend::dropout
  // of an f32 tensor holding dt·A); dropout_p <= 0: no mask. One rounding: dx = rnd(dx + mask(dt·A)).
  virtual void lora_dx(Tensor dx, Tensor dt, Tensor a, float dropout_p, DropoutSeed seed) = 0;

  // DoRA (model/layer.cc Note [DoRA]): a target's output is y = (mag / ||W + s·B·A||_row) ⊙ (x Wᵀ +
  // s·x Aᵀ Bᵀ) + bias, the row norm detached from the gradient (PEFT, DoRA paper §4.3).
  // norm[o] = ||W[o,:] + s·(B·A)[o,:]||₂ for W [out, in] (act dtype), A [r, in], B [out, r] (f32);
  // each element W + s·(B·A) formed in f32, the squares summed in a fixed order; f32 [out].
  // scale[o] = mag[o] / norm[o] when scale is given (f32 [out]; else mag is not read).
  virtual void dora_norm(Tensor norm, Tensor scale, Tensor w, Tensor a, Tensor b, Tensor mag, float s) = 0;
  // y[N,out] = rnd(scale[o]·y + bias[o] + residual[n,o]), in place; bias [out] and residual [N,out]
  // (act dtype) are optional (empty). residual must not alias y.
  virtual void dora_combine(Tensor y, Tensor scale, Tensor bias, Tensor residual) = 0;
  // dmag[o] += rnd(rnd(Σ_n dy[n,o]·v[n,o]) / den[o]) (the sum over N in a fixed order; Note [grad
  // rounding] of the LoRA grad ops), then g[n,o] = rnd(scale[o]·dy[n,o]). v = x Wᵀ + s·t Bᵀ, the
  // target's output before the scale, with den = its row norm; or v = the scaled output (m/norm)·v
  // of a bias-free target with den = m (the same quotient). g may alias v or dy (each element is
  // read before it is written).
  virtual void dora_backward(Tensor g, Tensor dmag, Tensor dy, Tensor v, Tensor scale, Tensor den) = 0;

  // y[R,N] += bias[N] (in place). bias may be f32 or bf16.
  virtual void add_bias(Tensor y, Tensor bias) = 0;
  // y = a + b (elementwise, y may alias a or b: in-place allowed for this op).
  virtual void add(Tensor y, Tensor a, Tensor b) = 0;
  // y = x * s (y may alias x).
  virtual void scale(Tensor y, Tensor x, float s) = 0;
  // dst = src with dtype conversion (same numel).
  virtual void convert(Tensor dst, Tensor src) = 0;

  // out[T,H] = table[ids[t], :]. ids: int32 backend memory [T]. Caller validated ids < V.
  virtual void embedding(Tensor out, Tensor table, const int32_t* ids) = 0;

  // RMSNorm over the last dim: y = x * rsqrt(mean(x²) + eps) * w.  x,y [R,N], w [N].
  // rstd [R] f32 receives rsqrt(mean(x²)+eps) (for backward).
  virtual void rmsnorm(Tensor y, Tensor rstd, Tensor x, Tensor w, float eps) = 0;
  // dx[R,N] = ∂/∂x given dy, x, w and the saved rstd. (w is frozen: no dw.)
  virtual void rmsnorm_backward(Tensor dx, Tensor dy, Tensor x, Tensor w, Tensor rstd) = 0;
  // dx = rmsnorm_backward(dy, ...) + residual, in one pass where the backend can: the norm's
  // gradient is rounded to dx's dtype before the add, so the bits are those of rmsnorm_backward
  // followed by add(dx, dx, residual). residual is [rows, n] in dx's dtype and does not alias dy.
  virtual void rmsnorm_backward_add(Tensor dx, Tensor dy, Tensor x, Tensor w, Tensor rstd, Tensor residual) {
    rmsnorm_backward(dx, dy, x, w, rstd);
    add(dx, dx, residual);
  }

  // RoPE (HF rotate-half) in place on x [tokens, heads, D]: for i < D/2, with
  // a = pos*inv_freq[i] (f32), c = cos(a), s = sin(a):
  //   x'[i] = x[i]*c - x[i+D/2]*s ;  x'[i+D/2] = x[i+D/2]*c + x[i]*s.
  // inverse=true applies the transpose rotation (the backward). inv_freq: f32 [D/2] backend memory.
  virtual void rope(Tensor x, const int32_t* positions, Tensor inv_freq, bool inverse) = 0;
  // rope on q and on k (same tokens and D, their own head counts): one launch where the backend can.
  virtual void rope_qk(Tensor q, Tensor k, const int32_t* positions, Tensor inv_freq, bool inverse) {
    rope(q, positions, inv_freq, inverse);
    rope(k, positions, inv_freq, inverse);
  }

  // Causal (and same-document) GQA attention, never materialising [T,T] on CUDA.
  // q [B*T, NH, D], k/v [B*T, KVH, D], out [B*T, NH, D]; lse f32 [B, NH, T] saved for backward.
  virtual void attention(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, const SeqLayout& L,
                         const AttnShape& s) = 0;
  // Gradients dq, dk, dv (overwritten) from dout, the forward inputs, out and lse.
  virtual void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k,
                                  Tensor v, Tensor out, Tensor lse, const SeqLayout& L,
                                  const AttnShape& s) = 0;

  // Note [fused attention workspace]: a backend may run training attention through a fused
  // library kernel (CUDA: cuDNN SDPA, deterministic backward) whose workspace depends on the shape
  // and can be large (1.1 GB for Llama-3-8B at 4096 tokens). fused_attention_workspace prepares
  // the path for (batch, seq, s) and says how many device bytes it needs (0: the backend has no
  // such path for the shape); the planner asks for the largest shape of a run, counts the bytes
  // and grants them with set_fused_attention_allowance. Other shapes (padded batches of other
  // lengths) are prepared when first seen. A workspace over the grant keeps the own kernels. The
  // choice is a function of the shape and the grant, so a forward and its backward agree and two
  // runs with the same plan run the same kernels.
  virtual uint64_t fused_attention_workspace(int64_t /*batch*/, int64_t /*seq*/, const AttnShape& /*s*/) {
    return 0;
  }
  // The same for packed rows run as the ragged layout (Note [document spans]): `slots` span slots
  // (document_slots) of `bucket` tokens (document_seq_bucket); 0: no such path.
  virtual uint64_t fused_attention_ragged_workspace(int64_t /*slots*/, int64_t /*bucket*/, const AttnShape& /*s*/) {
    return 0;
  }
  virtual void set_fused_attention_allowance(uint64_t /*bytes*/) {}
  // A smaller workspace the fused path can also run with, more slowly (CUDA: the backward in query
  // chunks); 0: none. The planner asks for it when fused_attention_workspace's does not fit.
  virtual uint64_t fused_attention_min_workspace(int64_t /*batch*/, int64_t /*seq*/, const AttnShape& /*s*/) {
    return 0;
  }

  // Decode-time causal GQA attention of ONE sequence against a KV cache (no lse, no backward).
  // q [Tq, NH, D] holds positions q_start .. q_start+Tq-1; k_cache / v_cache [Tk, KVH, D] hold
  // positions 0 .. Tk-1 (Tk >= q_start + Tq; rows past q_start+Tq-1 are never read).
  // Query i attends keys j <= q_start + i. out [Tq, NH, D]. f32 math, deterministic.
  virtual void attention_kv(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache, int64_t q_start,
                            const AttnShape& s) = 0;

  // NF4 base weights (core/nf4.h, model/weights.h Note [NF4 base layout]): w [out, in] (f32, bf16)
  // = code[nibble] * absmax[block] in f32, rounded once; codes U8 [out, in/2] (high nibble first),
  // absmax F32 [out*in/64]. Every backend gives the same bits (one f32 product, one rounding).
  virtual void dequant_nf4(Tensor w, Tensor codes, Tensor absmax) = 0;
  // code12 base weights (core/code12.h, model/weights.h Note [code12 base layout]): w [out, in]
  // (bf16) decoded losslessly from body U8 [out, in] and aux U8 [code12_aux_bytes(out*in)] (4-byte
  // aligned). Every backend gives the bits of core/code12.h code12_decode.
  virtual void decode_code12(Tensor w, Tensor body, Tensor aux) = 0;

  // h = silu(gate) * up, all [R,F].
  virtual void swiglu(Tensor h, Tensor gate, Tensor up) = 0;
  // dgate, dup from dh (dgate/dup may not alias inputs).
  virtual void swiglu_backward(Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up) = 0;

  // Softmax cross-entropy on a chunk of logits, fused with its gradient, in place:
  //   logits [R,V] (f32 or bf16) is overwritten with grad_scale * (softmax - onehot(label));
  //   rows whose label == ignore_index (-100) get zero gradient and no loss.
  //   loss_sum f32 [1] (backend memory) += sum over counted rows of -log softmax[label]
  //   (accumulated in a fixed order: deterministic). labels int32 [R].
  virtual void cross_entropy(Tensor logits, Tensor loss_sum, const int32_t* labels, float grad_scale) = 0;

  // ---- vocabulary-chunked cross-entropy (model/head.cc Note [vocab-chunked head]) -----------
  // The head walks the vocabulary in chunks of columns, keeping an online softmax per row, so it
  // never holds [tokens, V] logits nor needs the whole lm_head on the device at once (the chunks
  // may be streamed). Per chunk the caller runs: logits = xn · W_chunkᵀ; ce_chunk; then (training)
  // acc += logits · W_chunk (gemm, kOverwrite on the first chunk). After the last chunk: ce_finish.
  //
  // ce_chunk: logits [R, C] hold columns [col0, col0 + C) of R rows; m, s, target f32 [R];
  // labels int32 [R] (full-vocabulary ids; -100 = ignored, other values outside the chunk are
  // simply not in it). Per row, with mc = max_j logits[j]:
  //   first chunk (col0 == 0): m, s start at (-inf, 0); target, acc and the old m/s are not read;
  //   m' = max(m, mc);  s' = s * exp(m - m') + sum_j exp(logits[j] - m')  (f32 state, fixed order);
  //   if col0 <= label < col0 + C: target = logits[label - col0] (the stored value, as f32);
  //   if acc is non-empty (training): logits[j] <- exp(logits[j] - m') in place (rounded to the
  //   logits dtype), and acc [R, H] f32 *= exp(m - m') (skipped on the first chunk);
  //   m <- m', s <- s'.
  virtual void ce_chunk(Tensor logits, Tensor acc, Tensor m, Tensor s, Tensor target, const int32_t* labels,
                        int64_t col0) = 0;
  // ce_finish, after the last chunk. For counted rows (label != -100), lse = m + log(s):
  //   loss_sum f32 [1] += sum over counted rows of (lse - target), added in a fixed order;
  //   if dx [R, H] is non-empty: dx[r,:] = g_r * (acc[r,:] / s - w_label[r,:]) for counted rows
  //   and 0 for ignored ones (w_label [R, H], any float dtype: the lm_head row of each row's label),
  //   g_r = grad_scale, or grad_scale * row_scale[r] when row_scale (f32 [R], backend memory) is
  //   given: a weight per row (a preference loss weighs each sequence's tokens by its own factor).
  virtual void ce_finish(Tensor dx, Tensor loss_sum, Tensor acc, Tensor m, Tensor s, Tensor target, Tensor w_label,
                         const int32_t* labels, float grad_scale, Tensor row_scale) = 0;

  // Inverted dropout with a counter-based RNG: keep element i iff uniform(seed, i) >= p (seed:
  // seed.get(), dropout_rng.h DropoutSeed);
  // kept elements are scaled by 1/(1-p). The same (seed, p, shape) gives the same mask on every
  // backend, so backward re-derives it instead of storing it. y may alias x.
  virtual void dropout(Tensor y, Tensor x, float p, DropoutSeed seed) = 0;
  // NEFTune (model/model.cc Note [NEFTune]): x[i] = rnd(x[i] + rnd(v_i * magnitude)), in place, with
  // v_i = uniform_noise_unit(seed.get(), i) in [-1, 1) (dropout_rng.h): the same bits on every backend.
  virtual void add_uniform_noise(Tensor x, float magnitude, DropoutSeed seed) = 0;

  // AdamW (torch semantics, decoupled weight decay) on f32 param/grad/m/v [N], step t >= 1:
  //   p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
  //   p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
  struct AdamW {
    float lr, beta1, beta2, eps, weight_decay;
    int64_t step;
  };
  virtual void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const AdamW& h) = 0;

  // out f32 [1] (backend memory) += sum(x²) over x (f32), fixed reduction order.
  virtual void sum_squares(Tensor out, Tensor x) = 0;

  // Note [launch plans]: this backend's recorder, or nullptr when it has none (CPU: ops run
  // on the call) or plans are switched off.
  virtual PlanRecorder* plan_recorder() { return nullptr; }
};

struct BackendOptions {
  int device_index = 0;
  int num_threads = 0;  // CPU: 0 = all cores
};

// Makes the backend for `kind`. Unimplemented if this build has no CUDA; NotFound if no GPU.
StatusOr<std::unique_ptr<Backend>> make_backend(DeviceKind kind, const BackendOptions& opts = {});
// True when this build has CUDA and a visible GPU it can run on (cuda_capability_supported). When
// GPUs are visible but none is supported, the first call says so once on stderr (device: auto then
// means the CPU).
bool cuda_available();
// Whether a GPU of compute capability major.minor can run streamtune's CUDA kernels: 8.0 or newer
// (Ampere on: bf16 tensor-core mma and cp.async, which the kernels use; newer GPUs run the PTX).
bool cuda_capability_supported(int major, int minor);
// "cpu" or "cpu, cuda (sm_80 sm_86 sm_89 sm_90)".
std::string compiled_backends();

}  // namespace st
