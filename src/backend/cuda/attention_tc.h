// bf16 tensor-core flash attention (mma.sync m16n8k16, f32 accumulation), forward and backward.
// attention.cu routes here when every tensor is bf16 and head_dim is a multiple of 8 up to 128
// (head dims are zero-padded to 32/64/96/128 inside the kernels); everything else keeps the
// scalar f32 kernels. Same contract as Backend::attention / attention_backward: causal,
// same-document (doc_ids), GQA; lse f32 [B,NH,T]; backward deterministic (no atomics).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace st::cuda {

// Test/bench hook: set false to send every call to the scalar kernels (process-wide).
bool& attention_tc_enabled();
// Number of forward + backward calls that took the tensor-core path (lets tests prove the route).
int64_t attention_tc_calls();
// Test hook: set false to walk every tile below the diagonal (attention_tc.cu Note [tile
// skipping]); the bits must not change. Starts false with STREAMTUNE_ATTN_TILE_SKIP=off.
bool& attention_tile_skipping();

bool attention_tc_supported(const Tensor* tensors, int n, const AttnShape& s);

void launch_attention_tc(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, const SeqLayout& L,
                         const AttnShape& s, cudaStream_t st);
// scratch: attention_backward_scratch_floats(L, s) floats (ops.h): GQA partials, then delta.
void launch_attention_tc_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v,
                                  Tensor out, Tensor lse, const SeqLayout& L, const AttnShape& s, float* scratch,
                                  cudaStream_t st);

}  // namespace st::cuda
