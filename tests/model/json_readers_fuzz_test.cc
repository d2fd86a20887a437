// config.json and adapter_config.json as hostile input: every fixture's file with one node replaced
// by a value of another type (or removed). Each read either succeeds or returns a Status naming
// the file; none may throw or crash. An adapter config that reads is then loaded (its tensors
// checked against it), as merge and generate do.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/file.h"
#include "core/json.h"
#include "io/hf_config.h"
#include "model/lora.h"
#include "../json_fuzz.h"
#include "../fuzz_env.h"

namespace st {
namespace {

namespace fs = std::filesystem;
using testing_util::mutate;

std::vector<std::string> fixture_models() {
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(std::string(ST_SOURCE_DIR) + "/tests/fixtures"))
    if (fs::exists(e.path() / "model/config.json") && fs::exists(e.path() / "adapter/adapter_config.json"))
      dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

TEST(JsonReadersFuzz, MutatedConfigJsonNeverThrows) {
  std::mt19937 rng(static_cast<uint32_t>(testing_util::fuzz_seed(11)));
  int refused = 0;
  const std::vector<std::string> fixtures = fixture_models();
  ASSERT_GE(fixtures.size(), 4u);
  for (const std::string& fx : fixtures) {
    StatusOr<Json> good = read_json_file(fx + "/model/config.json");
    ASSERT_TRUE(good.ok()) << fx;
    for (int it = 0; it < testing_util::fuzz_iters(400); ++it) {
      Json j = *good;
      mutate(j, rng);
      try {
        StatusOr<ModelConfig> c = parse_hf_config(j, "config.json");
        if (!c.ok()) {
          ++refused;
          EXPECT_NE(c.status().message().find("config.json"), std::string::npos) << c.status().to_string();
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << fx << " iteration " << it << ": threw " << e.what() << "\n" << j.dump();
        return;
      }
    }
  }
  EXPECT_GT(refused, 100);
}

TEST(JsonReadersFuzz, MutatedAdapterConfigNeverThrows) {
  std::mt19937 rng(static_cast<uint32_t>(testing_util::fuzz_seed(12)));
  auto cpu = make_backend(DeviceKind::kCpu);
  ASSERT_TRUE(cpu.ok());
  const std::string tmp = ::testing::TempDir() + "/adapter_fuzz_" + std::to_string(::getpid());
  int refused = 0, loaded = 0;
  for (const std::string& fx : fixture_models()) {
    StatusOr<Json> cfg = read_json_file(fx + "/model/config.json");
    ASSERT_TRUE(cfg.ok());
    StatusOr<ModelConfig> mc = parse_hf_config(*cfg, fx);
    ASSERT_TRUE(mc.ok()) << mc.status().to_string();
    fs::remove_all(tmp);
    fs::copy(fx + "/adapter", tmp, fs::copy_options::recursive);
    StatusOr<Json> good = read_json_file(fx + "/adapter/adapter_config.json");
    ASSERT_TRUE(good.ok());
    for (int it = 0; it < testing_util::fuzz_iters(150); ++it) {
      Json j = *good;
      mutate(j, rng);
      ASSERT_TRUE(write_file_atomic(tmp + "/adapter_config.json", j.dump()).ok());
      try {
        StatusOr<LoraConfig> lc = read_peft_config(tmp);
        if (!lc.ok()) {
          ++refused;
          EXPECT_NE(lc.status().message().find("adapter_config.json"), std::string::npos) << lc.status().to_string();
          continue;
        }
        StatusOr<std::unique_ptr<Lora>> lora = Lora::create(cpu->get(), *mc, *lc);
        if (!lora.ok()) continue;
        if ((*lora)->load_peft(tmp).ok()) ++loaded;
      } catch (const std::exception& e) {
        ADD_FAILURE() << fx << " iteration " << it << ": threw " << e.what() << "\n" << j.dump();
        break;
      }
    }
  }
  fs::remove_all(tmp);
  EXPECT_GT(refused, 50);
  EXPECT_GT(loaded, 50);
}

}  // namespace
}  // namespace st
