// RamStore: the whole base (every layer blob + the extras blob) in ONE host arena, allocated
// once, filled in place by reads from the store files (no transient copies), then pinned with
// Backend::register_host (fill-then-register: ~10x faster than allocating pinned memory, see
// anchors.md). If pinning fails the arena stays pageable and a loud warning is printed once:
// copies still work, at a fraction of the link speed.
//
// Layer l lives at layer_host(l) (stride round_up_io(layer_bytes), so every slice is O_DIRECT
// aligned). Immutable after open(): load_layer is safe from one copy thread while other threads
// read layer_host().
//
// With RamStoreOptions::in_ram the arena holds only those layers (and the extras); the others are
// read from their store files at every load through a disk tier (store/host_memory.h Note
// [partial RAM store]).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "store/disk_store.h"
#include "store/layer_store.h"
#include "store/range_reader.h"

namespace st {

struct RamStoreOptions {
  RangeReader* reader = nullptr;  // nullptr = make_file_reader(kDirect); not owned
  bool pin = true;                // register the arena with the backend
  std::function<void(int, int)> progress;  // (files read, files total)
  // Per layer: kept in the arena (host_memory.h choose_ram_layers). Empty: every layer.
  std::vector<bool> in_ram;
};

class RamStore : public LayerStore {
 public:
  // Validates the store dir (open_store_manifest) and reads it into the arena. The backend
  // must outlive the store.
  static StatusOr<std::unique_ptr<RamStore>> open(const std::string& dir, Backend* be,
                                                  const RamStoreOptions& opts = {});
  ~RamStore() override;
  RamStore(const RamStore&) = delete;
  RamStore& operator=(const RamStore&) = delete;

  const StoreManifest& manifest() const override { return m_; }
  const std::string& dir() const override { return dir_; }
  const char* tier() const override { return "ram"; }
  size_t host_bytes() const override;  // the arena + the disk tier's staging ring
  Status load_layer(int layer, void* dst) override;
  Status load_extras(void* dst) override;

  const void* layer_host(int layer) const;  // CHECKs the layer is in the arena
  bool in_ram(int layer) const { return slot_[static_cast<size_t>(layer)] >= 0; }
  int ram_layers() const { return ram_layers_; }  // layers in the arena (the rest: read from disk)
  const void* extras_host() const { return arena_ + extras_offset_; }
  bool pinned() const { return pinned_; }

 private:
  RamStore(std::string dir, Backend* be, StoreManifest m) : dir_(std::move(dir)), be_(be), m_(std::move(m)) {}
  Status fill(RangeReader& reader, const RamStoreOptions& opts);

  std::string dir_;
  Backend* be_;
  StoreManifest m_;
  char* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  size_t stride_ = 0;
  size_t extras_offset_ = 0;
  bool pinned_ = false;
  std::vector<int64_t> slot_;   // per layer: its index in the arena, or -1 (read from disk)
  int ram_layers_ = 0;
  std::unique_ptr<DiskStore> disk_;  // the layers not in the arena (Note [partial RAM store])
};

}  // namespace st
