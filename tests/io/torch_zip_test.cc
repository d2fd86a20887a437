// PyTorch checkpoints (io/torch_zip.h). Fixtures written by torch 2.11 itself
// (tools/ref/make_torch_bin_fixture.py): views.bin holds tensors sharing a storage, an offset
// view, a transposed one, bf16/f16/int64, a 0-d tensor and a Parameter, and views.safetensors
// what each holds; legacy.bin is the pre-1.6 format. Then damage: every failure a Status naming
// the file, never a crash, and no GLOBAL outside the allowlist is accepted.
#include "io/torch_zip.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/file.h"
#include "io/safetensors.h"
#include "../fuzz_env.h"

namespace st {
namespace {

std::string fixture(const std::string& rel) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/torch/" + rel; }

TEST(TorchZip, EveryViewReadsAsTorchHoldsIt) {
  auto bin = SafetensorsFile::open_torch(fixture("views.bin"));
  ASSERT_TRUE(bin.ok()) << bin.status().to_string();
  auto want = SafetensorsFile::open(fixture("views.safetensors"));
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  EXPECT_EQ(bin->tensors().size(), want->tensors().size());
  for (const TensorInfo& w : want->tensors()) {
    const TensorInfo* g = bin->find(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    EXPECT_EQ(g->dtype, w.dtype) << w.name;
    EXPECT_EQ(g->shape, w.shape) << w.name;
    ASSERT_EQ(g->nbytes, w.nbytes) << w.name;
    EXPECT_EQ(std::memcmp(bin->data(*g), want->data(w), w.nbytes), 0) << w.name;
  }
  // "rows" is base[2:5]: it points into base's storage, 16 floats in, not at a copy.
  const TensorInfo* whole = bin->find("whole");
  const TensorInfo* rows = bin->find("rows");
  ASSERT_TRUE(whole && rows);
  EXPECT_EQ(bin->data(*rows), bin->data(*whole) + 16 * 4);
  EXPECT_EQ(bin->find("col_major")->shape, (std::vector<int64_t>{8, 6}));
}

TEST(TorchZip, TheOldFormatIsRefusedByName) {
  auto f = SafetensorsFile::open_torch(fixture("legacy.bin"));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("before torch 1.6"), std::string::npos) << f.status().to_string();
}

// The pickle of views.bin with its first allowed GLOBAL replaced by one that would run code.
TEST(TorchZip, OnlyAllowedGlobalsAreCalled) {
  auto bytes = read_file_to_string(fixture("views.bin"));
  ASSERT_TRUE(bytes.ok());
  std::string b = *bytes;
  const std::string from = "torch._utils\n_rebuild_tensor_v2\n";
  const std::string to = "posix_______\nsystem____________\n";  // the same length: offsets hold
  ASSERT_EQ(from.size(), to.size());
  const size_t at = b.find(from);
  ASSERT_NE(at, std::string::npos);
  b.replace(at, from.size(), to);
  auto t = read_torch_zip(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "evil.bin");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("posix_______ system____________"), std::string::npos) << t.status().to_string();
  EXPECT_NE(t.status().message().find("evil.bin"), std::string::npos);
}

// Shards over 4 GiB keep their sizes and offsets in ZIP64 records. views.bin rewritten that way:
// every central-directory entry with 0xFFFFFFFF sizes and offset and a ZIP64 extra field holding
// them, then a ZIP64 end record, its locator and an end record that defers to them.
void put(std::string* s, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t get(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(s[at + i]);
  return v;
}
std::string as_zip64(const std::string& z) {
  const size_t eocd = z.rfind(std::string("PK\x05\x06", 4));
  const uint64_t count = get(z, eocd + 10, 2), cd_off = get(z, eocd + 16, 4);
  std::string out = z.substr(0, cd_off), cd;
  size_t p = cd_off;
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t nl = get(z, p + 28, 2), el = get(z, p + 30, 2), cl = get(z, p + 32, 2);
    std::string e = z.substr(p, 46);
    for (size_t at : {20, 24, 42}) e.replace(at, 4, std::string(4, '\xFF'));
    std::string extra;  // id 1, 24 bytes: uncompressed size, compressed size, local header offset
    for (auto [v, n] : {std::pair<uint64_t, int>{1, 2}, {24, 2}, {get(z, p + 24, 4), 8}, {get(z, p + 20, 4), 8},
                        {get(z, p + 42, 4), 8}})
      put(&extra, v, n);
    e.replace(30, 2, std::string{static_cast<char>(extra.size()), 0});
    e.replace(32, 2, std::string(2, '\0'));
    cd += e + z.substr(p + 46, nl) + extra;
    p += 46 + nl + el + cl;
  }
  out += cd;
  const uint64_t rec = out.size();
  // (value, width) fields of the ZIP64 end record, its locator and the end record.
  const std::pair<uint64_t, int> tail[] = {
      {0x06064b50, 4}, {44, 8}, {45, 2}, {45, 2}, {0, 4}, {0, 4}, {count, 8}, {count, 8}, {cd.size(), 8}, {cd_off, 8},
      {0x07064b50, 4}, {0, 4}, {rec, 8}, {1, 4},
      {0x06054b50, 4}, {0, 4}, {0xFFFF, 2}, {0xFFFF, 2}, {0xFFFFFFFF, 4}, {0xFFFFFFFF, 4}, {0, 2}};
  for (auto [v, n] : tail) put(&out, v, n);
  return out;
}

TEST(TorchZip, Zip64RecordsAreFollowed) {
  auto bytes = read_file_to_string(fixture("views.bin"));
  ASSERT_TRUE(bytes.ok());
  auto plain = read_torch_zip(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size(), "views.bin");
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  const std::string z = as_zip64(*bytes);
  ASSERT_NE(z, *bytes);
  auto wide = read_torch_zip(reinterpret_cast<const uint8_t*>(z.data()), z.size(), "views64.bin");
  ASSERT_TRUE(wide.ok()) << wide.status().to_string();
  ASSERT_EQ(wide->size(), plain->size());
  for (size_t i = 0; i < plain->size(); ++i) {
    EXPECT_EQ((*wide)[i].name, (*plain)[i].name);
    EXPECT_EQ((*wide)[i].file_offset, (*plain)[i].file_offset) << (*plain)[i].name;  // the data did not move
  }
  // The locator pointing elsewhere: refused by name.
  std::string broken = z;
  broken[broken.size() - 22 - 20 + 8] ^= 0x40;
  auto bad = read_torch_zip(reinterpret_cast<const uint8_t*>(broken.data()), broken.size(), "views64.bin");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ZIP64"), std::string::npos) << bad.status().to_string();
}

TEST(TorchZip, DamageNeverCrashes) {
  auto bytes = read_file_to_string(fixture("llama_bin/pytorch_model-00001-of-00002.bin"));
  ASSERT_TRUE(bytes.ok());
  const std::string& good = *bytes;
  int refused = 0, read = 0;
  for (size_t cut = 0; cut < good.size(); cut += 997) {
    auto t = read_torch_zip(reinterpret_cast<const uint8_t*>(good.data()), cut, "cut.bin");
    if (t.ok()) {
      ++read;
    } else {
      ++refused;
      EXPECT_NE(t.status().message().find("cut.bin"), std::string::npos) << t.status().to_string();
    }
  }
  EXPECT_EQ(read, 0);  // the central directory is at the end: any cut loses it
  uint32_t seed = static_cast<uint32_t>(testing_util::fuzz_seed(7));
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (int k = 0; k < testing_util::fuzz_iters(3000); ++k) {
    std::string b = good;
    // Bytes of the pickle (at the front), of the central directory (at the end) and anywhere.
    for (int j = 0; j < 4; ++j) {
      const uint32_t r = next();
      const size_t at = j == 0 ? r % 1300 : j == 1 ? b.size() - 1 - r % 800 : r % b.size();
      b[at] = static_cast<char>(next() >> 24);
    }
    auto t = read_torch_zip(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "flip.bin");
    if (!t.ok()) {
      EXPECT_NE(t.status().message().find("flip.bin"), std::string::npos) << t.status().to_string();
    }
  }
  EXPECT_GT(refused, 100);
}

}  // namespace
}  // namespace st
