// GGUF reader. See gguf.h for the list of checks; formats.md §4 for the format.
#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "io/detail/gguf_value.h"

namespace st {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxLength = uint64_t{1} << 30;  // strings and array counts (as ggml)
constexpr uint64_t kMaxNameLen = 63;               // GGML_MAX_NAME - 1
constexpr uint64_t kMaxKeyLen = 65535;
constexpr uint32_t kMaxDims = 4;
// Smallest encodings, used to bound counts by the bytes left before allocating anything.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;                  // key len, 1-byte key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, ne[0], type, offset

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kF64); }

}  // namespace

// Bounds-checked reader over the mapping; every read names what it was reading on failure.
class GgufParser {
 public:
  GgufParser(GgufFile* f) : f_(f), p_(f->file_.data()), size_(f->file_.size()) {}

  Status parse() {
    RETURN_IF_ERROR(parse_header());
    for (uint64_t i = 0; i < n_kv_; ++i) RETURN_IF_ERROR(parse_kv(i));
    RETURN_IF_ERROR(read_alignment());
    f_->tensors_.reserve(n_tensors_);
    for (uint64_t i = 0; i < n_tensors_; ++i) RETURN_IF_ERROR(parse_tensor_info(i));
    return check_data_section();
  }

 private:
  uint64_t left() const { return size_ - pos_; }

  Status need(uint64_t n, const std::string& what) {
    if (n > left()) {
      return Corruption(Str() << what << ": needs " << n << " bytes at offset " << pos_ << ", only " << left()
                              << " left in the file");
    }
    return Status::OK();
  }
  template <typename T>
  Status read(T* v, const std::string& what) {
    RETURN_IF_ERROR(need(sizeof(T), what));
    *v = detail::gguf_load<T>(p_ + pos_);
    pos_ += sizeof(T);
    return Status::OK();
  }
  Status read_string(std::string_view* s, const std::string& what) {
    uint64_t len = 0;
    RETURN_IF_ERROR(read(&len, what + " (string length)"));
    if (len > kMaxLength) return Corruption(Str() << what << ": string length " << len << " exceeds 2^30");
    RETURN_IF_ERROR(need(len, what + " (string bytes)"));
    *s = std::string_view(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return Status::OK();
  }

  Status parse_header() {
    uint32_t magic = 0;
    RETURN_IF_ERROR(read(&magic, "header"));
    if (magic != kGgufMagic) return Corruption(Str() << "bad magic 0x" << std::hex << magic << " (not a GGUF file)");
    uint32_t version = 0;
    RETURN_IF_ERROR(read(&version, "header"));
    if ((version & 0xFFFF) == 0 && version != 0) {
      return Unimplemented(Str() << "version 0x" << std::hex << version << " looks byte-swapped (big-endian GGUF)");
    }
    if (version != 2 && version != 3) return Unimplemented(Str() << "GGUF version " << version << " (need 2 or 3)");
    f_->version_ = version;
    RETURN_IF_ERROR(read(&n_tensors_, "header"));
    RETURN_IF_ERROR(read(&n_kv_, "header"));
    if (n_kv_ > left() / kMinKvBytes) {
      return Corruption(Str() << "kv_count " << n_kv_ << " cannot fit in the " << left() << " bytes left");
    }
    if (n_tensors_ > left() / kMinTensorInfoBytes) {
      return Corruption(Str() << "tensor_count " << n_tensors_ << " cannot fit in the " << left() << " bytes left");
    }
    return Status::OK();
  }

  Status parse_kv(uint64_t index) {
    std::string_view key;
    RETURN_IF_ERROR(read_string(&key, Str() << "key #" << index));
    if (key.empty()) return Corruption(Str() << "key #" << index << " is empty");
    if (key.size() > kMaxKeyLen) return Corruption(Str() << "key #" << index << " longer than 65535 bytes");
    std::string k(key);
    if (f_->kv_.count(k)) return Corruption(Str() << "duplicate key '" << k << "'");
    uint32_t type = 0;
    RETURN_IF_ERROR(read(&type, Str() << "key '" << k << "' type"));
    if (!valid_value_type(type)) return Corruption(Str() << "key '" << k << "': unknown value type " << type);
    GgufValue v;
    RETURN_IF_ERROR(parse_value(static_cast<GgufValueType>(type), &v), "key '" << k << "'");
    f_->kv_.emplace(k, std::move(v));
    f_->key_order_.push_back(std::move(k));
    return Status::OK();
  }

  Status parse_value(GgufValueType t, GgufValue* v) {
    if (t == GgufValueType::kString) {
      v->type = t;
      return read_string(&v->str, "value");
    }
    if (t == GgufValueType::kArray) return parse_array(v);
    uint64_t n = detail::gguf_scalar_size(t);
    RETURN_IF_ERROR(need(n, "value"));
    RETURN_IF_ERROR(detail::gguf_decode_scalar(t, p_ + pos_, v));
    pos_ += n;
    return Status::OK();
  }

  Status parse_array(GgufValue* v) {
    v->type = GgufValueType::kArray;
    uint32_t et = 0;
    RETURN_IF_ERROR(read(&et, "array element type"));
    if (!valid_value_type(et)) return Corruption(Str() << "array: unknown element type " << et);
    v->elem_type = static_cast<GgufValueType>(et);
    if (v->elem_type == GgufValueType::kArray) return Corruption("nested arrays are not supported");
    RETURN_IF_ERROR(read(&v->count, "array count"));
    if (v->count > kMaxLength) return Corruption(Str() << "array count " << v->count << " exceeds 2^30");
    if (v->elem_type == GgufValueType::kString) {
      if (v->count > left() / 8) return Corruption(Str() << "array of " << v->count << " strings exceeds the file");
      v->strings.resize(v->count);
      for (uint64_t i = 0; i < v->count; ++i) RETURN_IF_ERROR(read_string(&v->strings[i], Str() << "element " << i));
      return Status::OK();
    }
    uint64_t es = detail::gguf_scalar_size(v->elem_type);
    if (v->count > left() / es) return Corruption(Str() << "array of " << v->count << " elements exceeds the file");
    v->raw = p_ + pos_;
    if (v->elem_type == GgufValueType::kBool) {
      for (uint64_t i = 0; i < v->count; ++i) {
        if (v->raw[i] > 1) return Corruption(Str() << "element " << i << ": bool value " << int{v->raw[i]});
      }
    }
    pos_ += v->count * es;
    return Status::OK();
  }

  Status read_alignment() {
    const GgufValue* a = f_->find("general.alignment");
    if (a == nullptr) return Status::OK();
    if (a->type != GgufValueType::kU32) return Corruption("key 'general.alignment' must be a u32");
    if (a->u == 0 || (a->u & (a->u - 1)) != 0) {
      return Corruption(Str() << "key 'general.alignment' = " << a->u << " is not a power of two");
    }
    f_->alignment_ = a->u;
    return Status::OK();
  }

  Status parse_tensor_info(uint64_t index) {
    std::string_view name;
    RETURN_IF_ERROR(read_string(&name, Str() << "tensor #" << index << " name"));
    if (name.empty() || name.size() > kMaxNameLen) {
      return Corruption(Str() << "tensor #" << index << ": name length " << name.size() << " not in 1..63");
    }
    GgufTensorInfo t;
    t.name = std::string(name);
    if (f_->tensor_index_.count(t.name)) return Corruption(Str() << "duplicate tensor '" << t.name << "'");
    RETURN_IF_ERROR(parse_tensor_fields(&t), "tensor '" << t.name << "'");
    f_->tensor_index_.emplace(t.name, f_->tensors_.size());
    f_->tensors_.push_back(std::move(t));
    return Status::OK();
  }

  Status parse_tensor_fields(GgufTensorInfo* t) {
    uint32_t n_dims = 0;
    RETURN_IF_ERROR(read(&n_dims, "n_dims"));
    if (n_dims < 1 || n_dims > kMaxDims) return Corruption(Str() << "n_dims " << n_dims << " not in 1..4");
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      RETURN_IF_ERROR(read(&ne, "ne"));
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Corruption(Str() << "ne[" << d << "] = " << ne << " (must be > 0)");
      }
      if (__builtin_mul_overflow(numel, static_cast<int64_t>(ne), &numel)) {
        return Corruption("element count overflows int64");
      }
      t->ne.push_back(static_cast<int64_t>(ne));
    }
    uint32_t type = 0;
    RETURN_IF_ERROR(read(&type, "type"));
    const GgmlTypeTraits* tr = ggml_type_traits(type);
    if (tr == nullptr) return Unimplemented(Str() << "ggml type id " << type << " is not supported");
    t->type = tr->type;
    if (t->ne[0] % tr->block_elems != 0) {
      return Corruption(Str() << "ne[0] = " << t->ne[0] << " is not a multiple of the " << tr->name << " block size "
                              << tr->block_elems);
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel / tr->block_elems), static_cast<uint64_t>(tr->block_bytes),
                               &nbytes)) {
      return Corruption("byte size overflows");
    }
    t->nbytes = nbytes;
    RETURN_IF_ERROR(read(&t->offset, "offset"));
    if (t->offset % f_->alignment_ != 0) {
      return Corruption(Str() << "offset " << t->offset << " is not a multiple of the alignment " << f_->alignment_);
    }
    return Status::OK();
  }

  Status check_data_section() {
    uint64_t a = f_->alignment_;
    uint64_t start = pos_ + (a - pos_ % a) % a;
    if (start > size_) {
      if (!f_->tensors_.empty()) return Corruption(Str() << "data section starts at " << start << ", past the end");
      start = size_;
    }
    f_->data_start_ = start;
    uint64_t data_size = size_ - start;
    std::vector<const GgufTensorInfo*> by_offset;
    for (const GgufTensorInfo& t : f_->tensors_) {
      uint64_t end = 0;
      if (__builtin_add_overflow(t.offset, t.nbytes, &end) || end > data_size) {
        return Corruption(Str() << "tensor '" << t.name << "': bytes [" << t.offset << ", +" << t.nbytes
                                << ") exceed the data section (" << data_size << " bytes)");
      }
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensorInfo* x, const GgufTensorInfo* y) { return x->offset < y->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensorInfo* prev = by_offset[i - 1];
      if (prev->offset + prev->nbytes > by_offset[i]->offset) {
        return Corruption(Str() << "tensors '" << prev->name << "' and '" << by_offset[i]->name << "' overlap");
      }
    }
    return Status::OK();
  }

  GgufFile* f_;
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

const char* gguf_value_type_name(GgufValueType t) {
  static const char* const kNames[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kU16: case GgufValueType::kI16:
    case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kU64: case GgufValueType::kI64:
      return true;
    default: return false;
  }
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // overflow excluded at open
  return n;
}

StatusOr<GgufFile> GgufFile::open(const std::string& path) {
  GgufFile f;
  ASSIGN_OR_RETURN(f.file_, MappedFile::open(path));
  GgufParser parser(&f);
  RETURN_IF_ERROR(parser.parse(), "gguf " << path);
  return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace st
