// tokenizer.json and tokenizer_config.json as hostile input: every fixture tokenizer with one node
// of its JSON replaced by a value of another type (or removed), thousands of times. Each load
// either succeeds (and then encodes and decodes) or returns a Status; none may throw (nlohmann's
// type_error escaping a reader ended the process) or crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/json.h"
#include "data/tokenizer.h"
#include "../json_fuzz.h"
#include "../fuzz_env.h"

namespace st {
namespace {

using testing_util::mutate;

std::vector<std::string> fixture_dirs() {
  std::vector<std::string> dirs;
  for (const auto& e : std::filesystem::directory_iterator(std::string(ST_SOURCE_DIR) + "/tests/fixtures/tokenizers"))
    if (std::filesystem::exists(e.path() / "tokenizer.json")) dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

void exercise(const Tokenizer& t) {
  const std::vector<int32_t> ids = t.encode("Hello, world! 123  \xC3\xA9\xE4\xB8\xAD <s>", AddSpecial::kYes);
  (void)t.decode(ids);
}

TEST(TokenizerJsonFuzz, MutatedTokenizerJsonNeverThrows) {
  std::mt19937 rng(static_cast<uint32_t>(testing_util::fuzz_seed(20261202)));
  int loaded = 0, refused = 0;
  for (const std::string& dir : fixture_dirs()) {
    StatusOr<std::string> text = read_file_to_string(dir + "/tokenizer.json");
    ASSERT_TRUE(text.ok());
    StatusOr<Json> good = parse_json(*text, dir);
    ASSERT_TRUE(good.ok());
    for (int it = 0; it < testing_util::fuzz_iters(250); ++it) {
      Json j = *good;
      const int edits = 1 + static_cast<int>(rng() % 2);
      for (int k = 0; k < edits; ++k) mutate(j, rng);
      const std::string doc = j.dump();
      try {
        StatusOr<Tokenizer> t = Tokenizer::from_json(doc, "fuzz.json");
        if (!t.ok()) {
          ++refused;
          EXPECT_NE(t.status().message().find("fuzz.json"), std::string::npos) << t.status().to_string();
          continue;
        }
        ++loaded;
        exercise(*t);
      } catch (const std::exception& e) {
        ADD_FAILURE() << dir << " iteration " << it << ": threw " << e.what() << "\n" << doc.substr(0, 600);
        if (getenv("FUZZ_ALL") == nullptr) return;
      }
    }
  }
  EXPECT_GT(refused, 50);
  EXPECT_GT(loaded, 50);
}

TEST(TokenizerJsonFuzz, MutatedTokenizerConfigNeverThrows) {
  std::mt19937 rng(static_cast<uint32_t>(testing_util::fuzz_seed(7)));
  const std::string tmp = ::testing::TempDir() + "/tokcfg_fuzz_" + std::to_string(::getpid());
  std::filesystem::create_directories(tmp);
  const std::string src = std::string(ST_SOURCE_DIR) + "/tests/fixtures/tokenizers/llama3/tokenizer.json";
  std::filesystem::copy_file(src, tmp + "/tokenizer.json", std::filesystem::copy_options::overwrite_existing);
  const Json good = {{"bos_token", "<|begin_of_text|>"},
                     {"eos_token", {{"content", "<|end_of_text|>"}, {"lstrip", false}}},
                     {"pad_token", Json()},
                     {"chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}"},
                     {"model_max_length", 131072},
                     {"added_tokens_decoder", {{"128000", {{"content", "<|begin_of_text|>"}, {"special", true}}}}}};
  for (int it = 0; it < testing_util::fuzz_iters(300); ++it) {
    Json j = good;
    mutate(j, rng);
    ASSERT_TRUE(write_file_atomic(tmp + "/tokenizer_config.json", j.dump()).ok());
    try {
      StatusOr<Tokenizer> t = Tokenizer::from_dir(tmp);
      if (t.ok()) {
        exercise(*t);
      } else {
        EXPECT_NE(t.status().message().find("tokenizer_config.json"), std::string::npos) << t.status().to_string();
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << it << ": threw " << e.what() << "\n" << j.dump();
      break;
    }
  }
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace st
