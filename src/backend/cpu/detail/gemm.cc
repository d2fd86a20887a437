// GEMM through OpenBLAS sgemm. bf16/f16 operands are widened to f32 scratch first; a non-f32 C is
// computed in f32 scratch (loaded first for Accum::kAdd) and rounded once on store.
#include <cblas.h>

#include <cstring>

#include "backend/cpu/detail/kernels.h"

namespace st::cpu {

F32View::F32View(const Tensor& t) {
  check_float(t, "F32View");
  if (t.dtype == DType::kF32) {
    ptr_ = t.ptr<const float>();
    return;
  }
  copy_.resize(static_cast<size_t>(t.numel()));
  convert_elements(copy_.data(), DType::kF32, t.data, t.dtype, copy_.size());
  ptr_ = copy_.data();
}

void gemm(Tensor c, Tensor a, Tensor b, const GemmOpts& o) {
  check_float(a, "gemm A");
  check_float(b, "gemm B");
  check_float(c, "gemm C");
  CHECK(a.dtype == b.dtype, "gemm: A and B dtypes differ: " << dtype_name(a.dtype) << " vs " << dtype_name(b.dtype));
  const bool ta = o.trans_a == Trans::kYes, tb = o.trans_b == Trans::kYes;
  const int64_t M = ta ? a.cols() : a.rows(), K = ta ? a.rows() : a.cols();
  const int64_t KB = tb ? b.cols() : b.rows(), N = tb ? b.rows() : b.cols();
  CHECK(K == KB && c.rows() == M && c.cols() == N,
        "gemm shapes: C " << shape_of(c) << " A " << shape_of(a) << (ta ? "^T" : "") << " B " << shape_of(b)
                          << (tb ? "^T" : ""));
  if (M == 0 || N == 0) return;
  const bool add = o.accum == Accum::kAdd || !o.residual.empty();
  if (!o.residual.empty()) {
    CHECK(o.accum == Accum::kOverwrite && o.residual.dtype == c.dtype && o.residual.rows() == M &&
              o.residual.cols() == N,
          "gemm: residual must be [M,N] in C's dtype, without Accum::kAdd");
    if (o.residual.data != c.data) std::memmove(c.data, o.residual.data, c.bytes());
  }
  if (K == 0) {
    if (!add) convert_elements(c.data, c.dtype, std::vector<float>(M * N, 0.0f).data(), DType::kF32, M * N);
    return;
  }
  F32View av(a), bv(b);
  float* cf = nullptr;
  std::vector<float> cbuf;
  if (c.dtype == DType::kF32) {
    cf = c.ptr<float>();
  } else {
    cbuf.resize(static_cast<size_t>(M * N), 0.0f);
    if (add) convert_elements(cbuf.data(), DType::kF32, c.data, c.dtype, cbuf.size());
    cf = cbuf.data();
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), o.alpha, av.data(), static_cast<int>(a.cols()), bv.data(),
              static_cast<int>(b.cols()), add ? 1.0f : 0.0f, cf, static_cast<int>(N));
  if (!o.bias.empty()) {
    check_float(o.bias, "gemm bias");
    CHECK(o.bias.numel() == N, "gemm: bias has " << o.bias.numel() << " elements, C has " << N << " columns");
    std::vector<float> bias(static_cast<size_t>(N));
    convert_elements(bias.data(), DType::kF32, o.bias.data, o.bias.dtype, bias.size());
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) cf[i * N + j] += bias[j];
  }
  if (c.dtype != DType::kF32) convert_elements(c.data, c.dtype, cbuf.data(), DType::kF32, cbuf.size());
}

}  // namespace st::cpu
