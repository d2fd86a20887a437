// The sharder: a model (HF checkpoint dir, .gguf file, or any ModelSource) -> a layer store directory.
//
// Output: manifest.json + layer_NNN.safetensors + extras.safetensors (see store/manifest.h).
// Each layer file's data section is the layer blob of make_layer_layout (same offsets, padding
// covered by "streamtune.pad.*" U8 tensors so the file is strict safetensors), starting at a
// 4096-aligned file offset, so one read fills a pool slot or a RAM-arena slice.
//
// Caching: the default location is <cache>/stores/<fingerprint>-<dtype>, where the fingerprint
// covers every source file's name, size and mtime. A store whose manifest matches the source
// fingerprint and dtype is reused; anything else is rebuilt.
//
// Atomicity (Note [store atomicity]): everything is written into "<out>.tmp.<pid>", the manifest
// last, and the directory is renamed into place. A crash leaves either the old store, no store,
// or a *.tmp.* directory that is never read as a store (no manifest under the final name) and
// is removed by the next shard once its process is gone.
#pragma once

#include <functional>
#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "store/manifest.h"
#include "model/load.h"

namespace st {

// $XDG_CACHE_HOME/streamtune, else $HOME/.cache/streamtune.
std::string default_cache_dir();
// <cache_dir or default>/stores/<fingerprint>-<dtype name>[-nf4].
std::string default_store_dir(const std::string& cache_dir, const std::string& fingerprint, DType dtype,
                              BaseQuant quant = BaseQuant::kNone);

struct ShardOptions {
  DType dtype = DType::kBF16;
  BaseQuant quant = BaseQuant::kNone;  // kNF4: the linears NF4-quantized (model/weights.h)
  std::string out_dir;    // "" = default_store_dir(cache_dir, fingerprint, dtype)
  std::string cache_dir;  // "" = default_cache_dir()
  bool force = false;     // rebuild even if a matching store exists
  // Called after each file is written: (files done, files total, file name). May be empty.
  std::function<void(int, int, const std::string&)> progress;
};

struct ShardResult {
  std::string dir;
  bool reused = false;  // an up-to-date store was already there
  std::string reason;   // why it was (re)built or reused, for the user
  StoreManifest manifest;
};

// Shards `src` (or reuses an up-to-date store). Not thread-safe with respect to the same out dir
// in other processes beyond the rename-based atomicity above.
StatusOr<ShardResult> shard_model(const ModelSource& src, const ShardOptions& opts);

// Convenience: an HF checkpoint directory or a .gguf file (open_model_source).
StatusOr<ShardResult> shard_model_path(const std::string& model_path, const ShardOptions& opts);

}  // namespace st
