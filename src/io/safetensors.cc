#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "core/json.h"
#include "io/torch_zip.h"

namespace st {
namespace {

// Same cap as the reference reader (MAX_HEADER_SIZE): a hostile length cannot make us allocate.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kMaxRank = 8;
constexpr int64_t kMaxDim = (int64_t{1} << 48) - 1;  // the schema's 48-bit bound per dimension

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Parses the header JSON, rejecting duplicate top-level keys (nlohmann would keep the last one,
// so two readers could disagree about which bytes a name means).
StatusOr<Json> parse_header_json(std::string_view text, const std::string& path) {
  std::set<std::string> seen;
  std::string dup;
  Json::parser_callback_t cb = [&](int depth, Json::parse_event_t ev, Json& parsed) {
    if (ev == Json::parse_event_t::key && depth == 1) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second && dup.empty()) dup = k;
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(text.begin(), text.end(), cb);
  } catch (const Json::parse_error& e) {
    return Corruption(Str() << path << ": safetensors header is not valid JSON (byte " << e.byte << "): " << e.what());
  } catch (const std::exception& e) {
    return Corruption(Str() << path << ": safetensors header is not valid JSON: " << e.what());
  }
  if (!dup.empty()) return Corruption(Str() << path << ": duplicate key '" << dup << "' in safetensors header");
  if (!j.is_object()) return Corruption(Str() << path << ": safetensors header is not a JSON object");
  return j;
}

Status parse_metadata(const Json& m, const std::string& path, std::map<std::string, std::string>* out) {
  if (!m.is_object()) return Corruption(Str() << path << ": __metadata__ is not an object");
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!it->is_string())
      return Corruption(Str() << path << ": __metadata__ value for '" << it.key() << "' is not a string");
    (*out)[it.key()] = it->get<std::string>();
  }
  return Status::OK();
}

StatusOr<uint64_t> nonneg_int(const Json& v, const std::string& path, const std::string& name, const char* what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    if (x >= 0) return static_cast<uint64_t>(x);
  }
  return Corruption(Str() << path << ": tensor '" << name << "': " << what << " is not a non-negative integer");
}

// One tensor entry: dtype allowlist, rank, shape, offsets, and size consistency (overflow-checked).
StatusOr<TensorInfo> parse_entry(const std::string& name, const Json& e, uint64_t data_size, const std::string& path) {
  auto bad = [&](const std::string& why) { return Corruption(Str() << path << ": tensor '" << name << "': " << why); };
  if (name.empty()) return bad("empty tensor name");
  if (!e.is_object()) return bad("entry is not an object");
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) return bad("missing or non-string 'dtype'");
  TensorInfo t;
  t.name = name;
  auto dtype = dtype_from_safetensors(dt->get<std::string>());
  if (!dtype.ok()) return dtype.status().with_context(Str() << path << ": tensor '" << name << "'");
  t.dtype = *dtype;
  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) return bad("missing or non-array 'shape'");
  if (sh->size() > kMaxRank) return bad(Str() << "rank " << sh->size() << " exceeds " << kMaxRank);
  uint64_t numel = 1;
  bool overflow = false, has_zero = false;
  for (const Json& d : *sh) {
    ASSIGN_OR_RETURN(uint64_t dim, nonneg_int(d, path, name, "a shape dimension"));
    if (dim > static_cast<uint64_t>(kMaxDim)) return bad(Str() << "shape dimension " << dim << " is too large");
    t.shape.push_back(static_cast<int64_t>(dim));
    if (dim == 0) has_zero = true;
    if (dim != 0 && numel > UINT64_MAX / dim) overflow = true;
    numel *= dim;
  }
  // A zero dimension makes the product 0 whatever overflowed before it.
  if (has_zero) numel = 0;
  if (!has_zero && overflow) return bad("shape element count overflows");
  const uint64_t esize = dtype_size(t.dtype);
  if (numel > UINT64_MAX / esize) return bad("shape byte size overflows");
  const uint64_t nbytes = numel * esize;
  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2) return bad("'data_offsets' is not [begin, end]");
  ASSIGN_OR_RETURN(uint64_t begin, nonneg_int((*off)[0], path, name, "data_offsets[0]"));
  ASSIGN_OR_RETURN(uint64_t end, nonneg_int((*off)[1], path, name, "data_offsets[1]"));
  if (end < begin) return bad(Str() << "data_offsets [" << begin << ", " << end << "] run backwards");
  if (end > data_size)
    return bad(Str() << "data_offsets end " << end << " is past the data section (" << data_size << " bytes)");
  if (end - begin != nbytes)
    return bad(Str() << "data_offsets span " << (end - begin) << " bytes but dtype " << dtype_safetensors_name(t.dtype)
                     << " x shape needs " << nbytes);
  t.offset = begin;
  t.nbytes = nbytes;
  return t;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  ASSIGN_OR_RETURN(f.file_, MappedFile::open(path));
  const uint64_t size = f.file_.size();
  if (size < 8) return Corruption(Str() << path << ": file of " << size << " bytes is too small for safetensors");
  const uint64_t n = read_u64_le(f.file_.data());
  if (n > kMaxHeaderBytes)
    return Corruption(Str() << path << ": safetensors header length " << n << " exceeds the cap " << kMaxHeaderBytes);
  if (n > size - 8)
    return Corruption(Str() << path << ": safetensors header length " << n << " is past the end of the file (" << size
                            << " bytes)");
  if (n < 2 || f.file_.data()[8] != '{')
    return Corruption(Str() << path << ": safetensors header does not start with '{'");
  std::string_view text(reinterpret_cast<const char*>(f.file_.data() + 8), n);
  ASSIGN_OR_RETURN(Json j, parse_header_json(text, path));
  f.data_start_ = 8 + n;
  const uint64_t data_size = size - f.data_start_;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      RETURN_IF_ERROR(parse_metadata(*it, path, &f.metadata_));
      continue;
    }
    ASSIGN_OR_RETURN(TensorInfo t, parse_entry(it.key(), *it, data_size, path));
    f.tensors_.push_back(std::move(t));
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.nbytes < b.nbytes;
  });
  // Sorted by begin, ranges are disjoint iff each begins at or after the furthest end so far.
  uint64_t reach = 0;
  std::string reach_name;
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    const TensorInfo& t = f.tensors_[i];
    if (t.nbytes > 0 && t.offset < reach)
      return Corruption(Str() << path << ": tensor '" << t.name << "' overlaps tensor '" << reach_name << "'");
    if (t.offset + t.nbytes > reach) {
      reach = t.offset + t.nbytes;
      reach_name = t.name;
    }
    f.index_[t.name] = i;
  }
  return f;
}

StatusOr<SafetensorsFile> SafetensorsFile::open_torch(const std::string& path) {
  SafetensorsFile f;
  ASSIGN_OR_RETURN(f.file_, MappedFile::open(path));
  ASSIGN_OR_RETURN(std::vector<TorchTensor> ts, read_torch_zip(f.file_.data(), f.file_.size(), path));
  for (TorchTensor& t : ts) {
    TensorInfo ti;
    ti.name = std::move(t.name);
    ti.dtype = t.dtype;
    ti.shape = t.shape;
    ti.offset = t.file_offset;
    const uint64_t es = dtype_size(t.dtype);
    ti.nbytes = static_cast<uint64_t>(ti.numel()) * es;
    if (!t.contiguous() && ti.nbytes > 0) {  // gather the view, element by element in row-major order
      auto buf = std::make_unique<uint8_t[]>(ti.nbytes);
      std::vector<int64_t> idx(t.shape.size(), 0);
      for (uint64_t k = 0; k < ti.nbytes / es; ++k) {
        uint64_t off = 0;
        for (size_t d = 0; d < idx.size(); ++d) off += static_cast<uint64_t>(idx[d] * t.stride[d]);
        std::memcpy(buf.get() + k * es, f.file_.data() + t.file_offset + off * es, es);
        for (size_t d = idx.size(); d-- > 0;) {
          if (++idx[d] < t.shape[d]) break;
          idx[d] = 0;
        }
      }
      ti.owned = buf.get();
      f.owned_.push_back(std::move(buf));
    }
    if (f.index_.count(ti.name)) return Corruption(Str() << path << ": tensor '" << ti.name << "' is listed twice");
    f.index_[ti.name] = f.tensors_.size();
    f.tensors_.push_back(std::move(ti));
  }
  return f;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace st
