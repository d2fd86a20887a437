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
  s->stride_ = round_up_io(s->m_.layer_bytes);
  s->extras_offset_ = s->stride_ * static_cast<size_t>(s->m_.num_layers);
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
// next file is read, so verifying costs ~max(read, hash) per file rather than their sum.
Status RamStore::fill(RangeReader& reader, const RamStoreOptions& opts) {
  const int total = m_.num_layers + 1;
  std::future<Status> pending;
  auto collect = [&]() -> Status { return pending.valid() ? pending.get() : Status::OK(); };
  for (int i = 0; i < total; ++i) {
    const bool extras = i == m_.num_layers;
    const StoreFile& f = extras ? m_.extras : m_.layers[static_cast<size_t>(i)];
    char* dst = extras ? arena_ + extras_offset_ : arena_ + stride_ * static_cast<size_t>(i);
    Status read = reader.read(path_join(dir_, f.name), f.data_start, f.bytes, dst);
    RETURN_IF_ERROR(collect());  // the previous file's verdict first: errors in file order
    RETURN_IF_ERROR(read);
    pending = std::async(std::launch::async, [this, &f, dst] { return verify_store_file(dir_, f, dst); });
    if (opts.progress) opts.progress(i + 1, total);
  }
  return collect();
}

RamStore::~RamStore() {
  if (pinned_) be_->unregister_host(arena_);
  std::free(arena_);
}

const void* RamStore::layer_host(int layer) const {
  CHECK(layer >= 0 && layer < m_.num_layers, "layer " << layer);
  return arena_ + stride_ * static_cast<size_t>(layer);
}

Status RamStore::load_layer(int layer, void* dst) {
  be_->copy_h2d(dst, layer_host(layer), m_.layer_bytes, StreamId::kH2D);
  return Status::OK();
}

Status RamStore::load_extras(void* dst) {
  be_->copy_h2d(dst, extras_host(), m_.extras_bytes, StreamId::kH2D);
  be_->sync_stream(StreamId::kH2D);
  return Status::OK();
}

}  // namespace st
