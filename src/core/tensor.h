// Tensor: a non-owning, contiguous, row-major view (pointer + dtype + shape). Who owns the
// bytes (an arena, a pool slot, an mmap'd file) is the caller's business; views are cheap
// to copy and never free anything. `data` may be a device pointer: only backends deref it.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/check.h"
#include "core/dtype.h"

namespace st {

constexpr int kMaxDims = 4;

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};  // shape[0] is the slowest dimension

  Tensor() = default;
  Tensor(void* d, DType t, std::initializer_list<int64_t> dims) : data(d), dtype(t) {
    CHECK(dims.size() <= static_cast<size_t>(kMaxDims));
    for (int64_t v : dims) shape[ndim++] = v;
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return ndim == 0 ? 0 : n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool empty() const { return data == nullptr; }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  // Rows/cols of the 2-D view [prod(shape[:-1]), shape[-1]].
  int64_t cols() const { return ndim == 0 ? 0 : shape[ndim - 1]; }
  int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }
  // Same bytes, new shape (numel must match).
  Tensor reshape(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dtype, dims);
    CHECK(t.numel() == numel(), "reshape " << shape_str() << " -> " << t.shape_str());
    return t;
  }
  // Rows [r0, r0+n) of the 2-D view, as a 2-D tensor.
  Tensor row_slice(int64_t r0, int64_t n) const {
    CHECK(r0 >= 0 && r0 + n <= rows());
    return Tensor(static_cast<char*>(data) + r0 * cols() * static_cast<int64_t>(dtype_size(dtype)), dtype,
                  {n, cols()});
  }
  std::string shape_str() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) {
      if (i) s.append(",");
      s.append(std::to_string(shape[i]));
    }
    s.append("]");
    return s;
  }
};

}  // namespace st
