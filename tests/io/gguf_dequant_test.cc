// Dequantisation vs gguf-py (tools/gguf/make_gguf_fixtures.py wrote quants.gguf and the
// ref_<type>.f32 files with gguf.quants.dequantize), plus hand-built blocks for the bit and
// nibble orders (each names the element it checks), and hostile files for the new block sizes.
#include "io/gguf_dequant.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
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

// Every type must match gguf-py bit for bit, even where a compiler fuses y = q*d + m or
// y = d*sc*q - dmin*m into an FMA (GCC does with -march=native): the f16 scale (11 significant
// bits) times an integer sub-block scale (<= 8 bits) times a quant (<= 6 bits) fits in f32's 24
// bits for every type whose formula has an addition (Q4_1, Q5_1: 15 bits; Q2_K: 17; Q4_K: 21;
// Q5_K: 22), so the product is exact and fusing cannot change the single rounding of the sum.
// Checked with this file built both ways (default flags and -march=native on an FMA machine).
class QuantsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantsTest, MatchesGgufPyBitForBit) {
  const std::string name = GetParam();
  auto f = GgufFile::open(fixture("quants.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufTensorInfo* t = f->find_tensor(name);
  ASSERT_NE(t, nullptr);
  std::vector<float> ref = read_f32(fixture("ref_" + name + ".f32"));
  ASSERT_EQ(static_cast<int64_t>(ref.size()), t->numel());
  std::vector<float> got(ref.size());
  ASSERT_TRUE(dequantize_to_f32(t->type, f->data(*t), t->numel(), got.data()).ok());
  int64_t worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, ulp_diff(got[i], ref[i]));
    // Same bits (signed zeros included); NaN payloads may differ (F16/BF16 NaN inputs).
    bool same = std::isnan(ref[i]) ? std::isnan(got[i]) : std::memcmp(&got[i], &ref[i], 4) == 0;
    ASSERT_TRUE(same) << name << " element " << i << ": got " << got[i] << ", gguf-py " << ref[i];
  }
  std::printf("%s: %zu elements, max ulp %lld\n", name.c_str(), ref.size(), static_cast<long long>(worst));

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
                         ::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q4_k", "q6_k", "q5_0",
                                           "q5_1", "q2_k", "q3_k", "q5_k", "iq4_nl", "iq4_xs"));

TEST(GgufDequant, FixtureHasEveryType) {
  auto f = GgufFile::open(fixture("quants.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::string> types;
  for (const auto& t : f->tensors()) {
    types.push_back(ggml_type_name(t.type));
    EXPECT_TRUE(ggml_can_dequantize(t.type)) << ggml_type_name(t.type);
  }
  EXPECT_EQ(types, (std::vector<std::string>{"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K", "Q5_0",
                                             "Q5_1", "Q2_K", "Q3_K", "Q5_K", "IQ4_NL", "IQ4_XS"}));
}

// Our type table against gguf-py's GGML_QUANT_SIZES (copied into the fixture as
// test.block.<TYPE> = [elements, bytes]): a wrong block size would misplace every block.
TEST(GgufDequant, BlockSizesMatchGgufPy) {
  auto f = GgufFile::open(fixture("quants.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  for (const auto& t : f->tensors()) {
    const GgmlTypeTraits& tr = ggml_traits(t.type);
    auto sizes = f->get_int_array(std::string("test.block.") + tr.name);
    ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
    EXPECT_EQ(*sizes, (std::vector<int64_t>{tr.block_elems, tr.block_bytes})) << tr.name;
  }
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

// Q5_0/Q5_1: bit j of the little-endian u32 qh is bit 4 of element j (j = 0..31); the low 4
// bits use Q4_0's nibble order.
TEST(GgufDequant, Q5_0AndQ5_1HighBitOrder) {
  uint8_t b0[22] = {};
  put_half(b0, 1.0f);
  b0[2 + 0] = 0x08;  // qh bit 3  -> element 3
  b0[2 + 2] = 0x10;  // qh bit 20 -> element 20
  b0[6 + 4] = 0x2A;  // qs[4]: low nibble 10 -> element 4, high nibble 2 -> element 20
  float y[32];
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kQ5_0, b0, 32, y).ok());
  EXPECT_EQ(y[3], 0.0f);             // 16 - 16
  EXPECT_EQ(y[4], 10.0f - 16.0f);    // no high bit
  EXPECT_EQ(y[20], 18.0f - 16.0f);   // 2 | 16
  EXPECT_EQ(y[19], -16.0f);          // untouched
  uint8_t b1[24] = {};
  put_half(b1, 2.0f);
  put_half(b1 + 2, 0.5f);
  std::memcpy(b1 + 4, b0 + 2, 20);   // same qh and qs
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kQ5_1, b1, 32, y).ok());
  EXPECT_EQ(y[3], 16 * 2.0f + 0.5f);
  EXPECT_EQ(y[4], 10 * 2.0f + 0.5f);
  EXPECT_EQ(y[20], 18 * 2.0f + 0.5f);
  EXPECT_EQ(y[19], 0.5f);
}

// Q2_K: element 128h + 32p + l is bits 2p..2p+1 of qs[32h + l]; scales[e/16] = scale | min << 4.
TEST(GgufDequant, Q2_KPlanesAndScales) {
  uint8_t b[84] = {};
  b[3] = 0x25;          // sub-block 3 (elements 48..63): scale 5, min 2
  b[15] = 0x13;         // sub-block 15 (elements 240..255): scale 3, min 1
  b[16 + 20] = 0x0C;    // qs[20] plane 1 = 3 -> element 52 (h 0, p 1, l 20)
  b[16 + 52] = 0xC0;    // qs[52] plane 3 = 3 -> element 244 (h 1, p 3, l 20)
  put_half(b + 80, 1.0f);
  put_half(b + 82, 0.5f);
  float y[256];
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kQ2_K, b, 256, y).ok());
  EXPECT_EQ(y[52], 5.0f * 3 - 0.5f * 2);
  EXPECT_EQ(y[48], -1.0f);             // q 0, min 2 * dmin 0.5
  EXPECT_EQ(y[244], 3.0f * 3 - 0.5f);
  EXPECT_EQ(y[20], 0.0f);              // sub-block 1: scale 0, min 0
}

// Q3_K: the 6-bit scales of sub-blocks s and s+8 share byte s % 8 (low / high nibble), their top
// 2 bits are in byte 8 + s%4 at shift 2*(s/4); element e's hmask bit is bit e/32 of hmask[e%32]
// and a clear bit subtracts 4.
TEST(GgufDequant, Q3_KHmaskAndScalePacking) {
  uint8_t b[110] = {};
  uint8_t* hmask = b;
  uint8_t* qs = b + 32;
  uint8_t* sc = b + 96;
  sc[5] = 0x70;        // sub-block 13 low bits 7 (high nibble), sub-block 5 low bits 0
  sc[9] = 0xC0;        // sub-block 13 top bits 3 (shift 6); sub-blocks 1, 5, 9 top bits 0
  hmask[10] = 1 << 6;  // element 6*32 + 10 = 202 (sub-block 12): no -4
  qs[32 + 10] = 0x20;  // element 202 (h 1, p 2, l 10): low bits 2
  qs[32 + 26] = 0x10;  // element 218 (h 1, p 2, l 26, sub-block 13): low bits 1
  put_half(b + 108, 1.0f);
  float y[256];
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kQ3_K, b, 256, y).ok());
  const float s13 = (7 | (3 << 4)) - 32;  // 23
  EXPECT_EQ(y[218], s13 * (1 - 4));
  EXPECT_EQ(y[217], s13 * -4);           // same sub-block, all bits zero
  EXPECT_EQ(y[202], -32.0f * 2);         // sub-block 12: scale 0 - 32; hmask set: q = 2
  EXPECT_EQ(y[80], -32.0f * -4);         // sub-block 5: both packed parts 0
}

// Q5_K: element 32s + l takes bit 4 from bit s of qh[l]; low 4 bits as Q4_K (nibble s%2 of
// qs[32*(s/2) + l]).
TEST(GgufDequant, Q5_KHighBits) {
  uint8_t b[176] = {};
  put_half(b, 1.0f);
  put_half(b + 2, 1.0f);
  uint8_t* sc = b + 4;
  for (int j = 0; j < 4; ++j) sc[j] = 1;       // sub-blocks 0..3: scale 1, min 0
  for (int j = 8; j < 12; ++j) sc[j] = 0x01;   // sub-blocks 4..7: scale 1, min 0
  uint8_t* qh = b + 16;
  uint8_t* qs = b + 48;
  qh[5] = 1 << 6;      // element 6*32 + 5 = 197
  qh[7] = 1 << 1;      // element 1*32 + 7 = 39
  qs[96 + 5] = 0x73;   // low nibble 3 -> element 197 (s 6), high nibble 7 -> element 229 (s 7)
  float y[256];
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kQ5_K, b, 256, y).ok());
  EXPECT_EQ(y[197], 3.0f + 16);
  EXPECT_EQ(y[229], 7.0f);
  EXPECT_EQ(y[39], 16.0f);
  EXPECT_EQ(y[7], 0.0f);       // qh[7] bit 0 is clear
  EXPECT_EQ(y[165], 0.0f);     // element 5 of sub-block 5: qh[5] bit 5 is clear
}

// ggml's kvalues_iq4nl, written out independently of the code under test.
constexpr float kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

TEST(GgufDequant, IQ4_NLLevelsAndNibbleOrder) {
  uint8_t b[18] = {};
  put_half(b, 0.25f);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kIQ4_NL, b, 32, y).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * kLevels[j]) << j;
    EXPECT_EQ(y[j + 16], 0.25f * kLevels[15 - j]) << j + 16;
  }
}

// IQ4_XS sub-block s: scale = nibble s%2 of scales_l[s/2] | bits 2s..2s+1 of scales_h << 4, - 32.
TEST(GgufDequant, IQ4_XSScalePacking) {
  uint8_t b[136] = {};
  put_half(b, 0.5f);
  b[3] = 0x08;          // scales_h = 0x0800: bits 10..11 = 2 -> sub-block 5 top bits
  b[4 + 2] = 0x90;      // scales_l[2]: sub-block 4 low 0, sub-block 5 low 9
  b[8 + 80 + 3] = 0xF0; // sub-block 5, byte 3: element 160+3 index 0, element 160+19 index 15
  float y[256];
  ASSERT_TRUE(dequantize_to_f32(GgmlType::kIQ4_XS, b, 256, y).ok());
  const float dl5 = 0.5f * ((9 | (2 << 4)) - 32);  // 4.5
  EXPECT_EQ(y[163], dl5 * kLevels[0]);
  EXPECT_EQ(y[179], dl5 * kLevels[15]);
  EXPECT_EQ(y[160], dl5 * kLevels[0]);
  EXPECT_EQ(y[128], 0.5f * -32 * kLevels[0]);      // sub-block 4: all packed bits 0
}

TEST(GgufDequant, UnsupportedTypeIsUnimplemented) {
  uint8_t b[292] = {};
  float y[256];
  for (GgmlType t : {GgmlType::kQ8_1, GgmlType::kQ8_K, GgmlType::kI32}) {
    const int64_t n = ggml_traits(t).block_elems;
    Status s = dequantize_to_f32(t, b, n, y);
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
    EXPECT_NE(s.message().find(ggml_type_name(t)), std::string::npos) << s.to_string();
    EXPECT_EQ(dequantize_to(t, b, n, DType::kBF16, y).code(), StatusCode::kUnimplemented);
  }
  EXPECT_EQ(dequantize_to(GgmlType::kF32, b, 1, DType::kI32, y).code(), StatusCode::kInvalidArgument);
}

// Hostile block contents (random bytes: NaN/Inf scales, every bit pattern) never read outside
// the exact-size source or write outside dst: the source is an exact-size heap buffer (the
// sanitizer build, -DSTREAMTUNE_SANITIZE=ON, flags any over-read) and dst has sentinels after it.
TEST(GgufDequant, RandomBlocksStayInBounds) {
  std::mt19937 rng(7);
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
                     GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                     GgmlType::kIQ4_NL, GgmlType::kIQ4_XS}) {
    const GgmlTypeTraits& tr = ggml_traits(t);
    const int64_t n = 5 * tr.block_elems;
    std::vector<uint8_t> src(ggml_nbytes(t, n));
    for (uint8_t& v : src) v = static_cast<uint8_t>(rng());
    std::vector<float> dst(static_cast<size_t>(n) + 8, 12345.0f);
    ASSERT_TRUE(dequantize_to_f32(t, src.data(), n, dst.data()).ok()) << tr.name;
    for (size_t i = static_cast<size_t>(n); i < dst.size(); ++i) EXPECT_EQ(dst[i], 12345.0f) << tr.name;
  }
}

// Hand-made one-tensor GGUF file: header, tensor info, padding to 32, `data_bytes` zero bytes.
std::string one_tensor_file(const std::string& name, std::vector<uint64_t> ne, uint32_t type, size_t data_bytes) {
  std::string b;
  auto put = [&b](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint32_t{0x46554747});
  put(uint32_t{3});
  put(uint64_t{1});  // tensors
  put(uint64_t{0});  // kv
  put(uint64_t{name.size()});
  b += name;
  put(static_cast<uint32_t>(ne.size()));
  for (uint64_t n : ne) put(n);
  put(type);
  put(uint64_t{0});  // offset
  while (b.size() % 32) b += '\0';
  b.append(data_bytes, '\0');
  return b;
}

Status open_bytes(const std::string& bytes) {
  std::string p = std::string(::testing::TempDir()) + "/gguf_dequant_test_" + std::to_string(::getpid()) + ".gguf";
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return GgufFile::open(p).status();
}

// The new types go through the reader's size checks like the old ones: a tensor whose bytes
// (rows x blocks x block bytes) do not fit the data section, or whose rows are not whole blocks,
// is refused with Corruption naming the tensor; the exact size opens.
TEST(GgufDequant, NewTypesAreSizeChecked) {
  for (GgmlType t : {GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ5_K,
                     GgmlType::kIQ4_NL, GgmlType::kIQ4_XS}) {
    const GgmlTypeTraits& tr = ggml_traits(t);
    const auto id = static_cast<uint32_t>(t);
    const auto be = static_cast<uint64_t>(tr.block_elems);
    const size_t exact = 2 * 3 * static_cast<size_t>(tr.block_bytes);  // 2 blocks a row, 3 rows
    EXPECT_TRUE(open_bytes(one_tensor_file("blk.0.w", {2 * be, 3}, id, exact)).ok()) << tr.name;

    Status s = open_bytes(one_tensor_file("blk.0.w", {2 * be, 3}, id, exact - 1));
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << tr.name;
    EXPECT_NE(s.message().find("blk.0.w"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("exceed the data section"), std::string::npos) << s.to_string();

    s = open_bytes(one_tensor_file("blk.0.w", {be + be / 2, 3}, id, exact));
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << tr.name;
    EXPECT_NE(s.message().find("blk.0.w"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find(std::string("multiple of the ") + tr.name + " block size"), std::string::npos)
        << s.to_string();
  }
}

}  // namespace
}  // namespace st
