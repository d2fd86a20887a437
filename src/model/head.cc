#include "model/head.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "data/batch.h"
#include "model/carver.h"

namespace st {
namespace {

struct HeadScratch {
  Tensor xn, dxn;          // [N,H] act
  Tensor rstd, m, s, tgt;  // [N] f32
  Tensor row_scale;        // [N] f32: Note [row-weighted head]
  Tensor acc;              // [N,H] f32 (training)
  Tensor logits;           // [rows, vocab_chunk] act
};

HeadScratch carve_head(Carver& cv, const ModelConfig& c, int64_t N, DType act, int64_t vocab_chunk,
                       size_t budget) {
  HeadScratch s;
  s.xn = cv.take(act, {N, c.hidden_size});
  s.dxn = cv.take(act, {N, c.hidden_size});
  s.rstd = cv.take(DType::kF32, {N});
  s.m = cv.take(DType::kF32, {N});
  s.s = cv.take(DType::kF32, {N});
  s.tgt = cv.take(DType::kF32, {N});
  s.row_scale = cv.take(DType::kF32, {N});
  s.acc = cv.take(DType::kF32, {N, c.hidden_size});
  const int64_t vc = std::min(vocab_chunk, c.vocab_size);
  s.logits = cv.take(act, {head_chunk_rows(vc, N, act, budget), vc});
  return s;
}

// The rows the head works on: every position, or the compact rows (Note [trained rows]).
int64_t head_rows(const HeadCtx& ctx) { return ctx.rows.gather ? ctx.rows.rows : ctx.tokens; }

HeadScratch carve_ctx(const HeadCtx& ctx) {
  Carver cv(ctx.scratch, ctx.scratch_bytes);
  return carve_head(cv, *ctx.cfg, head_rows(ctx), ctx.act, ctx.vocab_chunk, ctx.chunk_budget_bytes);
}

// The head's input: x itself, or its compact rows gathered into `room` (>= rows rows, free).
Tensor head_input(const HeadCtx& ctx, Tensor x, Tensor room) {
  if (!ctx.rows.gather) return x;
  Tensor xc = room.row_slice(0, ctx.rows.rows);
  ctx.be->embedding(xc, x, ctx.rows.gather);
  return xc;
}

Tensor span(Tensor t, int64_t r0, int64_t n) { return Tensor(t.ptr<float>() + r0, DType::kF32, {n}); }

// Note [vocab-chunked head]: vocabulary chunks outer, token chunks inner. For each block,
// logits [n, vc] = xn[r0 .. r0+n) · W_cᵀ, then fn(logits, W_c, col0, r0, n).
template <class Fn>
void for_each_logits_block(const HeadCtx& ctx, LmHeadSource& head, const HeadScratch& s, Fn fn) {
  Backend& be = *ctx.be;
  const int64_t N = head_rows(ctx), rows = s.logits.dim(0);
  head.begin_pass();
  for (int64_t c = 0; c < head.num_chunks(); ++c) {
    Tensor w = head.acquire(c);
    const int64_t col0 = c * s.logits.cols(), vc = w.rows();
    for (int64_t r0 = 0; r0 < N; r0 += rows) {
      const int64_t n = std::min(rows, N - r0);
      Tensor logits(s.logits.data, s.logits.dtype, {n, vc});
      be.gemm(logits, s.xn.row_slice(r0, n), w, {.trans_b = Trans::kYes});
      fn(logits, w, col0, r0, n);
    }
    head.release(c);
  }
}

// The online softmax over every block; with `grad`, acc ends as sum_j exp(l_j - m) W_j per token.
void chunked_ce(const HeadCtx& ctx, LmHeadSource& head, const HeadScratch& s, const int32_t* labels, bool grad) {
  Backend& be = *ctx.be;
  for_each_logits_block(ctx, head, s, [&](Tensor logits, Tensor w, int64_t col0, int64_t r0, int64_t n) {
    Tensor acc = grad ? s.acc.row_slice(r0, n) : Tensor();
    be.ce_chunk(logits, acc, span(s.m, r0, n), span(s.s, r0, n), span(s.tgt, r0, n), labels + r0, col0);
    if (grad) be.gemm(acc, logits, w, {.accum = col0 == 0 ? Accum::kOverwrite : Accum::kAdd});
  });
}

// ---- lm_head sources -------------------------------------------------------------------------

class ResidentLmHead final : public LmHeadSource {
 public:
  ResidentLmHead(Tensor w, int64_t chunk) : LmHeadSource(w.rows(), chunk), w_(w) {}
  Tensor acquire(int64_t c) override { return w_.row_slice(c * chunk_, chunk_rows(c)); }

 private:
  Tensor w_;
};

// Note [head chunk streaming]
// Two device slots, chunk c in slot c % 2. Chunk c+2 is copied (copy stream) once compute has
// enqueued every read of chunk c (release), after the copy stream waits on that slot's `free`
// event; compute waits on the slot's `ready` event before reading. Every wait refers to work
// already enqueued, so the copy stream never waits on the future (no deadlock with the layer
// prefetcher sharing it). A pass copies every chunk once: V x H elements per head call.
class StreamedLmHead final : public LmHeadSource {
 public:
  StreamedLmHead(Backend* be, const void* host, DType dt, int64_t vocab, int64_t hidden, int64_t chunk, void* slots)
      : LmHeadSource(vocab, chunk), be_(be), host_(static_cast<const char*>(host)), dt_(dt), hidden_(hidden) {
    const size_t slot_bytes = static_cast<size_t>(chunk * hidden) * dtype_size(dt);
    for (int i = 0; i < 2; ++i) {
      slot_[i] = static_cast<char*>(slots) + i * slot_bytes;
      ready_[i] = be->create_event();
      free_[i] = be->create_event();
    }
  }
  void begin_pass() override {
    for (int64_t c = 0; c < std::min<int64_t>(2, num_chunks()); ++c) issue(c);
  }
  Tensor acquire(int64_t c) override {
    be_->wait(StreamId::kCompute, *ready_[c % 2]);
    return Tensor(slot_[c % 2], dt_, {chunk_rows(c), hidden_});
  }
  void release(int64_t c) override {
    be_->record(*free_[c % 2], StreamId::kCompute);
    if (c + 2 < num_chunks()) issue(c + 2);
  }

 private:
  void issue(int64_t c) {
    const size_t row_bytes = static_cast<size_t>(hidden_) * dtype_size(dt_);
    const size_t bytes = static_cast<size_t>(chunk_rows(c)) * row_bytes;
    be_->wait(StreamId::kH2D, *free_[c % 2]);
    be_->copy_h2d(slot_[c % 2], host_ + static_cast<size_t>(c * chunk_) * row_bytes, bytes, StreamId::kH2D);
    be_->record(*ready_[c % 2], StreamId::kH2D);
    bytes_streamed_ += static_cast<int64_t>(bytes);
  }
  Backend* be_;
  const char* host_;
  DType dt_;
  int64_t hidden_;
  char* slot_[2];
  std::unique_ptr<Event> ready_[2], free_[2];
};

// log p(target) of each of the n head rows after the vocabulary pass: target - (m + log s), from
// the online softmax state copied to the host (blocks).
std::vector<double> host_row_logp(Backend& be, Tensor m_state, Tensor s_state, Tensor tgt_state, int64_t n) {
  std::vector<float> m(static_cast<size_t>(n)), sum(static_cast<size_t>(n)), tgt(static_cast<size_t>(n));
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  be.copy_d2h(m.data(), m_state.data, bytes, StreamId::kCompute);
  be.copy_d2h(sum.data(), s_state.data, bytes, StreamId::kCompute);
  be.copy_d2h(tgt.data(), tgt_state.data, bytes, StreamId::kCompute);
  be.sync_stream(StreamId::kCompute);
  std::vector<double> logp(static_cast<size_t>(n));
  for (size_t r = 0; r < logp.size(); ++r)
    logp[r] = static_cast<double>(tgt[r]) - (static_cast<double>(m[r]) + std::log(static_cast<double>(sum[r])));
  return logp;
}

}  // namespace

std::unique_ptr<LmHeadSource> resident_lm_head(Tensor lm_head, int64_t vocab_chunk) {
  return std::make_unique<ResidentLmHead>(lm_head, vocab_chunk);
}

std::unique_ptr<LmHeadSource> streamed_lm_head(Backend* be, const void* host_lm_head, DType dtype, int64_t vocab,
                                               int64_t hidden, int64_t vocab_chunk, void* slots) {
  return std::make_unique<StreamedLmHead>(be, host_lm_head, dtype, vocab, hidden, vocab_chunk, slots);
}

size_t lm_head_slot_bytes(const ModelConfig& c, DType dtype, int64_t vocab_chunk) {
  return 2 * static_cast<size_t>(std::min(vocab_chunk, c.vocab_size) * c.hidden_size) * dtype_size(dtype);
}

std::vector<int32_t> shift_labels(const std::vector<int32_t>& labels, int64_t batch, int64_t seq) {
  std::vector<int32_t> out(labels.size(), kIgnoreIndex);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t + 1 < seq; ++t) out[b * seq + t] = labels[b * seq + t + 1];
  return out;
}

HeadRowPlan plan_head_rows(const std::vector<int32_t>& shifted_labels) {
  const int64_t n = static_cast<int64_t>(shifted_labels.size());
  HeadRowPlan p;
  int64_t first_untrained = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (shifted_labels[i] != kIgnoreIndex) {
      p.gather.push_back(static_cast<int32_t>(i));
      p.labels.push_back(shifted_labels[i]);
    } else if (first_untrained < 0) {
      first_untrained = i;
    }
  }
  p.trained = static_cast<int64_t>(p.gather.size());
  p.rows = p.trained == 0 ? 0 : (p.trained + 1 + kHeadRowQuantum - 1) / kHeadRowQuantum * kHeadRowQuantum;
  if (p.rows >= n) return HeadRowPlan{};  // no fewer rows: the head runs on every position
  p.compact = true;
  p.gather.resize(static_cast<size_t>(p.rows), static_cast<int32_t>(first_untrained));
  p.labels.resize(static_cast<size_t>(p.rows), kIgnoreIndex);
  p.scatter.assign(static_cast<size_t>(n), static_cast<int32_t>(p.trained));
  for (int64_t r = 0; r < p.trained; ++r) p.scatter[static_cast<size_t>(p.gather[r])] = static_cast<int32_t>(r);
  return p;
}

int64_t head_chunk_rows(int64_t vocab_chunk, int64_t tokens, DType act, size_t budget) {
  const size_t row_bytes = static_cast<size_t>(vocab_chunk) * dtype_size(act);
  int64_t rows = static_cast<int64_t>(budget / std::max<size_t>(row_bytes, 1));
  return std::clamp<int64_t>(rows, 1, std::max<int64_t>(tokens, 1));
}

size_t head_scratch_bytes(const ModelConfig& c, int64_t tokens, DType act, int64_t vocab_chunk, size_t budget) {
  Carver cv;
  carve_head(cv, c, tokens, act, vocab_chunk, budget);
  return cv.used();
}

void head_forward_backward(const HeadCtx& ctx, Tensor final_norm, LmHeadSource& head, Tensor x,
                           const int32_t* labels, Tensor w_label, float grad_scale, Tensor loss_sum, Tensor dx,
                           const HeadRowWeights* row_weights) {
  Backend& be = *ctx.be;
  if (ctx.rows.gather && ctx.rows.rows == 0) {  // nothing trained: no loss, no gradient
    be.memset_zero(dx.data, dx.bytes(), StreamId::kCompute);
    return;
  }
  HeadScratch s = carve_ctx(ctx);
  // Compact rows: the input is gathered into dx, which is free until the final gather below.
  Tensor xin = head_input(ctx, x, dx);
  be.rmsnorm(s.xn, s.rstd, xin, final_norm, static_cast<float>(ctx.cfg->rms_norm_eps));
  chunked_ce(ctx, head, s, labels, true);
  Tensor row_scale;
  if (row_weights) {  // Note [row-weighted head]
    const int64_t n = head_rows(ctx);
    const std::vector<float> w = (*row_weights)(host_row_logp(*ctx.be, s.m, s.s, s.tgt, n));
    CHECK(static_cast<int64_t>(w.size()) == n, "head: " << w.size() << " row weights for " << n << " rows");
    row_scale = span(s.row_scale, 0, n);
    be.copy_h2d(row_scale.data, w.data(), w.size() * sizeof(float), StreamId::kCompute);
    be.sync_stream(StreamId::kCompute);  // `w` is a local: the copy must be done before it goes
  }
  be.ce_finish(s.dxn, loss_sum, s.acc, s.m, s.s, s.tgt, w_label, labels, grad_scale, row_scale);
  if (!ctx.rows.gather) {
    be.rmsnorm_backward(dx, s.dxn, x, final_norm, s.rstd);
    return;
  }
  // The compact rows' gradient goes to xn (dead after the logits), row `trained` is made exact
  // +0 (its label is ignored, but -0 could come out of the norm's backward), and every position
  // of dx reads its row.
  be.rmsnorm_backward(s.xn, s.dxn, xin, final_norm, s.rstd);
  Tensor zero = s.xn.row_slice(ctx.rows.trained, 1);
  be.memset_zero(zero.data, zero.bytes(), StreamId::kCompute);
  be.embedding(dx, s.xn, ctx.rows.scatter);
}

void head_loss(const HeadCtx& ctx, Tensor final_norm, LmHeadSource& head, Tensor x, const int32_t* labels,
               Tensor loss_sum, std::vector<double>* row_logp) {
  if (ctx.rows.gather && ctx.rows.rows == 0) {  // nothing counted
    if (row_logp) row_logp->clear();
    return;
  }
  HeadScratch s = carve_ctx(ctx);
  Tensor xin = head_input(ctx, x, s.dxn);  // dxn: unused without a gradient
  ctx.be->rmsnorm(s.xn, s.rstd, xin, final_norm, static_cast<float>(ctx.cfg->rms_norm_eps));
  chunked_ce(ctx, head, s, labels, false);
  ctx.be->ce_finish(Tensor(), loss_sum, Tensor(), s.m, s.s, s.tgt, Tensor(), labels, 0.0f, Tensor());
  if (row_logp) *row_logp = host_row_logp(*ctx.be, s.m, s.s, s.tgt, head_rows(ctx));
}

void head_losses(const std::vector<HeadLossBatch>& bs, Tensor spare, Tensor final_norm, LmHeadSource& head) {
  struct Ready {
    const HeadLossBatch* b;
    Tensor xn;
    int64_t rows, chunk_rows;
  };
  std::vector<Ready> ready;
  Tensor logits_block;
  Tensor free = spare;
  for (const HeadLossBatch& b : bs) {
    const HeadCtx& ctx = b.ctx;
    if (ctx.rows.gather && ctx.rows.rows == 0) {  // nothing counted, as head_loss
      if (b.row_logp) b.row_logp->clear();
      continue;
    }
    const int64_t rows = head_rows(ctx);
    const HeadScratch s = carve_ctx(ctx);  // for the row chunking head_loss takes; the largest block serves all
    if (s.logits.dim(0) > logits_block.dim(0) || logits_block.empty()) logits_block = s.logits;
    // The normalized rows: compact rows gathered into the free buffer and normalized into x (dead
    // by then); every position normalized into the free buffer, x becoming the next batch's.
    const Tensor x(b.x.data, b.x.dtype, {ctx.tokens, b.x.cols()});
    Tensor xin = head_input(ctx, x, free), xn;
    if (ctx.rows.gather) {
      xn = b.x.row_slice(0, rows);
    } else {
      xn = free.row_slice(0, rows);
      free = b.x;
    }
    ctx.be->rmsnorm(xn, span(b.rstd, 0, rows), xin, final_norm, static_cast<float>(ctx.cfg->rms_norm_eps));
    ready.push_back({&b, xn, rows, s.logits.dim(0)});
  }
  if (ready.empty()) return;
  Backend& be = *bs[0].ctx.be;
  head.begin_pass();  // Note [vocab-chunked head]: vocabulary chunks outer; batches, then token chunks, inner
  for (int64_t c = 0; c < head.num_chunks(); ++c) {
    Tensor w = head.acquire(c);
    const int64_t col0 = c * logits_block.cols(), vc = w.rows();
    for (const Ready& r : ready)
      for (int64_t r0 = 0; r0 < r.rows; r0 += r.chunk_rows) {
        const int64_t n = std::min(r.chunk_rows, r.rows - r0);
        Tensor logits(logits_block.data, logits_block.dtype, {n, vc});
        be.gemm(logits, r.xn.row_slice(r0, n), w, {.trans_b = Trans::kYes});
        be.ce_chunk(logits, Tensor(), span(r.b->m, r0, n), span(r.b->s, r0, n), span(r.b->tgt, r0, n),
                    r.b->labels + r0, col0);
      }
    head.release(c);
  }
  for (const Ready& r : ready) {
    const HeadLossBatch& b = *r.b;
    be.ce_finish(Tensor(), b.loss_sum, Tensor(), span(b.m, 0, r.rows), span(b.s, 0, r.rows), span(b.tgt, 0, r.rows),
                 Tensor(), b.labels, 0.0f, Tensor());
    if (b.row_logp) *b.row_logp = host_row_logp(be, b.m, b.s, b.tgt, r.rows);
  }
}

void head_logits(const HeadCtx& ctx, Tensor final_norm, LmHeadSource& head, Tensor x, float* host_logits) {
  HeadScratch s = carve_ctx(ctx);
  Backend& be = *ctx.be;
  be.rmsnorm(s.xn, s.rstd, x, final_norm, static_cast<float>(ctx.cfg->rms_norm_eps));
  const int64_t V = ctx.cfg->vocab_size;
  std::vector<uint8_t> staging(s.logits.bytes());
  std::vector<float> f32(static_cast<size_t>(s.logits.numel()));
  for_each_logits_block(ctx, head, s, [&](Tensor logits, Tensor, int64_t col0, int64_t r0, int64_t n) {
    const int64_t vc = logits.cols();
    be.copy_d2h(staging.data(), logits.data, logits.bytes(), StreamId::kCompute);
    be.sync_stream(StreamId::kCompute);
    convert_elements(f32.data(), DType::kF32, staging.data(), ctx.act, static_cast<size_t>(n * vc));
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(host_logits + (r0 + i) * V + col0, f32.data() + i * vc, static_cast<size_t>(vc) * sizeof(float));
  });
}

}  // namespace st
