#include "model/model.h"

#include <cstring>

#include "model/carver.h"
#include "model/head.h"
#include "model/layer.h"
#include "model/pack.h"

namespace st {

// ---- schedule ------------------------------------------------------------------------------

StepSchedule StepSchedule::micro_batch_major(int L, int k) {
  StepSchedule s;
  for (int mb = 0; mb < k; ++mb) {
    for (int l = 0; l < L; ++l) s.visits_.push_back({l, mb, Phase::kForward});
    for (int l = L - 1; l >= 0; --l) s.visits_.push_back({l, mb, Phase::kBackward});
  }
  return s;
}

StepSchedule StepSchedule::forward_only(int L) {
  StepSchedule s;
  for (int l = 0; l < L; ++l) s.visits_.push_back({l, 0, Phase::kForward});
  return s;
}

std::vector<int> StepSchedule::layers() const {
  std::vector<int> out;
  out.reserve(visits_.size());
  for (const Visit& v : visits_) out.push_back(v.layer);
  return out;
}

// ---- arena ---------------------------------------------------------------------------------

// Views carved once for max_tokens (Note [layer scratch]); per-batch views are prefixes.
struct Model::Arena {
  Tensor inv_freq;                 // f32 [D/2]
  Tensor loss;                     // f32 [1]
  Tensor ids, pos, docs, labels;   // i32 [Nmax]
  std::vector<Tensor> ckpt;        // L+1 x act [Nmax, H]
  Tensor grad[2];                  // act [Nmax, H]
  Tensor layer_scratch, head_scratch;  // raw bytes (u8)
  // current batch
  int64_t n = 0, batch = 0, seq = 0;
  bool has_docs = false;
};

namespace {

void carve_model_arena(Carver& cv, const ModelConfig& c, const LoraConfig& lc, const ModelOptions& o,
                              Tensor* inv_freq, Tensor* loss, Tensor ints[4], std::vector<Tensor>* ckpt,
                              Tensor grad[2], Tensor* layer_scratch, Tensor* head_scratch) {
  const int64_t N = o.max_tokens, H = c.hidden_size;
  *inv_freq = cv.take(DType::kF32, {c.head_dim / 2});
  *loss = cv.take(DType::kF32, {1});
  for (int i = 0; i < 4; ++i) ints[i] = cv.take(DType::kI32, {N});
  ckpt->clear();
  for (int64_t l = 0; l <= c.num_layers; ++l) ckpt->push_back(cv.take(o.act_dtype, {N, H}));
  grad[0] = cv.take(o.act_dtype, {N, H});
  grad[1] = cv.take(o.act_dtype, {N, H});
  *layer_scratch = cv.take(DType::kU8, {static_cast<int64_t>(layer_scratch_bytes(c, N, lc, o.act_dtype))});
  *head_scratch =
      cv.take(DType::kU8, {static_cast<int64_t>(head_scratch_bytes(c, N, o.act_dtype, o.logits_chunk_bytes))});
}

}  // namespace

size_t model_arena_bytes(const ModelConfig& c, const LoraConfig& lc, const ModelOptions& o) {
  Carver cv;
  Tensor t, ints[4], grad[2];
  std::vector<Tensor> ck;
  carve_model_arena(cv, c, lc, o, &t, &t, ints, &ck, grad, &t, &t);
  return cv.used();
}

// ---- model ---------------------------------------------------------------------------------

StatusOr<std::unique_ptr<Model>> Model::create(const ModelConfig& c, Backend* be, const LoraConfig& lc,
                                               const ModelOptions& o) {
  if (o.max_tokens <= 0) return InvalidArgument("Model: max_tokens must be > 0");
  std::unique_ptr<Model> m(new Model(c, be, o));
  ASSIGN_OR_RETURN(m->lora_, Lora::create(be, c, lc));
  m->extras_layout_ = make_extras_layout(c, o.act_dtype);
  ASSIGN_OR_RETURN(m->extras_, be->alloc(m->extras_layout_.bytes), "allocating embedding/norm/lm_head");
  m->arena_bytes_ = model_arena_bytes(c, lc, o);
  ASSIGN_OR_RETURN(m->arena_, be->alloc(m->arena_bytes_),
                   "allocating the activation arena (" << m->arena_bytes_ << " bytes for " << o.max_tokens
                                                       << " tokens)");
  m->a_ = std::make_unique<Arena>();
  Arena& a = *m->a_;
  Carver cv(m->arena_, m->arena_bytes_);
  Tensor ints[4];
  carve_model_arena(cv, c, lc, o, &a.inv_freq, &a.loss, ints, &a.ckpt, a.grad, &a.layer_scratch, &a.head_scratch);
  a.ids = ints[0];
  a.pos = ints[1];
  a.docs = ints[2];
  a.labels = ints[3];
  std::vector<float> inv = rope_inv_freq(c);
  CHECK(static_cast<int64_t>(inv.size()) == c.head_dim / 2);
  be->copy_h2d(a.inv_freq.data, inv.data(), inv.size() * sizeof(float), StreamId::kCompute);
  be->sync_stream(StreamId::kCompute);
  return m;
}

Model::Model(const ModelConfig& c, Backend* be, const ModelOptions& o) : cfg_(c), be_(be), opts_(o) {}

Model::~Model() {
  be_->sync_all();
  if (arena_) be_->free(arena_);
  if (extras_) be_->free(extras_);
}

void Model::load_extras_from_host(const void* blob) {
  be_->copy_h2d(extras_, blob, extras_layout_.bytes, StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);
}

Status Model::load_extras(const Checkpoint& ck) {
  std::vector<uint8_t> host(extras_layout_.bytes);
  RETURN_IF_ERROR(pack_extras(ck, extras_layout_, host.data()));
  load_extras_from_host(host.data());
  return Status::OK();
}

Status Model::validate(const Batch& b) const {
  const size_t n = static_cast<size_t>(b.batch * b.seq);
  if (b.batch <= 0 || b.seq <= 0) return InvalidArgument(Str() << "empty batch " << b.batch << "x" << b.seq);
  if (b.batch * b.seq > opts_.max_tokens)
    return InvalidArgument(Str() << "batch of " << b.batch << "x" << b.seq << " tokens exceeds the planned "
                                 << opts_.max_tokens);
  if (b.input_ids.size() != n || b.labels.size() != n || (!b.positions.empty() && b.positions.size() != n) ||
      (!b.doc_ids.empty() && b.doc_ids.size() != n))
    return InvalidArgument("batch arrays do not match batch x seq");
  for (size_t i = 0; i < n; ++i) {
    if (b.input_ids[i] < 0 || b.input_ids[i] >= cfg_.vocab_size)
      return InvalidArgument(Str() << "token id " << b.input_ids[i] << " outside the vocabulary of "
                                   << cfg_.vocab_size);
    if (b.labels[i] != kIgnoreIndex && (b.labels[i] < 0 || b.labels[i] >= cfg_.vocab_size))
      return InvalidArgument(Str() << "label " << b.labels[i] << " outside the vocabulary");
  }
  return Status::OK();
}

// Copies ids/positions/doc ids/shifted labels to the device (positions default to 0..T-1).
void Model::upload(const Batch& b) {
  Arena& a = *a_;
  a.n = b.batch * b.seq;
  a.batch = b.batch;
  a.seq = b.seq;
  const size_t bytes = static_cast<size_t>(a.n) * sizeof(int32_t);
  be_->sync_stream(StreamId::kCompute);  // host staging below is reused across micro-batches
  host_labels_ = shift_labels(b.labels, b.batch, b.seq);
  if (b.positions.empty()) {
    host_pos_.resize(static_cast<size_t>(a.n));
    for (int64_t i = 0; i < a.n; ++i) host_pos_[i] = static_cast<int32_t>(i % b.seq);
  }
  be_->copy_h2d(a.ids.data, b.input_ids.data(), bytes, StreamId::kCompute);
  be_->copy_h2d(a.pos.data, b.positions.empty() ? host_pos_.data() : b.positions.data(), bytes, StreamId::kCompute);
  a.has_docs = !b.doc_ids.empty();
  if (a.has_docs) be_->copy_h2d(a.docs.data, b.doc_ids.data(), bytes, StreamId::kCompute);
  be_->copy_h2d(a.labels.data, host_labels_.data(), bytes, StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);  // the batch's vectors may go away after this call
}

namespace {
Tensor rows_of(Tensor t, int64_t n) { return Tensor(t.data, t.dtype, {n, t.cols()}); }
}  // namespace

void Model::embed(const Batch& b) {
  upload(b);
  ExtrasWeights ew = extras_weights_view(extras_layout_, extras_, cfg_.tie_word_embeddings);
  be_->embedding(rows_of(a_->ckpt[0], a_->n), ew.embed, a_->ids.ptr<int32_t>());
}

namespace {
uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}
}  // namespace

// Builds the per-layer context for the current batch. Dropout seeds mix (seed, micro-batch, layer).
static LayerCtx make_ctx(const ModelConfig& c, Backend* be, const ModelOptions& o, const Tensor& inv_freq,
                         const Tensor& pos, const Tensor& docs, bool has_docs, int64_t n, int64_t batch,
                         int64_t seq, const Tensor& scratch, bool train, uint64_t micro, int layer) {
  LayerCtx ctx;
  ctx.be = be;
  ctx.cfg = &c;
  ctx.act = o.act_dtype;
  ctx.tokens = n;
  ctx.seq.batch = batch;
  ctx.seq.seq = seq;
  ctx.seq.positions = pos.ptr<int32_t>();
  ctx.seq.doc_ids = has_docs ? docs.ptr<int32_t>() : nullptr;
  ctx.inv_freq = inv_freq;
  ctx.scratch = scratch.data;
  ctx.scratch_bytes = scratch.bytes();
  ctx.train = train;
  ctx.dropout_seed = mix64(mix64(o.seed ^ 0x5eedull) ^ mix64(micro * 0x10001ull + static_cast<uint64_t>(layer)));
  return ctx;
}

void Model::forward_layer(int l, LayerSource& src, bool train) {
  Arena& a = *a_;
  LayerCtx ctx = make_ctx(cfg_, be_, opts_, a.inv_freq, a.pos, a.docs, a.has_docs, a.n, a.batch, a.seq,
                          a.layer_scratch, train, micro_counter_, l);
  LayerWeights w = src.acquire(l);
  layer_forward(ctx, w, lora_->layer(l), rows_of(a.ckpt[l], a.n), rows_of(a.ckpt[l + 1], a.n));
  src.release(l);
}

// Gradient ping-pong: grad[(l+1) % 2] holds d(output of layer l) on entry; dx goes to grad[l % 2].
void Model::backward_layer(int l, LayerSource& src) {
  Arena& a = *a_;
  LayerCtx ctx = make_ctx(cfg_, be_, opts_, a.inv_freq, a.pos, a.docs, a.has_docs, a.n, a.batch, a.seq,
                          a.layer_scratch, true, micro_counter_, l);
  LayerWeights w = src.acquire(l);
  Tensor dout = rows_of(a.grad[(l + 1) % 2], a.n), dx = rows_of(a.grad[l % 2], a.n);
  layer_backward(ctx, w, lora_->layer(l), rows_of(a.ckpt[l], a.n), dout, dx);
  src.release(l);
}

static HeadCtx make_head_ctx(const ModelConfig& c, Backend* be, const ModelOptions& o, int64_t n,
                             const Tensor& scratch) {
  HeadCtx h;
  h.be = be;
  h.cfg = &c;
  h.act = o.act_dtype;
  h.tokens = n;
  h.scratch = scratch.data;
  h.scratch_bytes = scratch.bytes();
  h.chunk_budget_bytes = o.logits_chunk_bytes;
  return h;
}

StatusOr<std::vector<double>> Model::forward_backward(const std::vector<const Batch*>& batches, LayerSource& src,
                                                      const std::vector<float>& grad_scales) {
  CHECK(grad_scales.size() == batches.size());
  for (const Batch* b : batches) RETURN_IF_ERROR(validate(*b));
  const int L = static_cast<int>(cfg_.num_layers);
  StepSchedule sched = StepSchedule::micro_batch_major(L, static_cast<int>(batches.size()));
  ExtrasWeights ew = extras_weights_view(extras_layout_, extras_, cfg_.tie_word_embeddings);
  std::vector<double> losses;
  std::vector<float> loss_host(1);
  Arena& a = *a_;
  src.begin_step(sched.layers());
  for (const Visit& v : sched.visits()) {
    const Batch& b = *batches[v.micro_batch];
    if (v.phase == Phase::kForward) {
      if (v.layer == 0) {
        embed(b);
        be_->memset_zero(a.loss.data, sizeof(float), StreamId::kCompute);
      }
      forward_layer(v.layer, src, true);
      if (v.layer == L - 1) {
        // d(final output) goes to grad[L % 2], which backward_layer(L-1) reads as dout.
        head_forward_backward(make_head_ctx(cfg_, be_, opts_, a.n, a.head_scratch), ew, rows_of(a.ckpt[L], a.n),
                              a.labels.ptr<int32_t>(), grad_scales[v.micro_batch], a.loss, rows_of(a.grad[L % 2], a.n));
      }
    } else {
      backward_layer(v.layer, src);
      if (v.layer == 0) {
        be_->copy_d2h(loss_host.data(), a.loss.data, sizeof(float), StreamId::kCompute);
        be_->sync_stream(StreamId::kCompute);
        losses.push_back(loss_host[0]);
        ++micro_counter_;
      }
    }
  }
  src.end_step();
  return losses;
}

void Model::run_forward(LayerSource& src, bool train) {
  const int L = static_cast<int>(cfg_.num_layers);
  StepSchedule sched = StepSchedule::forward_only(L);
  src.begin_step(sched.layers());
  for (const Visit& v : sched.visits()) forward_layer(v.layer, src, train);
  src.end_step();
}

StatusOr<double> Model::eval_loss_sum(const Batch& b, LayerSource& src) {
  RETURN_IF_ERROR(validate(b));
  Arena& a = *a_;
  embed(b);
  run_forward(src, false);
  ExtrasWeights ew = extras_weights_view(extras_layout_, extras_, cfg_.tie_word_embeddings);
  be_->memset_zero(a.loss.data, sizeof(float), StreamId::kCompute);
  head_loss(make_head_ctx(cfg_, be_, opts_, a.n, a.head_scratch), ew, rows_of(a.ckpt[cfg_.num_layers], a.n),
            a.labels.ptr<int32_t>(), a.loss);
  float loss = 0;
  be_->copy_d2h(&loss, a.loss.data, sizeof(float), StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);
  return static_cast<double>(loss);
}

StatusOr<std::vector<float>> Model::forward_logits(const Batch& b, LayerSource& src) {
  RETURN_IF_ERROR(validate(b));
  Arena& a = *a_;
  embed(b);
  run_forward(src, false);
  ExtrasWeights ew = extras_weights_view(extras_layout_, extras_, cfg_.tie_word_embeddings);
  std::vector<float> out(static_cast<size_t>(a.n * cfg_.vocab_size));
  head_logits(make_head_ctx(cfg_, be_, opts_, a.n, a.head_scratch), ew, rows_of(a.ckpt[cfg_.num_layers], a.n),
              out.data());
  return out;
}

}  // namespace st
