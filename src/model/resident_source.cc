#include "model/resident_source.h"

#include <cstdint>

#include "model/pack.h"

namespace st {

Status ResidentLayerSource::allocate() {
  ASSIGN_OR_RETURN(base_, be_->alloc(layout_.bytes * static_cast<size_t>(num_layers_)),
                   "allocating " << num_layers_ << " resident layers");
  return Status::OK();
}

ResidentLayerSource::~ResidentLayerSource() {
  if (base_) {
    be_->sync_all();
    be_->free(base_);
  }
}

StatusOr<std::unique_ptr<ResidentLayerSource>> ResidentLayerSource::from_checkpoint(Backend* be,
                                                                                    const ModelConfig& c,
                                                                                    const LayerLayout& layout,
                                                                                    const Checkpoint& ck) {
  const int L = static_cast<int>(c.num_layers);
  std::unique_ptr<ResidentLayerSource> src(new ResidentLayerSource(be, layout, L));
  RETURN_IF_ERROR(src->allocate());
  std::vector<uint8_t> staging(layout.bytes);
  for (int l = 0; l < L; ++l) {
    RETURN_IF_ERROR(pack_layer(ck, layout, l, staging.data()));
    be->copy_h2d(src->blob(l), staging.data(), layout.bytes, StreamId::kCompute);
    be->sync_stream(StreamId::kCompute);  // staging is reused for the next layer
  }
  return src;
}

StatusOr<std::unique_ptr<ResidentLayerSource>> ResidentLayerSource::from_host_blobs(
    Backend* be, const LayerLayout& layout, const std::vector<const void*>& blobs) {
  std::unique_ptr<ResidentLayerSource> src(new ResidentLayerSource(be, layout, static_cast<int>(blobs.size())));
  RETURN_IF_ERROR(src->allocate());
  for (size_t l = 0; l < blobs.size(); ++l)
    be->copy_h2d(src->blob(static_cast<int>(l)), blobs[l], layout.bytes, StreamId::kCompute);
  be->sync_stream(StreamId::kCompute);
  return src;
}

void ResidentLayerSource::begin_step(const std::vector<int>& visits) {
  CHECK(next_visit_ == visits_.size(), "begin_step before the previous step's visits were used");
  visits_ = visits;
  next_visit_ = 0;
}

LayerWeights ResidentLayerSource::acquire(int layer) {
  CHECK(layer >= 0 && layer < num_layers_, "layer " << layer);
  CHECK(held_ < 0, "acquire(" << layer << ") while layer " << held_ << " is held");
  CHECK(next_visit_ < visits_.size() && visits_[next_visit_] == layer,
        "acquire(" << layer << ") out of the announced visit order");
  ++next_visit_;
  held_ = layer;
  return layer_weights_view(layout_, blob(layer));
}

void ResidentLayerSource::release(int layer) {
  CHECK(held_ == layer, "release(" << layer << ") but held " << held_);
  held_ = -1;
}

void ResidentLayerSource::end_step() {
  CHECK(next_visit_ == visits_.size(), "end_step with " << visits_.size() - next_visit_ << " visits unused");
  CHECK(held_ < 0);
}

}  // namespace st
