#include "store/ram_store.h"

#include <cstdio>
#include <cstdlib>
#include <future>

#include "core/check.h"
#include "core/file.h"

namespace st {

StatusOr<std::unique_ptr<RamStore>> RamStore::open(const std::string& dir, Backend* be,
                                                   const RamStoreOptions& opts) {
  ASSIGN_OR_RETURN(StoreManifest m, open_store_manifest(dir));
  std::unique_ptr<RamStore> s(new RamStore(dir, be, std::move(m)));
  const int L = s->m_.num_layers;
  CHECK(opts.in_ram.empty() || opts.in_ram.size() == static_cast<size_t>(L),
        "RamStore: in_ram has " << opts.in_ram.size() << " entries for " << L << " layers");
  for (int l = 0; l < L; ++l)
    s->slot_.push_back(opts.in_ram.empty() || opts.in_ram[static_cast<size_t>(l)] ? s->ram_layers_++ : -1);
  s->stride_ = round_up_io(s->m_.layer_bytes);
  s->extras_offset_ = s->stride_ * static_cast<size_t>(s->ram_layers_);
  s->arena_bytes_ = s->extras_offset_ + round_up_io(s->m_.extras_bytes);
  s->arena_ = static_cast<char*>(std::aligned_alloc(kStoreIoAlign, s->arena_bytes_));
  if (s->arena_ == nullptr)
    return ResourceExhausted(Str() << "allocating the " << s->arena_bytes_ << "-byte host arena for store " << dir);
  std::unique_ptr<RangeReader> own;
  RangeReader* reader = opts.reader;
  if (reader == nullptr) {
    own = make_file_reader(IoMode::kDirect);
    reader = own.get();
  }
  if (s->ram_layers_ < L) {
    DiskStoreOptions d;
    d.reader = opts.reader;
    ASSIGN_OR_RETURN(s->disk_, DiskStore::open(dir, be, d), "the layers of store " << dir << " not kept in RAM");
  }
  RETURN_IF_ERROR(s->fill(*reader, opts), "loading store " << dir << " into RAM");
  if (opts.pin) {
    Status p = be->register_host(s->arena_, s->arena_bytes_);
    s->pinned_ = p.ok();
    if (!p.ok())
      std::fprintf(stderr,
                   "WARNING: could not pin the %zu-byte RAM store arena (%s); streaming from pageable "
                   "memory is several times slower\n",
                   s->arena_bytes_, p.to_string().c_str());
  }
  return s;
}

// Each file's checksum (manifest.h verify_store_file) is computed on a second thread while the
// next file is read, so verifying costs ~max(read, hash) per file rather than their sum. Layers not
// kept in the arena are verified by the disk tier on their first load.
Status RamStore::fill(RangeReader& reader, const RamStoreOptions& opts) {
  const int total = ram_layers_ + 1;
  std::future<Status> pending;
  auto collect = [&]() -> Status { return pending.valid() ? pending.get() : Status::OK(); };
  int done = 0;
  for (int i = 0; i <= m_.num_layers; ++i) {
    const bool extras = i == m_.num_layers;
    if (!extras && slot_[static_cast<size_t>(i)] < 0) continue;
    const StoreFile& f = extras ? m_.extras : m_.layers[static_cast<size_t>(i)];
    char* dst = extras ? arena_ + extras_offset_ : arena_ + stride_ * static_cast<size_t>(slot_[static_cast<size_t>(i)]);
    Status read = reader.read(path_join(dir_, f.name), f.data_start, f.bytes, dst);
    RETURN_IF_ERROR(collect());  // the previous file's verdict first: errors in file order
    RETURN_IF_ERROR(read);
    pending = std::async(std::launch::async, [this, &f, dst] { return verify_store_file(dir_, f, dst); });
    if (opts.progress) opts.progress(++done, total);
  }
  return collect();
}

RamStore::~RamStore() {
  if (pinned_) be_->unregister_host(arena_);
  std::free(arena_);
}

const void* RamStore::layer_host(int layer) const {
  CHECK(layer >= 0 && layer < m_.num_layers, "layer " << layer);
  CHECK(slot_[static_cast<size_t>(layer)] >= 0, "layer " << layer << " is not in the RAM arena");
  return arena_ + stride_ * static_cast<size_t>(slot_[static_cast<size_t>(layer)]);
}

size_t RamStore::host_bytes() const { return arena_bytes_ + (disk_ ? disk_->host_bytes() : 0); }

Status RamStore::load_layer(int layer, void* dst) {
  CHECK(layer >= 0 && layer < m_.num_layers, "layer " << layer);
  if (slot_[static_cast<size_t>(layer)] < 0) return disk_->load_layer(layer, dst);
  be_->copy_h2d(dst, layer_host(layer), m_.layer_bytes, StreamId::kH2D);
  return Status::OK();
}

Status RamStore::load_extras(void* dst) {
  be_->copy_h2d(dst, extras_host(), m_.extras_bytes, StreamId::kH2D);
  be_->sync_stream(StreamId::kH2D);
  return Status::OK();
}

}  // namespace st
