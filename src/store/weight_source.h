// WeightSource: where the sharder reads a model's base weights from.
//
// An HF checkpoint directory (config.json + one or many safetensors files) is one kind; a GGUF
// file (helper "gguf": GgufCheckpoint) plugs in by implementing the same four calls. The sharder
// only needs the config, the list of files that make up the source (for the fingerprint) and
// "read this tensor, converted to this dtype, checking this shape".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/hf_config.h"

namespace st {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const ModelConfig& config() const = 0;
  // Every file whose bytes determine the weights or the config (fingerprint input).
  virtual std::vector<std::string> files() const = 0;
  // "hf:/path/to/dir", "gguf:/path/model.gguf" (for messages and the manifest).
  virtual std::string describe() const = 0;
  virtual bool has(const std::string& hf_name) const = 0;
  // Copies tensor `hf_name` (HF naming, e.g. "model.layers.3.self_attn.q_proj.weight") into host
  // memory `dst`, converted to `dst_dtype`; shape must equal `shape`. Errors name the tensor.
  virtual Status read_tensor_as(const std::string& hf_name, const std::vector<int64_t>& shape,
                                DType dst_dtype, void* dst) const = 0;
};

// An HF checkpoint directory: config.json + model.safetensors or an index with shards.
StatusOr<std::unique_ptr<WeightSource>> open_hf_source(const std::string& dir);
// A GGUF file (io/gguf_checkpoint.h: dequantised to the requested dtype).
StatusOr<std::unique_ptr<WeightSource>> open_gguf_source(const std::string& path);
// A directory -> HF checkpoint; a *.gguf file -> GGUF. NotFound otherwise.
StatusOr<std::unique_ptr<WeightSource>> open_weight_source(const std::string& path);

}  // namespace st
