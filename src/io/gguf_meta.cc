// GgufFile typed metadata getters: integers of any width convert to int64 (u64 beyond int64 is
// an error), floats accept f32/f64 and integers, arrays decode element by element.
#include <limits>

#include "io/detail/gguf_value.h"
#include "io/gguf.h"

namespace st {
namespace {

// The integer in v as int64, or false when v is not an integer or does not fit.
bool scalar_int(const GgufValue& v, int64_t* out) {
  if (!v.is_integer()) return false;
  switch (v.type) {
    case GgufValueType::kI8: case GgufValueType::kI16: case GgufValueType::kI32: case GgufValueType::kI64:
      *out = v.i;
      return true;
    default:
      if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      *out = static_cast<int64_t>(v.u);
      return true;
  }
}

bool scalar_float(const GgufValue& v, double* out) {
  if (v.is_float()) {
    *out = v.f;
    return true;
  }
  int64_t i = 0;
  if (!scalar_int(v, &i)) return false;
  *out = static_cast<double>(i);
  return true;
}

// Element i of a numeric array (bounds and type established at open).
GgufValue array_elem(const GgufValue& a, uint64_t i) {
  GgufValue e;
  uint64_t es = detail::gguf_scalar_size(a.elem_type);
  detail::gguf_decode_scalar(a.elem_type, a.raw + i * es, &e).ignore_error();  // bools checked at open
  return e;
}

}  // namespace

Status GgufFile::err_type(const std::string& key, const GgufValue& v, const char* want) const {
  Str s;
  s << "gguf " << path() << ": key '" << key << "': expected " << want << ", found " << gguf_value_type_name(v.type);
  if (v.type == GgufValueType::kArray) s << " of " << gguf_value_type_name(v.elem_type);
  return InvalidArgument(s);
}

#define ST_GGUF_FIND(v, key)                                                              \
  const GgufValue* v = find(key);                                                         \
  if (v == nullptr) return NotFound(Str() << "gguf " << path() << ": key '" << key << "' is missing")

StatusOr<std::string> GgufFile::get_string(const std::string& key) const {
  ST_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kString) return err_type(key, *v, "string");
  return std::string(v->str);
}

StatusOr<int64_t> GgufFile::get_int(const std::string& key) const {
  ST_GGUF_FIND(v, key);
  int64_t out = 0;
  if (!scalar_int(*v, &out)) return err_type(key, *v, "an integer (fitting int64)");
  return out;
}

StatusOr<double> GgufFile::get_float(const std::string& key) const {
  ST_GGUF_FIND(v, key);
  double out = 0;
  if (!scalar_float(*v, &out)) return err_type(key, *v, "a number");
  return out;
}

StatusOr<bool> GgufFile::get_bool(const std::string& key) const {
  ST_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kBool) return err_type(key, *v, "bool");
  return v->u != 0;
}

StatusOr<std::vector<std::string>> GgufFile::get_string_array(const std::string& key) const {
  ST_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kArray || v->elem_type != GgufValueType::kString) {
    return err_type(key, *v, "array of string");
  }
  return std::vector<std::string>(v->strings.begin(), v->strings.end());
}

StatusOr<std::vector<int64_t>> GgufFile::get_int_array(const std::string& key) const {
  ST_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kArray) return err_type(key, *v, "array of integers");
  std::vector<int64_t> out(v->count);
  for (uint64_t i = 0; i < v->count; ++i) {
    if (!scalar_int(array_elem(*v, i), &out[i])) return err_type(key, *v, "array of integers (fitting int64)");
  }
  return out;
}

StatusOr<std::vector<double>> GgufFile::get_float_array(const std::string& key) const {
  ST_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kArray) return err_type(key, *v, "array of numbers");
  std::vector<double> out(v->count);
  for (uint64_t i = 0; i < v->count; ++i) {
    if (!scalar_float(array_elem(*v, i), &out[i])) return err_type(key, *v, "array of numbers");
  }
  return out;
}

StatusOr<int64_t> GgufFile::get_int_or(const std::string& key, int64_t dflt) const {
  if (!has(key)) return dflt;
  return get_int(key);
}

StatusOr<double> GgufFile::get_float_or(const std::string& key, double dflt) const {
  if (!has(key)) return dflt;
  return get_float(key);
}

StatusOr<std::string> GgufFile::get_string_or(const std::string& key, const std::string& dflt) const {
  if (!has(key)) return dflt;
  return get_string(key);
}

#undef ST_GGUF_FIND

}  // namespace st
