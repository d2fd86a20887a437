#include "model/decode.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/carver.h"
#include "model/layer.h"

namespace st {
namespace {

// Views of the decoder arena (Note [decode arena]): carved identically when measuring (base
// null) and when running, so the size computed in create() is the size used.
struct DecodeBufs {
  Tensor kcache, vcache;                  // [L, max_seq, KV] act
  Tensor inv_freq;                        // f32 [D/2]
  Tensor ids, positions;                  // i32 [C]
  Tensor x, y, xn, h, hn;                 // [C, H] act
  Tensor q, k, v, qn, kn, att;            // [C, Q] [C, KV] [C, KV] [C, Q] [C, KV] [C, Q]
  Tensor g, u, m;                         // [C, F]
  Tensor rstd, rstd_q, rstd_k;            // f32 [C], [C*NH], [C*KVH]
  Tensor t;                               // LoRA f32: [C, r]
  Tensor dnorm, dscale;                   // DoRA f32: [max out] (layer.cc Note [DoRA])
  Tensor logits;                          // f32 [C, V]
};

DecodeBufs carve_bufs(Carver& cv, const ModelConfig& c, const DecoderOptions& o, int64_t lora_r, bool dora) {
  const int64_t C = o.max_chunk, H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  const DType a = o.act, f32 = DType::kF32;
  DecodeBufs b;
  b.kcache = cv.take(a, {c.num_layers, o.max_seq, KV});
  b.vcache = cv.take(a, {c.num_layers, o.max_seq, KV});
  b.inv_freq = cv.take(f32, {c.head_dim / 2});
  b.ids = cv.take(DType::kI32, {C});
  b.positions = cv.take(DType::kI32, {C});
  for (Tensor* t : {&b.x, &b.y, &b.xn, &b.h, &b.hn}) *t = cv.take(a, {C, H});
  b.q = cv.take(a, {C, Q});
  b.k = cv.take(a, {C, KV});
  b.v = cv.take(a, {C, KV});
  b.qn = cv.take(a, {C, Q});
  b.kn = cv.take(a, {C, KV});
  b.att = cv.take(a, {C, Q});
  for (Tensor* t : {&b.g, &b.u, &b.m}) *t = cv.take(a, {C, F});
  b.rstd = cv.take(f32, {C});
  b.rstd_q = cv.take(f32, {C * c.num_heads});
  b.rstd_k = cv.take(f32, {C * c.num_kv_heads});
  if (lora_r > 0) b.t = cv.take(f32, {C, lora_r});
  if (dora) {
    b.dnorm = cv.take(f32, {std::max({Q, KV, H, F})});
    b.dscale = cv.take(f32, {std::max({Q, KV, H, F})});
  }
  b.logits = cv.take(f32, {C, c.vocab_size});
  return b;
}

// First n rows of a [C, ...] buffer, as [n, cols].
Tensor rows(Tensor t, int64_t n) { return t.reshape({t.rows(), t.cols()}).row_slice(0, n); }
Tensor vec_prefix(Tensor t, int64_t n) { return Tensor(t.data, t.dtype, {n}); }  // of a 1-D buffer
Tensor heads(Tensor t, int64_t nh, int64_t d) { return t.reshape({t.rows(), nh, d}); }

struct StepCtx {
  Backend* be;
  const ModelConfig* c;
  const DecodeBufs* b;
  const LoraLayer* lora;  // null: no adapter
  int64_t n;              // tokens in this chunk
  int64_t pos0;           // absolute position of the chunk's first token
};

// y[n,out] = x W^T (+bias) + scaling (x A^T) B^T, the LoRA path in f32 through the fused LoRA ops
// (as layer.cc's forward; PEFT computes the adapter in f32 too). DoRA: the bias waits for the
// magnitude scale (layer.cc Note [DoRA]); the row norms are formed again at every step.
void linear(const StepCtx& s, Tensor w, Tensor bias, LoraTarget tgt, Tensor x, Tensor y) {
  Backend& be = *s.be;
  const LoraPair* p = s.lora != nullptr && (*s.lora)[tgt].present() ? &(*s.lora)[tgt] : nullptr;
  const bool dora = p != nullptr && p->dora();
  be.gemm(y, x, w, {.trans_b = Trans::kYes, .bias = dora ? Tensor() : bias});
  if (p == nullptr) return;
  Tensor t(s.b->t.data, DType::kF32, {x.rows(), p->a.dim(0)});
  be.lora_down(t, x, p->a, 0.0f, {});
  be.lora_up(y, t, p->b, s.lora->scaling);
  if (!dora) return;
  Tensor norm = vec_prefix(s.b->dnorm, w.rows()), scale = vec_prefix(s.b->dscale, w.rows());
  be.dora_norm(norm, scale, w, p->a, p->b, p->mag, s.lora->scaling);
  be.dora_combine(y, scale, bias, Tensor());
}

// Rows [pos0, pos0+n) of layer l's cache, and rows [0, pos0+n) as [T, KVH, D].
Tensor cache_rows(const StepCtx& s, Tensor cache, int layer, int64_t first, int64_t n) {
  const int64_t KV = s.c->kv_dim();
  Tensor lay = cache.reshape({cache.dim(0) * cache.dim(1), KV}).row_slice(layer * cache.dim(1), cache.dim(1));
  return lay.row_slice(first, n);
}

// x -> y for one layer at positions pos0..pos0+n-1 (attention over the cache).
void layer_step(const StepCtx& s, const LayerWeights& w, int layer, Tensor x, Tensor y) {
  Backend& be = *s.be;
  const ModelConfig& c = *s.c;
  const DecodeBufs& b = *s.b;
  const int64_t n = s.n, D = c.head_dim, NH = c.num_heads, KVH = c.num_kv_heads;
  const float eps = static_cast<float>(c.rms_norm_eps);
  Tensor xn = rows(b.xn, n), q = rows(b.q, n), k = rows(b.k, n), v = rows(b.v, n), att = rows(b.att, n);
  Tensor h = rows(b.h, n), hn = rows(b.hn, n), g = rows(b.g, n), u = rows(b.u, n), m = rows(b.m, n);
  be.rmsnorm(xn, vec_prefix(b.rstd, n), x, w.input_norm, eps);
  linear(s, w.q, w.q_bias, LoraTarget::kQ, xn, q);
  linear(s, w.k, w.k_bias, LoraTarget::kK, xn, k);
  linear(s, w.v, w.v_bias, LoraTarget::kV, xn, v);
  if (c.qk_norm) {
    Tensor qn = rows(b.qn, n), kn = rows(b.kn, n);
    be.rmsnorm(qn.reshape({n * NH, D}), vec_prefix(b.rstd_q, n * NH), q.reshape({n * NH, D}),
               w.q_norm, eps);
    be.rmsnorm(kn.reshape({n * KVH, D}), vec_prefix(b.rstd_k, n * KVH), k.reshape({n * KVH, D}),
               w.k_norm, eps);
    q = qn;
    k = kn;
  }
  const int32_t* pos = b.positions.ptr<int32_t>();
  be.rope(heads(q, NH, D), pos, b.inv_freq, false);
  be.rope(heads(k, KVH, D), pos, b.inv_freq, false);
  be.copy_d2d(cache_rows(s, b.kcache, layer, s.pos0, n).data, k.data, k.bytes(), StreamId::kCompute);
  be.copy_d2d(cache_rows(s, b.vcache, layer, s.pos0, n).data, v.data, v.bytes(), StreamId::kCompute);
  const AttnShape as = attention_shape(c, layer);
  be.attention_kv(heads(att, NH, D), heads(q, NH, D), heads(cache_rows(s, b.kcache, layer, 0, s.pos0 + n), KVH, D),
                  heads(cache_rows(s, b.vcache, layer, 0, s.pos0 + n), KVH, D), s.pos0, as);
  linear(s, w.o, {}, LoraTarget::kO, att, h);
  be.add(h, h, x);
  be.rmsnorm(hn, vec_prefix(b.rstd, n), h, w.post_norm, eps);
  linear(s, w.gate, {}, LoraTarget::kGate, hn, g);
  linear(s, w.up, {}, LoraTarget::kUp, hn, u);
  be.swiglu(m, g, u);
  linear(s, w.down, {}, LoraTarget::kDown, m, y);
  be.add(y, y, h);
}

int64_t lora_rank(const Lora* lora) { return lora ? lora->config().r : 0; }
bool lora_dora(const Lora* lora) { return lora && lora->config().dora; }

}  // namespace

// Note [decode arena]: one allocation holds the KV cache, the chunk scratch and the logits;
// carve_bufs() lays it out, for measuring and for use.
Decoder::Decoder(Backend* be, const ModelConfig& c, const ExtrasWeights& e, LayerSource* l, const Lora* lora,
                 const DecoderOptions& o)
    : be_(be), cfg_(c), extras_(e), layers_(l), lora_(lora), opts_(o) {}

Decoder::~Decoder() {
  if (arena_) be_->free(arena_);
}

StatusOr<std::unique_ptr<Decoder>> Decoder::create(Backend* be, const ModelConfig& c, const ExtrasWeights& extras,
                                                   LayerSource* layers, const Lora* lora, const DecoderOptions& o) {
  if (o.max_seq <= 0 || o.max_chunk <= 0) {
    return InvalidArgument(Str() << "decoder: max_seq " << o.max_seq << " and max_chunk " << o.max_chunk
                                 << " must be positive");
  }
  if (c.head_dim % 2 != 0) return InvalidArgument(Str() << "decoder: odd head_dim " << c.head_dim);
  DecoderOptions opts = o;
  opts.max_chunk = std::min(o.max_chunk, o.max_seq);
  std::unique_ptr<Decoder> d(new Decoder(be, c, extras, layers, lora, opts));
  RETURN_IF_ERROR(d->allocate());
  return d;
}

Status Decoder::allocate() {
  Carver measure;
  carve_bufs(measure, cfg_, opts_, lora_rank(lora_), lora_dora(lora_));
  arena_bytes_ = measure.used();
  ASSIGN_OR_RETURN(arena_, be_->alloc(arena_bytes_),
                   "decoder: KV cache for " << opts_.max_seq << " tokens + scratch (" << arena_bytes_
                     << " bytes)");
  Carver cv(arena_, arena_bytes_);
  const DecodeBufs b = carve_bufs(cv, cfg_, opts_, lora_rank(lora_), lora_dora(lora_));
  const std::vector<float> inv = rope_inv_freq(cfg_);
  CHECK(static_cast<int64_t>(inv.size()) == cfg_.head_dim / 2);
  be_->copy_h2d(b.inv_freq.data, inv.data(), inv.size() * sizeof(float), StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);  // inv lives on this stack frame
  return Status::OK();
}

StatusOr<std::vector<float>> Decoder::forward(std::span<const int32_t> ids, LogitsFor which) {
  const int64_t n = static_cast<int64_t>(ids.size()), V = cfg_.vocab_size;
  if (n == 0) return InvalidArgument("decoder: forward of zero tokens");
  if (pos_ + n > opts_.max_seq) {
    return InvalidArgument(Str() << "decoder: " << pos_ << " + " << n << " tokens exceed the KV cache of "
                                 << opts_.max_seq << " (raise --max-seq)");
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= V) return InvalidArgument(Str() << "decoder: token id " << id << " outside vocab " << V);
  }
  RETURN_IF_ERROR(check_rope_positions(cfg_, pos_ + n, "decoder: the sequence"));
  std::vector<float> out(static_cast<size_t>(which == LogitsFor::kAll ? n * V : V));
  for (int64_t i0 = 0; i0 < n; i0 += opts_.max_chunk) {
    const int64_t c = std::min(opts_.max_chunk, n - i0);
    const bool last_chunk = i0 + c == n;
    float* dst = which == LogitsFor::kAll ? out.data() + i0 * V : (last_chunk ? out.data() : nullptr);
    run_chunk(ids.data() + i0, c, which, dst);
  }
  return out;
}

// One pass over all layers for n tokens at positions pos_..pos_+n-1. host_logits: null = no
// logits wanted (an inner prefill chunk); else [n, V] (kAll) or [V] (kLast).
void Decoder::run_chunk(const int32_t* ids, int64_t n, LogitsFor which, float* host_logits) {
  Carver cv(arena_, arena_bytes_);
  const DecodeBufs b = carve_bufs(cv, cfg_, opts_, lora_rank(lora_), lora_dora(lora_));
  std::vector<int32_t> pos(static_cast<size_t>(n));
  std::iota(pos.begin(), pos.end(), static_cast<int32_t>(pos_));
  be_->copy_h2d(b.ids.data, ids, static_cast<size_t>(n) * sizeof(int32_t), StreamId::kCompute);
  be_->copy_h2d(b.positions.data, pos.data(), pos.size() * sizeof(int32_t), StreamId::kCompute);
  Tensor x = rows(b.x, n), y = rows(b.y, n);
  be_->embedding(x, extras_.embed, b.ids.ptr<int32_t>());

  const int L = static_cast<int>(cfg_.num_layers);
  std::vector<int> visits(static_cast<size_t>(L));
  std::iota(visits.begin(), visits.end(), 0);
  layers_->begin_step(visits);
  for (int l = 0; l < L; ++l) {
    LoraLayer ll;
    if (lora_) ll = lora_->layer(l);
    const StepCtx s{be_, &cfg_, &b, lora_ ? &ll : nullptr, n, pos_};
    const LayerWeights w = layers_->acquire(l);
    layer_step(s, w, l, x, y);
    layers_->release(l);
    std::swap(x, y);
  }
  layers_->end_step();
  pos_ += n;
  if (host_logits == nullptr) {
    be_->sync_stream(StreamId::kCompute);  // pos (host) must outlive the copy
    return;
  }
  // Final norm + lm_head on the rows whose logits are wanted.
  const int64_t first = which == LogitsFor::kAll ? 0 : n - 1, m = n - first;
  Tensor xr = x.row_slice(first, m), hn = rows(b.hn, m), logits = rows(b.logits, m);
  be_->rmsnorm(hn, vec_prefix(b.rstd, m), xr, extras_.final_norm, static_cast<float>(cfg_.rms_norm_eps));
  be_->gemm(logits, hn, extras_.lm_head, {.trans_b = Trans::kYes});
  be_->copy_d2h(host_logits, logits.data, logits.bytes(), StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);
}

int32_t sample_token(std::span<const float> logits, const SamplingOptions& o, std::mt19937_64& rng) {
  CHECK(!logits.empty());
  const size_t V = logits.size();
  if (o.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  // Descending by logit, ties by id: a total order, so the same seed gives the same token anywhere.
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  const double mx = logits[order[0]], inv_t = 1.0 / o.temperature;
  std::vector<double> p(V);
  double total = 0.0;
  for (size_t i = 0; i < V; ++i) total += p[i] = std::exp((logits[order[i]] - mx) * inv_t);
  size_t keep = V;
  if (o.top_p < 1.0f) {
    double mass = 0.0;
    for (size_t i = 0; i < V; ++i) {
      mass += p[i] / total;
      if (mass >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0.0;
  for (size_t i = 0; i < keep; ++i) kept += p[i];
  // 53 random bits -> [0, 1): std::uniform_real_distribution is implementation-defined.
  const double r = static_cast<double>(rng() >> 11) * 0x1.0p-53 * kept;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (r < acc) return order[i];
  }
  return order[keep - 1];
}

}  // namespace st
