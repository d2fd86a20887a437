// Writes a randomly initialised checkpoint in HF layout (config.json + model.safetensors, or
// model-0000i-of-0000N.safetensors shards + model.safetensors.index.json), for benchmarks and
// tests that need a model of a real size without downloading one.
//
// Values: every Linear weight and bias ~ normal(0, std), norm weights = 1. The value of element
// i of tensor `name` depends only on (seed, name, i): a counter-based generator, so the bytes are
// identical for any thread count, chunk size or shard split, and a tensor can be regenerated
// alone (hf_init_values) as a test oracle.
//
// Memory: tensors are generated chunk by chunk into two fixed buffers (one being filled by all
// cores while the other is written), so a 14B model needs ~2 x kInitChunkBytes of RAM, not 28 GB.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/hf_config.h"

namespace st {

// One tensor of an HF checkpoint, in the order init_model writes them.
struct HfTensorSpec {
  std::string name;            // "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // HF shape ([out, in] for Linear)
  enum class Init { kNormal, kOnes } init = Init::kNormal;
  int64_t numel() const;
};

// The tensors an HF checkpoint of `c` holds (formats.md §2.5): embedding, per layer
// (input norm, q/k/v(+biases), q/k norms, o, post norm, gate/up/down), final norm, lm_head unless tied.
std::vector<HfTensorSpec> hf_tensor_list(const ModelConfig& c);

struct InitModelOptions {
  uint64_t seed = 0;
  DType dtype = DType::kBF16;       // kBF16 | kF16 | kF32
  double std = 0.02;
  uint64_t max_shard_bytes = 2000000000ull;  // a file holds at most this much tensor data
                                             // (a single larger tensor gets a shard of its own)
  int threads = 0;                  // 0 = all hardware threads
  bool overwrite = false;           // replace an existing checkpoint in the directory
};

struct InitModelResult {
  int64_t params = 0;
  uint64_t bytes = 0;               // tensor bytes written (sum over shards)
  std::vector<std::string> files;   // safetensors files written (basenames)
  double seconds = 0;
  int stale_temps_removed = 0;      // partial files of killed runs found in out_dir and removed
};

// Writes config.json and the weights into `out_dir` (created if missing). Refuses a directory
// that already holds config.json or model*.safetensors* unless opts.overwrite. Each file is
// written under a temporary name and renamed when complete; the temporaries of a killed run (its
// process gone) are removed first.
StatusOr<InitModelResult> init_model(const ModelConfig& c, const std::string& out_dir,
                                     const InitModelOptions& opts);

// Oracle for tests: the float32 values (before dtype rounding) of elements [first, first + n)
// of the tensor `spec` as init_model writes them.
void hf_init_values(const HfTensorSpec& spec, uint64_t seed, double std, uint64_t first, uint64_t n,
                    float* out);

}  // namespace st
