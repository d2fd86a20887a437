// The RAM tier within a RAM budget (store/host_memory.h Note [partial RAM store]): which layers the
// arena keeps, and that loads give the store files' bytes whether a layer is in RAM or read from
// disk (a damaged file left on disk is still caught, naming it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

#include "backend/backend.h"
#include "core/file.h"
#include "store/host_memory.h"
#include "store/ram_store.h"
#include "store_test_util.h"

namespace st {
namespace {

using testing_util::TempDir;

StoreManifest manifest(int layers, uint64_t layer_bytes, uint64_t extras_bytes) {
  StoreManifest m;
  m.num_layers = layers;
  m.layer_bytes = layer_bytes;
  m.extras_bytes = extras_bytes;
  return m;
}

int count(const std::vector<bool>& v) { return static_cast<int>(std::count(v.begin(), v.end(), true)); }

TEST(HostMemory, ParsesMeminfoInKiB) {
  HostMemory m = parse_meminfo("MemTotal:       65536000 kB\nMemFree:  100 kB\nMemAvailable:   32768000 kB\n");
  EXPECT_EQ(m.total, 65536000ull * 1024);
  EXPECT_EQ(m.available, 32768000ull * 1024);
  EXPECT_EQ(parse_meminfo("garbage").available, 0u);
  // 10% of total (6.25 GiB) exceeds the 2 GiB floor.
  EXPECT_EQ(default_ram_budget(m), m.available - m.total / 10);
  HostMemory small{4ull << 30, 3ull << 30};
  EXPECT_EQ(default_ram_budget(small), 1ull << 30);  // the 2 GiB floor
  EXPECT_EQ(default_ram_budget(HostMemory{4ull << 30, 1ull << 30}), 0u);
  EXPECT_EQ(default_ram_budget(HostMemory{}), UINT64_MAX);  // unknown: no limit
}

TEST(HostMemory, ReadsThisMachine) {  // Linux: /proc/meminfo is always there
  const HostMemory m = host_memory();
  EXPECT_GT(m.total, 64ull << 20);
  EXPECT_GT(m.available, 0u);
  EXPECT_LE(m.available, m.total);
}

TEST(HostMemory, AContainersCgroupLimitLowersWhatIsAvailable) {
  const HostMemory host{64ull << 30, 60ull << 30};
  // cgroup v2: 8 GiB limit, 3 GiB charged of which 1 GiB inactive page cache -> 6 GiB free.
  HostMemory m = apply_cgroup_limit(host, "8589934592\n", "3221225472\n", "anon 100\ninactive_file 1073741824\n");
  EXPECT_EQ(m.total, 8ull << 30);
  EXPECT_EQ(m.available, 6ull << 30);
  // No limit: "max" (v2) or ~2^63 (v1); unreadable files.
  EXPECT_EQ(apply_cgroup_limit(host, "max\n", "100", "").available, host.available);
  EXPECT_EQ(apply_cgroup_limit(host, "9223372036854771712", "100", "").available, host.available);
  EXPECT_EQ(apply_cgroup_limit(host, "", "", "").available, host.available);
  // v1's memory.stat names it total_inactive_file; usage over the limit leaves nothing.
  EXPECT_EQ(apply_cgroup_limit(host, "1000", "900", "total_inactive_file 300\n").available, 400u);
  EXPECT_EQ(apply_cgroup_limit(host, "1000", "5000", "").available, 0u);
  // A limit above the machine's free memory does not raise it.
  EXPECT_EQ(apply_cgroup_limit(host, "137438953472", "0", "").available, host.available);
}

TEST(HostMemory, EverythingFitsMeansAnEmptyChoice) {
  const StoreManifest m = manifest(8, 4096, 8192);
  EXPECT_TRUE(choose_ram_layers(m, 8 * 4096 + 8192, {}).empty());
  EXPECT_TRUE(choose_ram_layers(m, UINT64_MAX, {1, 5}).empty());
  EXPECT_EQ(count(choose_ram_layers(m, 8 * 4096 + 8191, {})), 7);
}

TEST(HostMemory, StreamedLayersFirstAndDiskLayersSpread) {
  const StoreManifest m = manifest(12, 4096, 4096);
  // Room for the extras and 7 layers; 3 resident (0, 4, 8): the 9 streamed take 7, two of them
  // spread over the depth go to disk, and every resident layer is read from disk.
  std::vector<bool> r = choose_ram_layers(m, 4096 + 7 * 4096, {0, 4, 8});
  ASSERT_EQ(r.size(), 12u);
  EXPECT_EQ(count(r), 7);
  for (int l : {0, 4, 8}) EXPECT_FALSE(r[l]) << l;
  std::vector<int> disk_streamed;
  for (int l = 0; l < 12; ++l)
    if (!r[l] && l % 4 != 0) disk_streamed.push_back(l);
  ASSERT_EQ(disk_streamed.size(), 2u);
  EXPECT_GE(disk_streamed[1] - disk_streamed[0], 3);  // spread, not adjacent at one end
  // Room beyond the streamed layers goes to resident ones.
  EXPECT_EQ(count(choose_ram_layers(m, 4096 + 10 * 4096, {0, 4, 8})), 10);
  // Less than the extras: every layer from disk.
  EXPECT_EQ(count(choose_ram_layers(m, 100, {})), 0);
  // Layer bytes are counted O_DIRECT-rounded, as the arena lays them out.
  const StoreManifest odd = manifest(4, 4097, 1);
  EXPECT_EQ(count(choose_ram_layers(odd, 4096 + 3 * 8192, {})), 3);
}

struct Fixture : testing_util::ShardedTinyModel {
  Fixture() : ShardedTinyModel(4) {}
};

TEST(PartialRamStore, LoadsEqualTheFullStoreWhereverALayerLives) {
  Fixture f;
  auto full = RamStore::open(f.store, f.be.get());
  RamStoreOptions o;
  o.in_ram = {false, true, false, true};
  int progress_total = 0;
  o.progress = [&](int, int total) { progress_total = total; };
  auto part = RamStore::open(f.store, f.be.get(), o);
  ASSERT_TRUE(full.ok() && part.ok()) << part.status().to_string();
  EXPECT_EQ((*part)->ram_layers(), 2);
  EXPECT_EQ(progress_total, 3);  // two layers and the extras
  EXPECT_TRUE((*part)->in_ram(1));
  EXPECT_FALSE((*part)->in_ram(2));
  const size_t lb = (*full)->manifest().layer_bytes;
  // The arena holds two layers, not four (plus the disk ring: two staging buffers).
  EXPECT_LT((*part)->host_bytes(), (*full)->host_bytes() + lb);
  std::vector<char> a(lb), b(lb);
  for (int l : {0, 1, 2, 3, 2, 0}) {
    ASSERT_TRUE((*full)->load_layer(l, a.data()).ok());
    ASSERT_TRUE((*part)->load_layer(l, b.data()).ok());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), lb)) << "layer " << l;
  }
  std::vector<char> ea((*full)->manifest().extras_bytes), eb(ea.size());
  ASSERT_TRUE((*full)->load_extras(ea.data()).ok());
  ASSERT_TRUE((*part)->load_extras(eb.data()).ok());
  EXPECT_EQ(0, std::memcmp(ea.data(), eb.data(), ea.size()));
}

TEST(PartialRamStore, ADamagedLayerLeftOnDiskIsCaughtOnItsLoad) {
  Fixture f;
  StoreManifest m = *open_store_manifest(f.store);
  const std::string victim = f.store + "/" + m.layers[2].name;
  {
    std::fstream io(victim, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(m.layers[2].data_start + 7));
    io.put('\x5a');
  }
  RamStoreOptions o;
  o.in_ram = {true, true, false, true};
  auto part = RamStore::open(f.store, f.be.get(), o);
  ASSERT_TRUE(part.ok()) << part.status().to_string();  // layer 2 is not read at open
  std::vector<char> dev(m.layer_bytes);
  EXPECT_TRUE((*part)->load_layer(1, dev.data()).ok());
  Status s = (*part)->load_layer(2, dev.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find(m.layers[2].name), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace st
