// Internal to backend/cpu: the op implementations behind CpuBackend (cpu_backend.cc) and the
// element load/store helpers they share. Every function runs synchronously on the calling
// thread plus an OpenMP team; parallel loops only split independent rows/heads/keys and every
// reduction is done by one thread in a fixed order, so results do not depend on thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace st::cpu {

// ---- element access (storage dtype -> f32 math -> storage dtype, RNE on store) ----------------
inline float load_elem(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: CHECK(false, "cpu backend: not a float dtype: " << dtype_name(t));
  }
  return 0.0f;
}

inline void store_elem(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(p)[i] = v; return;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); return;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); return;
    default: CHECK(false, "cpu backend: not a float dtype: " << dtype_name(t));
  }
}

// Tensor::shape_str() builds with string operator+, which trips GCC 12's -Wrestrict false
// positive under -Werror when inlined here; this streams the same text instead.
inline std::string shape_of(const Tensor& t) {
  Str s;
  s << "[";
  for (int i = 0; i < t.ndim; ++i) s << (i ? "," : "") << t.shape[i];
  return s << "]";
}

inline bool is_float(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }
inline void check_float(const Tensor& t, const char* what) {
  CHECK(is_float(t.dtype), what << ": float tensor expected, got " << dtype_name(t.dtype));
  CHECK(t.data != nullptr || t.numel() == 0, what << ": null data");
}

// Elements [off, off+n) of t into dst (f32) / from src (f32).
inline void load_f32(const Tensor& t, int64_t off, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = load_elem(t.data, t.dtype, off + i);
}
inline void store_f32(const Tensor& t, int64_t off, int64_t n, const float* src) {
  for (int64_t i = 0; i < n; ++i) store_elem(t.data, t.dtype, off + i, src[i]);
}

// An f32 view of a whole tensor: the tensor itself when it is f32, else a converted copy.
class F32View {
 public:
  explicit F32View(const Tensor& t);
  const float* data() const { return ptr_; }

 private:
  std::vector<float> copy_;
  const float* ptr_ = nullptr;
};

// ---- ops (semantics: backend.h) ------------------------------------------------------------
void gemm(Tensor c, Tensor a, Tensor b, const GemmOpts& o);
// lora_ops.cc
void lora_down(Tensor t, Tensor x, Tensor a, float dropout_p, uint64_t seed);
void lora_up(Tensor y, Tensor t, Tensor b, float scale);
void lora_grad_b(Tensor db, Tensor dy, Tensor t, float scale);
void lora_dt(Tensor dt, Tensor dy, Tensor b, float scale);
void lora_grad_a(Tensor da, Tensor dt, Tensor x, float dropout_p, uint64_t seed);
void lora_dx(Tensor dx, Tensor dt, Tensor a, float dropout_p, uint64_t seed);
// dora_ops.cc
void dora_norm(Tensor norm, Tensor scale, Tensor w, Tensor a, Tensor b, Tensor mag, float s);
void dora_combine(Tensor y, Tensor scale, Tensor bias, Tensor residual);
void dora_backward(Tensor g, Tensor dmag, Tensor dy, Tensor v, Tensor scale, Tensor norm);
void add_bias(Tensor y, Tensor bias);
void add(Tensor y, Tensor a, Tensor b);
void scale(Tensor y, Tensor x, float s);
void convert(Tensor dst, Tensor src);
void embedding(Tensor out, Tensor table, const int32_t* ids);
void rmsnorm(Tensor y, Tensor rstd, Tensor x, Tensor w, float eps);
void rmsnorm_backward(Tensor dx, Tensor dy, Tensor x, Tensor w, Tensor rstd);
void rope(Tensor x, const int32_t* positions, Tensor inv_freq, bool inverse);
void attention(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, const SeqLayout& L, const AttnShape& s);
void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out,
                        Tensor lse, const SeqLayout& L, const AttnShape& s);
void attention_kv(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache, int64_t q_start, const AttnShape& s);
void dequant_nf4(Tensor w, Tensor codes, Tensor absmax);
void decode_code12(Tensor w, Tensor body, Tensor aux);
void swiglu(Tensor h, Tensor gate, Tensor up);
void swiglu_backward(Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up);
void cross_entropy(Tensor logits, Tensor loss_sum, const int32_t* labels, float grad_scale);
void ce_chunk(Tensor logits, Tensor acc, Tensor m, Tensor s, Tensor target, const int32_t* labels, int64_t col0);
void ce_finish(Tensor dx, Tensor loss_sum, Tensor acc, Tensor m, Tensor s, Tensor target, Tensor w_label,
               const int32_t* labels, float grad_scale, Tensor row_scale);
void dropout(Tensor y, Tensor x, float p, uint64_t seed);
void add_uniform_noise(Tensor x, float magnitude, uint64_t seed);
void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const Backend::AdamW& h);
void sum_squares(Tensor out, Tensor x);

}  // namespace st::cpu
