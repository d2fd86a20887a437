// Checkpoint: one model.safetensors, or a model.safetensors.index.json whose weight_map names the
// shards (or, without either, their PyTorch counterparts pytorch_model.bin[.index.json]). The index is checked against the shard headers both ways, because a stale index would
// otherwise make a tensor silently missing or read from the wrong file.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/json.h"
#include "io/bnb4bit.h"
#include "io/safetensors.h"

namespace st {
namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";
// PyTorch checkpoints (io/torch_zip.h), read where a directory has no safetensors.
constexpr const char* kTorchIndexName = "pytorch_model.bin.index.json";
constexpr const char* kTorchSingleName = "pytorch_model.bin";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A shard name from a hostile index must stay inside the checkpoint directory.
bool is_plain_file_name(const std::string& s) {
  return !s.empty() && s.find('/') == std::string::npos && s != "." && s != "..";
}

bool is_float(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

std::string shape_str(const std::vector<int64_t>& s) {
  Str o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

}  // namespace

StatusOr<Checkpoint> Checkpoint::open(const std::string& dir) {
  Checkpoint ck;
  ck.dir_ = dir;
  std::string index_path = path_join(dir, kIndexName);
  std::string single_path = path_join(dir, kSingleName);
  bool torch_files = false;
  if (is_directory(dir) && !file_exists(index_path) && !file_exists(single_path) &&
      (file_exists(path_join(dir, kTorchIndexName)) || file_exists(path_join(dir, kTorchSingleName)))) {
    index_path = path_join(dir, kTorchIndexName);
    single_path = path_join(dir, kTorchSingleName);
    torch_files = true;
  }
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  if (!is_directory(dir) && ends_with(dir, ".safetensors") && file_exists(dir)) {
    ck.files_.push_back(dir);  // a single file given directly (e.g. adapter_model.safetensors)
  } else if (file_exists(index_path)) {
    ASSIGN_OR_RETURN(Json j, read_json_file(index_path));
    auto wm = j.find("weight_map");
    if (!j.is_object() || wm == j.end() || !wm->is_object())
      return Corruption(Str() << index_path << ": missing object 'weight_map'");
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it->is_string() || !is_plain_file_name(it->get<std::string>()))
        return Corruption(Str() << index_path << ": weight_map entry for '" << it.key() << "' is not a file name");
      const std::string shard = it->get<std::string>();
      weight_map[it.key()] = shard;
      const std::string full = path_join(dir, shard);
      if (std::find(ck.files_.begin(), ck.files_.end(), full) == ck.files_.end()) ck.files_.push_back(full);
    }
    if (ck.files_.empty()) return Corruption(Str() << index_path << ": weight_map is empty");
  } else if (file_exists(single_path)) {
    ck.files_.push_back(single_path);
  } else {
    return NotFound(Str() << dir << ": no " << kSingleName << " or " << kIndexName << " (nor " << kTorchSingleName
                          << " or " << kTorchIndexName << ")");
  }
  for (const std::string& f : ck.files_) {
    ASSIGN_OR_RETURN(SafetensorsFile sf, torch_files ? SafetensorsFile::open_torch(f) : SafetensorsFile::open(f),
                     "opening checkpoint " << dir);
    ck.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(sf)));
    const size_t si = ck.shards_.size() - 1;
    const std::string base = path_basename(f);
    for (const TensorInfo& t : ck.shards_.back()->tensors()) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(t.name);
        if (it == weight_map.end())
          return Corruption(Str() << index_path << ": tensor '" << t.name << "' in " << base
                                  << " is not listed in weight_map");
        if (it->second != base) continue;  // listed under another shard; that shard's copy wins
      }
      if (!ck.where_.emplace(t.name, si).second)
        return Corruption(Str() << dir << ": tensor '" << t.name << "' appears in more than one shard");
    }
  }
  for (const auto& [name, shard] : weight_map) {
    if (!ck.where_.count(name))
      return Corruption(Str() << index_path << ": weight_map says tensor '" << name << "' is in " << shard
                              << " but that shard does not contain it");
  }
  return ck;
}

StatusOr<std::pair<const SafetensorsFile*, const TensorInfo*>> Checkpoint::find(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) return NotFound(Str() << "tensor '" << name << "' not found in checkpoint " << dir_);
  const SafetensorsFile* f = shards_[it->second].get();
  return std::make_pair(f, f->find(name));
}

bool Checkpoint::has(const std::string& name) const { return where_.count(name) > 0; }

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& kv : where_) out.push_back(kv.first);
  return out;
}

StatusOr<std::pair<std::vector<int64_t>, DType>> tensor_shape_dtype(const Checkpoint& ck, const std::string& name) {
  if (is_bnb4bit(ck, name)) {
    ASSIGN_OR_RETURN(Bnb4bitState s, read_bnb4bit_state(ck, name));
    return std::make_pair(s.shape, s.dtype);
  }
  ASSIGN_OR_RETURN(auto f, ck.find(name));
  return std::make_pair(f.second->shape, f.second->dtype);
}

Status read_tensor_as(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& expect_shape,
                      DType dst_dtype, void* dst) {
  if (is_bnb4bit(ck, name)) {  // dequantized (io/bnb4bit.h)
    ASSIGN_OR_RETURN(Bnb4bitState s, read_bnb4bit_state(ck, name));
    if (s.shape != expect_shape)
      return InvalidArgument(Str() << "bitsandbytes tensor '" << name << "' has shape " << shape_str(s.shape)
                                   << ", expected " << shape_str(expect_shape));
    if (!is_float(dst_dtype))
      return InvalidArgument(Str() << "bitsandbytes tensor '" << name << "' cannot be read as " << dtype_name(dst_dtype));
    std::vector<float> v;
    RETURN_IF_ERROR(dequantize_bnb4bit(ck, name, s, &v));
    convert_elements(dst, dst_dtype, v.data(), DType::kF32, v.size());
    return Status::OK();
  }
  ASSIGN_OR_RETURN(auto found, ck.find(name));
  const auto [file, t] = found;
  if (t->shape != expect_shape)
    return InvalidArgument(Str() << file->path() << ": tensor '" << name << "' has shape " << shape_str(t->shape)
                                 << ", expected " << shape_str(expect_shape));
  const uint8_t* src = file->data(*t);
  const size_t n = static_cast<size_t>(t->numel());
  if (t->dtype == dst_dtype) {
    std::memcpy(dst, src, t->nbytes);
    return Status::OK();
  }
  if (!is_float(t->dtype) || !is_float(dst_dtype))
    return InvalidArgument(Str() << file->path() << ": tensor '" << name << "' is " << dtype_name(t->dtype)
                                 << " and cannot be converted to " << dtype_name(dst_dtype));
  const size_t src_es = dtype_size(t->dtype), dst_es = dtype_size(dst_dtype);
  if (reinterpret_cast<uintptr_t>(src) % src_es == 0) {
    convert_elements(dst, dst_dtype, src, t->dtype, n);
    return Status::OK();
  }
  // Writers other than ours may leave data misaligned: convert through an aligned bounce buffer.
  constexpr size_t kChunk = 1 << 16;
  std::vector<float> bounce(kChunk);
  for (size_t i = 0; i < n; i += kChunk) {
    const size_t m = std::min(kChunk, n - i);
    std::memcpy(bounce.data(), src + i * src_es, m * src_es);
    convert_elements(static_cast<uint8_t*>(dst) + i * dst_es, dst_dtype, bounce.data(), t->dtype, m);
  }
  return Status::OK();
}

}  // namespace st
