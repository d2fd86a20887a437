// train/model_card.h: the README.md written beside the final adapter. Oracles: the YAML header the
// Hub reads (library_name peft; base_model only for a Hub id), the settings and the last losses of
// metrics.jsonl (damaged lines skipped); our own card rewritten, the user's README.md left as it is.
#include "train/model_card.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/check.h"
#include "core/file.h"

namespace st {
namespace {

TEST(ModelCard, HeaderSettingsAndLastLosses) {
  const std::string dir = ::testing::TempDir() + "/card_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  CHECK_OK(write_file_atomic(dir + "/metrics.jsonl",
                             "{\"step\":1,\"loss\":2.5}\nnot json\n{\"step\":2,\"loss\":2.25}\n{\"step\":2,\"eval_loss\":2.375}\n"));
  TrainConfig cfg;
  cfg.base_model = "/models/qwen";
  cfg.output_dir = dir;
  cfg.lora_r = 16;
  cfg.datasets.push_back({});
  cfg.datasets.back().path = "/data/chat.jsonl";
  cfg.datasets.back().type = "chat_template";
  cfg.chat_template = "chatml";
  std::string card = model_card_text(cfg, dir + "/metrics.jsonl");
  EXPECT_EQ(card.rfind("---\nlibrary_name: peft\n", 0), 0u) << card;
  EXPECT_EQ(card.find("base_model:"), std::string::npos) << card;  // a local path is no Hub id
  for (const char* s : {"r 16, alpha 16", "targets q_proj, v_proj", "`chat.jsonl` (chat_template); chat template chatml",
                        "2 steps", "last logged train loss 2.25, eval loss 2.375"})
    EXPECT_NE(card.find(s), std::string::npos) << s << "\n" << card;
  cfg.base_model_cache_id = "Qwen/Qwen2.5-0.5B";
  card = model_card_text(cfg, dir + "/none.jsonl");
  EXPECT_NE(card.find("base_model: \"Qwen/Qwen2.5-0.5B\"\n"), std::string::npos) << card;
  EXPECT_EQ(card.find("last logged"), std::string::npos) << card;

  auto wrote = write_model_card(cfg);
  ASSERT_TRUE(wrote.ok() && *wrote);
  wrote = write_model_card(cfg);  // ours: rewritten with the next run's numbers
  ASSERT_TRUE(wrote.ok() && *wrote);
  CHECK_OK(write_file_atomic(dir + "/README.md", "my own notes\n"));
  wrote = write_model_card(cfg);
  ASSERT_TRUE(wrote.ok());
  EXPECT_FALSE(*wrote);
  EXPECT_EQ(*read_file_to_string(dir + "/README.md"), "my own notes\n");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace st
