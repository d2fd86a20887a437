// Dequantisation vs gguf-py (tools/gguf/make_gguf_fixtures.py wrote quants.gguf and the
// ref_<type>.f32 files with gguf.quants.dequantize), plus hand-built blocks for the nibble order.
#include "io/gguf_dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace st {
namespace {

std::string fixture(const std::string& name) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/gguf/" + name; }

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// Distance in units in the last place between two finite floats of the same sign (or bits equal).
int64_t ulp_diff(float a, float b) {
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  if (ua == ub) return 0;
  if (std::isnan(a) && std::isnan(b)) return 0;
  if ((ua >> 31) != (ub >> 31)) return (a == b) ? 0 : INT64_MAX;
  return std::llabs(static_cast<int64_t>(ua) - static_cast<int64_t>(ub));
}

class QuantsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantsTest, MatchesGgufPyWithinOneUlp) {
  const std::string name = GetParam();
  auto f = GgufFile::open(fixture("quants.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufTensorInfo* t = f->find_tensor(name);
  ASSERT_NE(t, nullptr);
  std::vector<float> ref = read_f32(fixture("ref_" + name + ".f32"));
  ASSERT_EQ(static_cast<int64_t>(ref.size()), t->numel());
  std::vector<float> got(ref.size());
  ASSERT_TRUE(dequantize_to_f32(t->type, f->data(*t), t->numel(), got.data()).ok());
  int64_t worst = 0, exact = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    int64_t d = ulp_diff(got[i], ref[i]);
    ASSERT_LE(d, 1) << name << " element " << i << ": got " << got[i] << ", gguf-py " << ref[i];
    worst = std::max(worst, d);
    exact += d == 0;
  }
  // Most elements must be bit-exact: 1 ulp only comes from a fused multiply-add.
  EXPECT_GE(exact * 10, static_cast<int64_t>(ref.size()) * 9) << name;

  // BF16 output = RNE of the f32 value.
  std::vector<uint16_t> bf(ref.size());
  ASSERT_TRUE(dequantize_to(t->type, f->data(*t), t->numel(), DType::kBF16, bf.data()).ok());
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(bf[i])));
    } else {
      EXPECT_EQ(bf[i], f32_to_bf16(got[i])) << name << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantsTest,
                         ::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q4_k", "q6_k"));

TEST(GgufDequant, FixtureHasEveryType) {
  auto f = GgufFile::open(fixture("quants.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::string> types;
  for (const auto& t : f->tensors()) types.push_back(ggml_type_name(t.type));
  EXPECT_EQ(types, (std::vector<std::string>{"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K"}));
}

void put_half(uint8_t* p, float v) {
  uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Hand oracle, independent of gguf-py: low nibble of byte j is element j, high nibble is j+16.
TEST(GgufDequant, Q4_0AndQ4_1NibbleOrder) {
  uint8_t b0[18] = {};
  put_half(b0, 0.5f);
  for (int j = 0; j < 16; ++j) b0[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kQ4_0, b0, 32, y).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(7 - j));
  }
  uint8_t b1[20] = {};
  put_half(b1, 2.0f);
  put_half(b1 + 2, -1.0f);
  for (int j = 0; j < 16; ++j) b1[4 + j] = static_cast<uint8_t>(j | (3 << 4));
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kQ4_1, b1, 32, y).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * static_cast<float>(j) - 1.0f);
    EXPECT_EQ(y[j + 16], 5.0f);
  }
}

// Q4_K sub-block 5 uses the packed high bits: sc = (q[9] & 15) | (q[1] >> 6) << 4.
TEST(GgufDequant, Q4_KScaleUnpacking) {
  uint8_t b[144] = {};
  put_half(b, 1.0f);
  put_half(b + 2, 1.0f);
  uint8_t* sc = b + 4;
  sc[1] = 0x40 | 3;   // sub-block 1: scale 3; top bits feed sub-block 5's scale
  sc[5] = 0x80 | 2;   // sub-block 1: min 2; top bits feed sub-block 5's min
  sc[9] = 0x21;       // sub-block 5: scale low 1, min low 2
  for (int i = 0; i < 128; ++i) b[16 + i] = 0x11;  // every nibble = 1
  float y[256];
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kQ4_K, b, 256, y).ok());
  EXPECT_EQ(y[32], 3.0f * 1 - 2.0f);                  // sub-block 1 (high nibbles of chunk 0)
  EXPECT_EQ(y[5 * 32], (1 + 16) * 1.0f - (2 + 32));   // sub-block 5: sc 17, min 34
  EXPECT_EQ(y[0], 0.0f);                              // sub-block 0: all zero scales
}

TEST(GgufDequant, Q6_KScaleIsPerSixteen) {
  uint8_t b[210] = {};
  for (int i = 0; i < 16; ++i) b[192 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 8));
  put_half(b + 208, 0.25f);
  float y[256];
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kQ6_K, b, 256, y).ok());
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.25f * static_cast<float>((e / 16) - 8) * -32.0f) << e;
}

TEST(GgufDequant, UnsupportedTypeIsUnimplemented) {
  uint8_t b[176] = {};
  float y[256];
  Status s = dequantize_to_f32(GgmlType::kQ5_K, b, 256, y);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("Q5_K"), std::string::npos);
  EXPECT_EQ(dequantize_to(GgmlType::kF32, b, 1, DType::kI32, y).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace st
