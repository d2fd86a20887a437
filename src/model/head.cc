#include "model/head.h"

#include <algorithm>
#include <cstring>

#include "model/carver.h"

namespace st {
namespace {

struct HeadScratch {
  Tensor xn, dxn;  // [N,H] act
  Tensor rstd;     // [N] f32
  Tensor logits;   // [rows, V] act (chunk)
};

HeadScratch carve_head(Carver& cv, const ModelConfig& c, int64_t N, DType act, size_t budget) {
  HeadScratch s;
  s.xn = cv.take(act, {N, c.hidden_size});
  s.dxn = cv.take(act, {N, c.hidden_size});
  s.rstd = cv.take(DType::kF32, {N});
  s.logits = cv.take(act, {head_chunk_rows(c, N, act, budget), c.vocab_size});
  return s;
}

HeadScratch carve_ctx(const HeadCtx& ctx) {
  Carver cv(ctx.scratch, ctx.scratch_bytes);
  return carve_head(cv, *ctx.cfg, ctx.tokens, ctx.act, ctx.chunk_budget_bytes);
}

// Runs lm_head + CE chunk by chunk; when dxn is non-empty writes dlogits · lm_head into it.
void chunked_ce(const HeadCtx& ctx, const ExtrasWeights& w, const HeadScratch& s, const int32_t* labels,
                float grad_scale, Tensor loss_sum, Tensor dxn) {
  Backend& be = *ctx.be;
  const int64_t N = ctx.tokens, rows = s.logits.dim(0);
  for (int64_t r0 = 0; r0 < N; r0 += rows) {
    const int64_t n = std::min(rows, N - r0);
    Tensor logits = s.logits.row_slice(0, n);
    be.gemm(logits, s.xn.row_slice(r0, n), w.lm_head, {.trans_b = Trans::kYes});
    be.cross_entropy(logits, loss_sum, labels + r0, grad_scale);
    if (!dxn.empty()) be.gemm(dxn.row_slice(r0, n), logits, w.lm_head, {});
  }
}

}  // namespace

std::vector<int32_t> shift_labels(const std::vector<int32_t>& labels, int64_t batch, int64_t seq) {
  std::vector<int32_t> out(labels.size(), -100);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t + 1 < seq; ++t) out[b * seq + t] = labels[b * seq + t + 1];
  return out;
}

int64_t head_chunk_rows(const ModelConfig& c, int64_t tokens, DType act, size_t budget) {
  const size_t row_bytes = static_cast<size_t>(c.vocab_size) * dtype_size(act);
  int64_t rows = static_cast<int64_t>(budget / std::max<size_t>(row_bytes, 1));
  return std::clamp<int64_t>(rows, 1, std::max<int64_t>(tokens, 1));
}

size_t head_scratch_bytes(const ModelConfig& c, int64_t tokens, DType act, size_t budget) {
  Carver cv;
  carve_head(cv, c, tokens, act, budget);
  return cv.used();
}

void head_forward_backward(const HeadCtx& ctx, const ExtrasWeights& w, Tensor x, const int32_t* labels,
                           float grad_scale, Tensor loss_sum, Tensor dx) {
  HeadScratch s = carve_ctx(ctx);
  Backend& be = *ctx.be;
  be.rmsnorm(s.xn, s.rstd, x, w.final_norm, static_cast<float>(ctx.cfg->rms_norm_eps));
  chunked_ce(ctx, w, s, labels, grad_scale, loss_sum, s.dxn);
  be.rmsnorm_backward(dx, s.dxn, x, w.final_norm, s.rstd);
}

void head_loss(const HeadCtx& ctx, const ExtrasWeights& w, Tensor x, const int32_t* labels, Tensor loss_sum) {
  HeadScratch s = carve_ctx(ctx);
  ctx.be->rmsnorm(s.xn, s.rstd, x, w.final_norm, static_cast<float>(ctx.cfg->rms_norm_eps));
  chunked_ce(ctx, w, s, labels, 0.0f, loss_sum, Tensor());
}

void head_logits(const HeadCtx& ctx, const ExtrasWeights& w, Tensor x, float* host_logits) {
  HeadScratch s = carve_ctx(ctx);
  Backend& be = *ctx.be;
  be.rmsnorm(s.xn, s.rstd, x, w.final_norm, static_cast<float>(ctx.cfg->rms_norm_eps));
  const int64_t N = ctx.tokens, V = ctx.cfg->vocab_size, rows = s.logits.dim(0);
  std::vector<uint8_t> staging(s.logits.bytes());
  for (int64_t r0 = 0; r0 < N; r0 += rows) {
    const int64_t n = std::min(rows, N - r0);
    Tensor logits = s.logits.row_slice(0, n);
    be.gemm(logits, s.xn.row_slice(r0, n), w.lm_head, {.trans_b = Trans::kYes});
    be.copy_d2h(staging.data(), logits.data, logits.bytes(), StreamId::kCompute);
    be.sync_stream(StreamId::kCompute);
    convert_elements(host_logits + r0 * V, DType::kF32, staging.data(), ctx.act, static_cast<size_t>(n * V));
  }
}

}  // namespace st
