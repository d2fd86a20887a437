// The head: final RMSNorm + lm_head + softmax cross-entropy, chunked over tokens so a chunk of
// logits [rows, V] stays under a byte budget (design.md §1). The frozen lm_head gets no gradient;
// the head produces the gradient of the final-norm input and the loss sum.
//
// Labels: `shifted` labels, already aligned so shifted[t] is the target of position t (HF
// label shift: shifted[t] = labels[t+1] within the same row, ignore at each row's last position).
// Use shift_labels() to build them.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "io/hf_config.h"
#include "model/weights.h"

namespace st {

// Host-side HF label shift for B rows of T: out[b*T+t] = labels[b*T+t+1], -100 at t = T-1.
std::vector<int32_t> shift_labels(const std::vector<int32_t>& labels, int64_t batch, int64_t seq);

// Rows of logits per chunk for a budget in bytes (at least 1, at most `tokens`).
int64_t head_chunk_rows(const ModelConfig& c, int64_t tokens, DType act, size_t chunk_budget_bytes);
size_t head_scratch_bytes(const ModelConfig& c, int64_t tokens, DType act, size_t chunk_budget_bytes);

struct HeadCtx {
  Backend* be = nullptr;
  const ModelConfig* cfg = nullptr;
  DType act = DType::kF32;
  int64_t tokens = 0;
  void* scratch = nullptr;  // head_scratch_bytes(...) bytes of backend memory
  size_t scratch_bytes = 0;
  size_t chunk_budget_bytes = 64ull << 20;
};

// loss_sum (f32 [1], backend memory) += sum of -log p(target) over counted positions;
// dx[N,H] = d(grad_scale * loss_sum)/dx. x: the last layer's output [N,H]. labels: shifted, int32
// backend memory [N]. Enqueues on compute.
void head_forward_backward(const HeadCtx& ctx, const ExtrasWeights& w, Tensor x, const int32_t* labels,
                           float grad_scale, Tensor loss_sum, Tensor dx);

// Loss only (no gradient written anywhere the caller sees).
void head_loss(const HeadCtx& ctx, const ExtrasWeights& w, Tensor x, const int32_t* labels, Tensor loss_sum);

// Logits of every position copied to host_logits ([N, V] f32, host memory). Blocks the host.
void head_logits(const HeadCtx& ctx, const ExtrasWeights& w, Tensor x, float* host_logits);

}  // namespace st
