// LayerBufferPool + Prefetcher: Belady choices, the early-overwrite and wrong-layer tripwires,
// and random visit sequences checked against a trivial model of the pool (std::map).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "mem_store.h"
#include "stream/layer_buffer_pool.h"
#include "stream/prefetcher.h"

namespace st {
namespace {

using testing_util::MemStore;

std::unique_ptr<Backend> cpu() { return make_backend(DeviceKind::kCpu).value(); }

TEST(Belady, PrefersEmptyThenNeverThenFurthest) {
  std::vector<int> visits = {0, 1, 2, 3, 2, 1, 0};
  EXPECT_EQ(belady_victim({5, -1}, visits, 0, 0), 1);     // empty slot first
  EXPECT_EQ(belady_victim({0, 9}, visits, 0, 1), 1);      // 9 never needed again
  EXPECT_EQ(belady_victim({0, 1}, visits, 2, 2), 0);      // from c=2: 1 at 5, 0 at 6 -> evict 0
  EXPECT_EQ(belady_victim({2, 1}, visits, 2, 3), 1);      // 2 needed at 2 (<= p): only 1 (at 5)
  EXPECT_EQ(belady_victim({2, 3}, visits, 2, 3), -1);     // both needed in [c, p]: wait
  EXPECT_EQ(belady_victim({7, 8}, visits, 0, 0), 0);      // ties -> lowest slot
}

TEST(Prefetcher, ForwardBackwardScheduleReusesAtTheTurnAndAcrossSteps) {
  auto be = cpu();
  const int L = 6;
  MemStore store(be.get(), L, 1024);
  auto pool = LayerBufferPool::create(be.get(), 2, 1024).value();
  Prefetcher pf(pool.get(), &store, CopyMode::kThread);
  std::vector<int> visits;
  for (int l = 0; l < L; ++l) visits.push_back(l);
  for (int l = L - 1; l >= 0; --l) visits.push_back(l);
  for (int step = 0; step < 2; ++step) {
    pf.begin_step(visits);
    for (int l : visits) {
      StatusOr<void*> p = pf.acquire(l);
      ASSERT_TRUE(p.ok());
      EXPECT_TRUE(store.holds(*p, l)) << "layer " << l;
      pf.release(l);
    }
    ASSERT_TRUE(pf.end_step().ok());
  }
  PrefetchStats s = pf.stats();
  // Step 1: 12 visits, the 2 layers in the slots at the turn are reused -> 10 loads.
  // Step 2: additionally layers 1 and 0 left by step 1's backward are reused -> 8 loads.
  EXPECT_EQ(s.loads, 18);
  EXPECT_EQ(s.reuse_hits, 6);
  EXPECT_EQ(s.visits, 24);
  EXPECT_EQ(s.bytes, 18 * 1024);
  EXPECT_EQ(store.loads, 18);
}

TEST(Prefetcher, AllSlotsLoadsEachLayerOnce) {
  auto be = cpu();
  MemStore store(be.get(), 4, 512);
  auto pool = LayerBufferPool::create(be.get(), 4, 512).value();
  Prefetcher pf(pool.get(), &store, CopyMode::kInline);
  std::vector<int> visits = {0, 1, 2, 3, 3, 2, 1, 0};
  for (int step = 0; step < 3; ++step) {
    pf.begin_step(visits);
    for (int l : visits) {
      ASSERT_TRUE(pf.acquire(l).ok());
      pf.release(l);
    }
    ASSERT_TRUE(pf.end_step().ok());
  }
  EXPECT_EQ(pf.stats().loads, 4);
  EXPECT_EQ(pf.stats().reuse_hits, 20);
}

// The trivial model: slot -> layer map, same issue rule, counted loads/hits and the slot of
// every visit. Written from the rule in prefetcher.h, independently of the implementation.
struct PoolModel {
  std::map<int, int> slot_layer;  // absent = empty
  int n;
  int64_t loads = 0, hits = 0;
  std::vector<int> visit_slot;

  size_t next_use(int layer, const std::vector<int>& v, size_t c) const {
    for (size_t i = c; i < v.size(); ++i)
      if (v[i] == layer) return i;
    return SIZE_MAX - 1;
  }
  // Issues from p while possible; returns the new p.
  size_t pump(const std::vector<int>& v, size_t c, size_t p) {
    for (; p < v.size(); ++p) {
      int found = -1;
      for (auto& [s, l] : slot_layer)
        if (l == v[p] && found < 0) found = s;
      if (found >= 0) {
        ++hits;
        visit_slot[p] = found;
        continue;
      }
      int best = -1;
      size_t best_next = 0;
      for (int s = 0; s < n; ++s) {
        size_t nu = slot_layer.count(s) ? next_use(slot_layer[s], v, c) : SIZE_MAX;
        if (nu <= p) continue;
        if (best < 0 || nu > best_next) best = s, best_next = nu;
      }
      if (best < 0) return p;
      slot_layer[best] = v[p];
      ++loads;
      visit_slot[p] = best;
    }
    return p;
  }
};

TEST(Prefetcher, RandomSequencesMatchTheMapModel) {
  auto be = cpu();
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 60; ++trial) {
    int L = 1 + static_cast<int>(rng() % 7);
    int n = 1 + static_cast<int>(rng() % 4);
    size_t bytes = 256 * (1 + rng() % 4);
    MemStore store(be.get(), L, bytes, -1, /*jitter=*/trial % 3 == 0);
    auto pool = LayerBufferPool::create(be.get(), n, bytes).value();
    Prefetcher pf(pool.get(), &store, trial % 2 ? CopyMode::kThread : CopyMode::kInline);
    PoolModel model;
    model.n = n;
    for (int step = 0; step < 3; ++step) {
      std::vector<int> v(rng() % 20);
      for (int& x : v) x = static_cast<int>(rng() % L);
      model.visit_slot.assign(v.size(), -1);
      size_t mp = model.pump(v, 0, 0);
      pf.begin_step(v);
      for (size_t i = 0; i < v.size(); ++i) {
        StatusOr<void*> p = pf.acquire(v[i]);
        ASSERT_TRUE(p.ok());
        int s = pf.visit_slots()[i];
        ASSERT_EQ(s, model.visit_slot[i]) << "trial " << trial << " visit " << i;
        EXPECT_EQ(pool->tag(s).layer, v[i]);
        ASSERT_TRUE(store.holds(*p, v[i])) << "trial " << trial << " visit " << i << " layer " << v[i];
        pf.release(v[i]);
        mp = model.pump(v, i + 1, mp);
      }
      ASSERT_TRUE(pf.end_step().ok());
    }
    EXPECT_EQ(pf.stats().loads, model.loads) << "trial " << trial;
    EXPECT_EQ(pf.stats().reuse_hits, model.hits) << "trial " << trial;
    EXPECT_EQ(store.loads, model.loads);
  }
}

TEST(LayerBufferPoolDeathTest, EarlyOverwriteTripwire) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto be = cpu();
        auto pool = LayerBufferPool::create(be.get(), 2, 256).value();
        SlotTag t = pool->begin_fill(0, 3);
        pool->finish_fill(0, t, Status::OK());
        (void)pool->acquire(0, t);
        pool->begin_fill(0, 5);  // compute still holds layer 3
      },
      "early-overwrite tripwire");
}

TEST(LayerBufferPoolDeathTest, AcquiringASlotHoldingAnotherLayer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto be = cpu();
        auto pool = LayerBufferPool::create(be.get(), 2, 256).value();
        SlotTag t = pool->begin_fill(1, 3);
        pool->finish_fill(1, t, Status::OK());
        (void)pool->acquire(1, SlotTag{4, t.generation});
      },
      "but it holds layer 3");
}

TEST(LayerBufferPool, ReleaseThenRefillIsFine) {
  auto be = cpu();
  auto pool = LayerBufferPool::create(be.get(), 1, 256).value();
  SlotTag a = pool->begin_fill(0, 1);
  pool->finish_fill(0, a, Status::OK());
  ASSERT_TRUE(pool->acquire(0, a).ok());
  pool->release(0);
  SlotTag b = pool->begin_fill(0, 2);
  EXPECT_GT(b.generation, a.generation);
  pool->finish_fill(0, b, IOError("x"));
  EXPECT_EQ(pool->acquire(0, b).code(), StatusCode::kIOError);
  pool->release(0);
}

TEST(Prefetcher, LoadErrorIsStickyNamesTheFileAndNeverHangs) {
  auto be = cpu();
  MemStore store(be.get(), 5, 256, /*fail_layer=*/2);
  auto pool = LayerBufferPool::create(be.get(), 2, 256).value();
  Prefetcher pf(pool.get(), &store, CopyMode::kThread);
  std::vector<int> v = {0, 1, 2, 3, 4, 4, 3, 2, 1, 0};
  pf.begin_step(v);
  int failed = 0;
  for (int l : v) {
    StatusOr<void*> p = pf.acquire(l);
    if (!p.ok()) {
      ++failed;
      EXPECT_NE(p.status().message().find("layer_002.safetensors"), std::string::npos);
    }
    pf.release(l);
  }
  Status s = pf.end_step();
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find("layer_002"), std::string::npos);
  EXPECT_GE(failed, 1);
}

}  // namespace
}  // namespace st
