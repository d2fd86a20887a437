// A model's base weights, whatever the file format: an HF checkpoint directory (config.json +
// safetensors) or a .gguf file, behind one small interface (tensors by HF name, converted to the
// dtype asked for), plus a loader that puts every layer resident on a backend
// (ResidentLayerSource) with the extras next to it.
//
// The sharder (store/) reads it to build a layer store for training; `generate`, `logits` and
// `merge` read it directly, each tensor once. Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/status.h"
#include "io/gguf_checkpoint.h"
#include "io/hf_config.h"
#include "model/resident_source.h"
#include "model/weights.h"

namespace st {

class ModelSource {
 public:
  virtual ~ModelSource() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::string describe() const = 0;      // "hf:/dir" | "gguf:/file.gguf"
  // Every file whose bytes determine the weights or the config (the store fingerprint's input).
  virtual std::vector<std::string> files() const = 0;
  virtual bool has(const std::string& hf_name) const = 0;
  virtual bool is_gguf() const = 0;
  virtual std::string hf_dir() const = 0;        // the HF directory ("" for GGUF)
  virtual const GgufCheckpoint* gguf() const { return nullptr; }  // the opened GGUF file, if one
  virtual std::vector<std::string> tensor_names() const = 0;  // HF names
  // Shape and stored dtype of a tensor (GGUF: quantised types report kBF16, the merge dtype).
  virtual StatusOr<std::pair<std::vector<int64_t>, DType>> info(const std::string& hf_name) const = 0;
  // Tensor `hf_name` into host `dst` converted to `dtype`; its shape must equal `shape`. Errors
  // name the tensor.
  virtual Status read(const std::string& hf_name, const std::vector<int64_t>& shape, DType dtype,
                      void* dst) const = 0;
};

// `path` is a directory (HF) or a file ending in .gguf. Errors name the path.
StatusOr<std::unique_ptr<ModelSource>> open_model_source(const std::string& path);
// The two kinds directly (an HF checkpoint directory; a GGUF file, dequantised on read).
StatusOr<std::unique_ptr<ModelSource>> open_hf_model_source(const std::string& dir);
StatusOr<std::unique_ptr<ModelSource>> open_gguf_model_source(const std::string& path);

// Fills a layer blob / the extras blob (host memory, layout.bytes, zeroed first) from `src`.
Status pack_layer_from(const ModelSource& src, const LayerLayout& layout, int layer, void* host_blob);
Status pack_extras_from(const ModelSource& src, const ExtrasLayout& layout, void* host_blob);

// Every layer resident on `be` in `dtype`, and the extras in backend memory.
struct LoadedModel {
  ~LoadedModel();
  Backend* be = nullptr;
  ModelConfig config;
  std::unique_ptr<ResidentLayerSource> layers;
  ExtrasLayout extras_layout;
  void* extras_blob = nullptr;  // backend memory, owned
  ExtrasWeights extras;         // views of extras_blob
};
StatusOr<std::unique_ptr<LoadedModel>> load_model_resident(Backend* be, const ModelSource& src, DType dtype);

}  // namespace st
