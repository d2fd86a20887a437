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
    {GgmlType::kQ5_0, "Q5_0", 32, 22, true},   {GgmlType::kQ5_1, "Q5_1", 32, 24, true},
    {GgmlType::kQ8_0, "Q8_0", 32, 34, true},   {GgmlType::kQ8_1, "Q8_1", 32, 36, false},
    {GgmlType::kQ2_K, "Q2_K", 256, 84, true},  {GgmlType::kQ3_K, "Q3_K", 256, 110, true},
    {GgmlType::kQ4_K, "Q4_K", 256, 144, true}, {GgmlType::kQ5_K, "Q5_K", 256, 176, true},
    {GgmlType::kQ6_K, "Q6_K", 256, 210, true}, {GgmlType::kQ8_K, "Q8_K", 256, 292, false},
    {GgmlType::kIQ4_NL, "IQ4_NL", 32, 18, true}, {GgmlType::kIQ4_XS, "IQ4_XS", 256, 136, true},
    {GgmlType::kI8, "I8", 1, 1, false},        {GgmlType::kI16, "I16", 1, 2, false},
    {GgmlType::kI32, "I32", 1, 4, false},      {GgmlType::kI64, "I64", 1, 8, false},
    {GgmlType::kF64, "F64", 1, 8, false},      {GgmlType::kBF16, "BF16", 1, 2, true},
};
// Q8_1 and Q8_K are ggml's intermediate types for dot products; no model file stores them.

// Block bytes of t in the table above; each dequantiser static_asserts that its layout (the
// sum of its fields) fills exactly this many bytes, so a table typo cannot make it read past
// a block.
constexpr int64_t table_block_bytes(GgmlType t) {
  for (const GgmlTypeTraits& tr : kTypes) {
    if (tr.type == t) return tr.block_bytes;
  }
  return -1;
}

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q8_0: { half d; int8 qs[32]; }
static_assert(table_block_bytes(GgmlType::kQ8_0) == 2 + 32);
void dequant_q8_0(const uint8_t* b, float* y) {
  float d = half(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int k = 0; k < 32; ++k) y[k] = static_cast<float>(qs[k]) * d;
}

// Q4_0: { half d; u8 qs[16]; } low nibble -> element j, high nibble -> element j+16.
static_assert(table_block_bytes(GgmlType::kQ4_0) == 2 + 16);
void dequant_q4_0(const uint8_t* b, float* y) {
  float d = half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: { half d; half m; u8 qs[16]; } same nibble order as Q4_0, y = q*d + m.
static_assert(table_block_bytes(GgmlType::kQ4_1) == 2 + 2 + 16);
void dequant_q4_1(const uint8_t* b, float* y) {
  float d = half(b);
  float m = half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Bit i of a little-endian bit string (bit 0 = lowest bit of byte 0). Q5_0/Q5_1 store qh as a
// little-endian u32; reading it byte by byte keeps the result independent of host endianness.
int le_bit(const uint8_t* bits, int i) { return (bits[i >> 3] >> (i & 7)) & 1; }

// 5-bit quant of element j (0..31) of a Q5_0/Q5_1 block: the low 4 bits in Q4_0's nibble order
// (low nibble of qs[j] for j < 16, high nibble of qs[j - 16] after), bit 4 = bit j of qh.
int q5_quant(const uint8_t* qh, const uint8_t* qs, int j) {
  int nibble = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return nibble | (le_bit(qh, j) << 4);
}

// Q5_0: { half d; u8 qh[4]; u8 qs[16]; } y = (q - 16) * d.
static_assert(table_block_bytes(GgmlType::kQ5_0) == 2 + 4 + 16);
void dequant_q5_0(const uint8_t* b, float* y) {
  float d = half(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q5_quant(b + 2, b + 6, j) - 16) * d;
}

// Q5_1: { half d; half m; u8 qh[4]; u8 qs[16]; } y = q * d + m.
static_assert(table_block_bytes(GgmlType::kQ5_1) == 2 + 2 + 4 + 16);
void dequant_q5_1(const uint8_t* b, float* y) {
  float d = half(b);
  float m = half(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q5_quant(b + 4, b + 8, j)) * d + m;
}

// Note [K-quant 2-bit planes]: Q2_K and Q3_K keep 2 bits of each of 256 elements in qs[64] as
// two halves of 128 elements; in half h, element 128h + 32p + l (plane p = 0..3, l = 0..31) is
// bits 2p..2p+1 of qs[32h + l]. Equivalently, element e lives in qs[32*(e/128) + e%32] at shift
// 2*((e%128)/32).
int k_plane_2bit(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

// Q2_K: { u8 scales[16]; u8 qs[64]; half d; half dmin; } 16 sub-blocks of 16 elements; scales[s]
// holds sub-block s's scale (low nibble) and min (high nibble). y = d*scale * q - dmin*min,
// q from Note [K-quant 2-bit planes].
static_assert(table_block_bytes(GgmlType::kQ2_K) == 16 + 64 + 2 + 2);
void dequant_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  float d = half(b + 80);
  float dmin = half(b + 82);
  for (int s = 0; s < 16; ++s) {
    float dl = d * static_cast<float>(scales[s] & 0x0F);  // ggml's operation order
    float ml = dmin * static_cast<float>(scales[s] >> 4);
    for (int e = 16 * s; e < 16 * s + 16; ++e) y[e] = dl * static_cast<float>(k_plane_2bit(qs, e)) - ml;
  }
}

// Signed 6-bit scale of Q3_K sub-block s (0..15) from its 12 packed bytes: the low 4 bits are
// the low (s < 8) or high (s >= 8) nibble of byte s % 8; the top 2 bits are bits 2*(s/4)..+1 of
// byte 8 + s % 4. The 6-bit value is biased by 32.
int q3k_scale(const uint8_t* sc, int s) {
  int lo = (sc[s % 8] >> (4 * (s / 8))) & 0x0F;
  int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// Q3_K: { u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d; } 16 sub-blocks of 16 elements.
// Element e: 2 low bits from Note [K-quant 2-bit planes]; its "high" bit is bit e/32 of
// hmask[e%32], and (as in ggml) a CLEAR bit subtracts 4: q in -4..3. y = d*scale * q.
static_assert(table_block_bytes(GgmlType::kQ3_K) == 32 + 64 + 12 + 2);
void dequant_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* scales = b + 96;
  float d = half(b + 108);
  for (int s = 0; s < 16; ++s) {
    float dl = d * static_cast<float>(q3k_scale(scales, s));
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      int high = (hmask[e % 32] >> (e / 32)) & 1;
      y[e] = dl * static_cast<float>(k_plane_2bit(qs, e) - (high ? 0 : 4));
    }
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
static_assert(table_block_bytes(GgmlType::kQ4_K) == 2 + 2 + 12 + 128);
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

// Q5_K: { half d; half dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]; } 8 sub-blocks of 32 with
// Q4_K's scale/min packing and nibble order: element 32s + l has low 4 bits = nibble s % 2 of
// qs[32*(s/2) + l] and bit 4 = bit s of qh[l]. y = d*sc * q - dmin*min.
static_assert(table_block_bytes(GgmlType::kQ5_K) == 2 + 2 + 12 + 32 + 128);
void dequant_q5_k(const uint8_t* b, float* y) {
  float d = half(b);
  float dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int s = 0; s < 8; ++s) {
    int sc, mn;
    q4k_scale_min(s, scales, &sc, &mn);
    float ds = d * static_cast<float>(sc), ms = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + 32 * (s / 2);
    for (int l = 0; l < 32; ++l) {
      int v = ((q[l] >> (4 * (s % 2))) & 0x0F) | (((qh[l] >> s) & 1) << 4);
      y[32 * s + l] = ds * static_cast<float>(v) - ms;
    }
  }
}

// Q6_K: { u8 ql[128]; u8 qh[64]; int8 scales[16]; half d; } 16 sub-blocks of 16, d last.
static_assert(table_block_bytes(GgmlType::kQ6_K) == 128 + 64 + 16 + 2);
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

// The 16 levels a 4-bit IQ4_NL / IQ4_XS index selects (ggml's kvalues_iq4nl, a non-uniform
// grid denser near zero).
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// 16 bytes of IQ4 indices -> 32 elements, Q4_0's nibble order, y = scale * level.
void iq4_32(const uint8_t* qs, float scale, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = scale * static_cast<float>(kIq4Levels[qs[j] & 0x0F]);
    y[j + 16] = scale * static_cast<float>(kIq4Levels[qs[j] >> 4]);
  }
}

// IQ4_NL: { half d; u8 qs[16]; } y = d * level[index].
static_assert(table_block_bytes(GgmlType::kIQ4_NL) == 2 + 16);
void dequant_iq4_nl(const uint8_t* b, float* y) { iq4_32(b + 2, half(b), y); }

// IQ4_XS: { half d; u16 scales_h; u8 scales_l[4]; u8 qs[128]; } 8 sub-blocks of 32. Sub-block
// s has a 6-bit scale biased by 32: low 4 bits = nibble s % 2 of scales_l[s/2], top 2 bits =
// bits 2s..2s+1 of scales_h (little-endian); its indices are qs[16s..16s+16) as in IQ4_NL.
static_assert(table_block_bytes(GgmlType::kIQ4_XS) == 2 + 2 + 4 + 128);
void dequant_iq4_xs(const uint8_t* b, float* y) {
  float d = half(b);
  unsigned scales_h = b[2] | (unsigned{b[3]} << 8);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int s = 0; s < 8; ++s) {
    int ls = ((scales_l[s / 2] >> (4 * (s % 2))) & 0x0F) | (((scales_h >> (2 * s)) & 3) << 4);
    iq4_32(qs + 16 * s, d * static_cast<float>(ls - 32), y + 32 * s);
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(GgmlType t) {
  switch (t) {
    case GgmlType::kQ8_0: return dequant_q8_0;
    case GgmlType::kQ4_0: return dequant_q4_0;
    case GgmlType::kQ4_1: return dequant_q4_1;
    case GgmlType::kQ5_0: return dequant_q5_0;
    case GgmlType::kQ5_1: return dequant_q5_1;
    case GgmlType::kQ2_K: return dequant_q2_k;
    case GgmlType::kQ3_K: return dequant_q3_k;
    case GgmlType::kQ4_K: return dequant_q4_k;
    case GgmlType::kQ5_K: return dequant_q5_k;
    case GgmlType::kQ6_K: return dequant_q6_k;
    case GgmlType::kIQ4_NL: return dequant_iq4_nl;
    case GgmlType::kIQ4_XS: return dequant_iq4_xs;
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
  CHECK(fn != nullptr, tr.name << " is marked dequantizable in the table but has no block function");
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
