// Causal GQA training attention through cuDNN's fused SDPA (flash attention) via the cuDNN
// frontend graph API: forward (O + natural-log logsumexp "Stats" = our lse [B,NH,T]) and a
// deterministic backward. Only this header is seen by the backend; the frontend's heavy headers
// are compiled in attention_cudnn.cc alone. Without cuDNN at build time (STREAMTUNE_HAVE_CUDNN
// unset) make_cudnn_attention() returns nullptr and the backend keeps its own kernels.
//
// Same-shape consistency: plan() builds the forward AND backward graphs of a shape together and
// answers once per shape, so a forward and the backward that reads its lse always take the same
// path (the lse conventions of cuDNN and attention_tc happen to agree, but nothing relies on it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace st::cuda {

// A ragged call's device arrays (backend.h Note [document spans]; Note [ragged documents] in
// attention_cudnn.cc): per span slot, the element offsets of its first token in q/out/dq/dout
// (token x NH x D), k/v/dk/dv (token x KVH x D) and lse (token x NH), doc_slots + 1 entries each,
// and its length (doc_slots entries).
struct RaggedArrays {
  const int32_t* q_offsets = nullptr;
  const int32_t* kv_offsets = nullptr;
  const int32_t* stats_offsets = nullptr;
  const int32_t* lens = nullptr;
};

// Whether a call is ragged: documents given as spans (the layout cuDNN then runs, every span a
// sequence of its own); other calls with doc_ids keep the own kernels.
inline bool is_ragged(const SeqLayout& L) { return L.doc_ids != nullptr && L.doc_starts != nullptr; }

class CudnnAttention {
 public:
  virtual ~CudnnAttention() = default;

  // Whether cuDNN runs causal attention of this shape (bf16; documents only as spans: the caller
  // checks those). A ragged shape is (doc_slots, document_seq_bucket) in place of
  // (B, T). With `build`, both graphs are built and cached on first sight of the shape (slow:
  // ~1 s); without, a shape never built answers false ("not planned"), so a run whose batches
  // vary in length builds graphs only for the shapes it planned. On true, *workspace_bytes is
  // the larger of the two graphs' workspaces; on false, *why says why. The answer depends only on
  // (B, T, NH, KVH, D, scale), whether the shape was built, and workspace_limit. A dense shape
  // whose whole workspace is over the limit may still answer true with the smaller workspace of
  // its chunked backward (attention_cudnn.cc Note [chunked backward]), which the next backward()
  // of the shape then runs.
  virtual bool plan(const SeqLayout& L, const AttnShape& s, size_t workspace_limit, bool build,
                    size_t* workspace_bytes, std::string* why) = 0;
  // Both require plan(L, s, ...) to have returned true. `workspace`: plan's workspace_bytes.
  // `ragged`: the arrays of a ragged call (is_ragged(L)), else nullptr.
  virtual void forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, const SeqLayout& L,
                       const AttnShape& s, void* workspace, const RaggedArrays* ragged, cudaStream_t st) = 0;
  virtual void backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out,
                        Tensor lse, const SeqLayout& L, const AttnShape& s, void* workspace,
                        const RaggedArrays* ragged, cudaStream_t st) = 0;
  // The workspace of a dense shape's chunked backward (0: none; builds its graphs on first sight):
  // what the planner asks for when the whole workspace does not fit.
  virtual size_t chunked_workspace(const SeqLayout& L, const AttnShape& s) = 0;
};

// nullptr when built without cuDNN. Creates no cuDNN handle until the first plan().
std::unique_ptr<CudnnAttention> make_cudnn_attention();
bool cudnn_attention_built();
// Test/bench hook: set false to keep every call on the backend's own kernels (process-wide). Never
// flip it between a forward and its backward: both must take the same path.
bool& cudnn_attention_enabled();
// Forward + backward calls that ran through cuDNN, process-wide (lets tests prove the route).
int64_t cudnn_attention_calls();
// Backward calls that ran in query chunks (attention_cudnn.cc Note [chunked backward]).
int64_t cudnn_chunked_backward_calls();

}  // namespace st::cuda
