#include "stream/prefetcher.h"

#include <cstdlib>
#include <limits>

#include "core/check.h"

namespace st {

namespace {
// Note [lent activation memory]: how far ahead of compute a lent-slot pool may evict (2, as a
// two-slot pool runs); STREAMTUNE_LEND_DEPTH=N in the environment overrides it (A/B timing).
size_t near_demand() {
  static const size_t n = [] {
    const char* e = std::getenv("STREAMTUNE_LEND_DEPTH");
    const long v = e ? std::strtol(e, nullptr, 10) : 0;
    return v >= 1 && v <= 64 ? static_cast<size_t>(v) : size_t{2};
  }();
  return n;
}
}  // namespace

int belady_victim(const std::vector<int>& slot_layers, const std::vector<int>& visits, size_t c, size_t p,
                  const std::vector<size_t>& horizon) {
  constexpr size_t kEmpty = std::numeric_limits<size_t>::max();
  constexpr size_t kNever = kEmpty - 1;
  int best = -1;
  size_t best_next = 0;
  for (size_t s = 0; s < slot_layers.size(); ++s) {
    const size_t h = horizon.empty() ? kEmpty : horizon[s];
    if (h <= p) continue;  // lost before the visit being issued
    size_t next = slot_layers[s] < 0 ? kEmpty : kNever;
    for (size_t i = c; i < visits.size() && i < h && next == kNever; ++i)
      if (visits[i] == slot_layers[s]) next = i;
    if (next <= p) continue;  // needed before (or at) the visit being issued
    if (best < 0 || next > best_next) {
      best = static_cast<int>(s);
      best_next = next;
    }
  }
  return best;
}

Prefetcher::Prefetcher(LayerBufferPool* pool, LayerStore* store, CopyMode mode)
    : pool_(pool), store_(store), mode_(mode) {
  CHECK(store->manifest().layer_bytes <= pool->slot_bytes(), "pool slots smaller than a layer blob");
  if (mode_ == CopyMode::kThread) thread_ = std::thread([this] { copy_loop(); });
}

Prefetcher::~Prefetcher() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
}

std::vector<int> Prefetcher::slot_layers() const {
  std::vector<int> v(pool_->num_slots());
  for (int s = 0; s < pool_->num_slots(); ++s) v[s] = pool_->tag(s).layer;
  return v;
}

void Prefetcher::lend_slot(int slot, int first, int layers) {
  CHECK(c_ == visits_.size() && !held_, "lend_slot during a step");
  CHECK(slot >= 0 && slot < pool_->num_slots() && pool_->lent(slot), "lend_slot: slot " << slot << " is not lent");
  CHECK(first >= 0 && layers >= 1, "lend_slot: layers " << first << " + " << layers);
  lent_first_.resize(pool_->num_slots(), -1);
  lent_count_.resize(pool_->num_slots(), 0);
  lent_open_.resize(pool_->num_slots(), false);
  CHECK(lent_count_[slot] == 0, "lend_slot: slot " << slot << " lent twice");
  lent_first_[slot] = first;
  lent_count_[slot] = layers;
  if (region_dead_.size() < static_cast<size_t>(first + layers)) region_dead_.resize(first + layers, false);
}

size_t Prefetcher::horizon(int slot) const {
  if (static_cast<size_t>(slot) >= lent_count_.size() || lent_count_[slot] == 0) return std::numeric_limits<size_t>::max();
  if (!lent_open_[slot]) return 0;
  size_t i = c_;
  while (i < visits_.size() && !spans(slot, visits_[i])) ++i;
  return i;  // the next visit of a spanned layer closes it; none left in this step: open past its end
}

void Prefetcher::begin_step(const std::vector<int>& visits, const std::vector<bool>& backward) {
  CHECK(c_ == visits_.size() && !held_, "begin_step before the previous step was consumed");
  CHECK(backward.empty() || backward.size() == visits.size(), "begin_step: one backward flag per visit");
  visits_ = visits;
  backward_ = backward;
  backward_.resize(visits.size(), false);
  visit_slot_.assign(visits.size(), -1);
  visit_tag_.assign(visits.size(), SlotTag{});
  c_ = p_ = 0;
  pump();
}

// Issues visits from p_ on while a slot can take them (Note [prefetch rule]).
void Prefetcher::pump() {
  // The horizons depend on c_ and the open windows only, which issuing does not change.
  std::vector<size_t> hz;
  if (!lent_count_.empty())
    for (int s = 0; s < pool_->num_slots(); ++s) hz.push_back(horizon(s));
  while (p_ < visits_.size()) {
    int layer = visits_[p_];
    std::vector<int> occ = slot_layers();
    int hit = -1;
    for (size_t s = 0; s < occ.size() && hit < 0; ++s)
      if (occ[s] == layer && (hz.empty() || hz[s] > p_)) hit = static_cast<int>(s);
    if (hit >= 0) {
      visit_slot_[p_] = hit;
      visit_tag_[p_] = pool_->tag(hit);
      ++stats_.reuse_hits;
    } else {
      int victim = -1;
      if (hz.empty()) {
        victim = belady_victim(occ, visits_, c_, p_);
      } else {
        // With lent slots (Note [lent activation memory]) every layer in the pool may be the next
        // step's hit: ahead of compute, fill empty slots only; evict (Belady) only for the visits
        // compute needs within near_demand() visits, as a two-slot pool would.
        for (size_t s = 0; s < occ.size() && victim < 0; ++s)
          if (occ[s] < 0 && hz[s] > p_) victim = static_cast<int>(s);
        if (victim < 0 && p_ <= c_ + near_demand()) victim = belady_victim(occ, visits_, c_, p_, hz);
      }
      if (victim < 0) return;
      issue(victim, layer);
    }
    ++p_;
  }
}

void Prefetcher::issue(int slot, int layer) {
  Job j{slot, pool_->begin_fill(slot, layer)};
  visit_slot_[p_] = slot;
  visit_tag_[p_] = j.tag;
  ++stats_.loads;
  stats_.bytes += static_cast<int64_t>(store_->manifest().layer_bytes);
  if (mode_ == CopyMode::kInline) {
    run_job(j);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(j);
  }
  cv_.notify_all();
}

void Prefetcher::run_job(const Job& j) {
  Status st;
  {
    std::lock_guard<std::mutex> lk(mu_);
    st = error_;
  }
  if (st.ok()) {
    pool_->copy_wait_free(j.slot);
    st = store_->load_layer(j.tag.layer, pool_->data(j.slot));
    if (!st.ok()) {
      std::lock_guard<std::mutex> lk(mu_);
      if (error_.ok()) error_ = st;
    }
  }
  pool_->finish_fill(j.slot, j.tag, st);
}

void Prefetcher::copy_loop() {
  for (;;) {
    Job j;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      j = queue_.front();
      queue_.pop_front();
    }
    run_job(j);
  }
}

StatusOr<void*> Prefetcher::acquire(int layer) {
  CHECK(!held_, "acquire(" << layer << ") while another layer is held");
  CHECK(c_ < visits_.size() && visits_[c_] == layer,
        "acquire(" << layer << ") out of order: visit " << c_ << " expects layer "
                   << (c_ < visits_.size() ? visits_[c_] : -1));
  CHECK(c_ < p_, "visit " << c_ << " was never issued");
  // This visit closes the lent slots over its layer's region (Note [lent activation memory]): no
  // fill or hit went past the horizon, so they are idle.
  if (static_cast<size_t>(layer) < region_dead_.size()) region_dead_[layer] = false;
  for (size_t s = 0; s < lent_count_.size(); ++s)
    if (lent_open_[s] && spans(static_cast<int>(s), layer)) {
      pool_->close_lent(static_cast<int>(s));
      lent_open_[s] = false;
    }
  held_ = true;
  ++stats_.visits;
  int s = visit_slot_[c_];
  Status st = pool_->acquire(s, visit_tag_[c_]);
  if (!st.ok()) return st;
  return pool_->data(s);
}

void Prefetcher::release(int layer) {
  CHECK(held_ && visits_[c_] == layer, "release(" << layer << ") without a matching acquire");
  pool_->release(visit_slot_[c_]);
  held_ = false;
  if (backward_[c_] && static_cast<size_t>(layer) < region_dead_.size()) {
    region_dead_[layer] = true;
    // A slot opens once every region it spans is dead (Note [lent region spans]).
    for (size_t s = 0; s < lent_count_.size(); ++s) {
      if (lent_open_[s] || !spans(static_cast<int>(s), layer)) continue;
      bool dead = true;
      for (int l = lent_first_[s]; dead && l < lent_first_[s] + lent_count_[s]; ++l) dead = region_dead_[l];
      if (!dead) continue;
      pool_->open_lent(static_cast<int>(s));
      lent_open_[s] = true;
    }
  }
  ++c_;
  pump();
}

Status Prefetcher::end_step() {
  CHECK(c_ == visits_.size() && !held_, "end_step with " << visits_.size() - c_ << " visits not consumed");
  return status();
}

PrefetchStats Prefetcher::stats() const {
  PrefetchStats s = stats_;
  s.compute_wait_ns = pool_->compute_wait_ns();
  return s;
}

Status Prefetcher::status() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

}  // namespace st
