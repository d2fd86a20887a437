// Helpers shared by the store and stream tests: a tiny random HF checkpoint on disk, sharded.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/check.h"
#include "model/init_model.h"
#include "model/presets.h"
#include "store/sharder.h"

namespace st::testing_util {

// A fresh directory under the system temp dir, removed at destruction.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "st_store_XXXXXX").string();
    CHECK(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string sub(const std::string& n) const { return path + "/" + n; }
};

// tiny-llama with `layers` layers; several shards so the Checkpoint index path is exercised.
inline ModelConfig tiny_config(int layers) {
  ModelConfig c = *model_preset("tiny-llama");
  c.num_layers = layers;
  return c;
}

inline void write_model(const ModelConfig& c, const std::string& dir, uint64_t seed = 7) {
  InitModelOptions o;
  o.seed = seed;
  o.dtype = DType::kF32;
  o.max_shard_bytes = 200000;  // a few shards
  o.threads = 1;
  o.overwrite = true;
  CHECK_OK(init_model(c, dir, o).status());
}

inline ShardResult shard_or_die(const std::string& model, const std::string& out, DType dt = DType::kBF16) {
  ShardOptions o;
  o.out_dir = out;
  o.dtype = dt;
  StatusOr<ShardResult> r = shard_model_path(model, o);
  CHECK_OK(r.status());
  return *r;
}

// A tiny model of `layers` layers sharded into a store (bf16), and a CPU backend to open it with.
struct ShardedTinyModel {
  TempDir t;
  std::string store;
  std::unique_ptr<Backend> be;
  explicit ShardedTinyModel(int layers) {
    write_model(tiny_config(layers), t.sub("model"));
    store = t.sub("store");
    shard_or_die(t.sub("model"), store);
    be = make_backend(DeviceKind::kCpu).value();
  }
};

}  // namespace st::testing_util
