// The `devices` entry points end to end on CPU replicas: config -> shard -> shared RAM store ->
// N replicas -> metrics.jsonl + adapter (written once); the synthetic bench; the devices parser.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/file.h"
#include "dist/run_train_dp.h"

namespace st {
namespace {

const std::string kFixture = std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_gqa";

TrainConfig tiny_config(const std::string& tmp) {
  TrainConfig tc;
  tc.base_model = kFixture + "/model";
  tc.device = "cpu";
  tc.dtype = "float32";
  tc.datasets = {{kFixture + "/data.jsonl", "tokenized"}};
  tc.sequence_len = 32;
  tc.max_steps = 2;
  tc.lora_r = 4;
  tc.lora_alpha = 8;
  tc.cache_dir = tmp + "/cache";
  tc.output_dir = tmp + "/out";
  return tc;
}

TEST(RunTrainDataParallel, TwoCpuReplicasWriteOneRun) {
  const std::string tmp = Str() << "/tmp/st_dist_run_" << getpid();
  TrainConfig tc = tiny_config(tmp);
  bool interrupted = false;
  Status s = run_train_data_parallel(tc, 2, &interrupted);
  EXPECT_FALSE(interrupted);
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto metrics = read_file_to_string(tc.output_dir + "/metrics.jsonl");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(std::count(metrics->begin(), metrics->end(), '\n'), 2);
  EXPECT_TRUE(file_exists(tc.output_dir + "/adapter_model.safetensors"));
  EXPECT_TRUE(file_exists(tc.output_dir + "/adapter_config.json"));

  auto bench = bench_data_parallel(tc, 3, /*steps=*/2, /*warmup=*/1);
  ASSERT_TRUE(bench.ok()) << bench.status().to_string();
  EXPECT_EQ(bench->world_size, 3);
  EXPECT_EQ(bench->tokens_per_step, 3 * 32);
  EXPECT_GT(bench->tok_s, 0);
  EXPECT_GT(bench->loss_first, 0);
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
}

// stream: disk opens one DiskStore per replica (kept alive by the replica's parts); it reads the
// same store bytes as the shared RAM store, so the losses are the same; so does a shared RAM store
// that keeps no layer within its RAM budget.
TEST(RunTrainDataParallel, DiskStreamingMatchesRam) {
  const std::string tmp = Str() << "/tmp/st_dist_disk_" << getpid();
  TrainConfig tc = tiny_config(tmp);
  tc.stream = "ram";
  auto ram = bench_data_parallel(tc, 2, /*steps=*/2, /*warmup=*/0);
  ASSERT_TRUE(ram.ok()) << ram.status().to_string();
  tc.stream = "disk";
  auto disk = bench_data_parallel(tc, 2, /*steps=*/2, /*warmup=*/0);
  ASSERT_TRUE(disk.ok()) << disk.status().to_string();
  EXPECT_GT(ram->loss_first, 0);
  EXPECT_EQ(disk->loss_first, ram->loss_first);
  EXPECT_EQ(disk->loss_last, ram->loss_last);
  // store/host_memory.h Note [partial RAM store]: a RAM budget below the store keeps no layer in
  // the shared arena; each replica's view reads them through a disk tier of its own.
  tc.stream = "ram";
  tc.ram_budget = "1KiB";
  auto partial = bench_data_parallel(tc, 2, /*steps=*/2, /*warmup=*/0);
  ASSERT_TRUE(partial.ok()) << partial.status().to_string();
  EXPECT_EQ(partial->loss_first, ram->loss_first);
  EXPECT_EQ(partial->loss_last, ram->loss_last);
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
}

TEST(RunTrainDataParallel, BadInputsAreNamed) {
  TrainConfig tc = tiny_config("/tmp/st_dist_unused");
  bool interrupted = false;
  tc.stream = "tape";
  EXPECT_NE(run_train_data_parallel(tc, 2, &interrupted).to_string().find("stream: 'tape'"), std::string::npos);
  EXPECT_EQ(run_train_data_parallel(tc, 0, &interrupted).code(), StatusCode::kInvalidArgument);
}

TEST(ResolveDevices, OneAllOrN) {
  EXPECT_EQ(*resolve_devices("1", DeviceKind::kCpu), 1);
  EXPECT_EQ(*resolve_devices("", DeviceKind::kCpu), 1);
  EXPECT_EQ(*resolve_devices("all", DeviceKind::kCpu), 1);
  EXPECT_EQ(*resolve_devices("3", DeviceKind::kCpu), 3);
  for (const char* bad : {"0", "-2", "two", "2x"}) {
    auto r = resolve_devices(bad, DeviceKind::kCpu);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().to_string().find(bad), std::string::npos) << r.status().to_string();
  }
}

}  // namespace
}  // namespace st
