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
  GemmRunner();
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // C[M,N] (=|+=) alpha op(A) op(B), as Backend::gemm. `tmp_f32` is used only when A/B are f32
  // and C is bf16 (cuBLASLt has no such combination): it must hold M*N floats.
  void run(Tensor c, Tensor a, Tensor b, const GemmOpts& o, cudaStream_t s, float* tmp_f32, size_t tmp_elems);

 private:
  struct Plan;
  // m, n, k, trans_a, trans_b, ab dtype, c dtype, beta!=0, alignment class of A/B/C, bias epilogue
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, int, int, int, int, int>;
  Plan& plan_for(const Key& key);
  void matmul(void* c, DType ct, const void* a, const void* b, DType abt, int64_t M, int64_t N, int64_t K,
              const GemmOpts& o, cudaStream_t s, const void* c_in = nullptr);

  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace st::cuda
