// train/train_data.h: the data assembly shared by the single-device and data-parallel runs.
#include "train/train_data.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "core/check.h"
#include "core/file.h"

namespace st {
namespace {

std::string temp_dir() {
  std::string t = "/tmp/st_train_data_XXXXXX";
  CHECK(mkdtemp(t.data()) != nullptr);
  return t;
}

// Five pre-tokenised samples (no tokenizer needed); sample i holds i+2 tokens.
TrainConfig tokenized_config(const std::string& dir) {
  std::string jsonl;
  for (int i = 0; i < 5; ++i) {
    jsonl += "{\"input_ids\": [";
    for (int k = 0; k < i + 2; ++k) jsonl += (k ? ", " : "") + std::to_string(k + 1);
    jsonl += "]}\n";
  }
  const std::string path = path_join(dir, "train.jsonl");
  CHECK(write_file_atomic(path, jsonl).ok());
  TrainConfig c;
  c.base_model = path_join(dir, "no-model-here");  // a tokenizer load would fail
  c.datasets = {DatasetSpec{path, "tokenized"}};
  c.sequence_len = 16;
  return c;
}

TEST(TrainData, NeedsTokenizerOnlyForUntokenizedSets) {
  TrainConfig c;
  c.datasets = {DatasetSpec{"a.jsonl", "tokenized"}};
  EXPECT_FALSE(needs_tokenizer(c));
  c.eval_datasets = {DatasetSpec{"b.jsonl", "text"}};
  EXPECT_TRUE(needs_tokenizer(c));
}

TEST(TrainData, LoadsSplitsAndCounts) {
  const std::string dir = temp_dir();
  TrainConfig c = tokenized_config(dir);
  ModelConfig mc;
  mc.vocab_size = 100;
  StatusOr<TrainData> td = load_train_data(c, mc);
  ASSERT_TRUE(td.ok()) << td.status().to_string();
  EXPECT_EQ(td->train->size(), 5u);
  EXPECT_EQ(td->eval, nullptr);
  EXPECT_EQ(td->stats.tokens, 2 + 3 + 4 + 5 + 6);
  EXPECT_EQ(td->pad_id, 0);  // no tokenizer: neither pad nor eos

  c.val_set_size = 2;
  td = load_train_data(c, mc);
  ASSERT_TRUE(td.ok()) << td.status().to_string();
  EXPECT_EQ(td->train->size(), 3u);
  ASSERT_NE(td->eval, nullptr);
  EXPECT_EQ(td->eval->size(), 2u);
  std::filesystem::remove_all(dir);
}

TEST(TrainData, ErrorsNameTheProblem) {
  TrainConfig c;
  ModelConfig mc;
  StatusOr<TrainData> none = load_train_data(c, mc);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("datasets"), std::string::npos);
  c.datasets = {DatasetSpec{"/nonexistent/x.jsonl", "tokenized"}};
  StatusOr<TrainData> missing = load_train_data(c, mc);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/x.jsonl"), std::string::npos);

  // An empty file says so; records with nothing to train on say how many and what to change.
  const std::string dir = temp_dir();
  const std::string empty = path_join(dir, "empty.jsonl"), masked = path_join(dir, "masked.jsonl");
  CHECK(write_file_atomic(empty, "\n").ok());
  CHECK(write_file_atomic(masked, "{\"input_ids\": [1, 2], \"labels\": [-100, -100]}\n").ok());
  mc.vocab_size = 100;
  c.sequence_len = 16;
  c.datasets = {DatasetSpec{empty, "tokenized"}};
  StatusOr<TrainData> no_records = load_train_data(c, mc);
  ASSERT_FALSE(no_records.ok());
  EXPECT_NE(no_records.status().message().find(empty), std::string::npos) << no_records.status().to_string();
  c.datasets = {DatasetSpec{masked, "tokenized"}};
  StatusOr<TrainData> no_targets = load_train_data(c, mc);
  ASSERT_FALSE(no_targets.ok());
  EXPECT_NE(no_targets.status().message().find("all 1 record(s) were dropped"), std::string::npos)
      << no_targets.status().to_string();
  std::filesystem::remove_all(dir);
}

TEST(TrainData, LoaderOptionsShuffleOnlyTraining) {
  TrainConfig c;
  c.sequence_len = 32;
  c.micro_batch_size = 3;
  c.sample_packing = true;
  c.shuffle = true;
  c.seed = 7;
  auto cpu = make_backend(DeviceKind::kCpu);
  ASSERT_TRUE(cpu.ok());
  Backend& be = **cpu;
  LoaderOptions tr = loader_options(c, 5, /*train=*/true, be), ev = loader_options(c, 5, /*train=*/false, be);
  EXPECT_TRUE(tr.shuffle);
  EXPECT_FALSE(ev.shuffle);
  for (const LoaderOptions& o : {tr, ev}) {
    EXPECT_EQ(o.sequence_len, 32);
    EXPECT_EQ(o.micro_batch_size, 3);
    EXPECT_TRUE(o.sample_packing);
    EXPECT_EQ(o.seed, 7u);
    EXPECT_EQ(o.pad_id, 5);
    EXPECT_EQ(o.pad_to_multiple_of, 1);  // auto: 1 on the CPU backend (64 on CUDA)
  }
  c.pad_to_multiple_of = 16;
  EXPECT_EQ(loader_options(c, 5, /*train=*/true, be).pad_to_multiple_of, 16);
}

}  // namespace
}  // namespace st
