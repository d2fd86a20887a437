// Merging a LoRA adapter into its base model: W' = W + scaling * B·A for every adapted projection,
// written as a plain HF checkpoint (config.json, model.safetensors or shards + index, tokenizer
// files copied from an HF base or written from a GGUF base's vocabulary) that needs no adapter to
// load -- or, for a GGUF base and an output
// path ending in .gguf, as one GGUF file for llama.cpp (merge.cc Note [GGUF merge]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace st {

struct MergeOptions {
  // Output dtype; unset: each tensor keeps the base's dtype (GGUF bases: bf16; a .gguf output:
  // the merged projections in f16, every other tensor in its own type).
  std::optional<DType> dtype;
  uint64_t max_shard_bytes = 2000000000ull;  // per safetensors file (one larger tensor gets its own)
  bool overwrite = false;                    // replace an existing out_dir
};

struct MergeResult {
  int64_t merged = 0;               // projections that received B·A
  std::vector<std::string> files;   // safetensors basenames written
  uint64_t bytes = 0;               // tensor bytes written
  std::vector<std::string> notes;   // what the caller should tell the user (a tokenizer not written)
};

// Reads the base (HF dir or .gguf) and the PEFT adapter dir, writes `out_dir` atomically: all
// files go to a temporary sibling directory that is renamed to out_dir when complete.
// The merge is computed in f32 (W converted, + scaling * B·A, rounded once to the output dtype).
// Refuses an existing out_dir unless overwrite (InvalidArgument); adapter/base mismatches give
// the adapter loader's errors. Blocks; single call at a time per out_dir.
StatusOr<MergeResult> merge_lora(const std::string& model_path, const std::string& adapter_dir,
                                 const std::string& out_dir, const MergeOptions& opts);

}  // namespace st
