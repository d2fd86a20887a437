// safetensors: reader (mmap, validated as hostile input) and writer (atomic).
//
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets:
// [begin, end]}, "__metadata__": {str: str}}, then the data section. The reader validates: N
// against the file size (and an absolute cap), the JSON, each dtype against the allowlist, rank
// <= 8, shape product x dtype size == end - begin (overflow-checked), ranges inside the data
// section and pairwise non-overlapping. Errors name the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/file.h"
#include "core/status.h"

namespace st {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // byte offset from the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* owned = nullptr;  // a PyTorch view gathered into memory the file object owns (else null)
  int64_t numel() const;
};

// A mapped file of named tensors: safetensors, or (open_torch) a PyTorch checkpoint.
class SafetensorsFile {
 public:
  static StatusOr<SafetensorsFile> open(const std::string& path);
  // A torch.save zip archive (pytorch_model.bin; io/torch_zip.h): its tensors read in place where
  // contiguous, gathered into owned memory where a view is not; storages may be shared.
  static StatusOr<SafetensorsFile> open_torch(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by offset
  const TensorInfo* find(const std::string& name) const;               // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Pointer to the tensor's bytes inside the mapping (valid while this object lives).
  const uint8_t* data(const TensorInfo& t) const { return t.owned ? t.owned : file_.data() + data_start_ + t.offset; }
  uint64_t data_start() const { return data_start_; }  // file offset of the data section

 private:
  MappedFile file_;
  uint64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_;  // gathered views (open_torch)
};

// A tensor to write: bytes are copied from `data` (host memory) at write time.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Writes atomically (temp + rename). Tensors are laid out back to back in the given order (the
// reference reader rejects holes, so there is no padding between tensors); the header is padded
// with spaces so the data section starts `align`-aligned (align: a multiple of 8). Metadata always
// gets "format": "pt" (transformers requires it).
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {}, size_t align = 64);

// A checkpoint of one or many files: `dir/model.safetensors`, or `dir/model.safetensors.index.json`
// whose weight_map names the shards. Lookups by tensor name across shards.
class Checkpoint {
 public:
  static StatusOr<Checkpoint> open(const std::string& dir);
  const std::vector<std::string>& files() const { return files_; }
  // The tensor and its file, or NotFound naming the tensor and the checkpoint directory.
  StatusOr<std::pair<const SafetensorsFile*, const TensorInfo*>> find(const std::string& name) const;
  bool has(const std::string& name) const;
  std::vector<std::string> tensor_names() const;

 private:
  std::string dir_;
  std::vector<std::string> files_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, size_t> where_;
};

// Copies a tensor to `dst` converting to `dst_dtype` (float types), checking its shape equals
// `expect_shape`; errors name the tensor and the file.
// A bitsandbytes 4-bit weight (io/bnb4bit.h) reads dequantized, with its logical shape.
Status read_tensor_as(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& expect_shape,
                      DType dst_dtype, void* dst);
// Shape and dtype as read_tensor_as sees them (a bitsandbytes 4-bit weight: its logical shape and
// the dtype it was quantized from).
StatusOr<std::pair<std::vector<int64_t>, DType>> tensor_shape_dtype(const Checkpoint& ck, const std::string& name);

}  // namespace st
