#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "model/carver.h"
#include "model/head.h"
#include "model/layer.h"
#include "model/model_internals.h"
#include "model/pack.h"

namespace st {

// ---- schedule ------------------------------------------------------------------------------

StepSchedule StepSchedule::micro_batch_major(int L, int k) { return layer_major(L, k, 1); }

// Groups of `slots` micro-batches; within a group every layer is visited for each micro-batch in
// turn (Note [layer-major accumulation]). slots = 1 is micro-batch-major order.
StepSchedule StepSchedule::layer_major(int L, int k, int slots) {
  CHECK(slots >= 1);
  StepSchedule s;
  for (int g0 = 0; g0 < k; g0 += slots) {
    const int g1 = std::min(k, g0 + slots);
    for (int l = 0; l < L; ++l)
      for (int mb = g0; mb < g1; ++mb) s.visits_.push_back({l, mb, Phase::kForward});
    for (int l = L - 1; l >= 0; --l)
      for (int mb = g0; mb < g1; ++mb) s.visits_.push_back({l, mb, Phase::kBackward});
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

namespace {

// A slot's per-batch vectors (what an eval slot holds), then the rest of a training slot.
struct SlotVectors {
  Tensor loss, seeds, ints[8], doc_starts, doc_lens;
};
struct SlotViews {
  SlotVectors vec;
  Tensor grad[2], w_label;
  std::vector<Tensor> ckpt, saved;
};

struct ArenaViews {
  Tensor inv_freq, layer_scratch, head_scratch;
  std::vector<SlotViews> slots;
};

SlotVectors carve_slot_vectors(Carver& cv, const ModelConfig& c, const ModelOptions& o) {
  const int64_t N = o.max_tokens;
  SlotVectors v;
  v.loss = cv.take(DType::kF32, {1});
  v.seeds = cv.take(DType::kU8, {8 * c.num_layers});
  for (Tensor& t : v.ints) t = cv.take(DType::kI32, {N});
  v.doc_starts = cv.take(DType::kI32, {2 * N + 2});  // document_slots(N) + 1 <= 2N + 1 entries
  v.doc_lens = cv.take(DType::kI32, {2 * N});
  return v;
}

// One slot's views, in the order a single-slot arena always had them.
SlotViews carve_slot(Carver& cv, const ModelConfig& c, const LoraConfig& lc, const ModelOptions& o) {
  const int64_t N = o.max_tokens, H = c.hidden_size;
  SlotViews v;
  v.vec = carve_slot_vectors(cv, c, o);
  for (int64_t l = 0; l <= c.num_layers; ++l) v.ckpt.push_back(cv.take(o.act_dtype, {N, H}));
  const size_t saved = layer_saved_bytes(c, N, lc, o.act_dtype, o.recompute);
  for (int64_t l = 0; saved > 0 && l < c.num_layers; ++l)
    v.saved.push_back(cv.take(DType::kU8, {static_cast<int64_t>(saved)}));
  v.grad[0] = cv.take(o.act_dtype, {N, H});
  v.grad[1] = cv.take(o.act_dtype, {N, H});
  v.w_label = cv.take(o.act_dtype, {N, H});
  return v;
}

ArenaViews carve_model_arena(Carver& cv, const ModelConfig& c, const LoraConfig& lc, const ModelOptions& o) {
  const int64_t N = o.max_tokens;
  ArenaViews v;
  v.inv_freq = cv.take(DType::kF32, {c.head_dim / 2});
  for (int s = 0; s < std::max(1, o.micro_batch_slots); ++s) v.slots.push_back(carve_slot(cv, c, lc, o));
  v.layer_scratch = cv.take(DType::kU8, {static_cast<int64_t>(layer_scratch_bytes(c, N, lc, o.act_dtype, o.base_quant))});
  v.head_scratch = cv.take(
      DType::kU8, {static_cast<int64_t>(head_scratch_bytes(c, N, o.act_dtype, o.vocab_chunk, o.logits_chunk_bytes))});
  return v;
}

size_t round_up(size_t n) { return (n + Carver::kAlign - 1) / Carver::kAlign * Carver::kAlign; }
size_t norm_bytes(const ModelConfig& c, DType dt) { return static_cast<size_t>(c.hidden_size) * dtype_size(dt); }

}  // namespace

size_t model_arena_bytes(const ModelConfig& c, const LoraConfig& lc, const ModelOptions& o) {
  Carver cv;
  carve_model_arena(cv, c, lc, o);
  return cv.used();
}

size_t model_slot_bytes(const ModelConfig& c, const LoraConfig& lc, const ModelOptions& o) {
  Carver cv;
  carve_slot(cv, c, lc, o);
  return cv.used();
}

size_t model_device_extras_bytes(const ModelConfig& c, const ModelOptions& o) {
  if (!o.host_extras) return make_extras_layout(c, o.act_dtype).bytes;
  return round_up(norm_bytes(c, o.act_dtype)) + lm_head_slot_bytes(c, o.act_dtype, o.vocab_chunk);
}

size_t model_host_extras_bytes(const ModelConfig& c, const ModelOptions& o) {
  if (!o.host_extras) return 0;
  return make_extras_layout(c, o.act_dtype).bytes +
         2 * static_cast<size_t>(o.max_tokens * c.hidden_size) * dtype_size(o.act_dtype);
}

// ---- model ---------------------------------------------------------------------------------

StatusOr<std::unique_ptr<Model>> Model::create(const ModelConfig& c, Backend* be, const LoraConfig& lc,
                                               const ModelOptions& o) {
  if (o.max_tokens <= 0) return InvalidArgument("Model: max_tokens must be > 0");
  if (o.vocab_chunk <= 0) return InvalidArgument("Model: vocab_chunk must be > 0");
  if (o.micro_batch_slots < 1) return InvalidArgument("Model: micro_batch_slots must be >= 1");
  std::unique_ptr<Model> m(new Model(c, be, o));
  if (const char* e = std::getenv("STREAMTUNE_HEAD_ROWS"); e != nullptr && std::string(e) == "all")
    m->opts_.head_trained_rows = false;  // A/B timing of head.h Note [trained rows]
  if (o.fused_attention_allowance > 0) {
    fused_attention_workspace(be, o.fused_attention_batch, o.fused_attention_seq, c);
    be->set_fused_attention_allowance(o.fused_attention_allowance);
  }
  ASSIGN_OR_RETURN(m->lora_, Lora::create(be, c, lc));
  m->extras_layout_ = make_extras_layout(c, o.act_dtype);
  const size_t dev_extras = model_device_extras_bytes(c, o);
  ASSIGN_OR_RETURN(m->extras_, be->alloc(dev_extras),
                   (o.host_extras ? "allocating the final norm and lm_head chunk buffers"
                                  : "allocating embedding/norm/lm_head"));
  if (o.host_extras) {
    const size_t staging = 2 * static_cast<size_t>(o.max_tokens * c.hidden_size) * dtype_size(o.act_dtype);
    ASSIGN_OR_RETURN(m->host_staging_, be->alloc_host_pinned(staging),
                     "allocating " << staging << " bytes of pinned host staging for the embedding gather");
  }
  m->arena_bytes_ = model_arena_bytes(c, lc, o);
  ASSIGN_OR_RETURN(m->arena_, be->alloc(m->arena_bytes_),
                   "allocating the activation arena (" << m->arena_bytes_ << " bytes for " << o.max_tokens
                                                       << " tokens)");
  m->a_ = std::make_unique<Arena>();
  m->plans_ = std::make_unique<LaunchPlanCache>(o.launch_plan_bytes > 0 ? be->plan_recorder() : nullptr,
                                                o.launch_plan_bytes);
  Arena& a = *m->a_;
  Carver cv(m->arena_, m->arena_bytes_);
  ArenaViews v = carve_model_arena(cv, c, lc, o);
  a.inv_freq = v.inv_freq;
  for (const SlotViews& sv : v.slots) {
    Slot s;
    s.set_vectors(sv.vec);
    s.ckpt = sv.ckpt;
    s.saved = sv.saved;
    s.grad[0] = sv.grad[0];
    s.grad[1] = sv.grad[1];
    s.w_label = sv.w_label;
    a.slots.push_back(std::move(s));
  }
  a.layer_scratch = v.layer_scratch;
  a.head_scratch = v.head_scratch;
  m->carve_eval_slots();
  std::vector<float> inv = rope_inv_freq(c);
  CHECK(static_cast<int64_t>(inv.size()) == c.head_dim / 2);
  be->copy_h2d(a.inv_freq.data, inv.data(), inv.size() * sizeof(float), StreamId::kCompute);
  be->sync_stream(StreamId::kCompute);
  return m;
}

Model::Model(const ModelConfig& c, Backend* be, const ModelOptions& o) : cfg_(c), be_(be), opts_(o) {}

Model::Slot& Model::slot() {
  const int n = static_cast<int>(a_->slots.size());
  return cur_ < n ? a_->slots[static_cast<size_t>(cur_)] : a_->eval_slots[static_cast<size_t>(cur_ - n)];
}
const Model::Slot& Model::slot() const { return const_cast<Model*>(this)->slot(); }

// Note [layer-major evaluation]: as many eval slots as slot 0's gradient and label-row buffers
// hold (three [Nmax, H] views, adjacent), at most one per layer and 64; none below two.
// STREAMTUNE_EVAL_GROUP=<n> in the environment caps them (A/B timing; 1: one batch at a time).
void Model::carve_eval_slots() {
  size_t max_group = 64;
  if (const char* e = std::getenv("STREAMTUNE_EVAL_GROUP"); e != nullptr && std::atoll(e) >= 1)
    max_group = std::min<size_t>(max_group, static_cast<size_t>(std::atoll(e)));
  const Slot& s0 = a_->slots[0];
  char* begin = static_cast<char*>(s0.grad[0].data);
  char* end = static_cast<char*>(s0.w_label.data) + s0.w_label.bytes();
  CHECK(s0.grad[1].data > s0.grad[0].data && s0.w_label.data > s0.grad[1].data);
  auto carve_eval_slot = [&](Carver& cv) {
    Slot e;
    e.set_vectors(carve_slot_vectors(cv, cfg_, opts_));
    for (Tensor* t : {&e.rstd, &e.m, &e.s, &e.tgt}) *t = cv.take(DType::kF32, {opts_.max_tokens});
    return e;
  };
  Carver measure;
  carve_eval_slot(measure);
  const size_t n = std::min({static_cast<size_t>(end - begin) / measure.used(), static_cast<size_t>(cfg_.num_layers),
                             max_group});
  if (n < 2) return;
  Carver cv(begin, static_cast<size_t>(end - begin));
  for (size_t j = 0; j < n; ++j) {
    a_->eval_slots.push_back(carve_eval_slot(cv));
    a_->eval_slots.back().ckpt = {s0.ckpt[j]};  // where embed() leaves batch j: its input to layer 0
  }
}

Model::~Model() {
  be_->sync_all();
  head_.reset();
  if (arena_) be_->free(arena_);
  if (extras_) be_->free(extras_);
  if (host_extras_ && host_pageable_.empty()) be_->free_host_pinned(host_extras_);
  if (host_staging_) be_->free_host_pinned(host_staging_);
}

void Model::load_extras_from_host(const void* blob) {
  const size_t bytes = extras_layout_.bytes;
  if (!opts_.host_extras) {
    be_->copy_h2d(extras_, blob, bytes, StreamId::kCompute);
    be_->sync_stream(StreamId::kCompute);
    ExtrasWeights ew = extras_weights_view(extras_layout_, extras_, cfg_.tie_word_embeddings);
    head_ = resident_lm_head(ew.lm_head, opts_.vocab_chunk);
    return;
  }
  if (!host_extras_) {
    StatusOr<void*> pinned = be_->alloc_host_pinned(bytes);
    if (pinned.ok()) {
      host_extras_ = *pinned;
    } else {
      std::fprintf(stderr,
                   "streamtune: WARNING: could not pin %zu bytes for the embedding/lm_head host copy (%s); using "
                   "pageable memory: lm_head streaming will be slower\n",
                   bytes, pinned.status().message().c_str());
      host_pageable_.resize(bytes);
      host_extras_ = host_pageable_.data();
    }
  }
  std::memcpy(host_extras_, blob, bytes);
  ExtrasWeights hw = extras_weights_view(extras_layout_, host_extras_, cfg_.tie_word_embeddings);
  be_->copy_h2d(extras_, hw.final_norm.data, hw.final_norm.bytes(), StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);
  void* slots = static_cast<char*>(extras_) + round_up(norm_bytes(cfg_, opts_.act_dtype));
  head_ = streamed_lm_head(be_, hw.lm_head.data, opts_.act_dtype, cfg_.vocab_size, cfg_.hidden_size,
                           opts_.vocab_chunk, slots);
}

Status Model::load_extras(const Checkpoint& ck) {
  std::vector<uint8_t> host(extras_layout_.bytes);
  RETURN_IF_ERROR(pack_extras(ck, extras_layout_, host.data()));
  load_extras_from_host(host.data());
  return Status::OK();
}

int64_t Model::lm_head_bytes_streamed() const { return head_ ? head_->bytes_streamed() : 0; }

Tensor Model::final_norm() const {
  if (!opts_.host_extras) return extras_weights_view(extras_layout_, extras_, cfg_.tie_word_embeddings).final_norm;
  return Tensor(extras_, opts_.act_dtype, {cfg_.hidden_size});
}

Status Model::validate(const Batch& b) const {
  const size_t n = static_cast<size_t>(b.batch * b.seq);
  if (b.batch <= 0 || b.seq <= 0) return InvalidArgument(Str() << "empty batch " << b.batch << "x" << b.seq);
  if (b.batch * b.seq > opts_.max_tokens)
    return InvalidArgument(Str() << "batch of " << b.batch << "x" << b.seq << " tokens exceeds the planned "
                                 << opts_.max_tokens);
  if (b.input_ids.size() != n || b.labels.size() != n || (!b.positions.empty() && b.positions.size() != n) ||
      (!b.doc_ids.empty() && b.doc_ids.size() != n) || (!b.segments.empty() && b.segments.size() != n))
    return InvalidArgument("batch arrays do not match batch x seq");
  for (int32_t s : b.segments)
    if (s < -1) return InvalidArgument(Str() << "segment id " << s << " (ids are >= 0, or -1 for none)");
  for (size_t i = 0; i < n; ++i) {
    if (b.input_ids[i] < 0 || b.input_ids[i] >= cfg_.vocab_size)
      return InvalidArgument(Str() << "token id " << b.input_ids[i] << " outside the vocabulary of "
                                   << cfg_.vocab_size);
    if (b.labels[i] != kIgnoreIndex && (b.labels[i] < 0 || b.labels[i] >= cfg_.vocab_size))
      return InvalidArgument(Str() << "label " << b.labels[i] << " outside the vocabulary");
  }
  return Status::OK();
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

// Note [documents that matter]: batches from the loader always carry document ids, also when a
// row is one sample followed by padding (the padding its own "document"). The mask only matters
// where a token that is trained on -- its shifted label not ignored -- sits after a document
// border of its row: such tokens would otherwise attend across it. Padding never is one: it comes
// after the row's last real token, so no real token sees it (attention is causal), its labels are
// ignored, and every gradient that reaches it is an exact zero (dL/dy = 0 there, so its products
// add +-0 to the weight gradients). Without that case the ids are dropped and the row runs plain
// causal attention -- on CUDA the fused (cuDNN) kernels rather than the own masked ones. The real
// tokens' values are the same either way; the choice is a function of the batch alone, so every
// mode of a run makes it alike.
static bool documents_interact(const Batch& b) {
  for (int64_t r = 0; r < b.batch; ++r) {
    const int32_t* doc = b.doc_ids.data() + r * b.seq;
    const int32_t* lab = b.labels.data() + r * b.seq;
    int64_t border = 1;
    while (border < b.seq && doc[border] == doc[0]) ++border;
    // Position p predicts lab[p + 1]: the tokens from the border on are trained on when any
    // label after the border is.
    for (int64_t u = border + 1; u < b.seq; ++u)
      if (lab[u] != kIgnoreIndex) return true;
  }
  return false;
}

// The LoRA dropout seed of (micro-batch, layer): a mix of (seed, micro-batch counter, layer).
static uint64_t layer_dropout_seed(uint64_t seed, uint64_t micro, int layer) {
  return mix64(mix64(seed ^ 0x5eedull) ^ mix64(micro * 0x10001ull + static_cast<uint64_t>(layer)));
}

// Copies ids/positions/doc ids/shifted labels to the current slot (positions default to 0..T-1);
// `micro` numbers the micro-batch for its dropout seeds.
void Model::upload(const Batch& b, uint64_t micro) {
  Slot& a = slot();
  a.micro = micro;
  a.n = b.batch * b.seq;
  a.batch = b.batch;
  a.seq = b.seq;
  const size_t bytes = static_cast<size_t>(a.n) * sizeof(int32_t);
  be_->sync_stream(StreamId::kCompute);  // host staging (labels, gathers) is reused across micro-batches
  host_labels_ = shift_labels(b.labels, b.batch, b.seq);
  if (b.positions.empty()) {
    host_pos_.resize(static_cast<size_t>(a.n));
    for (int64_t i = 0; i < a.n; ++i) host_pos_[i] = static_cast<int32_t>(i % b.seq);
  }
  be_->copy_h2d(a.ids.data, b.input_ids.data(), bytes, StreamId::kCompute);
  be_->copy_h2d(a.pos.data, b.positions.empty() ? host_pos_.data() : b.positions.data(), bytes, StreamId::kCompute);
  a.has_docs = !b.doc_ids.empty() && documents_interact(b);
  if (a.has_docs) {
    be_->copy_h2d(a.docs.data, b.doc_ids.data(), bytes, StreamId::kCompute);
    upload_document_spans(b);
  }
  be_->copy_h2d(a.labels.data, host_labels_.data(), bytes, StreamId::kCompute);
  // The head's rows (head.h Note [trained rows]) and the labels of its rows.
  host_head_rows_ = opts_.head_trained_rows ? plan_head_rows(host_labels_) : HeadRowPlan{};
  a.head_rows = HeadRows{};
  const HeadRowPlan& hp = host_head_rows_;
  if (hp.compact) {
    const auto up = [&](Tensor dst, const std::vector<int32_t>& v) {
      if (!v.empty()) be_->copy_h2d(dst.data, v.data(), v.size() * sizeof(int32_t), StreamId::kCompute);
    };
    up(a.head_labels, hp.labels);
    up(a.head_gather, hp.gather);
    up(a.head_scatter, hp.scatter);
    a.head_rows = {a.head_gather.ptr<int32_t>(), a.head_scatter.ptr<int32_t>(), hp.rows, hp.trained};
  }
  host_safe_labels_ = hp.compact ? hp.labels : host_labels_;
  for (int32_t& l : host_safe_labels_)
    if (l == kIgnoreIndex) l = 0;
  if (!host_safe_labels_.empty())
    be_->copy_h2d(a.safe_labels.data, host_safe_labels_.data(), host_safe_labels_.size() * sizeof(int32_t),
                  StreamId::kCompute);
  // Note [layer launch plans]: the dropout ops read this micro-batch's seeds from the arena.
  host_seeds_.resize(static_cast<size_t>(cfg_.num_layers));
  for (int l = 0; l < cfg_.num_layers; ++l) host_seeds_[l] = layer_dropout_seed(opts_.seed, micro, l);
  be_->copy_h2d(a.seeds.data, host_seeds_.data(), host_seeds_.size() * sizeof(uint64_t), StreamId::kCompute);
  be_->sync_stream(StreamId::kCompute);  // the batch's vectors may go away after this call
}

DocumentSpans document_spans(const std::vector<int32_t>& doc_ids, int64_t seq) {
  DocumentSpans d;
  const int64_t n = static_cast<int64_t>(doc_ids.size());
  for (int64_t i = 0; i < n; ++i)
    if (i % seq == 0 || doc_ids[static_cast<size_t>(i)] != doc_ids[static_cast<size_t>(i - 1)]) {
      if (!d.starts.empty()) d.lens.push_back(static_cast<int32_t>(i) - d.starts.back());
      d.starts.push_back(static_cast<int32_t>(i));
    }
  if (!d.starts.empty()) d.lens.push_back(static_cast<int32_t>(n) - d.starts.back());
  d.spans = static_cast<int64_t>(d.lens.size());
  for (int32_t len : d.lens) d.max_len = std::max<int64_t>(d.max_len, len);
  d.slots = document_slots(d.spans);
  d.starts.resize(static_cast<size_t>(d.slots + 1), static_cast<int32_t>(n));
  d.lens.resize(static_cast<size_t>(d.slots), 0);
  return d;
}

void Model::upload_document_spans(const Batch& b) {
  Slot& a = slot();
  host_spans_ = document_spans(b.doc_ids, b.seq);
  a.doc_spans = host_spans_.spans;
  a.doc_slots = host_spans_.slots;
  a.max_doc_len = host_spans_.max_len;
  be_->copy_h2d(a.doc_starts.data, host_spans_.starts.data(), host_spans_.starts.size() * sizeof(int32_t),
                StreamId::kCompute);
  be_->copy_h2d(a.doc_lens.data, host_spans_.lens.data(), host_spans_.lens.size() * sizeof(int32_t),
                StreamId::kCompute);
}

namespace {
// out[i,:] = table[ids[i],:] on the host (row bytes each).
void gather_rows(char* out, const char* table, const int32_t* ids, int64_t n, size_t row_bytes) {
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + static_cast<size_t>(i) * row_bytes, table + static_cast<size_t>(ids[i]) * row_bytes, row_bytes);
}
}  // namespace

// Note [NEFTune]: NEFTune (Jain et al. 2023; transformers' neftune_noise_alpha) adds uniform noise
// in [-m, m), m = alpha / sqrt(T x hidden), to the embeddings of every training forward (never to
// evaluation, logits or generation). HF's T is the batch's sequence dimension, here the
// micro-batch's row length. The noise is the dropout RNG's uniform (dropout_rng.h) under a seed of
// (seed, micro-batch counter) -- not torch's generator, so not HF's numbers: its distribution.
// Layer 0 keeps its noisy input as its checkpoint, so a recompute sees the same input, and the
// resident and streamed runs the same bits.
static uint64_t neftune_seed(uint64_t seed, uint64_t micro) {
  return mix64(mix64(seed ^ 0x9ef7u) ^ mix64(micro * 0x10001ull + 0xffffull));
}

void Model::embed(const Batch& b, uint64_t micro, bool train) {
  upload(b, micro);
  Slot& a = slot();
  auto noise = [&] {
    if (!train || opts_.neftune_alpha <= 0) return;
    const double mag = opts_.neftune_alpha / std::sqrt(static_cast<double>(a.seq) * static_cast<double>(cfg_.hidden_size));
    be_->add_uniform_noise(rows_of(a.ckpt[0], a.n), static_cast<float>(mag), neftune_seed(opts_.seed, micro));
  };
  if (!opts_.host_extras) {
    ExtrasWeights ew = extras_weights_view(extras_layout_, extras_, cfg_.tie_word_embeddings);
    be_->embedding(rows_of(a.ckpt[0], a.n), ew.embed, a.ids.ptr<int32_t>());
    noise();
    return;
  }
  // Note [host extras]: gather on the host, one copy up; upload() synchronised compute, so the
  // staging buffer is free, and the copy below completes before the next upload reuses it.
  ExtrasWeights hw = extras_weights_view(extras_layout_, host_extras_, cfg_.tie_word_embeddings);
  const size_t row = static_cast<size_t>(cfg_.hidden_size) * dtype_size(opts_.act_dtype);
  char* staging = static_cast<char*>(host_staging_);
  gather_rows(staging, static_cast<const char*>(hw.embed.data), b.input_ids.data(), a.n, row);
  be_->copy_h2d(a.ckpt[0].data, staging, static_cast<size_t>(a.n) * row, StreamId::kCompute);
  noise();
}

// The lm_head row of each head row's (shifted) label, for the head's gradient; ignored labels
// read row 0.
void Model::gather_label_rows() {
  Slot& a = slot();
  const int64_t n = static_cast<int64_t>(host_safe_labels_.size());
  if (n == 0) return;
  if (!opts_.host_extras) {
    ExtrasWeights ew = extras_weights_view(extras_layout_, extras_, cfg_.tie_word_embeddings);
    be_->embedding(rows_of(a.w_label, n), ew.lm_head, a.safe_labels.ptr<int32_t>());
    return;
  }
  ExtrasWeights hw = extras_weights_view(extras_layout_, host_extras_, cfg_.tie_word_embeddings);
  const size_t row = static_cast<size_t>(cfg_.hidden_size) * dtype_size(opts_.act_dtype);
  char* staging = static_cast<char*>(host_staging_) + static_cast<size_t>(opts_.max_tokens) * row;
  gather_rows(staging, static_cast<const char*>(hw.lm_head.data), host_safe_labels_.data(), n, row);
  be_->copy_h2d(a.w_label.data, staging, static_cast<size_t>(n) * row, StreamId::kCompute);
}

// Builds the per-layer context for the current batch. Dropout seeds mix (seed, micro-batch, layer).
static LayerCtx make_ctx(const ModelConfig& c, Backend* be, const ModelOptions& o, const Tensor& inv_freq,
                         const Tensor& pos, const Tensor& docs, bool has_docs, int64_t n, int64_t batch,
                         int64_t seq, const Tensor& scratch, bool train, uint64_t micro, int layer) {
  LayerCtx ctx;
  ctx.be = be;
  ctx.cfg = &c;
  ctx.layer = layer;
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
  ctx.dropout_seed = layer_dropout_seed(o.seed, micro, layer);
  return ctx;
}

// Layer l's context for this micro-batch: training visits get the saved region kept from the
// training forward (Note [recompute], model/layer.h); every visit reads its dropout seed from the
// slot upload() filled (Note [layer launch plans]).
LayerCtx Model::layer_ctx(int l, bool train) const {
  const Slot& a = slot();
  LayerCtx ctx = make_ctx(cfg_, be_, opts_, a_->inv_freq, a.pos, a.docs, a.has_docs, a.n, a.batch, a.seq,
                          a_->layer_scratch, train, a.micro, l);
  ctx.dropout_seed_slot = static_cast<const uint64_t*>(a.seeds.data) + l;
  if (a.has_docs) {  // backend.h Note [document spans]
    ctx.seq.doc_spans = a.doc_spans;
    ctx.seq.doc_slots = a.doc_slots;
    ctx.seq.max_doc_len = a.max_doc_len;
    ctx.seq.doc_starts = a.doc_starts.ptr<int32_t>();
    ctx.seq.doc_lens = a.doc_lens.ptr<int32_t>();
  }
  if (train) {
    ctx.recompute = opts_.recompute;
    if (!a.saved.empty()) {  // empty only for kFull without LoRA targets
      ctx.saved = a.saved[l].data;
      ctx.saved_bytes = a.saved[l].bytes();
    }
  }
  return ctx;
}

// Note [layer launch plans] (model/launch_plans.h): everything a visit's ops depend on that is not
// fixed for the Model's life (the arena views, the LoRA tensors, the config are). The per
// micro-batch inputs (tokens, positions, dropout seeds) are read from the arena when the ops run.
LaunchPlanCache::Key Model::visit_key(Phase phase, int l, bool train, const LayerWeights& w,
                                      bool forward_current) const {
  const Slot& a = slot();
  LaunchPlanCache::Key k = {static_cast<uint64_t>(phase), static_cast<uint64_t>(l), train,
                            static_cast<uint64_t>(a.n), static_cast<uint64_t>(a.batch), static_cast<uint64_t>(a.seq),
                            a.has_docs, static_cast<uint64_t>(opts_.recompute), forward_current,
                            static_cast<uint64_t>(cur_)};
  if (a.has_docs) {  // a ragged attention is shaped by these (backend.h Note [document spans])
    k.push_back(static_cast<uint64_t>(a.doc_slots));
    k.push_back(static_cast<uint64_t>(document_seq_bucket(SeqLayout{.seq = a.seq, .max_doc_len = a.max_doc_len})));
  }
  for (const Tensor* t : {&w.input_norm, &w.q, &w.k, &w.v, &w.o, &w.q_bias, &w.k_bias, &w.v_bias, &w.q_norm,
                          &w.k_norm, &w.post_norm, &w.gate, &w.up, &w.down})
    k.push_back(reinterpret_cast<uintptr_t>(t->data));
  return k;
}

void Model::forward_layer(int l, LayerSource& src, bool train) {
  Slot& a = slot();
  const LayerCtx ctx = layer_ctx(l, train);
  LayerWeights w = src.acquire(l);
  const LoraLayer& lora = lora_->layer(l);
  plans_->run(visit_key(Phase::kForward, l, train, w), /*recordable=*/true, [&] {
    layer_forward(ctx, w, lora, rows_of(a.ckpt[l], a.n), rows_of(a.ckpt[l + 1], a.n));
  });
  src.release(l);
}

// Gradient ping-pong: grad[(l+1) % 2] holds d(output of layer l) on entry; dx goes to grad[l % 2].
// forward_current: the visit before was this layer's training forward of the same micro-batch
// (LayerCtx::forward_current).
void Model::backward_layer(int l, LayerSource& src, bool forward_current) {
  Slot& a = slot();
  LayerCtx ctx = layer_ctx(l, /*train=*/true);
  ctx.forward_current = forward_current;
  LayerWeights w = src.acquire(l);
  // Layer 0's input gradient would be the embeddings', which are frozen: not computed.
  Tensor dout = rows_of(a.grad[(l + 1) % 2], a.n), dx = l == 0 ? Tensor() : rows_of(a.grad[l % 2], a.n);
  const LoraLayer& lora = lora_->layer(l);
  plans_->run(visit_key(Phase::kBackward, l, true, w, forward_current), /*recordable=*/true,
              [&] { layer_backward(ctx, w, lora, rows_of(a.ckpt[l], a.n), dout, dx); });
  src.release(l);
}

int64_t segment_count(const Batch& b) {
  int64_t n = b.batch;
  for (int32_t s : b.segments) n = std::max<int64_t>(n, int64_t{s} + 1);
  return n;
}

StatusOr<std::vector<double>> Model::forward_backward(const std::vector<const Batch*>& batches, LayerSource& src,
                                                      const std::vector<float>& grad_scales,
                                                      const SequenceWeights* seq_weights) {
  CHECK(grad_scales.size() == batches.size());
  for (const Batch* b : batches) RETURN_IF_ERROR(validate(*b));
  const int L = static_cast<int>(cfg_.num_layers);
  const int slots = static_cast<int>(a_->slots.size());
  StepSchedule sched = StepSchedule::layer_major(L, static_cast<int>(batches.size()), slots);
  CHECK(head_ != nullptr, "Model: extras were never loaded");
  std::vector<double> losses(batches.size());
  std::vector<float> loss_host(1);
  const uint64_t first_micro = micro_counter_;
  // With one arena slot, layer l's saved region is dead from its backward to its next forward: the
  // source may hold layers there (stream/prefetcher.h Note [lent activation memory]).
  if (slots == 1) {
    std::vector<LentRegion> regions;
    const Slot& a = a_->slots[0];
    // Each region with the carver's padding after it (no view uses it), so that consecutive
    // regions are adjacent and may be lent together (Note [lent region spans]).
    for (size_t l = 0; l < a.saved.size(); ++l)
      regions.push_back({static_cast<int>(l), a.saved[l].data, round_up(a.saved[l].bytes())});
    src.lend_regions(regions);
  }
  std::vector<bool> backward;
  for (const Visit& v : sched.visits()) backward.push_back(v.phase == Phase::kBackward);
  src.begin_training_step(sched.layers(), backward);
  const Visit* prev = nullptr;
  for (const Visit& v : sched.visits()) {
    const Batch& b = *batches[v.micro_batch];
    const bool after_own_forward = prev != nullptr && prev->phase == Phase::kForward && prev->layer == v.layer &&
                                   prev->micro_batch == v.micro_batch;
    prev = &v;
    cur_ = v.micro_batch % slots;  // a group of `slots` micro-batches takes slots 0..slots-1
    Slot& a = slot();
    if (v.phase == Phase::kForward) {
      if (v.layer == 0) {
        embed(b, first_micro + static_cast<uint64_t>(v.micro_batch), /*train=*/true);
        gather_label_rows();
        be_->memset_zero(a.loss.data, sizeof(float), StreamId::kCompute);
      }
      forward_layer(v.layer, src, true);
      if (v.layer == L - 1) {
        // d(final output) goes to grad[L % 2], which backward_layer(L-1) reads as dout.
        const HeadRows& hr = a.head_rows;
        HeadRowWeights row_weights;  // Note [sequence weights]
        if (seq_weights) {
          row_weights = [&, mb = v.micro_batch](const std::vector<double>& row_logp) {
            const std::vector<int32_t> seq_of_row = head_row_sequences(b, opts_.head_trained_rows);
            CHECK(seq_of_row.size() == row_logp.size(), "Model: head rows " << row_logp.size() << " vs plan "
                                                                             << seq_of_row.size());
            const int64_t segments = segment_count(b);
            const std::vector<float> w = (*seq_weights)(mb, sequence_sums(seq_of_row, row_logp, segments));
            CHECK(static_cast<int64_t>(w.size()) == segments, "Model: " << w.size() << " sequence weights for "
                                                                         << segments << " segments");
            std::vector<float> per_row(seq_of_row.size(), 0.0f);
            for (size_t r = 0; r < per_row.size(); ++r)
              if (seq_of_row[r] >= 0) per_row[r] = w[static_cast<size_t>(seq_of_row[r])];
            return per_row;
          };
        }
        head_forward_backward(make_head_ctx(cfg_, be_, opts_, a.n, a_->head_scratch, hr), final_norm(), *head_,
                              rows_of(a.ckpt[L], a.n), head_labels(a.labels, a.head_labels, hr),
                              rows_of(a.w_label, hr.gather ? hr.rows : a.n), grad_scales[v.micro_batch], a.loss,
                              rows_of(a.grad[L % 2], a.n), seq_weights ? &row_weights : nullptr);
      }
    } else {
      backward_layer(v.layer, src, /*forward_current=*/after_own_forward);  // the last layer: no recompute
      if (v.layer == 0) {
        be_->copy_d2h(loss_host.data(), a.loss.data, sizeof(float), StreamId::kCompute);
        be_->sync_stream(StreamId::kCompute);
        losses[v.micro_batch] = loss_host[0];
      }
    }
  }
  src.end_step();
  cur_ = 0;
  micro_counter_ = first_micro + batches.size();
  return losses;
}

void Model::run_forward(LayerSource& src, bool train) {
  const int L = static_cast<int>(cfg_.num_layers);
  StepSchedule sched = StepSchedule::forward_only(L);
  src.begin_step(sched.layers());
  for (const Visit& v : sched.visits()) forward_layer(v.layer, src, train);
  src.end_step();
}

Status Model::init_dora_magnitudes(LayerSource& src) {
  if (!lora_->magnitudes_pending()) return Status::OK();
  cur_ = 0;
  StepSchedule sched = StepSchedule::forward_only(static_cast<int>(cfg_.num_layers));
  src.begin_step(sched.layers());
  for (const Visit& v : sched.visits()) {
    LayerWeights w = src.acquire(v.layer);
    layer_dora_init(layer_ctx(v.layer, /*train=*/false), w, lora_->layer(v.layer));
    src.release(v.layer);
  }
  src.end_step();
  be_->sync_stream(StreamId::kCompute);
  RETURN_IF_ERROR(src.status(), "DoRA: the base weights' row norms");
  lora_->set_magnitudes_pending(false);
  return Status::OK();
}

// One batch through embed and every layer (no dropout) in slot 0, ready for a head.
Status Model::forward_one(const Batch& b, LayerSource& src) {
  RETURN_IF_ERROR(validate(b));
  cur_ = 0;
  embed(b, micro_counter_);
  run_forward(src, false);
  CHECK(head_ != nullptr, "Model: extras were never loaded");
  return Status::OK();
}

StatusOr<std::vector<float>> Model::forward_logits(const Batch& b, LayerSource& src) {
  RETURN_IF_ERROR(forward_one(b, src));
  Slot& a = slot();
  std::vector<float> out(static_cast<size_t>(a.n * cfg_.vocab_size));
  head_logits(make_head_ctx(cfg_, be_, opts_, a.n, a_->head_scratch), final_norm(), *head_,
              rows_of(a.ckpt[cfg_.num_layers], a.n), out.data());
  return out;
}

}  // namespace st
