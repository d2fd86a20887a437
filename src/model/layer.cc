#include "model/layer.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "model/carver.h"

namespace st {
namespace {

// Views of the layer scratch (Note [layer scratch]). Shapes: N tokens; act = activation dtype.
struct Scratch {
  Tensor rstd1, rstd2, rstd_q, rstd_k, lse;   // f32 [N], [N], [N*NH], [N*KVH], [N*NH]
  Tensor xn, h, hn;                           // [N,H]
  Tensor q, k, v, qn, kn, att;                // [N,Q] [N,KV] [N,KV] [N,Q] [N,KV] [N,Q] (qn/kn: Qwen3)
  Tensor g, u, m;                             // [N,F]
  // backward
  Tensor dm, du, dxn, da, dq, dk, dv, dq2, dk2;  // [N,F] [N,F] [N,H] [N,Q] [N,Q] [N,KV] [N,KV] [N,Q] [N,KV]
  // LoRA, f32
  Tensor t[kNumLoraTargets];   // [N, r] per target: the forward's x A^T, reused by the backward
  bool t_kept = false;         // t lives in the saved region: the training forward's (Note [kept LoRA t])
  Tensor dt[kNumLoraTargets];  // [N, r] per target: s dy B (one each: the side stream reads it late)
  Tensor xd;            // [N, max_in] act: DoRA's dropped-out input (Note [dropped input]; DoRA + dropout only)
  // DoRA (Note [DoRA]): the backward's pre-scale output v [N, max_out] (act), which becomes the
  // scaled gradient in place; with dropout (Note [DoRA with dropout]) also w [N, max(in, out)] and
  // q [N, max_out].
  Tensor dora_v, dora_w, dora_q;
  Tensor wq;            // NF4 / code12 base: a group's decoded weights (Note [NF4 base]); else empty
};

// The dense-weight staging a coded base needs: the largest group of linears decoded at once
// (q/k/v, o, gate/up or down), contiguous so gemm_pair still sees one strided batch.
int64_t coded_staging_elems(const ModelConfig& c) {
  const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  return std::max({(Q + 2 * KV) * H, H * Q, 2 * F * H});
}

void carve_attention(Carver& cv, Scratch* s, const ModelConfig& c, int64_t N, DType act) {
  s->att = cv.take(act, {N, c.q_dim()});
  s->lse = cv.take(DType::kF32, {N * c.num_heads});
}

// Note [kept LoRA t]: t = drop(x) A^T of every target, [N, r] f32, is kept from the training
// forward in every recompute mode (it is part of the saved region), so the backward's recompute
// forward runs no lora_down and down_proj's backward needs none: r / (in + out) of the layer's
// activations (~0.4% at r 16 on a 4096-wide layer; 16 MiB for Llama-3-8B@4096 with q,v), for 1-2
// small launches fewer per target and step. lora_down is deterministic, so the kept t are the bits
// a recompute would form.
void carve_lora_t(Carver& cv, Scratch* s, int64_t N, const LoraConfig& lc) {
  for (int t = 0; t < kNumLoraTargets; ++t)
    if (lc.targets[t]) s->t[t] = cv.take(DType::kF32, {N, lc.r});
}

// The forward's intermediates: what a kNone layer keeps for its backward (Note [recompute]).
// att and lse first, so a kAttention region is a prefix-compatible carving of the same two views.
void carve_forward(Carver& cv, Scratch* s, const ModelConfig& c, int64_t N, const LoraConfig& lc, DType act) {
  const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  const DType f32 = DType::kF32;
  carve_attention(cv, s, c, N, act);
  s->rstd1 = cv.take(f32, {N});
  s->rstd2 = cv.take(f32, {N});
  s->xn = cv.take(act, {N, H});
  s->h = cv.take(act, {N, H});
  s->hn = cv.take(act, {N, H});
  s->q = cv.take(act, {N, Q});
  s->k = cv.take(act, {N, KV});
  s->v = cv.take(act, {N, KV});
  if (c.qk_norm) {
    s->rstd_q = cv.take(f32, {N * c.num_heads});
    s->rstd_k = cv.take(f32, {N * c.num_kv_heads});
    s->qn = cv.take(act, {N, Q});
    s->kn = cv.take(act, {N, KV});
  }
  s->g = cv.take(act, {N, F});
  s->u = cv.take(act, {N, F});
  s->m = cv.take(act, {N, F});
  carve_lora_t(cv, s, N, lc);
}

// The backward's own temporaries (and the dropout staging both passes use).
void carve_backward(Carver& cv, Scratch* s, const ModelConfig& c, int64_t N, const LoraConfig& lc, DType act) {
  const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  if (c.qk_norm) {
    s->dq2 = cv.take(act, {N, Q});
    s->dk2 = cv.take(act, {N, KV});
  }
  s->dm = cv.take(act, {N, F});
  s->du = cv.take(act, {N, F});
  s->dxn = cv.take(act, {N, H});
  s->da = cv.take(act, {N, Q});
  s->dq = cv.take(act, {N, Q});
  s->dk = cv.take(act, {N, KV});
  s->dv = cv.take(act, {N, KV});
  // LoRA staging is sized by the targeted linears only (q/v-only LoRA needs [N, H], not [N, F]).
  // The fused LoRA ops read bf16 or f32 activations directly (Note [fused LoRA]), dropped out as
  // they read them (Note [dropped input]); only DoRA with dropout stages the dropped input.
  int64_t max_in = 0;
  for (int t = 0; t < kNumLoraTargets; ++t) {
    if (!lc.targets[t]) continue;
    max_in = std::max(max_in, lora_target_dims(c, static_cast<LoraTarget>(t)).first);
  }
  for (int t = 0; t < kNumLoraTargets; ++t)
    if (lc.targets[t]) s->dt[t] = cv.take(DType::kF32, {N, lc.r});
  // Note [dropped input]: the LoRA input with dropout is x dropped out in the activation dtype, as
  // PEFT's dropout returns it (bf16 x / (1 - p) rounded to bf16, then read by the f32 LoRA path).
  // lora_down and lora_grad_a form it as they read x (backend.h; the mask of Backend::dropout,
  // element for element), so nothing is staged: a staged copy cost a dropout pass writing [N, in]
  // per target each way and serialized the side stream's work on its one buffer. lora_dx masks
  // its product with the same mask. DoRA's dropout path also feeds the dropped input to base GEMMs,
  // so there it is staged (xd, through Backend::dropout: the same values the fused ops form).
  if (max_in > 0 && lc.dropout > 0 && lc.dora) s->xd = cv.take(act, {N, max_in});
  if (!lc.dora) return;
  // gate/up form v from their kept output (Note [DoRA]): only the other targets need the buffer
  // (all of them with dropout, whose v is the dropped input's).
  int64_t max_out = 0, all_out = 0;
  for (int t = 0; t < kNumLoraTargets; ++t) {
    if (!lc.targets[t]) continue;
    const auto tt = static_cast<LoraTarget>(t);
    const int64_t out = lora_target_dims(c, tt).second;
    all_out = std::max(all_out, out);
    if (lc.dropout > 0 || (tt != LoraTarget::kGate && tt != LoraTarget::kUp)) max_out = std::max(max_out, out);
  }
  if (max_out > 0) s->dora_v = cv.take(act, {N, max_out});
  if (lc.dropout > 0) {
    s->dora_w = cv.take(act, {N, std::max(max_in, all_out)});
    s->dora_q = cv.take(act, {N, all_out});
  }
}

// The staging goes last so that a coded base moves no other view.
Scratch carve(Carver& cv, const ModelConfig& c, int64_t N, const LoraConfig& lc, DType act, BaseQuant quant) {
  Scratch s;
  carve_forward(cv, &s, c, N, lc, act);
  carve_backward(cv, &s, c, N, lc, act);
  if (quant != BaseQuant::kNone) s.wq = cv.take(act, {coded_staging_elems(c)});
  return s;
}

// A [rows, cols] view at the start of a (larger) scratch buffer.
Tensor prefix(Tensor buf, DType dt, int64_t rows, int64_t cols) {
  CHECK(static_cast<size_t>(rows * cols) * dtype_size(dt) <= buf.bytes());
  return Tensor(buf.data, dt, {rows, cols});
}

// Target t's mask seed: the layer's seed ^ a per-target constant (read from the slot when there is one).
DropoutSeed target_seed(const LayerCtx& ctx, LoraTarget t) {
  const uint64_t salt = 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(t) + 1);
  if (ctx.dropout_seed_slot != nullptr) return DropoutSeed(salt, ctx.dropout_seed_slot);
  return DropoutSeed(ctx.dropout_seed ^ salt);
}

struct LinearArgs {
  Tensor w, bias;     // W [out, in] (NF4 base: its codes [out, in/2]), optional bias [out]
  const LoraPair* p;  // may be absent
  LoraTarget target;
  Tensor residual = Tensor();  // forward only: added in the GEMM epilogue (y = x W^T + residual + LoRA)
  Tensor aux = Tensor();       // NF4: W's block scales; code12: its exponent codes (weights.h)
  // Backward, DoRA: the forward's output y = (m / norm) v of a bias-free, residual-free linear,
  // kept or recomputed (Note [DoRA]); empty: v is formed again.
  Tensor out = Tensor();
  bool lora() const { return p && p->present(); }
  bool dora() const { return lora() && p->dora(); }
};

// One linear of a group sharing its input x: y (forward output) or dy (backward input gradient).
struct GroupLinear {
  LinearArgs a;
  Tensor y;
};

// Note [fused LoRA]: the low-rank path runs on Backend's fused LoRA ops, which read bf16 or f32
// activations as stored, do f32 math and round once on store: t = x A^T (lora_down), y += s t B^T
// (lora_up); backward db += s dy^T t, dt = s dy B, da += dt^T x, dx += mask(dt A). No f32 staging
// copies of x, y or dy and no skinny GEMMs: 2 launches per target forward, 4 backward (t is kept
// per target from the training forward: Note [kept LoRA t]; the recompute runs lora_up only). On CUDA with
// bf16 activations they run on tensor cores with the f32 operand split into exact bf16 parts
// (backend/cuda/lora_tc.cu Note [split LoRA products]).
//
// Note [LoRA on the side stream]: lora_down (forward) and lora_grad_b / lora_grad_a (backward) are
// small latency-bound kernels nothing on the layer's main path waits for right away, so they go to
// the backend's side stream (backend.h Note [side stream]) and overlap the group's GEMMs. What the
// side reads -- x, dy, t and dt -- must not be written on the compute stream until the join: dt
// has one buffer per target (the dropped-out input is formed inside the ops: Note [dropped
// input]), and layer_backward joins before swiglu_backward overwrites m and rmsnorm_backward
// overwrites hn (the rest joins at the end of the visit). Every output is produced by the same op
// from the same inputs as in issue order, and the accumulations into y and dx keep their order, so
// the bits are those of running everything in order.

// Note [NF4 base]: with an NF4 base (model/weights.h Note [NF4 base layout]) a group's weights are
// dequantized into the scratch staging s.wq right before the group's GEMMs, on the compute stream,
// and overwritten by the next group: one layer visit holds at most one group dense (q/k/v or
// gate/up: 2 F H elements), never the layer. The backward dequantizes again (a 4-bit read and a
// 16-bit write per weight, small next to the GEMM that follows). Dequantization is exact and the
// same on every backend, so an NF4 run is bit-identical to a run whose base is the dequantized
// weights, streamed or resident. A code12 base (weights.h Note [code12 base layout]) takes the same
// path: its decode is lossless, so the run has the bits of the dense bf16 base. Both:
// tests/model/coded_base_test.cc.
constexpr int kMaxGroup = 3;
void dense_weights(const LayerCtx& ctx, const Scratch& s, std::initializer_list<GroupLinear> group,
                   Tensor (&w)[kMaxGroup]) {
  CHECK(group.size() <= kMaxGroup);
  int64_t used = 0;
  int i = 0;
  for (const GroupLinear& g : group) {
    const Tensor& a = g.a.w;
    if (g.a.aux.empty()) {
      w[i++] = a;
      continue;
    }
    // The second part says how W is stored: F32 block scales (NF4) or U8 exponent codes (code12).
    const bool nf4 = g.a.aux.dtype == DType::kF32;
    const int64_t out = a.rows(), in = nf4 ? a.cols() * 2 : a.cols();
    CHECK(used + out * in <= s.wq.numel(), "layer: coded-base staging too small");
    w[i] = Tensor(static_cast<char*>(s.wq.data) + used * static_cast<int64_t>(dtype_size(ctx.act)), ctx.act, {out, in});
    if (nf4) ctx.be->dequant_nf4(w[i++], a, g.a.aux);
    else ctx.be->decode_code12(w[i++], a, g.a.aux);
    used += out * in;
  }
}

// The LoRA dropout probability of this visit: training only.
float drop_p(const LayerCtx& ctx, const LoraLayer& lora) { return ctx.train ? lora.dropout : 0.0f; }

// DoRA with dropout (Note [DoRA with dropout]): x dropped out into xd (Note [dropped input]).
Tensor dora_input(const LayerCtx& ctx, const LoraLayer& lora, const Scratch& s, Tensor x, LoraTarget t) {
  Tensor xd = prefix(s.xd, s.xd.dtype, x.rows(), x.cols());
  ctx.be->dropout(xd, x, lora.dropout, target_seed(ctx, t));
  return xd;
}

// Target a's t = x A^T and dt = s dy B views (per target: Note [LoRA on the side stream]).
Tensor t_view(const Scratch& s, const LinearArgs& a, int64_t n) {
  return prefix(s.t[static_cast<int>(a.target)], DType::kF32, n, a.p->a.dim(0));
}
Tensor dt_view(const Scratch& s, const LinearArgs& a, int64_t n) {
  return prefix(s.dt[static_cast<int>(a.target)], DType::kF32, n, a.p->a.dim(0));
}

// t = drop(x) A^T of target a (Note [dropped input]).
void lora_down_of(const LayerCtx& ctx, const LoraLayer& lora, const Scratch& s, Tensor x, const LinearArgs& a) {
  ctx.be->lora_down(t_view(s, a, x.rows()), x, a.p->a, drop_p(ctx, lora), target_seed(ctx, a.target));
}

// Note [DoRA]: a DoRA target (PEFT use_dora; Liu et al. 2024) computes
//   y = (m / ||W + s B A||_row) * (x W^T + s (x A^T) B^T) + bias (+ residual)
// with the row norm treated as a constant in the backward (PEFT detaches it, the paper's §4.3):
//   g = (m / norm) * dy;  the LoRA gradients and dx as plain LoRA's with g for dy;
//   dm += sum_n dy * v / norm, v = x W^T + s (x A^T) B^T the output before the scale.
// The forward's GEMM leaves the bias and residual out, lora_up adds the low-rank term, and
// dora_combine scales and adds them (one more pass over y). The norms (dora_norm: one read of W,
// A staged per block) are formed by each training forward and kept per (layer, target) beside the
// adapter (LoraPair::norm / scale): the backward of the same micro-batch reads them (A and B do
// not change before the optimizer step), and its recompute forward does not form them again.
// dora_backward needs v. gate/up (no bias, no residual, output kept or recomputed for
// swiglu_backward) take it from their output: sum dy * y / m = sum dy * v / norm (y = (m/norm) v),
// so dm divides by m there. The other targets form v again (one more GEMM each: q/k are rotated in
// place, o/down carry the residual stream, a bias would cost v its low bits). dora_backward turns
// dy into g in place: into dy itself where the caller says dy is dead after the group (q/k/v,
// gate/up), else into the v buffer, which then must outlive the side stream's reads of it (joined
// at the group's end).
// m starts at ||W||_row (B = 0), formed by the same dora_norm: Model::init_dora_magnitudes.
// With LoRA dropout in training, PEFT's DoRA is another formula: Note [DoRA with dropout].
void dora_norms(const LayerCtx& ctx, const LoraLayer& lora, std::initializer_list<GroupLinear> group,
                const Tensor (&w)[kMaxGroup]) {
  int i = 0;
  for (const GroupLinear& g : group) {
    if (g.a.dora()) ctx.be->dora_norm(g.a.p->norm, g.a.p->scale, w[i], g.a.p->a, g.a.p->b, g.a.p->mag, lora.scaling);
    ++i;
  }
}

// y_i[N,out_i] = x W_i^T (+ bias) (+ residual) + s (drop(x) A_i^T) B_i^T for each linear of the group.
// The residual rides in the GEMM (one launch, one rounding) before the LoRA update is added; the
// down-projections run on the side stream beside the GEMMs (Note [LoRA on the side stream]); two
// neighbours of one weight shape share a launch (Backend::gemm_pair).
// Note [DoRA with dropout]: PEFT's DoRA in training with lora_dropout p > 0 (tuners/lora: the
// dropped input x_d = drop(x) also feeds a second base product) computes
//   y = (x W^T + b + r) + (m/norm - 1) * (x_d W^T) + (m/norm) * s (x_d A^T) B^T
//     = y_base - z + (m/norm) * v,   z = x_d W^T,  v = z + s (x_d A^T) B^T.
// Forward, per target, on the compute stream: x_d (act dtype, the target's mask), t = x_d A^T,
// y = z = x_d W^T, Yb = x W^T + b + r, Q = Yb - z (a copy of z through dora_combine with a scale
// of -1s), y += s t B^T (= v), y = (m/norm) y + Q (dora_combine): one base GEMM more than LoRA's.
// Backward, g = (m/norm) dy:  dm += sum dy * v / norm;  the LoRA grads as LoRA's with g on x_d;
//   dx = dy W + mask((g - dy) W + s (g B) A),
// the dropped part formed as Q = g - dy (again through the -1 scale), H = Q W, H = drop(H) (the
// same mask), dx += H, then lora_dx adds mask(dt A) as for LoRA: v and Q W, two base GEMMs more
// than LoRA's. Each target runs to the end before the next (one x_d, v, Q and H buffer), on the
// compute stream only: no side-stream overlap for this path.
bool dora_dropout(const LayerCtx& ctx, const LoraLayer& lora, std::initializer_list<GroupLinear> group) {
  if (!ctx.train || lora.dropout <= 0.0f) return false;
  for (const GroupLinear& g : group)
    if (g.a.dora()) return true;
  return false;
}

void dora_dropout_forward(const LayerCtx& ctx, const LoraLayer& lora, const Scratch& s, Tensor x,
                          std::initializer_list<GroupLinear> group, const Tensor (&w)[kMaxGroup], bool t_current) {
  Backend& be = *ctx.be;
  const int64_t N = x.rows();
  int i = 0;
  for (const GroupLinear& g : group) {
    const LinearArgs& a = g.a;
    if (!a.dora()) {  // a plain linear of the group (this path runs only where every LoRA target is DoRA)
      CHECK(!a.lora(), "layer: DoRA and plain LoRA targets in one group");
      be.gemm(g.y, x, w[i++], {.trans_b = Trans::kYes, .bias = a.bias, .residual = a.residual});
      continue;
    }
    const int64_t out = g.y.cols();
    Tensor xd = dora_input(ctx, lora, s, x, a.target);
    if (!t_current) be.lora_down(t_view(s, a, N), xd, a.p->a, 0.0f, {});
    be.gemm(g.y, xd, w[i], {.trans_b = Trans::kYes});  // z
    Tensor yb = prefix(s.dora_w, ctx.act, N, out), q = prefix(s.dora_q, ctx.act, N, out);
    be.gemm(yb, x, w[i], {.trans_b = Trans::kYes, .bias = a.bias, .residual = a.residual});
    be.copy_d2d(q.data, g.y.data, q.bytes(), StreamId::kCompute);
    be.dora_combine(q, Tensor(lora.neg_ones.data, DType::kF32, {out}), Tensor(), yb);  // Yb - z
    be.lora_up(g.y, t_view(s, a, N), a.p->b, lora.scaling);                          // v
    be.dora_combine(g.y, a.p->scale, Tensor(), q);
    ++i;
  }
}

// See Note [DoRA with dropout]. dx empty: the LoRA and magnitude gradients only.
void dora_dropout_backward(const LayerCtx& ctx, const LoraLayer& lora, const Scratch& s, Tensor x,
                           std::initializer_list<GroupLinear> group, const Tensor (&w)[kMaxGroup], Tensor dx,
                           Accum acc, bool t_current) {
  Backend& be = *ctx.be;
  const int64_t N = x.rows();
  const float sc = lora.scaling;
  int i = 0;
  for (const GroupLinear& g : group) {
    const LinearArgs& a = g.a;
    const Accum first = i == 0 ? acc : Accum::kAdd;
    if (!a.dora()) {
      CHECK(!a.lora(), "layer: DoRA and plain LoRA targets in one group");
      if (!dx.empty()) be.gemm(dx, g.y, w[i], {.accum = first});
      ++i;
      continue;
    }
    const DropoutSeed seed = target_seed(ctx, a.target);
    Tensor xd = dora_input(ctx, lora, s, x, a.target);
    if (!t_current) be.lora_down(t_view(s, a, N), xd, a.p->a, 0.0f, {});
    Tensor v = prefix(s.dora_v, ctx.act, N, g.y.cols());
    be.gemm(v, xd, w[i], {.trans_b = Trans::kYes});
    be.lora_up(v, t_view(s, a, N), a.p->b, sc);
    be.dora_backward(v, a.p->dmag, g.y, v, a.p->scale, a.p->norm);  // v becomes g = (m/norm) dy
    be.lora_dt(dt_view(s, a, N), v, a.p->b, sc);
    be.lora_grad_b(a.p->db, v, t_view(s, a, N), sc);
    be.lora_grad_a(a.p->da, dt_view(s, a, N), xd, 0.0f, {});
    if (!dx.empty()) {
      const int64_t out = g.y.cols();
      be.gemm(dx, g.y, w[i], {.accum = first});  // the base product sees dy itself
      Tensor q = prefix(s.dora_q, ctx.act, N, out), h = prefix(s.dora_w, ctx.act, N, dx.cols());
      be.copy_d2d(q.data, g.y.data, q.bytes(), StreamId::kCompute);
      be.dora_combine(q, Tensor(lora.neg_ones.data, DType::kF32, {out}), Tensor(), v);  // g - dy
      be.gemm(h, q, w[i], {});
      be.dropout(h, h, lora.dropout, seed);
      be.add(dx, dx, h);
      be.lora_dx(dx, dt_view(s, a, N), a.p->a, lora.dropout, seed);
    }
    ++i;
  }
}

// recompute: the backward's recompute of this micro-batch's training forward, whose DoRA norms are
// current (Note [DoRA]) and, with a saved region, whose t too (Note [kept LoRA t]).
void linears_forward(const LayerCtx& ctx, const LoraLayer& lora, const Scratch& s, Tensor x,
                     std::initializer_list<GroupLinear> group, bool recompute = false) {
  Backend& be = *ctx.be;
  const bool t_current = recompute && s.t_kept;
  if (dora_dropout(ctx, lora, group)) {
    Tensor w[kMaxGroup];
    dense_weights(ctx, s, group, w);
    if (!recompute) dora_norms(ctx, lora, group, w);
    dora_dropout_forward(ctx, lora, s, x, group, w, t_current);
    return;
  }
  bool any = false;
  for (const GroupLinear& g : group) any = any || g.a.lora();
  if (any && !t_current) {
    be.side_begin();
    for (const GroupLinear& g : group)
      if (g.a.lora()) lora_down_of(ctx, lora, s, x, g.a);
    be.side_end();
  }
  Tensor w[kMaxGroup];
  dense_weights(ctx, s, group, w);
  if (!recompute) dora_norms(ctx, lora, group, w);
  // A DoRA target's bias and residual wait for its scale (Note [DoRA]).
  Tensor bias[kMaxGroup], residual[kMaxGroup];
  const GroupLinear* l = group.begin();
  for (size_t i = 0; i < group.size(); ++i) {
    if (l[i].a.dora()) continue;
    bias[i] = l[i].a.bias;
    residual[i] = l[i].a.residual;
  }
  // Neighbours with one weight shape (gate/up; k/v, or q/k without GQA) go as a pair.
  for (size_t i = 0; i < group.size();) {
    if (i + 1 < group.size() && residual[i].empty() && residual[i + 1].empty() && w[i].rows() == w[i + 1].rows() &&
        bias[i].empty() == bias[i + 1].empty()) {
      be.gemm_pair(l[i].y, l[i + 1].y, x, w[i], w[i + 1], bias[i], bias[i + 1]);
      i += 2;
    } else {
      be.gemm(l[i].y, x, w[i], {.trans_b = Trans::kYes, .bias = bias[i], .residual = residual[i]});
      i += 1;
    }
  }
  if (!any) return;
  if (!t_current) be.side_join();
  for (const GroupLinear& g : group) {
    if (!g.a.lora()) continue;
    be.lora_up(g.y, t_view(s, g.a, x.rows()), g.a.p->b, lora.scaling);
    if (g.a.dora()) be.dora_combine(g.y, g.a.p->scale, g.a.bias, g.a.residual);
  }
}

// dx[N,in] (acc for the first linear, then +=) = sum_i (dy_i W_i + LoRA input-gradient_i), in group
// order; LoRA grads += (x: the forward input of the group). t = x A^T: with t_current, the one the
// training forward left in s.t[target] (Note [kept LoRA t]) or its recompute formed (same bits a
// fresh lora_down would give); else computed here (down_proj without a saved region, whose
// forward the recompute does not run). The weight gradients are left running on the side stream:
// the caller joins it before anything overwrites x or the dy_i (Note [LoRA on the side stream]). An empty dx: only the LoRA
// gradients are wanted (layer 0: nothing reads the gradient of the frozen embeddings).
void linears_backward(const LayerCtx& ctx, const LoraLayer& lora, const Scratch& s, Tensor x,
                      std::initializer_list<GroupLinear> group, Tensor dx, Accum acc, bool dy_dead,
                      bool t_current = true) {
  Backend& be = *ctx.be;
  const int64_t N = x.rows();
  const float sc = lora.scaling;
  if (dora_dropout(ctx, lora, group)) {
    Tensor w[kMaxGroup];
    dense_weights(ctx, s, group, w);
    dora_dropout_backward(ctx, lora, s, x, group, w, dx, acc, t_current);
    return;
  }
  bool any = false, any_dora = false, join = false;
  for (const GroupLinear& g : group) any_dora = any_dora || (g.a.dora() && g.a.out.empty());
  Tensor w[kMaxGroup];
  if (any_dora || !dx.empty()) dense_weights(ctx, s, group, w);
  Tensor gy[kMaxGroup];  // the output gradient the LoRA ops and dx see: dy, or DoRA's (m / norm) dy
  int i = 0;
  for (const GroupLinear& g : group) {
    gy[i] = g.y;
    if (g.a.lora()) {
      any = true;
      if (!t_current) lora_down_of(ctx, lora, s, x, g.a);  // [N,r]
      if (g.a.dora() && !g.a.out.empty()) {  // Note [DoRA]: v from the output, dm over m
        CHECK(dy_dead && g.a.bias.empty());
        gy[i] = g.y;
        be.dora_backward(gy[i], g.a.p->dmag, g.y, g.a.out, g.a.p->scale, g.a.p->mag);
      } else if (g.a.dora()) {  // v formed again
        Tensor v = prefix(s.dora_v, ctx.act, N, g.y.cols());
        be.gemm(v, x, w[i], {.trans_b = Trans::kYes});
        be.lora_up(v, t_view(s, g.a, N), g.a.p->b, sc);
        gy[i] = dy_dead ? g.y : v;
        join = join || !dy_dead;
        be.dora_backward(gy[i], g.a.p->dmag, g.y, v, g.a.p->scale, g.a.p->norm);
      }
      be.lora_dt(dt_view(s, g.a, N), gy[i], g.a.p->b, sc);  // [N,r]
    }
    ++i;
  }
  if (any) {
    be.side_begin();
    i = 0;
    for (const GroupLinear& g : group) {
      if (g.a.lora()) {
        be.lora_grad_b(g.a.p->db, gy[i], t_view(s, g.a, N), sc);                                  // [out,r] +=
        be.lora_grad_a(g.a.p->da, dt_view(s, g.a, N), x, drop_p(ctx, lora), target_seed(ctx, g.a.target));  // [r,in] +=
      }
      ++i;
    }
    be.side_end();
  }
  if (!dx.empty()) {
    i = 0;
    for (const GroupLinear& g : group) {
      be.gemm(dx, gy[i], w[i], {.accum = i == 0 ? acc : Accum::kAdd});
      if (g.a.lora())
        be.lora_dx(dx, dt_view(s, g.a, N), g.a.p->a, drop_p(ctx, lora), target_seed(ctx, g.a.target));  // +=
      ++i;
    }
  }
  if (join) be.side_join();  // the side read gy in dora_v, which the next group reuses
}

}  // namespace

AttnShape attention_shape(const ModelConfig& c, int64_t layer) {
  return {.num_heads = c.num_heads, .num_kv_heads = c.num_kv_heads, .head_dim = c.head_dim,
          .scale = rope_attention_scale(c), .window = c.attention_window(layer)};
}

std::vector<AttnShape> attention_shapes(const ModelConfig& c) {
  std::vector<AttnShape> out;
  for (int64_t l = 0; l < std::max<int64_t>(c.num_layers, 1); ++l) {
    const AttnShape s = attention_shape(c, l);
    bool seen = false;
    for (const AttnShape& o : out) seen = seen || o.window == s.window;
    if (!seen) out.push_back(s);
  }
  return out;
}

// Note [packed attention allowance]: packed rows run cuDNN's ragged layout (backend.h Note
// [document spans]), shaped [span slots, longest-span bucket], whose workspace follows slots x
// bucket rather than the row's tokens: ~0.45x a dense row's per slot-token on the H200, and slots
// x bucket is ~2-3x the tokens for documents of mixed lengths. Packed runs therefore ask for
// twice the dense workspace, and at least the ragged workspace of `batch` + 1 spans (rounded up to
// even) of sequence_len each: a padding-free micro-batch's samples and its padding tail (data/
// data_loader.h Note [padding-free batches]). That shape is common -- two samples of nearly
// sequence_len -- and twice the dense workspace did not hold it (Qwen2.5-1.5B, 2 x 2048: 504 MB
// against 453 granted; its own kernels made the step 73 ms against 54 for the same samples as rows:
// bench/RESULTS.md session 30). A batch whose shape needs more still keeps the own kernels (a
// decision per shape, so a layer's forward and backward agree).
uint64_t fused_attention_min_workspace(Backend* be, int64_t batch, int64_t seq, const ModelConfig& c, bool packed) {
  if (packed) return 0;
  uint64_t ws = 0;
  for (const AttnShape& s : attention_shapes(c)) ws = std::max(ws, be->fused_attention_min_workspace(batch, seq, s));
  return ws;
}

uint64_t fused_attention_workspace(Backend* be, int64_t batch, int64_t seq, const ModelConfig& c, bool packed) {
  uint64_t ws = 0;
  for (const AttnShape& s : attention_shapes(c)) ws = std::max(ws, be->fused_attention_workspace(batch, seq, s));
  if (!packed) return ws;
  ws *= 2;
  const int64_t bucket = std::max<int64_t>(128, (seq + 127) / 128 * 128);  // document_seq_bucket of a full sample
  for (const AttnShape& s : attention_shapes(c))
    ws = std::max(ws, be->fused_attention_ragged_workspace(document_slots(batch + 1), bucket, s));
  return ws;
}

namespace {

Tensor heads(Tensor t, int64_t n_heads, int64_t d) { return t.reshape({t.rows(), n_heads, d}); }

// The layer's views for this call (Note [recompute]): without a saved region (kFull outside
// training) everything comes from the scratch; kFull takes the LoRA t from the saved region (Note
// [kept LoRA t]), kAttention att/lse and t, kNone every forward view.
Scratch carve_ctx(const LayerCtx& ctx, const LoraConfig& lc, const LayerWeights& w) {
  const ModelConfig& c = *ctx.cfg;
  const int64_t N = ctx.tokens;
  Carver cv(ctx.scratch, ctx.scratch_bytes);
  Scratch s = carve(cv, c, N, lc, ctx.act, w.quant);
  if (ctx.saved == nullptr) {
    CHECK(ctx.recompute == Recompute::kFull, "layer: recompute " << recompute_name(ctx.recompute) << " without a saved region");
    return s;
  }
  Carver kept(ctx.saved, ctx.saved_bytes);
  if (ctx.recompute == Recompute::kNone) {
    carve_forward(kept, &s, c, N, lc, ctx.act);
  } else {
    if (ctx.recompute == Recompute::kAttention) carve_attention(kept, &s, c, N, ctx.act);
    carve_lora_t(kept, &s, N, lc);
  }
  CHECK(kept.used() <= ctx.saved_bytes, "layer: saved region too small");
  s.t_kept = true;
  return s;
}

LoraConfig lora_shape_of(const LoraLayer& lora) {
  LoraConfig lc;
  lc.r = 1;
  lc.dropout = lora.dropout;
  for (int t = 0; t < kNumLoraTargets; ++t) {
    lc.targets[t] = lora.t[t].present();
    if (lora.t[t].present()) lc.r = lora.t[t].a.dim(0);
    lc.dora = lc.dora || lora.t[t].dora();
  }
  return lc;
}

// Attention block up to h = x + o_proj(attention(...)); fills s.{xn,q,k,v,qn,kn,att,h,rstd*,lse}
// (att and lse are only read when !run_attention: Note [recompute]).
void attention_forward(const LayerCtx& ctx, const LayerWeights& w, const LoraLayer& lora, const Scratch& s,
                       Tensor x, bool run_attention = true, bool recompute = false) {
  Backend& be = *ctx.be;
  const ModelConfig& c = *ctx.cfg;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t N = ctx.tokens, D = c.head_dim, NH = c.num_heads, KVH = c.num_kv_heads;
  be.rmsnorm(s.xn, s.rstd1, x, w.input_norm, eps);
  linears_forward(ctx, lora, s, s.xn,
                  {{{w.q, w.q_bias, &lora[LoraTarget::kQ], LoraTarget::kQ, {}, w.q_aux}, s.q},
                   {{w.k, w.k_bias, &lora[LoraTarget::kK], LoraTarget::kK, {}, w.k_aux}, s.k},
                   {{w.v, w.v_bias, &lora[LoraTarget::kV], LoraTarget::kV, {}, w.v_aux}, s.v}},
                  recompute);
  Tensor qa = s.q, ka = s.k;
  if (c.qk_norm) {
    be.rmsnorm(s.qn.reshape({N * NH, D}), s.rstd_q, s.q.reshape({N * NH, D}), w.q_norm, eps);
    be.rmsnorm(s.kn.reshape({N * KVH, D}), s.rstd_k, s.k.reshape({N * KVH, D}), w.k_norm, eps);
    qa = s.qn;
    ka = s.kn;
  }
  be.rope_qk(heads(qa, NH, D), heads(ka, KVH, D), ctx.seq.positions, ctx.inv_freq, false);
  Tensor lse = s.lse.reshape({ctx.seq.batch, NH, ctx.seq.seq});
  if (run_attention)
    be.attention(heads(s.att, NH, D), lse, heads(qa, NH, D), heads(ka, KVH, D), heads(s.v, KVH, D), ctx.seq,
                 attention_shape(c, ctx.layer));
  linears_forward(ctx, lora, s, s.att, {{{w.o, {}, &lora[LoraTarget::kO], LoraTarget::kO, x, w.o_aux}, s.h}},
                  recompute);  // h = x + ...
}

// MLP up to m = silu(gate) * up; fills s.{hn,g,u,m,rstd2}. Without need_m, m is left unwritten: the
// backward's recompute reads m only as the LoRA input of down_proj (swiglu_backward reads g and u).
void mlp_forward(const LayerCtx& ctx, const LayerWeights& w, const LoraLayer& lora, const Scratch& s,
                 bool need_m = true, bool recompute = false) {
  Backend& be = *ctx.be;
  be.rmsnorm(s.hn, s.rstd2, s.h, w.post_norm, static_cast<float>(ctx.cfg->rms_norm_eps));
  linears_forward(ctx, lora, s, s.hn,
                  {{{w.gate, {}, &lora[LoraTarget::kGate], LoraTarget::kGate, {}, w.gate_aux}, s.g},
                   {{w.up, {}, &lora[LoraTarget::kUp], LoraTarget::kUp, {}, w.up_aux}, s.u}},
                  recompute);
  if (need_m) be.swiglu(s.m, s.g, s.u);
}

}  // namespace

size_t layer_scratch_bytes(const ModelConfig& c, int64_t tokens, const LoraConfig& lc, DType act, BaseQuant quant) {
  Carver cv;
  carve(cv, c, tokens, lc, act, quant);
  return cv.used();
}

size_t layer_saved_bytes(const ModelConfig& c, int64_t tokens, const LoraConfig& lc, DType act, Recompute r) {
  Carver cv;
  Scratch s;
  if (r == Recompute::kNone) {
    carve_forward(cv, &s, c, tokens, lc, act);
  } else {
    if (r == Recompute::kAttention) carve_attention(cv, &s, c, tokens, act);
    carve_lora_t(cv, &s, tokens, lc);
  }
  return cv.used();
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kFull: return "full";
    case Recompute::kAttention: return "attention";
    case Recompute::kNone: return "none";
  }
  return "?";
}

bool parse_recompute(const std::string& s, Recompute* out) {
  for (Recompute r : {Recompute::kFull, Recompute::kAttention, Recompute::kNone})
    if (s == recompute_name(r)) {
      *out = r;
      return true;
    }
  return false;
}

void layer_forward(const LayerCtx& ctx, const LayerWeights& w, const LoraLayer& lora, Tensor x, Tensor out) {
  CHECK(x.dtype == ctx.act && out.dtype == ctx.act && x.data != out.data);
  Scratch s = carve_ctx(ctx, lora_shape_of(lora), w);
  attention_forward(ctx, w, lora, s, x);
  mlp_forward(ctx, w, lora, s);
  linears_forward(ctx, lora, s, s.m,
                  {{{w.down, {}, &lora[LoraTarget::kDown], LoraTarget::kDown, s.h, w.down_aux}, out}});  // out = h + ...
}

void layer_dora_init(const LayerCtx& ctx, const LayerWeights& w, const LoraLayer& lora) {
  Carver cv(ctx.scratch, ctx.scratch_bytes);
  const Scratch s = carve(cv, *ctx.cfg, ctx.tokens, lora_shape_of(lora), ctx.act, w.quant);
  const std::pair<Tensor, Tensor> weights[kNumLoraTargets] = {
      {w.q, w.q_aux},       {w.k, w.k_aux},   {w.v, w.v_aux},      {w.o, w.o_aux},
      {w.gate, w.gate_aux}, {w.up, w.up_aux}, {w.down, w.down_aux}};
  for (int t = 0; t < kNumLoraTargets; ++t) {
    const LoraPair& p = lora.t[t];
    if (!p.dora()) continue;
    Tensor dense[kMaxGroup];
    dense_weights(ctx, s, {{{weights[t].first, {}, &p, static_cast<LoraTarget>(t), {}, weights[t].second}, Tensor()}},
                  dense);
    ctx.be->dora_norm(p.mag, Tensor(), dense[0], p.a, p.b, Tensor(), lora.scaling);
  }
}

void layer_backward(const LayerCtx& ctx, const LayerWeights& w, const LoraLayer& lora, Tensor x, Tensor dout,
                    Tensor dx) {
  CHECK(dx.data != dout.data && dx.data != x.data);  // dx may be empty: no input gradient wanted
  Backend& be = *ctx.be;
  const ModelConfig& c = *ctx.cfg;
  const int64_t N = ctx.tokens, D = c.head_dim, NH = c.num_heads, KVH = c.num_kv_heads;
  Scratch s = carve_ctx(ctx, lora_shape_of(lora), w);
  const bool recompute = ctx.recompute != Recompute::kNone && !ctx.forward_current;
  if (recompute) {  // recompute from x (Note [recompute])
    // The DoRA norms are this micro-batch's forward's (Note [DoRA]), and so is t where it was kept
    // (Note [kept LoRA t]).
    attention_forward(ctx, w, lora, s, x, /*run_attention=*/ctx.recompute == Recompute::kFull, /*recompute=*/true);
    mlp_forward(ctx, w, lora, s, /*need_m=*/lora[LoraTarget::kDown].present(), /*recompute=*/true);
  }

  // MLP. dg reuses m's memory (m is dead once down_proj's backward has read it).
  linears_backward(ctx, lora, s, s.m, {{{w.down, {}, &lora[LoraTarget::kDown], LoraTarget::kDown, {}, w.down_aux}, dout}}, s.dm,
                   Accum::kOverwrite, /*dy_dead=*/false, /*t_current=*/!recompute || s.t_kept);
  be.side_join();  // down_proj's LoRA grads read m (Note [LoRA on the side stream])
  Tensor dg = s.m;
  be.swiglu_backward(dg, s.du, s.dm, s.g, s.u);
  Tensor dhn = s.dxn;
  linears_backward(ctx, lora, s, s.hn,
                   {{{w.gate, {}, &lora[LoraTarget::kGate], LoraTarget::kGate, {}, w.gate_aux, s.g}, dg},
                    {{w.up, {}, &lora[LoraTarget::kUp], LoraTarget::kUp, {}, w.up_aux, s.u}, s.du}},
                   dhn, Accum::kOverwrite, /*dy_dead=*/true);
  be.side_join();    // gate/up's LoRA grads read hn
  Tensor dh = s.hn;  // hn is dead after gate/up backward
  be.rmsnorm_backward_add(dh, dhn, s.h, w.post_norm, s.rstd2, dout);

  // Attention.
  // o_proj's LoRA grads (side) read att and dh until the join at the end: nothing below writes them.
  linears_backward(ctx, lora, s, s.att, {{{w.o, {}, &lora[LoraTarget::kO], LoraTarget::kO, {}, w.o_aux}, dh}}, s.da,
                   Accum::kOverwrite, /*dy_dead=*/false);
  Tensor qa = c.qk_norm ? s.qn : s.q, ka = c.qk_norm ? s.kn : s.k;
  Tensor lse = s.lse.reshape({ctx.seq.batch, NH, ctx.seq.seq});
  be.attention_backward(heads(s.dq, NH, D), heads(s.dk, KVH, D), heads(s.dv, KVH, D), heads(s.da, NH, D),
                        heads(qa, NH, D), heads(ka, KVH, D), heads(s.v, KVH, D), heads(s.att, NH, D), lse, ctx.seq,
                        attention_shape(c, ctx.layer));
  be.rope_qk(heads(s.dq, NH, D), heads(s.dk, KVH, D), ctx.seq.positions, ctx.inv_freq, true);
  Tensor dq = s.dq, dk = s.dk;
  if (c.qk_norm) {
    be.rmsnorm_backward(s.dq2.reshape({N * NH, D}), s.dq.reshape({N * NH, D}), s.q.reshape({N * NH, D}), w.q_norm,
                        s.rstd_q);
    be.rmsnorm_backward(s.dk2.reshape({N * KVH, D}), s.dk.reshape({N * KVH, D}), s.k.reshape({N * KVH, D}),
                        w.k_norm, s.rstd_k);
    dq = s.dq2;
    dk = s.dk2;
  }
  linears_backward(ctx, lora, s, s.xn,
                   {{{w.q, {}, &lora[LoraTarget::kQ], LoraTarget::kQ, {}, w.q_aux}, dq},
                    {{w.k, {}, &lora[LoraTarget::kK], LoraTarget::kK, {}, w.k_aux}, dk},
                    {{w.v, {}, &lora[LoraTarget::kV], LoraTarget::kV, {}, w.v_aux}, s.dv}},
                   dx.empty() ? Tensor() : s.dxn, Accum::kOverwrite, /*dy_dead=*/true);
  if (!dx.empty()) be.rmsnorm_backward_add(dx, s.dxn, x, w.input_norm, s.rstd1, dh);
  be.side_join();  // the q/k/v (and o) LoRA grads: a visit leaves nothing running on the side
}

}  // namespace st
