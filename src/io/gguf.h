// GGUF (v2/v3, little-endian) reader: mmap, validated as hostile input (formats.md §4).
//
// open() checks, before anything is used: magic; version 2 or 3 (byte-swapped files rejected);
// tensor and kv counts against the bytes left in the file; every string and array length
// against the bytes left (and a 2^30 cap); value and element type ids; no nested arrays; bools
// are 0/1; no empty or duplicate keys; general.alignment a u32 power of two (default 32);
// tensor names 1..63 bytes and unique; 1..4 dims, each > 0, product without int64 overflow;
// type ids on the allowlist (gguf_types.h); ne[0] a multiple of the block size; offsets aligned,
// inside the data section, and tensors pairwise non-overlapping. Every error is Corruption (or
// Unimplemented for an unsupported type) naming the file and the key or tensor.
//
// Strings and arrays are not copied at open: values are views into the mapping, decoded by the
// typed getters. A GgufFile is move-only; views and pointers it hands out stay valid while it
// (or the object it was moved into) lives. Const methods are safe to call from several threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/file.h"
#include "core/status.h"
#include "io/gguf_types.h"

namespace st {

enum class GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

// One metadata value. Scalars are decoded; strings are views into the mapping; arrays keep
// their element type, count and raw payload (plus string views for string arrays).
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  uint64_t u = 0;          // unsigned integer types and bool
  int64_t i = 0;           // signed integer types
  double f = 0;            // kF32 / kF64
  std::string_view str;    // kString
  // kArray only:
  GgufValueType elem_type = GgufValueType::kU8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;           // numeric payload, count * element size bytes
  std::vector<std::string_view> strings;  // string elements

  bool is_integer() const;  // any of the 8 integer types (not bool)
  bool is_float() const { return type == GgufValueType::kF32 || type == GgufValueType::kF64; }
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous (fastest) dimension
  uint64_t offset = 0;      // from the start of the data section
  uint64_t nbytes = 0;
  int64_t numel() const;
  int64_t row_elems() const { return ne[0]; }
  int64_t num_rows() const { return numel() / ne[0]; }
  uint64_t row_bytes() const { return nbytes / static_cast<uint64_t>(num_rows()); }
  // PyTorch / HF order: ne reversed ([out, in] for a Linear weight).
  std::vector<int64_t> hf_shape() const { return {ne.rbegin(), ne.rend()}; }
};

class GgufFile {
 public:
  static StatusOr<GgufFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_start() const { return data_start_; }  // absolute file offset of the data section

  // Metadata, in file order / by key.
  const std::vector<std::string>& keys() const { return key_order_; }
  const GgufValue* find(const std::string& key) const;  // nullptr if absent
  bool has(const std::string& key) const { return find(key) != nullptr; }

  // Typed getters. NotFound when the key is absent; InvalidArgument (naming the file, the key,
  // the wanted and the actual type) when it has another type or the value does not fit.
  StatusOr<std::string> get_string(const std::string& key) const;
  StatusOr<int64_t> get_int(const std::string& key) const;     // any integer type
  StatusOr<double> get_float(const std::string& key) const;    // f32/f64 (or an integer)
  StatusOr<bool> get_bool(const std::string& key) const;
  StatusOr<std::vector<std::string>> get_string_array(const std::string& key) const;
  StatusOr<std::vector<int64_t>> get_int_array(const std::string& key) const;
  StatusOr<std::vector<double>> get_float_array(const std::string& key) const;
  // As above, but `dflt` when the key is absent (still an error when present with a bad type).
  StatusOr<int64_t> get_int_or(const std::string& key, int64_t dflt) const;
  StatusOr<double> get_float_or(const std::string& key, double dflt) const;
  StatusOr<std::string> get_string_or(const std::string& key, const std::string& dflt) const;

  // Tensors in file (tensor-info) order / by GGUF name.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;  // nullptr if absent
  // The tensor's bytes inside the mapping (t.nbytes long; valid while this object lives).
  const uint8_t* data(const GgufTensorInfo& t) const { return file_.data() + data_start_ + t.offset; }

 private:
  friend class GgufParser;
  Status err_type(const std::string& key, const GgufValue& v, const char* want) const;

  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_start_ = 0;
  std::vector<std::string> key_order_;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace st
