// Lent pool slots (stream/prefetcher.h Note [lent activation memory]): the prefetcher may hold
// layers in a layer's saved region only between that layer's backward and its next visit. The
// tests play the Model's part: every training forward of layer l writes a pattern into region l
// and its backward checks the pattern is still there (no fill landed in a live region), while
// every acquire checks the slot holds the right layer (no lent slot served bytes its owner had
// already overwritten).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "mem_store.h"
#include "stream/layer_buffer_pool.h"
#include "stream/planner.h"
#include "stream/prefetcher.h"

namespace st {
namespace {

using testing_util::MemStore;

std::unique_ptr<Backend> cpu() { return make_backend(DeviceKind::kCpu).value(); }

struct Visits {
  std::vector<int> layers;
  std::vector<bool> backward;
};

// G micro-batches, each forward 0..L-1 then backward L-1..0 (Model's micro-batch-major order).
Visits training_step(int L, int micro_batches) {
  Visits v;
  for (int g = 0; g < micro_batches; ++g) {
    for (int l = 0; l < L; ++l) v.layers.push_back(l), v.backward.push_back(false);
    for (int l = L - 1; l >= 0; --l) v.layers.push_back(l), v.backward.push_back(true);
  }
  return v;
}

// The saved regions, adjacent in one arena as the Model carves them.
class Regions {
 public:
  Regions(int layers, size_t bytes) : bytes_(bytes), mem_(layers * bytes) {}
  void* data(int l) { return mem_.data() + l * bytes_; }
  // The Model's training forward of layer l: its activations overwrite the region.
  void write(int l, uint8_t tag) { std::memset(data(l), tag, bytes_); }
  // Its backward reads them back: they must be intact.
  bool intact(int l, uint8_t tag) const {
    for (size_t i = 0; i < bytes_; ++i)
      if (mem_[l * bytes_ + i] != tag) return false;
    return true;
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> mem_;
};

// Runs `steps` steps of `v` (training_step, or forward-only when v.backward is all false) and
// checks every visit; returns the loads of the last step.
int64_t run_steps(Prefetcher& pf, MemStore& store, Regions& regions, const Visits& v, int steps, bool train) {
  int64_t loads_before = 0;
  for (int step = 0; step < steps; ++step) {
    loads_before = pf.stats().loads;
    if (train)
      pf.begin_step(v.layers, v.backward);
    else
      pf.begin_step(v.layers);
    for (size_t i = 0; i < v.layers.size(); ++i) {
      const int l = v.layers[i];
      StatusOr<void*> p = pf.acquire(l);
      EXPECT_TRUE(p.ok());
      if (!p.ok()) return -1;
      EXPECT_TRUE(store.holds(*p, l)) << "step " << step << " visit " << i << " layer " << l;
      const auto tag = static_cast<uint8_t>(0x80 + l);
      if (train && !v.backward[i]) regions.write(l, tag);
      if (train && v.backward[i]) {
        EXPECT_TRUE(regions.intact(l, tag)) << "step " << step << " visit " << i;
      }
      pf.release(l);
    }
    EXPECT_TRUE(pf.end_step().ok());
  }
  return pf.stats().loads - loads_before;
}

TEST(LentSlots, RegionsAreUsedOnlyBetweenBackwardAndNextVisitAndSaveForwardLoads) {
  const int L = 8;
  const size_t bytes = 512;
  for (CopyMode mode : {CopyMode::kInline, CopyMode::kThread}) {
    auto be = cpu();
    MemStore store(be.get(), L, bytes, -1, /*jitter=*/mode == CopyMode::kThread);
    Regions regions(L, bytes);
    auto pool = LayerBufferPool::create(be.get(), 2, bytes).value();
    Prefetcher pf(pool.get(), &store, mode);
    for (int l = 0; l < L; ++l) pf.lend_slot(pool->add_lent_slot(regions.data(l)), l);
    const Visits v = training_step(L, 1);
    const int64_t steady = run_steps(pf, store, regions, v, 4, /*train=*/true);
    // Without lent slots two slots load 2L - 4 = 12 layers a step (reuse at the turn and across
    // the boundary). With them the backward fills each region as it opens and keeps what it
    // loaded, so the next forward finds every layer but L-1 (its own slot took layer L-4 at the
    // turn, before any region below L-1 was open): 1 load in the forward, L-2 in the backward.
    EXPECT_EQ(steady, L - 1) << "copy mode " << static_cast<int>(mode);
  }
}

// Note [lent region spans]: k adjacent regions of consecutive layers hold one blob together; the
// windows keep every region's bytes (run_steps), and the loads are the planner's model of them.
TEST(LentSlots, SpansOfAdjacentRegionsHoldABlobTogether) {
  for (int own : {2, 3})
    for (int L : {12, 28})
      for (int k = 1; k <= 6; ++k) {
        const size_t region = 128;
        auto be = cpu();
        MemStore store(be.get(), L, k * region, -1, /*jitter=*/false);
        Regions regions(L, region);
        auto pool = LayerBufferPool::create(be.get(), own, k * region).value();
        Prefetcher pf(pool.get(), &store, CopyMode::kInline);
        int lent = 0;
        for (int l = 0; l + k <= L; l += k, ++lent) pf.lend_slot(pool->add_lent_slot(regions.data(l)), l, k);
        const int64_t steady = run_steps(pf, store, regions, training_step(L, 1), 4, /*train=*/true);
        const std::string row = "own " + std::to_string(own) + " L " + std::to_string(L) + " k " + std::to_string(k);
        EXPECT_LT(steady, steady_layer_loads(L, own, 0)) << row;  // fewer than without lending
        EXPECT_NEAR(steady, steady_layer_loads(L, own, lent), 1) << row;
      }
}

TEST(LentSlots, ForwardOnlyStepsAndGradientAccumulationStayCorrect) {
  const int L = 6;
  const size_t bytes = 256;
  auto be = cpu();
  MemStore store(be.get(), L, bytes, -1, /*jitter=*/true);
  Regions regions(L, bytes);
  auto pool = LayerBufferPool::create(be.get(), 2, bytes).value();
  Prefetcher pf(pool.get(), &store, CopyMode::kThread);
  // Lend only some regions (as when only some regions hold a blob).
  for (int l : {1, 3, 4}) pf.lend_slot(pool->add_lent_slot(regions.data(l)), l);
  Visits fwd;
  for (int l = 0; l < L; ++l) fwd.layers.push_back(l), fwd.backward.push_back(false);
  run_steps(pf, store, regions, training_step(L, 3), 2, /*train=*/true);
  run_steps(pf, store, regions, fwd, 1, /*train=*/false);  // eval between training steps
  run_steps(pf, store, regions, training_step(L, 1), 2, /*train=*/true);
  run_steps(pf, store, regions, fwd, 2, /*train=*/false);
}

TEST(LentSlots, RandomLendingsNeverServeStaleBytes) {
  std::mt19937 rng(77);
  for (int trial = 0; trial < 40; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 9);
    const int own = 1 + static_cast<int>(rng() % 3);
    const int k = 1 + static_cast<int>(rng() % 3);  // regions a blob needs (Note [lent region spans])
    const size_t region = 64 * (1 + rng() % 3);
    auto be = cpu();
    MemStore store(be.get(), L, k * region, -1, /*jitter=*/trial % 4 == 0);
    Regions regions(L, region);
    auto pool = LayerBufferPool::create(be.get(), own, k * region).value();
    Prefetcher pf(pool.get(), &store, trial % 2 ? CopyMode::kThread : CopyMode::kInline);
    for (int l = 0; l + k <= L;)
      if (rng() % 3) {
        pf.lend_slot(pool->add_lent_slot(regions.data(l)), l, k);
        l += k;
      } else {
        ++l;
      }
    for (int step = 0; step < 4; ++step) {
      const bool train = rng() % 4 != 0;
      Visits v = training_step(L, 1 + static_cast<int>(rng() % 2));
      if (!train) v.backward.assign(v.layers.size(), false);
      // Sometimes the backward visits in another order: a span must stay shut while any region it
      // covers is live, however far off that region's backward is.
      if (rng() % 3 == 0)
        for (size_t b = 0; b < v.layers.size(); b += 2 * L)
          std::shuffle(v.layers.begin() + b + L, v.layers.begin() + b + 2 * L, rng);
      run_steps(pf, store, regions, v, 1, train);
      if (testing::Test::HasFailure()) FAIL() << "trial " << trial << " step " << step;
    }
  }
}

TEST(Belady, HorizonExcludesSlotsLostBeforeTheVisitAndCountsLaterUsesAsNever) {
  std::vector<int> visits = {0, 1, 2, 3, 2, 1, 0};
  // Slot 1 is lost at visit 2: it cannot take the fill for visit 3.
  EXPECT_EQ(belady_victim({0, -1}, visits, 3, 3, {SIZE_MAX, 2}), 0);  // slot 0 (0 needed at 6)
  // Slot 1 (layer 1, next use 5) is lost at 4: its use counts as never, so it goes first.
  EXPECT_EQ(belady_victim({0, 1}, visits, 3, 3, {SIZE_MAX, 4}), 1);
  EXPECT_EQ(belady_victim({0, 1}, visits, 3, 3, {SIZE_MAX, SIZE_MAX}), 0);  // plain Belady: 0 (at 6)
}

}  // namespace
}  // namespace st
