// Dataset files in Parquet and gzip. Oracle: the same records as JSON Lines (written by
// tools/ref/parquet_fixtures.py from the rows it gave pyarrow) must tokenize to the same samples.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/file.h"
#include "data/batch.h"
#include "data/datasets.h"

namespace st {
namespace {

const std::string kDir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/parquet/";

Tokenizer load_tok(const char* name) {
  auto t = Tokenizer::from_file(std::string(ST_SOURCE_DIR) + "/tests/fixtures/tokenizers/" + name + "/tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return *t;
}

std::string tmp(const std::string& name, const std::string& bytes) {
  const std::string p = ::testing::TempDir() + "/dsp_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct Loaded {
  Status status;
  std::vector<Sample> samples;
  DatasetStats stats;
};

Loaded load(const std::string& path, const std::string& type, const Tokenizer& tok) {
  Loaded l;
  DatasetOptions opt;
  opt.chat_template = "chatml";
  l.status = load_dataset({path, type}, tok, opt, &l.samples, &l.stats);
  return l;
}

void expect_same(const Loaded& a, const Loaded& b) {
  ASSERT_TRUE(a.status.ok()) << a.status.to_string();
  ASSERT_TRUE(b.status.ok()) << b.status.to_string();
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    EXPECT_EQ(a.samples[i].input_ids, b.samples[i].input_ids) << "sample " << i;
    EXPECT_EQ(a.samples[i].labels, b.samples[i].labels) << "sample " << i;
  }
  EXPECT_EQ(a.stats.tokens, b.stats.tokens);
  EXPECT_EQ(a.stats.target_tokens, b.stats.target_tokens);
}

TEST(DatasetsParquet, MessagesParquetEqualsJsonl) {
  Tokenizer tok = load_tok("qwen2");
  Loaded pq = load(kDir + "chat.parquet", "messages", tok), js = load(kDir + "chat.jsonl", "messages", tok);
  expect_same(pq, js);
  EXPECT_EQ(pq.samples.size(), 12u);
  // The multi-byte second conversation, decoded from the Parquet run.
  EXPECT_NE(tok.decode(pq.samples[1].input_ids).find("Combien font 2+2 ? 日本語も 🤖"), std::string::npos);
}

TEST(DatasetsParquet, TokenizedParquetEqualsJsonl) {
  Tokenizer tok = load_tok("qwen2");
  Loaded pq = load(kDir + "ids.parquet", "tokenized", tok);
  expect_same(pq, load(kDir + "ids.jsonl", "tokenized", tok));
  EXPECT_EQ(pq.samples.size(), 8u);
}

TEST(DatasetsParquet, GzipEqualsPlain) {
  Tokenizer tok = load_tok("qwen2");
  expect_same(load(kDir + "chat.jsonl.gz", "messages", tok), load(kDir + "chat.jsonl", "messages", tok));
  expect_same(load(kDir + "chat.parquet.gz", "messages", tok), load(kDir + "chat.jsonl", "messages", tok));
  // A truncated .gz is an error naming the file.
  const std::string gz = slurp(kDir + "chat.jsonl.gz");
  Loaded cut = load(tmp("cut.jsonl.gz", gz.substr(0, gz.size() - 20)), "messages", tok);
  ASSERT_FALSE(cut.status.ok());
  EXPECT_NE(cut.status.message().find("cut.jsonl.gz: gzip-compressed: truncated deflate stream"), std::string::npos)
      << cut.status.to_string();
}

TEST(DatasetsParquet, ErrorsNameFileAndRow) {
  Tokenizer tok = load_tok("qwen2");
  Loaded wrong = load(kDir + "chat.parquet", "text", tok);
  ASSERT_FALSE(wrong.status.ok());
  EXPECT_NE(wrong.status.message().find("chat.parquet row 1: missing field 'text'"), std::string::npos) << wrong.status.to_string();
  // Row 3 of the messages fixture has an empty list, which the dataset code refuses by row.
  Loaded empty = load(kDir + "messages_snappy_v1.parquet", "messages", tok);
  ASSERT_FALSE(empty.status.ok());
  EXPECT_NE(empty.status.message().find("messages_snappy_v1.parquet row 3"), std::string::npos) << empty.status.to_string();
  // A damaged Parquet file: a Status naming the file.
  std::string bytes = slurp(kDir + "chat.parquet");
  bytes.resize(bytes.size() - 5);
  Loaded cut = load(tmp("cut.parquet", bytes), "messages", tok);
  ASSERT_FALSE(cut.status.ok());
  EXPECT_NE(cut.status.message().find("cut.parquet"), std::string::npos) << cut.status.to_string();
  // Its head overwritten: still read as Parquet (by its name), not as JSON Lines of binary.
  bytes = slurp(kDir + "chat.parquet");
  bytes.replace(0, 4, "\0\0\0\0", 4);
  Loaded head = load(tmp("head.parquet", bytes), "messages", tok);
  ASSERT_FALSE(head.status.ok());
  EXPECT_NE(head.status.message().find("head.parquet: not a Parquet file (no PAR1 magic at the start)"), std::string::npos)
      << head.status.to_string();
}

}  // namespace
}  // namespace st

namespace st {
namespace {

// A downloaded dataset folder: every dataset file in it, in name order (other files ignored), of
// one format as `datasets` reads one builder's (two .parquet outnumber a .jsonl.gz); an empty
// folder is refused by name.
TEST(DatasetsParquet, DirectoryOfShards) {
  const Tokenizer tok = load_tok("qwen2");
  const std::string dir = ::testing::TempDir() + "/dsp_dir_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kDir + "chat.parquet", dir + "/train-00001-of-00002.parquet");
  std::filesystem::copy_file(kDir + "chat.parquet", dir + "/train-00000-of-00002.parquet");
  std::filesystem::copy_file(kDir + "chat.jsonl.gz", dir + "/extra.jsonl.gz");
  std::ofstream(dir + "/README.md") << "# not data\n";
  const Loaded all = load(dir, "messages", tok);
  const Loaded one = load(kDir + "chat.jsonl", "messages", tok);
  ASSERT_TRUE(all.status.ok()) << all.status.to_string();
  ASSERT_TRUE(one.status.ok()) << one.status.to_string();
  ASSERT_EQ(all.samples.size(), 2 * one.samples.size());
  for (size_t i = 0; i < all.samples.size(); ++i)
    EXPECT_EQ(all.samples[i].input_ids, one.samples[i % one.samples.size()].input_ids) << i;
  const std::string empty = dir + "/empty";
  std::filesystem::create_directories(empty);
  const Loaded none = load(empty, "messages", tok);
  EXPECT_NE(none.status.message().find("a directory without dataset files"), std::string::npos)
      << none.status.to_string();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace st
