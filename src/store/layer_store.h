// LayerStore: a tier holding the frozen base weights of a sharded model (RamStore, DiskStore).
// The prefetcher (stream/) asks it to copy one layer blob into a device buffer.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "store/manifest.h"

namespace st {

class LayerStore {
 public:
  virtual ~LayerStore() = default;
  virtual const StoreManifest& manifest() const = 0;
  virtual const std::string& dir() const = 0;
  virtual const char* tier() const = 0;  // "ram" | "disk"
  // Host bytes this tier holds (arena or staging ring).
  virtual size_t host_bytes() const = 0;

  // Copies layer `layer`'s blob (manifest().layer_bytes bytes) into backend memory `dst`,
  // enqueued on StreamId::kH2D. The host may block (disk reads; staging reuse); the copy may
  // still be in flight on return, so the caller records its `ready` event on kH2D afterwards.
  // Not thread-safe: one caller thread at a time (the copy thread). IOError/Corruption naming
  // the file on failure.
  virtual Status load_layer(int layer, void* dst) = 0;
  // Copies the extras blob (manifest().extras_bytes) into backend memory `dst` and waits for it.
  virtual Status load_extras(void* dst) = 0;
};

// The extras blob (embedding, final norm, lm_head) in host memory, staged through a temporary
// device buffer because load_extras() targets device memory. Blocks the host.
StatusOr<std::vector<char>> extras_to_host(Backend* be, LayerStore& store);

}  // namespace st
