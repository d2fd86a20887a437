// shared_ram_store_parts (data_parallel.h): N replicas over one host copy of the base.
//
// RamStore is immutable after open() and layer_host()/extras_host() are const reads of its arena,
// so any number of prefetch threads may read it at once. What is NOT shareable is
// RamStore::load_layer: it copies through the backend that opened the store. Each replica
// therefore gets a RamStoreView, a LayerStore whose copies go through the replica's backend. A
// store kept partly in RAM (store/host_memory.h Note [partial RAM store]) gives each view a disk
// tier of its own (its staging ring pinned through the replica's backend) for the other layers.
#include "core/check.h"
#include "dist/data_parallel.h"
#include "store/disk_store.h"

namespace st {
namespace {

class RamStoreView final : public LayerStore {
 public:
  RamStoreView(const RamStore* store, Backend* be, std::unique_ptr<DiskStore> disk)
      : store_(store), be_(be), disk_(std::move(disk)) {}
  const StoreManifest& manifest() const override { return store_->manifest(); }
  const std::string& dir() const override { return store_->dir(); }
  const char* tier() const override { return "ram"; }
  size_t host_bytes() const override { return 0; }  // the shared arena is counted once, by the store
  Status load_layer(int layer, void* dst) override {
    if (!store_->in_ram(layer)) return disk_->load_layer(layer, dst);
    be_->copy_h2d(dst, store_->layer_host(layer), manifest().layer_bytes, StreamId::kH2D);
    return Status::OK();
  }
  Status load_extras(void* dst) override {
    be_->copy_h2d(dst, store_->extras_host(), manifest().extras_bytes, StreamId::kH2D);
    be_->sync_stream(StreamId::kH2D);
    return Status::OK();
  }

 private:
  const RamStore* store_;
  Backend* be_;
  std::unique_ptr<DiskStore> disk_;  // null when every layer is in the arena
};

// A StreamedLayerSource that owns the view it streams from.
class ViewSource final : public LayerSource {
 public:
  ViewSource(std::unique_ptr<RamStoreView> view, std::unique_ptr<StreamedLayerSource> src)
      : view_(std::move(view)), src_(std::move(src)) {}
  ~ViewSource() override { src_.reset(); }  // the prefetch thread stops before the view goes
  void begin_step(const std::vector<int>& visits) override { src_->begin_step(visits); }
  void begin_training_step(const std::vector<int>& visits, const std::vector<bool>& backward) override {
    src_->begin_training_step(visits, backward);
  }
  void lend_regions(const std::vector<LentRegion>& regions) override { src_->lend_regions(regions); }
  LayerWeights acquire(int layer) override { return src_->acquire(layer); }
  void release(int layer) override { src_->release(layer); }
  void end_step() override { src_->end_step(); }
  Status status() const override { return src_->status(); }
  bool loads_layers() const override { return src_->loads_layers(); }

 private:
  std::unique_ptr<RamStoreView> view_;
  std::unique_ptr<StreamedLayerSource> src_;
};

}  // namespace

ReplicaPartsFactory shared_ram_store_parts(const RamStore* store, StreamedSourceOptions opts,
                                           std::string base_model_name) {
  CHECK(store != nullptr);
  return [store, opts, base_model_name](int, Backend* be) -> StatusOr<TrainerParts> {
    TrainerParts p;
    p.model = store->manifest().config;
    p.base_model_name = base_model_name;
    p.make_layers = [store, opts](Backend* b, const LayerLayout& layout) -> StatusOr<std::unique_ptr<LayerSource>> {
      if (layout.bytes != store->manifest().layer_bytes)
        return Internal(Str() << "layer layout (" << layout.bytes << " bytes) does not match the store "
                              << store->dir() << " (" << store->manifest().layer_bytes << " bytes)");
      std::unique_ptr<DiskStore> disk;
      if (store->ram_layers() < store->manifest().num_layers) {
        ASSIGN_OR_RETURN(disk, DiskStore::open(store->dir(), b), "the layers of store " << store->dir() << " not kept in RAM");
      }
      auto view = std::make_unique<RamStoreView>(store, b, std::move(disk));
      ASSIGN_OR_RETURN(std::unique_ptr<StreamedLayerSource> s, StreamedLayerSource::create(b, view.get(), opts));
      return std::unique_ptr<LayerSource>(std::make_unique<ViewSource>(std::move(view), std::move(s)));
    };
    (void)be;
    p.load_extras = [store](Model& m) -> Status {
      if (m.extras_layout().bytes != store->manifest().extras_bytes)
        return Internal(Str() << "extras layout (" << m.extras_layout().bytes << " bytes) does not match the store "
                              << store->dir() << " (" << store->manifest().extras_bytes << " bytes)");
      m.load_extras_from_host(store->extras_host());  // host -> this replica's device, blocks
      return Status::OK();
    };
    return p;
  };
}

}  // namespace st
