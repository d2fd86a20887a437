// Test double: a LayerStore whose layer blobs live in memory, each filled with a pattern that
// identifies the layer, with optional random copy delays (to shake thread interleavings) and an
// injected failure for one layer.
#pragma once

#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "store/layer_store.h"

namespace st::testing_util {

class MemStore : public LayerStore {
 public:
  MemStore(Backend* be, int layers, size_t bytes, int fail_layer = -1, bool jitter = false)
      : be_(be), fail_layer_(fail_layer), jitter_(jitter) {
    m_.num_layers = layers;
    m_.layer_bytes = bytes;
    for (int l = 0; l < layers; ++l) {
      blobs_.emplace_back(bytes);
      for (size_t i = 0; i < bytes; ++i) blobs_[l][i] = static_cast<uint8_t>(l * 31 + i * 7 + 1);
    }
  }
  const StoreManifest& manifest() const override { return m_; }
  const std::string& dir() const override { return dir_; }
  const char* tier() const override { return "mem"; }
  size_t host_bytes() const override { return 0; }
  Status load_layer(int layer, void* dst) override {
    ++loads;
    if (jitter_) std::this_thread::sleep_for(std::chrono::microseconds(rng_() % 300));
    if (layer == fail_layer_) return IOError("reading store file /fake/layer_00" + std::to_string(layer) + ".safetensors: injected");
    be_->copy_h2d(dst, blobs_[layer].data(), blobs_[layer].size(), StreamId::kH2D);
    return Status::OK();
  }
  Status load_extras(void*) override { return Status::OK(); }
  bool holds(const void* p, int layer) const { return std::memcmp(p, blobs_[layer].data(), m_.layer_bytes) == 0; }
  const void* blob(int layer) const { return blobs_[layer].data(); }

  int loads = 0;  // touched by the copy thread only while compute waits, read after end_step

 private:
  Backend* be_;
  StoreManifest m_;
  std::string dir_ = "/fake";
  std::vector<std::vector<uint8_t>> blobs_;
  int fail_layer_;
  bool jitter_;
  std::mt19937 rng_{123};
};

}  // namespace st::testing_util
