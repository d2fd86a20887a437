// Live oracle: random strings from tools/tok/live_check.py, tokenized by HF `tokenizers` at test
// time, compared id-for-id with ours for every fixture tokenizer (byte-level and SentencePiece
// style), and by sentencepiece itself for the GGUF "llama" vocabulary; NFC compared with Python's.
// Fails (never skips) when python3 or the `tokenizers` / `sentencepiece` package is missing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "core/json.h"
#include "data/detail/unicode.h"
#include "data/model_tokenizer.h"
#include "data/tokenizer.h"
#include "../run_command.h"

namespace st {
namespace {

TEST(TokenizerLive, MatchesHfOnRandomStrings) {
  const std::string root = ST_SOURCE_DIR;
  const long seed = std::chrono::system_clock::now().time_since_epoch().count() % 1000000;
  std::string cmd = "python3 " + root + "/tools/tok/live_check.py " + std::to_string(seed) + " 400 2>&1";
  int rc = -1;
  const std::string out = run_command(cmd, &rc);
  ASSERT_EQ(rc, 0) << "live_check.py failed (python3 with the `tokenizers` and `sentencepiece` packages is "
                      "required; run tools/install_deps.sh):\n" << out.substr(0, 2000);

  std::map<std::string, Tokenizer> toks;
  for (const char* name : {"llama3", "qwen2", "smollm2", "gpt2", "tekken", "llama2", "mistral3", "spm_split", "spm_unk"}) {
    auto t = Tokenizer::from_file(root + "/tests/fixtures/tokenizers/" + name + "/tokenizer.json");
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    toks.emplace(name, *t);
  }
  auto gguf = load_model_tokenizer(root + "/tests/fixtures/tokenizers/spm_gguf/tiny_spm.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
  toks.emplace("spm_gguf", *gguf);
  size_t pos = 0;
  int lines = 0, bad = 0;
  while (pos < out.size()) {
    size_t e = out.find('\n', pos);
    if (e == std::string::npos) e = out.size();
    auto j = parse_json(std::string_view(out).substr(pos, e - pos), "live_check output");
    pos = e + 1;
    ASSERT_TRUE(j.ok()) << j.status().to_string();
    std::string text = (*j)["text"];
    ++lines;
    if (tok::nfc(text) != (*j)["nfc"].get<std::string>() && bad++ < 5)
      ADD_FAILURE() << "NFC differs for " << Json(text).dump() << " (seed " << seed << ")";
    for (auto& [name, t] : toks) {
      auto got = t.encode(text, AddSpecial::kYes);
      // sentencepiece's decode drops control tokens: compare with skip_special.
      const SkipSpecial skip = name == "spm_gguf" ? SkipSpecial::kYes : SkipSpecial::kNo;
      if ((got != (*j)["ids"][name].get<std::vector<int32_t>>() ||
           t.decode(got, skip) != (*j)["decoded"][name].get<std::string>()) && bad++ < 5)
        ADD_FAILURE() << name << ": ids or decode differ for " << Json(text).dump() << " (seed " << seed << ")";
    }
  }
  EXPECT_EQ(lines, 400);
  EXPECT_EQ(bad, 0) << "seed " << seed;
}

}  // namespace
}  // namespace st
