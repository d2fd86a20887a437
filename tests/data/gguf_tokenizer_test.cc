// The tokenizer a GGUF file carries (io: read_gguf_tokenizer -> data: Tokenizer::from_gguf_parts)
// must give the same ids as the tokenizer.json it was exported from, and as HF `tokenizers`
// itself (tokenizer_cases.json, written by tools/gguf/make_gguf_fixtures.py).
#include <gtest/gtest.h>

#include "core/file.h"
#include "core/json.h"
#include "data/tokenizer.h"
#include "io/gguf_checkpoint.h"

namespace st {
namespace {

std::string fixture(const std::string& name) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/gguf/" + name; }

GgufTokenizerParts to_parts(const GgufTokenizerData& d) {
  GgufTokenizerParts p;
  p.tokens = d.tokens;
  p.merges = d.merges;
  p.token_types = d.token_types;
  p.pre = d.pre;
  p.bos_id = d.bos_id;
  p.eos_id = d.eos_id;
  p.pad_id = d.pad_id;
  p.add_bos = d.add_bos;
  p.chat_template = d.chat_template;
  return p;
}

TEST(GgufTokenizer, SameIdsAsTokenizerJsonAndHf) {
  auto ck = GgufCheckpoint::open(fixture("tiny_qwen3.gguf"));
  ASSERT_TRUE(ck.ok()) << ck.status().to_string();
  auto data = ck->tokenizer();
  ASSERT_TRUE(data.ok()) << data.status().to_string();
  auto from_gguf = Tokenizer::from_gguf_parts(to_parts(*data));
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status().to_string();
  auto from_json = Tokenizer::from_file(fixture("tiny_tokenizer.json"));
  ASSERT_TRUE(from_json.ok()) << from_json.status().to_string();

  auto text = read_file_to_string(fixture("tokenizer_cases.json"));
  ASSERT_TRUE(text.ok());
  auto cases = parse_json(*text, "tokenizer_cases.json");
  ASSERT_TRUE(cases.ok()) << cases.status().to_string();
  int n = 0;
  for (const auto& c : *cases) {
    std::string s = c["text"].get<std::string>();
    std::vector<int32_t> hf = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(from_gguf->encode(s), hf) << "'" << s << "' (GGUF vs HF tokenizers)";
    EXPECT_EQ(from_json->encode(s), hf) << "'" << s << "' (tokenizer.json vs HF tokenizers)";
    ++n;
  }
  EXPECT_GE(n, 5);
}

}  // namespace
}  // namespace st
