#include "store/disk_store.h"

#include <cstdio>
#include <cstdlib>

#include "core/check.h"
#include "core/file.h"

namespace st {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

StatusOr<std::unique_ptr<DiskStore>> DiskStore::open(const std::string& dir, Backend* be,
                                                     const DiskStoreOptions& opts) {
  ASSIGN_OR_RETURN(StoreManifest m, open_store_manifest(dir));
  std::unique_ptr<DiskStore> s(new DiskStore(dir, be, std::move(m)));
  s->reader_ = opts.reader;
  if (s->reader_ == nullptr) {
    s->own_reader_ = make_file_reader(IoMode::kDirect);
    s->reader_ = s->own_reader_.get();
  }
  RETURN_IF_ERROR(s->alloc_ring(std::max(1, opts.ring_size)), "store " << dir);
  return s;
}

Status DiskStore::alloc_ring(int n) {
  staging_bytes_ = round_up_io(m_.layer_bytes);
  bool warned = false;
  for (int i = 0; i < n; ++i) {
    Staging st;
    // Over-allocate so the buffer can be 4096-aligned whatever the backend's alignment is.
    StatusOr<void*> p = be_->alloc_host_pinned(staging_bytes_ + kStoreIoAlign);
    if (p.ok()) {
      st.base = *p;
      st.p = reinterpret_cast<void*>(round_up_io(reinterpret_cast<uintptr_t>(*p)));
      st.pinned = true;
    } else {
      if (!warned)
        std::fprintf(stderr, "WARNING: disk store staging buffers are not pinned (%s); copies will be slow\n",
                     p.status().to_string().c_str());
      warned = true;
      st.base = st.p = std::aligned_alloc(kStoreIoAlign, staging_bytes_);
      if (st.p == nullptr) return ResourceExhausted(Str() << "allocating " << staging_bytes_ << " staging bytes");
    }
    st.done = be_->create_event();
    staging_.push_back(std::move(st));
  }
  return Status::OK();
}

DiskStore::~DiskStore() {
  for (Staging& s : staging_) {
    if (s.in_flight) be_->sync_event(*s.done);
    if (s.pinned) be_->free_host_pinned(s.base);
    else std::free(s.base);
  }
}

Status DiskStore::load_layer(int layer, void* dst) {
  CHECK(layer >= 0 && layer < m_.num_layers, "layer " << layer);
  Staging& s = staging_[next_];
  next_ = (next_ + 1) % staging_.size();
  if (s.in_flight) be_->sync_event(*s.done);  // the h2d that last read this buffer is done
  s.in_flight = false;
  const StoreFile& f = m_.layers[layer];
  RETURN_IF_ERROR(reader_->read(path_join(dir_, f.name), f.data_start, f.bytes, s.p), "layer " << layer);
  if (!verified_[static_cast<size_t>(layer)]) {  // once per process (manifest.h verify_store_file)
    RETURN_IF_ERROR(verify_store_file(dir_, f, s.p));
    verified_[static_cast<size_t>(layer)] = true;
  }
  be_->copy_h2d(dst, s.p, f.bytes, StreamId::kH2D);
  be_->record(*s.done, StreamId::kH2D);
  s.in_flight = true;
  return Status::OK();
}

Status DiskStore::load_extras(void* dst) {
  const StoreFile& f = m_.extras;
  std::unique_ptr<void, FreeDeleter> buf(std::aligned_alloc(kStoreIoAlign, round_up_io(f.bytes)));
  if (!buf) return ResourceExhausted(Str() << "allocating " << f.bytes << " bytes to read " << f.name);
  RETURN_IF_ERROR(reader_->read(path_join(dir_, f.name), f.data_start, f.bytes, buf.get()));
  RETURN_IF_ERROR(verify_store_file(dir_, f, buf.get()));
  be_->copy_h2d(dst, buf.get(), f.bytes, StreamId::kH2D);
  be_->sync_stream(StreamId::kH2D);  // pageable source: must finish before buf is freed
  return Status::OK();
}

}  // namespace st
