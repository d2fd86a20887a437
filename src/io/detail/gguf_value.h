// Internal: decoding of fixed-width GGUF metadata scalars, shared by the parser and the getters.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/status.h"
#include "io/gguf.h"

namespace st::detail {

// Size of a fixed-width value type; 0 for string, array and unknown ids.
inline uint64_t gguf_scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kBool: return 1;
    case GgufValueType::kU16: case GgufValueType::kI16: return 2;
    case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kF32: return 4;
    case GgufValueType::kU64: case GgufValueType::kI64: case GgufValueType::kF64: return 8;
    default: return 0;
  }
}

template <typename T>
T gguf_load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Decodes one scalar of type t at p (gguf_scalar_size(t) readable bytes) into v.
inline Status gguf_decode_scalar(GgufValueType t, const uint8_t* p, GgufValue* v) {
  v->type = t;
  switch (t) {
    case GgufValueType::kU8: v->u = p[0]; break;
    case GgufValueType::kI8: v->i = gguf_load<int8_t>(p); break;
    case GgufValueType::kU16: v->u = gguf_load<uint16_t>(p); break;
    case GgufValueType::kI16: v->i = gguf_load<int16_t>(p); break;
    case GgufValueType::kU32: v->u = gguf_load<uint32_t>(p); break;
    case GgufValueType::kI32: v->i = gguf_load<int32_t>(p); break;
    case GgufValueType::kU64: v->u = gguf_load<uint64_t>(p); break;
    case GgufValueType::kI64: v->i = gguf_load<int64_t>(p); break;
    case GgufValueType::kF32: v->f = gguf_load<float>(p); break;
    case GgufValueType::kF64: v->f = gguf_load<double>(p); break;
    case GgufValueType::kBool:
      if (p[0] > 1) return Corruption(Str() << "bool value " << int{p[0]} << " (must be 0 or 1)");
      v->u = p[0];
      break;
    default: return Corruption("not a scalar type");
  }
  return Status::OK();
}

}  // namespace st::detail
