// DiskStore: reads each layer from its file at every use (O_DIRECT where the filesystem allows,
// into 4096-aligned buffers) into a small ring of pinned staging buffers, then copies to the
// device on kH2D. Host RAM stays at ring_size x layer_bytes whatever the model size.
//
// Staging buffer i is reused only after the h2d copy that last read it has finished (an event
// per buffer), so a read never overwrites bytes still in flight. Not thread-safe: one copy
// thread calls load_layer.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "store/layer_store.h"
#include "store/range_reader.h"

namespace st {

struct DiskStoreOptions {
  RangeReader* reader = nullptr;  // nullptr = make_file_reader(kDirect); not owned
  int ring_size = 2;
};

class DiskStore : public LayerStore {
 public:
  static StatusOr<std::unique_ptr<DiskStore>> open(const std::string& dir, Backend* be,
                                                   const DiskStoreOptions& opts = {});
  ~DiskStore() override;
  DiskStore(const DiskStore&) = delete;
  DiskStore& operator=(const DiskStore&) = delete;

  const StoreManifest& manifest() const override { return m_; }
  const std::string& dir() const override { return dir_; }
  const char* tier() const override { return "disk"; }
  size_t host_bytes() const override { return staging_bytes_ * staging_.size(); }
  Status load_layer(int layer, void* dst) override;
  Status load_extras(void* dst) override;

 private:
  struct Staging {
    void* base = nullptr;  // as allocated
    void* p = nullptr;     // 4096-aligned within base
    bool pinned = false;
    std::unique_ptr<Event> done;  // h2d from this buffer finished
    bool in_flight = false;
  };
  DiskStore(std::string dir, Backend* be, StoreManifest m)
      : dir_(std::move(dir)), be_(be), m_(std::move(m)), verified_(static_cast<size_t>(m_.num_layers), false) {}
  Status alloc_ring(int n);

  std::string dir_;
  Backend* be_;
  StoreManifest m_;
  std::unique_ptr<RangeReader> own_reader_;
  RangeReader* reader_ = nullptr;
  std::vector<Staging> staging_;
  size_t staging_bytes_ = 0;
  size_t next_ = 0;
  std::vector<bool> verified_;  // per layer: its checksum has been checked in this process
};

}  // namespace st
