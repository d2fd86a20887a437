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
  uint32_t seed = 7;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (int k = 0; k < 3000; ++k) {
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
