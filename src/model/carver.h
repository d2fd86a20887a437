// Carver: splits one arena into aligned tensor views by offsets. Run with base == nullptr it only
// measures, so the scratch-size functions and the code that uses the scratch share one carving
// routine and can never disagree (design.md §3: every byte is computed before allocating).
#pragma once

#include <cstddef>
#include <initializer_list>

#include "core/tensor.h"

namespace st {

class Carver {
 public:
  static constexpr size_t kAlign = 256;
  explicit Carver(void* base = nullptr, size_t capacity = 0) : base_(static_cast<char*>(base)), cap_(capacity) {}

  // Next view of `dims` elements of `dtype`, aligned to kAlign. Data is nullptr when measuring.
  Tensor take(DType dtype, std::initializer_list<int64_t> dims) {
    Tensor t(nullptr, dtype, dims);
    t.data = base_ ? base_ + off_ : nullptr;
    off_ += (t.bytes() + kAlign - 1) / kAlign * kAlign;
    CHECK(base_ == nullptr || off_ <= cap_, "arena overflow: need " << off_ << " bytes, have " << cap_);
    return t;
  }
  size_t used() const { return off_; }

 private:
  char* base_;
  size_t cap_;
  size_t off_ = 0;
};

}  // namespace st
