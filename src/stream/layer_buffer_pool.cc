#include "stream/layer_buffer_pool.h"

#include <chrono>

#include "core/check.h"

namespace st {

StatusOr<std::unique_ptr<LayerBufferPool>> LayerBufferPool::create(Backend* be, int num_slots,
                                                                   size_t slot_bytes) {
  CHECK(num_slots >= 1, "pool needs at least one slot");
  std::unique_ptr<LayerBufferPool> pool(new LayerBufferPool(be));
  pool->slot_bytes_ = slot_bytes;
  pool->slots_.resize(num_slots);
  for (int s = 0; s < num_slots; ++s) {
    Slot& slot = pool->slots_[s];
    ASSIGN_OR_RETURN(slot.data, be->alloc(slot_bytes),
                     "layer buffer pool slot " << s << " of " << num_slots << " (" << slot_bytes << " bytes)");
    slot.ready = be->create_event();
    slot.free = be->create_event();
  }
  return pool;
}

LayerBufferPool::~LayerBufferPool() {
  be_->sync_all();  // no copy or kernel may still touch a slot we free
  for (Slot& s : slots_)
    if (s.data && !s.lent) be_->free(s.data);
}

int LayerBufferPool::add_lent_slot(void* data) {
  std::lock_guard<std::mutex> lk(mu_);
  Slot& slot = slots_.emplace_back();
  slot.data = data;
  slot.lent = true;
  slot.ready = be_->create_event();
  slot.free = be_->create_event();
  return static_cast<int>(slots_.size()) - 1;
}

void LayerBufferPool::empty_lent(Slot& slot) {
  slot.tag = SlotTag{-1, next_generation_++};
  slot.published = slot.tag.generation;  // empty: nothing to wait for
}

void LayerBufferPool::open_lent(int s) {
  be_->record(*slots_[s].free, StreamId::kCompute);
  std::lock_guard<std::mutex> lk(mu_);
  CHECK(slots_[s].lent && !slots_[s].held, "open_lent of slot " << s);
  empty_lent(slots_[s]);
}

void LayerBufferPool::close_lent(int s) {
  std::lock_guard<std::mutex> lk(mu_);
  const Slot& slot = slots_[s];
  CHECK(slot.lent && !slot.held && slot.published >= slot.tag.generation,
        "lent slot " << s << " closed while compute holds it or a fill is in flight");
  empty_lent(slots_[s]);
}

SlotTag LayerBufferPool::tag(int s) const {
  std::lock_guard<std::mutex> lk(mu_);
  return slots_[s].tag;
}

bool LayerBufferPool::held(int s) const {
  std::lock_guard<std::mutex> lk(mu_);
  return slots_[s].held;
}

SlotTag LayerBufferPool::begin_fill(int s, int layer) {
  std::lock_guard<std::mutex> lk(mu_);
  Slot& slot = slots_[s];
  CHECK(!slot.held, "early-overwrite tripwire: slot " << s << " is about to be overwritten with layer " << layer
                                                      << " while compute still holds layer " << slot.tag.layer);
  slot.tag = SlotTag{layer, next_generation_++};
  return slot.tag;
}

void LayerBufferPool::copy_wait_free(int s) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    CHECK(!slots_[s].held, "early-overwrite tripwire: slot " << s << " is being written while compute holds it");
  }
  be_->wait(StreamId::kH2D, *slots_[s].free);
}

void LayerBufferPool::finish_fill(int s, SlotTag tag, const Status& status) {
  be_->record(*slots_[s].ready, StreamId::kH2D);
  std::lock_guard<std::mutex> lk(mu_);
  Slot& slot = slots_[s];
  CHECK(slot.tag == tag, "slot " << s << " was re-tagged (layer " << slot.tag.layer << ") during the fill of layer "
                                 << tag.layer);
  slot.published = tag.generation;
  slot.fill_status = status;
  cv_.notify_all();
}

Status LayerBufferPool::acquire(int s, SlotTag expect) {
  std::unique_lock<std::mutex> lk(mu_);
  Slot& slot = slots_[s];
  if (slot.published < expect.generation) {
    auto t0 = std::chrono::steady_clock::now();
    cv_.wait(lk, [&] { return slot.published >= expect.generation; });
    compute_wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  }
  CHECK(slot.tag == expect, "compute acquired slot " << s << " for layer " << expect.layer << " (generation "
                                                     << expect.generation << ") but it holds layer " << slot.tag.layer
                                                     << " (generation " << slot.tag.generation << ")");
  CHECK(!slot.held, "slot " << s << " acquired twice without a release");
  slot.held = true;
  Status st = slot.fill_status;
  lk.unlock();
  be_->wait(StreamId::kCompute, *slot.ready);
  return st;
}

void LayerBufferPool::release(int s) {
  be_->record(*slots_[s].free, StreamId::kCompute);
  std::lock_guard<std::mutex> lk(mu_);
  CHECK(slots_[s].held, "release of slot " << s << " that compute does not hold");
  slots_[s].held = false;
  cv_.notify_all();
}

}  // namespace st
