// RamStore / DiskStore: bytes equal the layer files' data sections; damaged stores and failing
// reads give a clear error naming the file (never a crash or a hang).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "backend/backend.h"
#include "core/file.h"
#include "store/disk_store.h"
#include "store/ram_store.h"
#include "store_test_util.h"

namespace st {
namespace {

using testing_util::TempDir;

struct Fixture : testing_util::ShardedTinyModel {
  Fixture() : ShardedTinyModel(3) {}
  std::vector<char> data_section(int layer) {
    StoreManifest m = *open_store_manifest(store);
    std::string s = *read_file_to_string(store + "/" + m.layers[layer].name);
    return std::vector<char>(s.begin() + m.layers[layer].data_start, s.end());
  }
};

TEST(RamStore, ArenaHoldsEveryLayerAndLoadsCopyIt) {
  Fixture f;
  StatusOr<std::unique_ptr<RamStore>> rs = RamStore::open(f.store, f.be.get());
  ASSERT_TRUE(rs.ok()) << rs.status().to_string();
  RamStore& r = **rs;
  EXPECT_TRUE(r.pinned());
  size_t lb = r.manifest().layer_bytes;
  std::vector<char> dev(lb);
  for (int l = 0; l < 3; ++l) {
    std::vector<char> want = f.data_section(l);
    ASSERT_EQ(want.size(), lb);
    EXPECT_EQ(0, std::memcmp(r.layer_host(l), want.data(), lb));
    ASSERT_TRUE(r.load_layer(l, dev.data()).ok());
    EXPECT_EQ(0, std::memcmp(dev.data(), want.data(), lb));
  }
  EXPECT_GE(r.host_bytes(), 3 * lb + r.manifest().extras_bytes);
}

TEST(DiskStore, LoadsEqualTheRamStore) {
  Fixture f;
  auto rs = RamStore::open(f.store, f.be.get());
  auto ds = DiskStore::open(f.store, f.be.get());
  ASSERT_TRUE(rs.ok() && ds.ok());
  size_t lb = (*ds)->manifest().layer_bytes;
  std::vector<char> dev(lb);
  for (int l : {2, 0, 1, 1, 2}) {
    ASSERT_TRUE((*ds)->load_layer(l, dev.data()).ok());
    EXPECT_EQ(0, std::memcmp(dev.data(), (*rs)->layer_host(l), lb)) << "layer " << l;
  }
  std::vector<char> ex((*ds)->manifest().extras_bytes);
  ASSERT_TRUE((*ds)->load_extras(ex.data()).ok());
  EXPECT_EQ(0, std::memcmp(ex.data(), (*rs)->extras_host(), ex.size()));
}

TEST(StoreValidation, TruncatedLayerFileIsCorruptionNamingIt) {
  Fixture f;
  std::string victim = f.store + "/layer_001.safetensors";
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) - 100);
  for (int tier = 0; tier < 2; ++tier) {
    Status s = tier == 0 ? RamStore::open(f.store, f.be.get()).status() : DiskStore::open(f.store, f.be.get()).status();
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_NE(s.message().find("layer_001.safetensors"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.to_string();
  }
}

// A flipped byte in a data section (same size, so open_store_manifest cannot see it) is caught by
// the checksum: the RAM store when it fills, the disk store on the layer's first load.
TEST(StoreValidation, FlippedDataByteIsCorruptionNamingTheFile) {
  Fixture f;
  StoreManifest m = *open_store_manifest(f.store);
  const std::string victim = f.store + "/layer_002.safetensors";
  std::string bytes = *read_file_to_string(victim);
  bytes[m.layers[2].data_start + m.layers[2].bytes / 2] ^= 0x10;
  ASSERT_TRUE(write_file_atomic(victim, bytes).ok());
  ASSERT_TRUE(open_store_manifest(f.store).ok());  // sizes and headers still agree
  Status s = RamStore::open(f.store, f.be.get()).status();
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.to_string();
  EXPECT_NE(s.message().find("layer_002.safetensors"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.to_string();
  auto ds = DiskStore::open(f.store, f.be.get());
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  std::vector<char> dev((*ds)->manifest().layer_bytes);
  EXPECT_TRUE((*ds)->load_layer(0, dev.data()).ok());
  s = (*ds)->load_layer(2, dev.data());
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.to_string();
  EXPECT_NE(s.message().find("layer_002.safetensors"), std::string::npos) << s.to_string();
  // A damaged store is rebuilt by the next shard (the manifest's checksum is the sharder's).
  ShardOptions o;
  o.out_dir = f.store;
  o.force = true;
  ASSERT_TRUE(shard_model(**open_model_source(f.t.sub("model")), o).ok());
  EXPECT_TRUE(RamStore::open(f.store, f.be.get()).ok());
}

TEST(StoreValidation, ManifestNotMatchingFiles) {
  Fixture f;
  std::string mpath = f.store + "/manifest.json";
  Json j = *read_json_file(mpath);
  Json orig = j;
  j["files"][2]["data_start"] = j["files"][2]["data_start"].get<int64_t>() + 4096;
  j["files"][2]["size"] = j["files"][2]["size"].get<int64_t>() + 4096;
  ASSERT_TRUE(write_file_atomic(mpath, j.dump()).ok());
  Status s = open_store_manifest(f.store).status();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("layer_002.safetensors"), std::string::npos) << s.to_string();

  j = orig;
  j["num_layers"] = 4;
  ASSERT_TRUE(write_file_atomic(mpath, j.dump()).ok());
  s = open_store_manifest(f.store).status();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("num_layers"), std::string::npos) << s.to_string();

  j = orig;
  ASSERT_TRUE(write_file_atomic(mpath, j.dump()).ok());
  std::filesystem::remove(f.store + "/layer_000.safetensors");
  s = open_store_manifest(f.store).status();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("layer_000.safetensors"), std::string::npos) << s.to_string();
}

// Note [store file identity]: layer files swapped together with their manifest entries (so
// every checksum agrees) are caught by the headers, which name the layer each file holds.
TEST(StoreValidation, SwappedLayerFilesAreCorruptionNamingTheLayer) {
  Fixture f;
  const std::string a = f.store + "/layer_000.safetensors", b = f.store + "/layer_002.safetensors";
  std::filesystem::rename(a, f.store + "/swap");
  std::filesystem::rename(b, a);
  std::filesystem::rename(f.store + "/swap", b);
  std::string mpath = f.store + "/manifest.json";
  Json j = *read_json_file(mpath);
  for (const char* k : {"size", "data_start", "bytes", "checksum"}) std::swap(j["files"][0][k], j["files"][2][k]);
  ASSERT_TRUE(write_file_atomic(mpath, j.dump()).ok());
  for (int tier = 0; tier < 2; ++tier) {
    Status s = tier == 0 ? RamStore::open(f.store, f.be.get()).status() : DiskStore::open(f.store, f.be.get()).status();
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.to_string();
    EXPECT_NE(s.message().find("layer_000.safetensors: its header says it holds 'layer 2'"), std::string::npos)
        << s.to_string();
  }
  // Swapped back, the same store opens: the check reads what the sharder wrote.
  std::filesystem::rename(a, f.store + "/swap");
  std::filesystem::rename(b, a);
  std::filesystem::rename(f.store + "/swap", b);
  for (const char* k : {"size", "data_start", "bytes", "checksum"}) std::swap(j["files"][0][k], j["files"][2][k]);
  ASSERT_TRUE(write_file_atomic(mpath, j.dump()).ok());
  EXPECT_TRUE(RamStore::open(f.store, f.be.get()).ok());
}

// Test double: fails or truncates reads of files whose name contains `match`.
class FaultyReader : public RangeReader {
 public:
  enum class Mode { kFail, kShort };
  FaultyReader(std::string match, Mode m) : match_(std::move(match)), mode_(m), real_(make_file_reader()) {}
  Status read(const std::string& path, uint64_t off, size_t len, void* dst) override {
    if (path.find(match_) == std::string::npos) return real_->read(path, off, len, dst);
    if (mode_ == Mode::kFail) return IOError("reading store file " + path + ": Input/output error (injected)");
    Status s = real_->read(path, off, len / 2, dst);
    if (!s.ok()) return s;
    return Corruption(path + ": truncated (injected short read)");
  }

 private:
  std::string match_;
  Mode mode_;
  std::unique_ptr<RangeReader> real_;
};

TEST(DiskStore, InjectedReadErrorNamesTheFile) {
  Fixture f;
  for (auto mode : {FaultyReader::Mode::kFail, FaultyReader::Mode::kShort}) {
    FaultyReader reader("layer_001", mode);
    DiskStoreOptions o;
    o.reader = &reader;
    auto ds = DiskStore::open(f.store, f.be.get(), o);
    ASSERT_TRUE(ds.ok());
    std::vector<char> dev((*ds)->manifest().layer_bytes);
    EXPECT_TRUE((*ds)->load_layer(0, dev.data()).ok());
    Status s = (*ds)->load_layer(1, dev.data());
    EXPECT_TRUE(s.code() == StatusCode::kIOError || s.code() == StatusCode::kCorruption) << s.to_string();
    EXPECT_NE(s.message().find("layer_001.safetensors"), std::string::npos) << s.to_string();
    EXPECT_TRUE((*ds)->load_layer(2, dev.data()).ok());
  }
  FaultyReader reader("layer_002", FaultyReader::Mode::kFail);
  RamStoreOptions ro;
  ro.reader = &reader;
  Status s = RamStore::open(f.store, f.be.get(), ro).status();
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find("layer_002.safetensors"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace st
