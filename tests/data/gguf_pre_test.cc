// Every GGUF tokenizer.ggml.pre name we map builds its pre-tokenizer (each regex compiles; a
// pattern the general matcher refused would surface here, not in a user's run), and splits text.
// Token-for-token agreement with HF on real vocabularies is gguf_vocab_test's job.
#include <gtest/gtest.h>

#include "data/detail/tokenizer_json.h"

namespace st::tok {
namespace {

TEST(GgufPre, EveryNameBuilds) {
  const std::vector<std::string> names = gguf_pre_names();
  EXPECT_GT(names.size(), 60u);
  for (const std::string& name : names) {
    TokenizerImpl t;
    Status s = gguf_pre_tokenizer(name, &t, "test");
    ASSERT_TRUE(s.ok()) << name << ": " << s.to_string();
    std::vector<std::string> pieces;
    t.pre_tokenize("Hello, wörld 12345\n\tdon't 中文", true, &pieces);
    std::string joined;
    for (const std::string& p : pieces) joined += p;
    EXPECT_EQ(joined, "Hello, wörld 12345\n\tdon't 中文") << name << ": pieces must cover the text";
    EXPECT_GT(pieces.size(), 3u) << name;
  }
}

TEST(GgufPre, UnknownNameRefusedByName) {
  TokenizerImpl t;
  Status s = gguf_pre_tokenizer("kimi-k2", &t, "model.gguf");
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("kimi-k2"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("model.gguf"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace st::tok
