// cuBLASLt GEMM for row-major tensors, with per-shape descriptor/algorithm caching and a
// workspace allocated once. Not thread-safe: the backend calls it from one host thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "backend/backend.h"

namespace st::cuda {

class GemmRunner {
 public:
  // tune: pick each shape's algorithm among cuBLASLt's candidates (gemm_tune.h Note [bit-preserving
  // GEMM tuning]); false keeps the heuristic's first choice (tests compare the two).
  explicit GemmRunner(bool tune = true);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // C[M,N] (=|+=) alpha op(A) op(B), as Backend::gemm. `tmp_f32` is used only when A/B are f32
  // and C is bf16 (cuBLASLt has no such combination): it must hold M*N floats.
  void run(Tensor c, Tensor a, Tensor b, const GemmOpts& o, cudaStream_t s, float* tmp_f32, size_t tmp_elems);

  // Backend::gemm_pair in one strided-batched call: C_i = A·B_iᵀ (+ bias_i) for i = 0, 1, where
  // B_1, C_1 and bias_1 sit sb, sc and sbias elements after B_0, C_0 and bias_0. bf16/f16 A and B.
  void run_pair(Tensor c0, Tensor a, Tensor b0, Tensor bias0, int64_t sb, int64_t sc, int64_t sbias, cudaStream_t s);

 private:
  struct Plan;
  // A strided batch of two (run_pair): element strides of B, C and the bias; all 0 for one product.
  struct Pair {
    int64_t sb, sc, sbias;
  };
  // m, n, k, trans_a, trans_b, ab dtype, c dtype, beta!=0, alignment class of A/B/C, bias epilogue,
  // pair strides (B, C, bias)
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, int, int, int, int, int, int64_t, int64_t, int64_t>;
  Plan& plan_for(const Key& key);
  void tune(Plan& p, const Key& key, DType ct, const void* a, const void* b, float alpha, float beta,
            const void* c_in, cudaStream_t s);
  void matmul(void* c, DType ct, const void* a, const void* b, DType abt, int64_t M, int64_t N, int64_t K,
              const GemmOpts& o, cudaStream_t s, const void* c_in = nullptr, Pair pair = Pair{0, 0, 0});

  bool tune_;
  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace st::cuda
