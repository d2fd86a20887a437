// GgufFile: metadata getters on a gguf-py file, and hostile input built byte by byte (each must
// give a Status naming the problem, never a crash), plus truncations and random bit flips.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "io/gguf_checkpoint.h"
#include "io/gguf_dequant.h"
#include "../fuzz_env.h"

namespace st {
namespace {

std::string fixture(const std::string& name) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/gguf/" + name; }

std::string tmp_path(const std::string& name) {
  return std::string(::testing::TempDir()) + "/gguf_test_" + std::to_string(::getpid()) + "_" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Little-endian byte builder for hand-made GGUF files.
struct Bytes {
  std::string b;
  template <typename T>
  Bytes& put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b += s;
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return put<uint32_t>(0x46554747).put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  Bytes& kv_u32(const std::string& k, uint32_t v) { return str(k).put<uint32_t>(4).put<uint32_t>(v); }
  Bytes& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) put<uint64_t>(n);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Bytes& pad(size_t align = 32) {
    while (b.size() % align) b += '\0';
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.append(n, '\0');
    return *this;
  }
};

Status open_bytes(const std::string& bytes, const std::string& name = "x.gguf") {
  std::string p = tmp_path(name);
  spit(p, bytes);
  return GgufFile::open(p).status();
}

void expect_error(const Bytes& b, StatusCode code, const std::string& needle) {
  Status s = open_bytes(b.b);
  ASSERT_FALSE(s.ok()) << "accepted a file that should fail with '" << needle << "'";
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("x.gguf"), std::string::npos) << s.to_string();
}

TEST(GgufFile, GettersOnGgufPyFile) {
  auto f = GgufFile::open(fixture("tiny_qwen3.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_start() % 32, 0u);
  EXPECT_EQ(*f->get_string("general.architecture"), "qwen3");
  EXPECT_EQ(*f->get_int("qwen3.block_count"), 1);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("qwen3.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_FALSE(*f->get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type")->size(), f->get_string_array("tokenizer.ggml.tokens")->size());
  EXPECT_EQ(*f->get_int_or("qwen3.nope", 7), 7);
  // Wrong type and missing key name the key and the file.
  auto bad = f->get_int("general.architecture");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("general.architecture"), std::string::npos);
  EXPECT_NE(bad.status().message().find("tiny_qwen3.gguf"), std::string::npos);
  EXPECT_EQ(f->get_string("nope").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(f->get_string_array("qwen3.block_count").ok());
  const GgufTensorInfo* t = f->find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->hf_shape(), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(t->nbytes, 64u * 2 * 34);
}

TEST(GgufFile, MinimalHandMadeFileOpens) {
  Bytes b;
  b.header(1, 1).kv_u32("general.alignment", 64).tensor("w", {32, 2}, 8, 0).pad(64).zeros(68);
  std::string p = tmp_path("ok.gguf");
  spit(p, b.b);
  auto f = GgufFile::open(p);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->tensors()[0].nbytes, 68u);
  EXPECT_EQ(f->tensors()[0].ne, (std::vector<int64_t>{32, 2}));
}

TEST(GgufFile, HostileHeaders) {
  expect_error(Bytes().put<uint32_t>(0x12345678).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(0),
               StatusCode::kCorruption, "magic");
  expect_error(Bytes().header(0, 0, 1), StatusCode::kUnimplemented, "version 1");
  expect_error(Bytes().header(0, 0, 0x03000000), StatusCode::kUnimplemented, "byte-swapped");
  expect_error(Bytes().put<uint32_t>(0x46554747).put<uint32_t>(3), StatusCode::kCorruption, "header");
  expect_error(Bytes().header(uint64_t{1} << 62, 0), StatusCode::kCorruption, "tensor_count");
  expect_error(Bytes().header(0, ~uint64_t{0}), StatusCode::kCorruption, "kv_count");
}

TEST(GgufFile, HostileMetadata) {
  expect_error(Bytes().header(0, 1).put<uint64_t>(1000).zeros(20), StatusCode::kCorruption, "string bytes");
  expect_error(Bytes().header(0, 1).put<uint64_t>(~uint64_t{0}).zeros(20), StatusCode::kCorruption, "2^30");
  expect_error(Bytes().header(0, 1).str("").put<uint32_t>(4).put<uint32_t>(1), StatusCode::kCorruption, "empty");
  expect_error(Bytes().header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2), StatusCode::kCorruption, "duplicate key 'a.b'");
  expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(13).zeros(8), StatusCode::kCorruption, "unknown value type");
  expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2).zeros(8), StatusCode::kCorruption,
               "bool");
  // Arrays: nested, huge count, count beyond the file, string element beyond EOF.
  expect_error(Bytes().header(0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(1).zeros(16),
               StatusCode::kCorruption, "nested");
  expect_error(Bytes().header(0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(uint64_t{1} << 40),
               StatusCode::kCorruption, "2^30");
  expect_error(Bytes().header(0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(10).put<uint64_t>(1000).zeros(16),
               StatusCode::kCorruption, "exceeds the file");
  expect_error(Bytes().header(0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("ok").put<uint64_t>(99),
               StatusCode::kCorruption, "element 1");
  expect_error(Bytes().header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(24), StatusCode::kCorruption,
               "power of two");
  expect_error(Bytes().header(0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(32),
               StatusCode::kCorruption, "u32");
}

TEST(GgufFile, HostileTensorInfos) {
  auto one = [](std::vector<uint64_t> ne, uint32_t type, uint64_t off, size_t data = 4096) {
    Bytes b;
    b.header(1, 0).tensor("blk.0.w", std::move(ne), type, off).pad().zeros(data);
    return b;
  };
  expect_error(one({}, 0, 0), StatusCode::kCorruption, "n_dims 0");
  expect_error(one({1, 1, 1, 1, 1}, 0, 0), StatusCode::kCorruption, "n_dims 5");
  expect_error(one({4, 0}, 0, 0), StatusCode::kCorruption, "ne[1] = 0");
  expect_error(one({uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0), StatusCode::kCorruption, "overflow");
  expect_error(one({32}, 16, 0), StatusCode::kUnimplemented, "type id 16");
  expect_error(one({32}, 4, 0), StatusCode::kUnimplemented, "type id 4");
  expect_error(one({33}, 8, 0), StatusCode::kCorruption, "multiple of the Q8_0 block");
  expect_error(one({8}, 0, 16), StatusCode::kCorruption, "alignment");
  expect_error(one({1024, 2}, 0, 0), StatusCode::kCorruption, "exceed the data section");
  expect_error(one({8}, 0, uint64_t{1} << 63), StatusCode::kCorruption, "exceed");
  Bytes overlap;
  overlap.header(2, 0).tensor("a", {64}, 0, 0).tensor("b", {8}, 0, 224).pad().zeros(512);
  expect_error(overlap, StatusCode::kCorruption, "overlap");
  Bytes dup;
  dup.header(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad().zeros(64);
  expect_error(dup, StatusCode::kCorruption, "duplicate tensor 'a'");
  Bytes longname;
  longname.header(1, 0).tensor(std::string(64, 'n'), {8}, 0, 0).pad().zeros(64);
  expect_error(longname, StatusCode::kCorruption, "name length 64");
  // The tensor name appears in tensor-level errors.
  Status s = open_bytes(one({8}, 0, 16).b);
  EXPECT_NE(s.message().find("blk.0.w"), std::string::npos) << s.to_string();
}

// Everything a loader does with an opened file; must never crash whatever the bytes were.
void exercise(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f.ok()) return;
  for (const std::string& k : f->keys()) {
    (void)f->get_string(k).ok();
    (void)f->get_int_array(k).ok();
    (void)f->get_float_array(k).ok();
    (void)f->get_string_array(k).ok();
  }
  std::vector<float> buf;
  for (const GgufTensorInfo& t : f->tensors()) {
    if (!ggml_can_dequantize(t.type) || t.numel() > (1 << 20)) continue;
    buf.resize(static_cast<size_t>(t.numel()));
    (void)dequantize_to_f32(t.type, f->data(t), t.numel(), buf.data()).ok();
  }
  auto ck = GgufCheckpoint::open(path);
  if (!ck.ok()) return;
  (void)ck->tokenizer().ok();
  for (const std::string& n : ck->tensor_names()) {
    auto shape = ck->shape(n);
    int64_t numel = 1;
    for (int64_t d : *shape) numel *= d;
    buf.resize(static_cast<size_t>(numel));
    (void)ck->read_tensor_as(n, *shape, DType::kF32, buf.data()).ok();
  }
}

TEST(GgufFile, TruncationsNeverCrash) {
  const std::string orig = slurp(fixture("tiny_qwen3.gguf"));
  ASSERT_GT(orig.size(), 1000u);
  const std::string p = tmp_path("trunc.gguf");
  size_t n_ok = 0;
  for (size_t len = 0; len < orig.size(); len += (len < 8192 ? 37 : 997)) {
    spit(p, orig.substr(0, len));
    exercise(p);
    n_ok += GgufFile::open(p).ok();
  }
  EXPECT_EQ(n_ok, 0u);  // every truncation cuts tensor data, so none may open
}

TEST(GgufFile, RandomBitFlipsNeverCrash) {
  const std::string orig = slurp(fixture("tiny_llama.gguf"));
  const std::string p = tmp_path("flip.gguf");
  std::mt19937 rng(static_cast<uint32_t>(testing_util::fuzz_seed(12345)));
  // Most flips land in the first ~2 KB (header, kv, tensor infos), where they matter.
  std::uniform_int_distribution<size_t> head(0, 2047), any(0, orig.size() - 1);
  std::uniform_int_distribution<int> bit(0, 7);
  for (int iter = 0; iter < testing_util::fuzz_iters(400); ++iter) {
    std::string m = orig;
    for (int k = 0; k < 1 + iter % 4; ++k) {
      size_t at = (k % 4 == 3) ? any(rng) : head(rng);
      m[at] = static_cast<char>(m[at] ^ (1 << bit(rng)));
    }
    spit(p, m);
    exercise(p);
  }
}

}  // namespace
}  // namespace st
