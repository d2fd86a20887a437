// ggml type table and block dequantisers (formats.md §4.4, §4.5).
#include "io/gguf_dequant.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace st {
namespace {

constexpr GgmlTypeTraits kTypes[] = {
    {GgmlType::kF32, "F32", 1, 4, true},       {GgmlType::kF16, "F16", 1, 2, true},
    {GgmlType::kQ4_0, "Q4_0", 32, 18, true},   {GgmlType::kQ4_1, "Q4_1", 32, 20, true},
    {GgmlType::kQ5_0, "Q5_0", 32, 22, false},  {GgmlType::kQ5_1, "Q5_1", 32, 24, false},
    {GgmlType::kQ8_0, "Q8_0", 32, 34, true},   {GgmlType::kQ8_1, "Q8_1", 32, 36, false},
    {GgmlType::kQ2_K, "Q2_K", 256, 84, false}, {GgmlType::kQ3_K, "Q3_K", 256, 110, false},
    {GgmlType::kQ4_K, "Q4_K", 256, 144, true}, {GgmlType::kQ5_K, "Q5_K", 256, 176, false},
    {GgmlType::kQ6_K, "Q6_K", 256, 210, true}, {GgmlType::kQ8_K, "Q8_K", 256, 292, false},
    {GgmlType::kI8, "I8", 1, 1, false},        {GgmlType::kI16, "I16", 1, 2, false},
    {GgmlType::kI32, "I32", 1, 4, false},      {GgmlType::kI64, "I64", 1, 8, false},
    {GgmlType::kF64, "F64", 1, 8, false},      {GgmlType::kBF16, "BF16", 1, 2, true},
};

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q8_0: { half d; int8 qs[32]; }
void dequant_q8_0(const uint8_t* b, float* y) {
  float d = half(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int k = 0; k < 32; ++k) y[k] = static_cast<float>(qs[k]) * d;
}

// Q4_0: { half d; u8 qs[16]; } low nibble -> element j, high nibble -> element j+16.
void dequant_q4_0(const uint8_t* b, float* y) {
  float d = half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: { half d; half m; u8 qs[16]; } same nibble order as Q4_0, y = q*d + m.
void dequant_q4_1(const uint8_t* b, float* y) {
  float d = half(b);
  float m = half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// 6-bit scale and min of Q4_K sub-block j from the 12 packed bytes q.
void q4k_scale_min(int j, const uint8_t* q, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: { half d; half dmin; u8 scales[12]; u8 qs[128]; } 8 sub-blocks of 32.
void dequant_q4_k(const uint8_t* b, float* y) {
  float d = half(b);
  float dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c) {  // 64 elements per chunk: low nibbles, then high nibbles
    int sc0, mn0, sc1, mn1;
    q4k_scale_min(2 * c, scales, &sc0, &mn0);
    q4k_scale_min(2 * c + 1, scales, &sc1, &mn1);
    float d0 = d * static_cast<float>(sc0), m0 = dmin * static_cast<float>(mn0);
    float d1 = d * static_cast<float>(sc1), m1 = dmin * static_cast<float>(mn1);
    const uint8_t* q = qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      y[64 * c + l] = d0 * static_cast<float>(q[l] & 0x0F) - m0;
      y[64 * c + 32 + l] = d1 * static_cast<float>(q[l] >> 4) - m1;
    }
  }
}

// Q6_K: { u8 ql[128]; u8 qh[64]; int8 scales[16]; half d; } 16 sub-blocks of 16, d last.
void dequant_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql_all = b;
  const uint8_t* qh_all = b + 128;
  const auto* sc_all = reinterpret_cast<const int8_t*>(b + 192);
  float d = half(b + 208);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = ql_all + 64 * h;
    const uint8_t* qh = qh_all + 32 * h;
    const int8_t* s = sc_all + 8 * h;
    float* out = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      int is = l / 16;
      int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * static_cast<float>(s[is + 0]) * static_cast<float>(q0);
      out[l + 32] = d * static_cast<float>(s[is + 2]) * static_cast<float>(q1);
      out[l + 64] = d * static_cast<float>(s[is + 4]) * static_cast<float>(q2);
      out[l + 96] = d * static_cast<float>(s[is + 6]) * static_cast<float>(q3);
    }
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(GgmlType t) {
  switch (t) {
    case GgmlType::kQ8_0: return dequant_q8_0;
    case GgmlType::kQ4_0: return dequant_q4_0;
    case GgmlType::kQ4_1: return dequant_q4_1;
    case GgmlType::kQ4_K: return dequant_q4_k;
    case GgmlType::kQ6_K: return dequant_q6_k;
    default: return nullptr;
  }
}

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t id) {
  for (const GgmlTypeTraits& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == id) return &t;
  }
  return nullptr;
}

const GgmlTypeTraits& ggml_traits(GgmlType t) {
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
  CHECK(tr != nullptr, "ggml type id " << static_cast<uint32_t>(t) << " not on the allowlist");
  return *tr;
}

uint64_t ggml_nbytes(GgmlType t, int64_t n) {
  const GgmlTypeTraits& tr = ggml_traits(t);
  CHECK(n >= 0 && n % tr.block_elems == 0, n << " elements of " << tr.name);
  return static_cast<uint64_t>(n / tr.block_elems) * static_cast<uint64_t>(tr.block_bytes);
}

Status dequantize_to_f32(GgmlType t, const void* src, int64_t n, float* dst) {
  const GgmlTypeTraits& tr = ggml_traits(t);
  if (!tr.dequantizable) return Unimplemented(Str() << "dequantisation of ggml type " << tr.name);
  CHECK(n >= 0 && n % tr.block_elems == 0, n << " elements of " << tr.name);
  const auto* s = static_cast<const uint8_t*>(src);
  switch (t) {
    case GgmlType::kF32: std::memcpy(dst, s, static_cast<size_t>(n) * 4); return Status::OK();
    case GgmlType::kF16: convert_elements(dst, DType::kF32, s, DType::kF16, static_cast<size_t>(n)); return Status::OK();
    case GgmlType::kBF16: convert_elements(dst, DType::kF32, s, DType::kBF16, static_cast<size_t>(n)); return Status::OK();
    default: break;
  }
  BlockFn fn = block_fn(t);
  for (int64_t b = 0; b < n / tr.block_elems; ++b) fn(s + b * tr.block_bytes, dst + b * tr.block_elems);
  return Status::OK();
}

Status dequantize_to(GgmlType t, const void* src, int64_t n, DType dst_dtype, void* dst) {
  if (dst_dtype != DType::kF32 && dst_dtype != DType::kBF16 && dst_dtype != DType::kF16) {
    return InvalidArgument(Str() << "dequantise to " << dtype_name(dst_dtype) << ": need a float dtype");
  }
  if (dst_dtype == DType::kF32) return dequantize_to_f32(t, src, n, static_cast<float*>(dst));
  const GgmlTypeTraits& tr = ggml_traits(t);
  if (!tr.dequantizable) return Unimplemented(Str() << "dequantisation of ggml type " << tr.name);
  // Chunks of whole blocks keep the f32 scratch small (and in cache).
  const int64_t chunk = std::max<int64_t>(tr.block_elems, 4096 / tr.block_elems * tr.block_elems);
  std::vector<float> tmp(static_cast<size_t>(std::min(chunk, n)));
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const size_t out_es = dtype_size(dst_dtype);
  for (int64_t i = 0; i < n; i += chunk) {
    int64_t m = std::min(chunk, n - i);
    RETURN_IF_ERROR(dequantize_to_f32(t, s + ggml_nbytes(t, i), m, tmp.data()));
    convert_elements(d + static_cast<size_t>(i) * out_es, dst_dtype, tmp.data(), DType::kF32, static_cast<size_t>(m));
  }
  return Status::OK();
}

}  // namespace st
