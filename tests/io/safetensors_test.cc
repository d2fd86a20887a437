// safetensors reader/writer: round trips, every hostile-input rule, random bit flips and
// truncations (must yield a Status or a self-consistent parse, never a crash), sharded checkpoints.
#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "core/file.h"
#include "../fuzz_env.h"

namespace st {
namespace {

// Plain write without fsync: the fuzz loops rewrite one file thousands of times.
void quick_write(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  ASSERT_EQ(std::fclose(f), 0);
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // tmpfs when available: the fuzz loops rewrite a file thousands of times.
    char tmpl[] = "/dev/shm/st_io_test_XXXXXX";
    char tmpl2[] = "/tmp/st_io_test_XXXXXX";
    char* made = is_directory("/dev/shm") ? mkdtemp(tmpl) : nullptr;
    if (made == nullptr) made = mkdtemp(tmpl2);
    ASSERT_NE(made, nullptr);
    dir_ = made;
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }
  std::string p(const std::string& name) const { return path_join(dir_, name); }

  // A file with the raw header text and `data_bytes` bytes of data (value = index).
  std::string raw(const std::string& name, const std::string& header, size_t data_bytes, uint64_t n_override = 0) {
    std::string s(8, '\0');
    uint64_t n = n_override ? n_override : header.size();
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(n >> (8 * i));
    s += header;
    for (size_t i = 0; i < data_bytes; ++i) s.push_back(static_cast<char>(i));
    quick_write(p(name), s);
    return p(name);
  }

  std::string dir_;
};

Status open_status(const std::string& path) { return SafetensorsFile::open(path).status(); }


TEST_F(SafetensorsTest, RoundTripKeepsBytesShapesAndMetadata) {
  std::vector<float> a(6);
  for (int i = 0; i < 6; ++i) a[i] = 0.5f * static_cast<float>(i) - 1.0f;
  std::vector<uint16_t> b = {f32_to_bf16(1.5f), f32_to_bf16(-2.25f), f32_to_bf16(3.0f)};
  std::vector<int64_t> c = {7, -8};
  int32_t scalar = 42;
  std::vector<TensorToWrite> w = {{"a", DType::kF32, {2, 3}, a.data()},
                                  {"b.bf16", DType::kBF16, {3}, b.data()},
                                  {"c", DType::kI64, {2}, c.data()},
                                  {"s", DType::kI32, {}, &scalar},
                                  {"empty", DType::kF32, {0, 4}, nullptr}};
  ASSERT_TRUE(write_safetensors(p("x.safetensors"), w, {{"k", "v"}}).ok());
  auto f = SafetensorsFile::open(p("x.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->data_start() % 64, 0u);
  EXPECT_EQ(f->metadata().at("k"), "v");
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->tensors().size(), 5u);
  const TensorInfo* ta = f->find("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ta->numel(), 6);
  EXPECT_EQ(std::memcmp(f->data(*ta), a.data(), 24), 0);
  const TensorInfo* tb = f->find("b.bf16");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->dtype, DType::kBF16);
  EXPECT_EQ(std::memcmp(f->data(*tb), b.data(), 6), 0);
  const TensorInfo* ts = f->find("s");
  ASSERT_NE(ts, nullptr);
  EXPECT_EQ(ts->numel(), 1);
  EXPECT_EQ(std::memcmp(f->data(*ts), &scalar, 4), 0);
  EXPECT_EQ(f->find("empty")->nbytes, 0u);
  EXPECT_EQ(f->find("missing"), nullptr);
  // Sorted by offset, back to back (the reference reader rejects holes).
  uint64_t off = 0;
  for (const TensorInfo& t : f->tensors()) {
    EXPECT_EQ(t.offset, off) << t.name;
    off += t.nbytes;
  }
  // Header begins with '{' and is space-padded; the file ends exactly after the last tensor.
  auto text = read_file_to_string(p("x.safetensors"));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ((*text)[8], '{');
  EXPECT_EQ((*text)[f->data_start() - 1], ' ');
  EXPECT_EQ(text->size(), f->data_start() + off);
  // No temp file left behind.
  EXPECT_FALSE(file_exists(p("x.safetensors.tmp." + std::to_string(getpid()))));
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  float v = 1;
  EXPECT_FALSE(write_safetensors(p("d.safetensors"), {{"a", DType::kF32, {1}, &v}, {"a", DType::kF32, {1}, &v}}).ok());
  EXPECT_FALSE(write_safetensors(p("d.safetensors"), {{"a", DType::kF32, {-1}, &v}}).ok());
  EXPECT_FALSE(write_safetensors(p("d.safetensors"), {{"a", DType::kF32, {2}, nullptr}}).ok());
  EXPECT_FALSE(write_safetensors(p("d.safetensors"), {{"__metadata__", DType::kF32, {1}, &v}}).ok());
  EXPECT_FALSE(write_safetensors(p("d.safetensors"), {{"a", DType::kF32, {1}, &v}}, {}, 12).ok());
  EXPECT_FALSE(file_exists(p("d.safetensors")));
}

TEST_F(SafetensorsTest, AcceptsUnpaddedHeaderAndForeignOrder) {
  // Written by hand: JSON order differs from data order; no padding; misaligned data start.
  std::string h = R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]},"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})";
  auto f = SafetensorsFile::open(raw("ok.safetensors", h, 5));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->tensors()[0].name, "a");
  EXPECT_EQ(f->data(*f->find("b"))[0], 3);
}

struct BadCase {
  const char* label;
  std::string header;
  size_t data;
  const char* must_mention;
};

TEST_F(SafetensorsTest, RejectsHostileHeaders) {
  const std::vector<BadCase> cases = {
      {"invalid json", R"({"a":{"dtype":"F32",)", 0, "JSON"},
      {"not an object", R"([1,2,3])", 0, "{"},
      {"unknown dtype", R"({"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})", 4, "'w'"},
      {"unsupported dtype", R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8, "'w'"},
      {"shape bytes mismatch", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8, "'w'"},
      {"overlap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "overlaps"},
      {"out of bounds", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8, "past the data section"},
      {"backwards range", R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 8, "backwards"},
      {"negative dim", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, "'w'"},
      {"float dim", R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4, "'w'"},
      {"huge dim", R"({"w":{"dtype":"F32","shape":[1152921504606846976],"data_offsets":[0,4]}})", 4, "too large"},
      {"product overflow", R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4, "overflow"},
      {"byte overflow", R"({"w":{"dtype":"I64","shape":[281474976710655,65536],"data_offsets":[0,4]}})", 4, "overflow"},
      {"rank 9", R"({"w":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1, "rank"},
      {"missing offsets", R"({"w":{"dtype":"U8","shape":[1]}})", 1, "data_offsets"},
      {"three offsets", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", 1, "data_offsets"},
      {"negative offset", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", 1, "data_offsets"},
      {"entry not object", R"({"w":[1]})", 0, "'w'"},
      {"metadata non-string", R"({"__metadata__":{"a":1}})", 0, "__metadata__"},
      {"metadata not object", R"({"__metadata__":"x"})", 0, "__metadata__"},
      {"duplicate key", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1, "duplicate"},
      {"empty name", R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1, "empty"},
      {"leading space", R"( {})", 0, "{"},
      {"invalid utf8", "{\"\xff\xfe\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "JSON"},
  };
  for (const BadCase& c : cases) {
    const std::string path = raw("bad.safetensors", c.header, c.data);
    Status s = open_status(path);
    EXPECT_FALSE(s.ok()) << c.label;
    EXPECT_NE(s.message().find(path), std::string::npos) << c.label << ": " << s.to_string();
    EXPECT_NE(s.message().find(c.must_mention), std::string::npos) << c.label << ": " << s.to_string();
  }
}

TEST_F(SafetensorsTest, RejectsBadHeaderLengths) {
  const std::string h = R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  EXPECT_NE(open_status(raw("a.safetensors", h, 1, uint64_t{1} << 60)).message().find("cap"), std::string::npos);
  EXPECT_NE(open_status(raw("b.safetensors", h, 1, h.size() + 2)).message().find("past the end"), std::string::npos);
  EXPECT_NE(open_status(raw("c.safetensors", h, 1, UINT64_MAX)).message().find("cap"), std::string::npos);
  ASSERT_TRUE(write_file_atomic(p("tiny.safetensors"), std::string(5, '\0')).ok());
  EXPECT_NE(open_status(p("tiny.safetensors")).message().find("too small"), std::string::npos);
  ASSERT_TRUE(write_file_atomic(p("zero.safetensors"), "").ok());
  EXPECT_FALSE(open_status(p("zero.safetensors")).ok());
  EXPECT_EQ(open_status(p("nope.safetensors")).code(), StatusCode::kNotFound);
}

// A valid multi-tensor file, as bytes.
std::string valid_file_bytes(const std::string& path) {
  std::vector<float> a(12, 1.0f), b(5, 2.0f);
  std::vector<uint16_t> c(7, 0x3f80);
  EXPECT_TRUE(write_safetensors(path, {{"model.a.weight", DType::kF32, {3, 4}, a.data()},
                                       {"model.b", DType::kF32, {5}, b.data()},
                                       {"model.c", DType::kBF16, {7, 1}, c.data()}},
                                {}, 8)
                  .ok());
  return *read_file_to_string(path);
}

void expect_consistent(const SafetensorsFile& f, size_t file_size) {
  uint64_t reach = 0;
  for (const TensorInfo& t : f.tensors()) {
    ASSERT_LE(f.data_start() + t.offset + t.nbytes, file_size) << t.name;
    ASSERT_EQ(static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype), t.nbytes) << t.name;
    if (t.nbytes) {
      ASSERT_GE(t.offset, reach) << t.name;
    }
    reach = std::max(reach, t.offset + t.nbytes);
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < t.nbytes; ++i) sink = sink ^ f.data(t)[i];  // touch every byte (ASan)
  }
}

TEST_F(SafetensorsTest, RandomBitFlipsNeverCrash) {
  const std::string good = valid_file_bytes(p("good.safetensors"));
  const uint64_t header_end = 8 + (static_cast<uint8_t>(good[0]) | static_cast<uint8_t>(good[1]) << 8);
  std::mt19937_64 rng(testing_util::fuzz_seed(1234));
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < testing_util::fuzz_iters(5000); ++iter) {
    std::string s = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Half the flips land in the length + header, where parsing decisions are made.
      const uint64_t limit = (iter % 2) ? header_end : s.size();
      const uint64_t pos = rng() % limit;
      s[pos] = static_cast<char>(s[pos] ^ (1u << (rng() % 8)));
    }
    quick_write(p("flip.safetensors"), s);
    auto f = SafetensorsFile::open(p("flip.safetensors"));
    if (f.ok()) {
      ++parsed;
      expect_consistent(*f, s.size());
    } else {
      ++rejected;
      EXPECT_NE(f.status().message().find("flip.safetensors"), std::string::npos) << f.status().to_string();
    }
  }
  EXPECT_GT(parsed, 100);  // data-section flips keep the file valid
  EXPECT_GT(rejected, 100);
}

TEST_F(SafetensorsTest, EveryTruncationIsRejectedOrConsistent) {
  const std::string good = valid_file_bytes(p("good.safetensors"));
  for (size_t len = 0; len < good.size(); ++len) {
    quick_write(p("trunc.safetensors"), good.substr(0, len));
    auto f = SafetensorsFile::open(p("trunc.safetensors"));
    EXPECT_FALSE(f.ok()) << "length " << len;  // the last tensor always ends at the file's end
  }
}

class CheckpointTest : public SafetensorsTest {
 protected:
  void write_shards() {
    ASSERT_TRUE(make_dirs(p("ck")).ok());
    ASSERT_TRUE(write_safetensors(p("ck/model-00001-of-00002.safetensors"),
                                  {{"x", DType::kF32, {2}, x_.data()}, {"y", DType::kBF16, {2}, y_.data()}})
                    .ok());
    ASSERT_TRUE(write_safetensors(p("ck/model-00002-of-00002.safetensors"), {{"z", DType::kF16, {3}, z_.data()}}).ok());
  }
  void write_index(const std::string& weight_map) {
    ASSERT_TRUE(write_file_atomic(p("ck/model.safetensors.index.json"),
                                  R"({"metadata":{"total_size":18},"weight_map":)" + weight_map + "}")
                    .ok());
  }
  std::vector<float> x_ = {1.0f, -3.5f};
  std::vector<uint16_t> y_ = {f32_to_bf16(2.0f), f32_to_bf16(0.15625f)};
  std::vector<uint16_t> z_ = {f32_to_f16(0.5f), f32_to_f16(-1.0f), f32_to_f16(65504.0f)};
};

TEST_F(CheckpointTest, ShardedLookupAndConversion) {
  write_shards();
  write_index(R"({"x":"model-00001-of-00002.safetensors","y":"model-00001-of-00002.safetensors",
                  "z":"model-00002-of-00002.safetensors"})");
  auto ck = Checkpoint::open(p("ck"));
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  EXPECT_EQ(ck->files().size(), 2u);
  EXPECT_EQ(ck->tensor_names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_TRUE(ck->has("z"));
  EXPECT_FALSE(ck->has("w"));
  auto f = ck->find("z");
  ASSERT_TRUE(f.ok());
  EXPECT_NE(f->first->path().find("00002"), std::string::npos);
  Status nf = ck->find("w").status();
  EXPECT_EQ(nf.code(), StatusCode::kNotFound);
  EXPECT_NE(nf.message().find("'w'"), std::string::npos);

  std::vector<float> out(3);
  ASSERT_TRUE(read_tensor_as(*ck, "z", {3}, DType::kF32, out.data()).ok());
  EXPECT_EQ(out, (std::vector<float>{0.5f, -1.0f, 65504.0f}));
  ASSERT_TRUE(read_tensor_as(*ck, "y", {2}, DType::kF32, out.data()).ok());
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 0.15625f);
  std::vector<uint16_t> bf(2);
  ASSERT_TRUE(read_tensor_as(*ck, "x", {2}, DType::kBF16, bf.data()).ok());
  EXPECT_EQ(bf16_to_f32(bf[1]), -3.5f);
  Status shape = read_tensor_as(*ck, "x", {1, 2}, DType::kF32, out.data());
  EXPECT_FALSE(shape.ok());
  EXPECT_NE(shape.message().find("'x'"), std::string::npos);
  EXPECT_NE(shape.message().find("model-00001"), std::string::npos);
}

TEST_F(CheckpointTest, IndexErrors) {
  write_shards();
  write_index(R"({"x":"model-00001-of-00002.safetensors","y":"model-00001-of-00002.safetensors",
                  "z":"model-00003-of-00003.safetensors"})");
  Status s = Checkpoint::open(p("ck")).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("model-00003-of-00003"), std::string::npos) << s.to_string();

  write_index(R"({"x":"model-00001-of-00002.safetensors","y":"model-00001-of-00002.safetensors",
                  "z":"model-00001-of-00002.safetensors"})");
  s = Checkpoint::open(p("ck")).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'z'"), std::string::npos) << s.to_string();

  write_index(R"({"x":"model-00001-of-00002.safetensors","z":"model-00002-of-00002.safetensors"})");
  s = Checkpoint::open(p("ck")).status();
  EXPECT_NE(s.message().find("'y'"), std::string::npos) << s.to_string();

  write_index(R"({"x":"../model-00001-of-00002.safetensors"})");
  EXPECT_FALSE(Checkpoint::open(p("ck")).ok());
  write_index(R"([1])");
  EXPECT_FALSE(Checkpoint::open(p("ck")).ok());
  EXPECT_EQ(Checkpoint::open(p("nothing_here")).status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointTest, SingleFileAndDirectPath) {
  ASSERT_TRUE(make_dirs(p("one")).ok());
  int32_t ids[3] = {1, 2, 3};
  ASSERT_TRUE(write_safetensors(p("one/model.safetensors"), {{"ids", DType::kI32, {3}, ids}}).ok());
  for (const std::string& where : {p("one"), p("one/model.safetensors")}) {
    auto ck = Checkpoint::open(where);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    int32_t out[3] = {};
    ASSERT_TRUE(read_tensor_as(*ck, "ids", {3}, DType::kI32, out).ok());
    EXPECT_EQ(out[2], 3);
    float f[3];
    EXPECT_FALSE(read_tensor_as(*ck, "ids", {3}, DType::kF32, f).ok());  // no int -> float conversion
  }
}

TEST_F(CheckpointTest, MisalignedSourceIsConverted) {
  // 3 bytes of U8 first so the f32 tensor sits at an odd address.
  std::string h = R"({"pad":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"w":{"dtype":"F32","shape":[2],"data_offsets":[3,11]}})";
  std::string s(8, '\0');
  s[0] = static_cast<char>(h.size());
  s += h + "abc";
  float v[2] = {1.25f, -7.0f};
  s.append(reinterpret_cast<const char*>(v), 8);
  ASSERT_TRUE(make_dirs(p("mis")).ok());
  ASSERT_TRUE(write_file_atomic(p("mis/model.safetensors"), s).ok());
  auto ck = Checkpoint::open(p("mis"));
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  uint16_t out[2];
  ASSERT_TRUE(read_tensor_as(*ck, "w", {2}, DType::kBF16, out).ok());
  EXPECT_EQ(bf16_to_f32(out[0]), 1.25f);
  EXPECT_EQ(bf16_to_f32(out[1]), -7.0f);
}

}  // namespace
}  // namespace st
