#include "stream/streamed_layer_source.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/check.h"

namespace st {

StatusOr<std::unique_ptr<StreamedLayerSource>> StreamedLayerSource::create(Backend* be, LayerStore* store,
                                                                           const StreamedSourceOptions& opts) {
  const StoreManifest& m = store->manifest();
  LayerLayout layout = make_layer_layout(m.config, m.dtype, m.quant);
  CHECK(layout.bytes == m.layer_bytes, "store layout disagrees with make_layer_layout");
  LayerLayout resident_layout = resident_layer_layout(m.config, m.dtype, m.quant);
  std::unique_ptr<StreamedLayerSource> src(
      new StreamedLayerSource(be, store, std::move(layout), std::move(resident_layout)));
  src->resident_index_.assign(m.num_layers, -1);
  std::vector<int> resident;
  for (int l : opts.resident_layers) {
    if (l < 0 || l >= m.num_layers) return InvalidArgument(Str() << "resident layer " << l << " out of range");
    if (src->resident_index_[l] < 0) {
      src->resident_index_[l] = static_cast<int>(resident.size());
      resident.push_back(l);
    }
  }
  RETURN_IF_ERROR(src->load_resident(resident));
  int streamed = m.num_layers - static_cast<int>(resident.size());
  if (streamed > 0) {
    if (opts.num_slots < 1) return InvalidArgument("stream_buffers must be at least 1");
    ASSIGN_OR_RETURN(src->pool_, LayerBufferPool::create(be, std::min(opts.num_slots, streamed), m.layer_bytes));
    const char* sync = std::getenv("STREAMTUNE_SYNC_DEBUG");
    CopyMode mode = sync && std::strcmp(sync, "1") == 0 ? CopyMode::kInline : opts.copy_mode;
    src->prefetcher_ = std::make_unique<Prefetcher>(src->pool_.get(), store, mode);
  }
  return src;
}

Status StreamedLayerSource::load_resident(const std::vector<int>& layers) {
  if (layers.empty()) return Status::OK();
  const size_t lb = resident_layout_.bytes;
  ASSIGN_OR_RETURN(resident_, be_->alloc(lb * layers.size()), "resident layers (" << layers.size() << " x " << lb << " bytes)");
  if (resident_layout_.quant == layout_.quant) {
    for (size_t i = 0; i < layers.size(); ++i)
      RETURN_IF_ERROR(store_->load_layer(layers[i], static_cast<char*>(resident_) + i * lb));
    be_->sync_stream(StreamId::kH2D);
    return Status::OK();
  }
  // Coded store, dense residents: each blob through one staging buffer, decoded into place.
  ASSIGN_OR_RETURN(void* staging, be_->alloc(layout_.bytes), "staging a coded resident layer (" << layout_.bytes << " bytes)");
  Status st;
  for (size_t i = 0; i < layers.size() && st.ok(); ++i) {
    st = store_->load_layer(layers[i], staging);
    be_->sync_stream(StreamId::kH2D);  // the decode runs on the compute stream
    if (st.ok()) decode_resident(staging, static_cast<char*>(resident_) + i * lb);
    be_->sync_stream(StreamId::kCompute);  // before the next load overwrites the staging
  }
  be_->free(staging);
  return st;
}

// One coded blob into its dense twin: code12 linears decoded, every other tensor copied.
void StreamedLayerSource::decode_resident(void* coded, void* dense) {
  const LayerWeights c = layer_weights_view(layout_, coded);
  const LayerWeights d = layer_weights_view(resident_layout_, dense);
  const std::pair<const Tensor*, const Tensor*> linears[] = {
      {&c.q, &d.q}, {&c.k, &d.k}, {&c.v, &d.v}, {&c.o, &d.o}, {&c.gate, &d.gate}, {&c.up, &d.up}, {&c.down, &d.down}};
  const Tensor* aux[] = {&c.q_aux, &c.k_aux, &c.v_aux, &c.o_aux, &c.gate_aux, &c.up_aux, &c.down_aux};
  for (size_t i = 0; i < std::size(linears); ++i) be_->decode_code12(*linears[i].second, *linears[i].first, *aux[i]);
  for (const LayerTensorSpec& s : resident_layout_.tensors) {
    const LayerTensorSpec* from = layout_.find(s.id);
    if (from == nullptr || from->quantized()) continue;
    CHECK(from->nbytes == s.nbytes, "resident decode: " << s.hf_suffix << " changed size");
    be_->copy_d2d(static_cast<char*>(dense) + s.offset, static_cast<char*>(coded) + from->offset, s.nbytes,
                  StreamId::kCompute);
  }
}

StreamedLayerSource::~StreamedLayerSource() {
  prefetcher_.reset();
  pool_.reset();
  if (resident_) {
    be_->sync_all();
    be_->free(resident_);
  }
}

void StreamedLayerSource::begin_step(const std::vector<int>& visits) { begin_training_step(visits, {}); }

void StreamedLayerSource::begin_training_step(const std::vector<int>& visits, const std::vector<bool>& backward) {
  CHECK(backward.empty() || backward.size() == visits.size(), "begin_training_step: one flag per visit");
  std::vector<int> streamed;
  std::vector<bool> streamed_backward;
  for (size_t i = 0; i < visits.size(); ++i) {
    const int l = visits[i];
    CHECK(l >= 0 && l < static_cast<int>(resident_index_.size()), "visit of layer " << l);
    if (resident_index_[l] >= 0) continue;
    streamed.push_back(l);
    streamed_backward.push_back(!backward.empty() && backward[i]);
  }
  if (prefetcher_) prefetcher_->begin_step(streamed, streamed_backward);
}

void StreamedLayerSource::lend_regions(const std::vector<LentRegion>& regions) {
  if (lent_) {  // the pool holds these pointers: another set would leave it writing freed memory
    bool same = regions.size() == offered_.size();
    for (size_t i = 0; same && i < regions.size(); ++i)
      same = regions[i].layer == offered_[i].layer && regions[i].data == offered_[i].data &&
             regions[i].bytes == offered_[i].bytes;
    CHECK(same, "lend_regions: a source borrows from one Model's arena for its whole life");
    return;
  }
  lent_ = true;
  offered_ = regions;
  if (!prefetcher_) return;
  const char* env = std::getenv("STREAMTUNE_LEND_ACTIVATIONS");
  if (env && std::strcmp(env, "0") == 0) return;
  // Note [lent region spans]: runs of consecutive streamed layers whose regions are adjacent, cut
  // greedily from the lowest layer into spans that hold a blob.
  auto streamed = [&](const LentRegion& r) {
    return r.layer >= 0 && r.layer < static_cast<int>(resident_index_.size()) && resident_index_[r.layer] < 0 &&
           r.data != nullptr;
  };
  for (size_t i = 0; i < regions.size();) {
    if (!streamed(regions[i])) {
      ++i;
      continue;
    }
    size_t j = i, bytes = regions[i].bytes;
    while (bytes < pool_->slot_bytes() && j + 1 < regions.size() && streamed(regions[j + 1]) &&
           regions[j + 1].layer == regions[j].layer + 1 &&
           static_cast<char*>(regions[j].data) + regions[j].bytes == regions[j + 1].data)
      bytes += regions[++j].bytes;
    if (bytes >= pool_->slot_bytes()) {
      prefetcher_->lend_slot(pool_->add_lent_slot(regions[i].data), regions[i].layer, static_cast<int>(j - i + 1));
      ++lent_slots_;
    }
    i = j + 1;
  }
}

LayerWeights StreamedLayerSource::acquire(int layer) {
  if (resident_index_[layer] >= 0)
    return layer_weights_view(resident_layout_,
                              static_cast<char*>(resident_) + resident_index_[layer] * resident_layout_.bytes);
  StatusOr<void*> p = prefetcher_->acquire(layer);
  if (p.ok()) return layer_weights_view(layout_, *p);
  if (error_.ok()) error_ = p.status();
  // Keep the protocol going without blocking: the slot's stale bytes, the step is discarded.
  return layer_weights_view(layout_, pool_->data(prefetcher_->held_slot()));
}

void StreamedLayerSource::release(int layer) {
  if (resident_index_[layer] < 0) prefetcher_->release(layer);
}

void StreamedLayerSource::end_step() {
  if (!prefetcher_) return;
  Status s = prefetcher_->end_step();
  if (!s.ok() && error_.ok()) error_ = s;
}

Status StreamedLayerSource::status() const {
  if (!error_.ok()) return error_;
  return prefetcher_ ? prefetcher_->status() : Status::OK();
}

PrefetchStats StreamedLayerSource::stats() const { return prefetcher_ ? prefetcher_->stats() : PrefetchStats{}; }

}  // namespace st
