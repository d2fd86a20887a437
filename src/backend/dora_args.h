// The DoRA ops' argument contract (backend.h, "DoRA"), checked alike by every backend before it
// runs them: shapes, dtypes and the one forbidden alias. A violation is a caller bug (CHECK).
#pragma once

#include <cstdint>

#include <string>

#include "core/check.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace st::dora_args {

inline bool floating(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// "[d0,d1,...]" streamed (Tensor::shape_str builds strings GCC 12 warns about when inlined).
inline std::string shape(const Tensor& t) {
  Str s;
  s << "[";
  for (int i = 0; i < t.ndim; ++i) s << (i ? "," : "") << t.shape[i];
  return s << "]";
}

// f32 [n] (norm, scale, mag, dmag, den).
inline void vec(const Tensor& t, int64_t n, const char* what) {
  if (t.dtype == DType::kF32 && t.numel() == n && (t.data != nullptr || n == 0)) return;
  CHECK(false, what << ": f32 [" << n << "] expected, got " << dtype_name(t.dtype) << " " << shape(t));
}

// A float [rows, cols] activation or weight.
inline void mat(const Tensor& t, int64_t rows, int64_t cols, const char* what) {
  if (floating(t.dtype) && t.rows() == rows && t.cols() == cols && t.numel() == rows * cols &&
      (t.data != nullptr || t.numel() == 0))
    return;
  CHECK(false, what << ": float [" << rows << "," << cols << "] expected, got " << dtype_name(t.dtype) << " "
                    << shape(t));
}

inline void f32_mat(const Tensor& t, int64_t rows, int64_t cols, const char* what) {
  mat(t, rows, cols, what);
  CHECK(t.dtype == DType::kF32, what << ": f32 expected, got " << dtype_name(t.dtype));
}

// dora_norm: W [out, in], A [r, in], B [out, r], norm [out]; scale and mag [out] when scale is given.
inline void norm_args(const Tensor& norm, const Tensor& scale, const Tensor& w, const Tensor& a, const Tensor& b,
                      const Tensor& mag) {
  const int64_t out = w.rows(), in = w.cols(), r = a.rows();
  mat(w, out, in, "dora_norm W");
  f32_mat(a, r, in, "dora_norm A");
  f32_mat(b, out, r, "dora_norm B");
  vec(norm, out, "dora_norm norm");
  if (scale.empty()) return;
  vec(scale, out, "dora_norm scale");
  vec(mag, out, "dora_norm mag");
}

// dora_combine: y [N, out], scale [out], bias [out] (any float) and residual [N, out] optional;
// residual must not alias y.
inline void combine_args(const Tensor& y, const Tensor& scale, const Tensor& bias, const Tensor& residual) {
  const int64_t N = y.rows(), out = y.cols();
  mat(y, N, out, "dora_combine y");
  vec(scale, out, "dora_combine scale");
  if (!bias.empty()) CHECK(floating(bias.dtype) && bias.numel() == out, "dora_combine bias: float [" << out << "] expected");
  if (residual.empty()) return;
  mat(residual, N, out, "dora_combine residual");
  CHECK(residual.data != y.data, "dora_combine: residual aliases y");
}

// dora_backward: g, dy, v [N, out]; dmag, scale, den [out].
inline void backward_args(const Tensor& g, const Tensor& dmag, const Tensor& dy, const Tensor& v, const Tensor& scale,
                          const Tensor& den) {
  const int64_t N = dy.rows(), out = dy.cols();
  mat(dy, N, out, "dora_backward dy");
  mat(v, N, out, "dora_backward v");
  mat(g, N, out, "dora_backward g");
  vec(dmag, out, "dora_backward dmag");
  vec(scale, out, "dora_backward scale");
  vec(den, out, "dora_backward den");
}

}  // namespace st::dora_args
