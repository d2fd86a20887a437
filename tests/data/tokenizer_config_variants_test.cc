// Tokenizer configurations beyond the model fixtures: each file of tests/fixtures/tokenizers/variants
// is a small tokenizer.json built with HF `tokenizers` in a configuration tools/tok/config_fuzz.py
// found us getting wrong (added-token matching, Metaspace "first", the decoder chain of byte-level
// models, post-processors), with HF's ids and decode for texts that hit it. Regenerate with
// tools/tok/make_variant_fixtures.py. Also: configurations we refuse, with the component named.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/json.h"
#include "data/tokenizer.h"

namespace st {
namespace {

const std::string kDir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/tokenizers/variants";

TEST(TokenizerVariants, MatchHf) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kDir))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 10u) << kDir;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    auto doc = read_json_file(f);
    ASSERT_TRUE(doc.ok()) << doc.status().to_string();
    auto tok = Tokenizer::from_json((*doc)["tokenizer"].dump(), f);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    ASSERT_FALSE((*doc)["cases"].empty());
    for (const Json& c : (*doc)["cases"]) {
      const std::string text = c["text"];
      const std::vector<int32_t> want = c["ids"];
      const std::vector<int32_t> got = tok->encode(text, AddSpecial::kYes);
      EXPECT_EQ(got, want) << Json(text).dump() << " (" << (*doc)["what"].get<std::string>() << ")";
      EXPECT_EQ(tok->decode(want, SkipSpecial::kNo), c["decoded"].get<std::string>()) << Json(text).dump();
    }
  }
}

// Configurations whose HF behaviour we do not reproduce are refused, naming the file and the
// component, rather than tokenized differently.
TEST(TokenizerVariants, RefusedWithTheComponentNamed) {
  std::string bytes;  // the 256 chars of the ByteLevel alphabet as vocab entries
  {
    Json v = Json::object();
    int next = 0x100;  // bytes_to_unicode: printable Latin-1 maps to itself, the rest to U+0100.. in order
    for (int b = 0, id = 0; b < 256; ++b) {
      const bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = keep ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
      std::string s;
      if (cp < 0x80) s.push_back(static_cast<char>(cp));
      else { s.push_back(static_cast<char>(0xC0 | (cp >> 6))); s.push_back(static_cast<char>(0x80 | (cp & 0x3F))); }
      v[s] = id++;
    }
    bytes = v.dump();
  }
  const std::string bl = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})";
  struct Case {
    std::string json, says;
  };
  const std::vector<Case> cases = {
      // HF's BPE would look "▁" up in a byte-level vocab; ours works on the mapped-back bytes.
      {R"({"model":{"type":"BPE","vocab":)" + bytes + R"(,"merges":[]},"pre_tokenizer":{"type":"Sequence","pretokenizers":[)" +
           bl + R"(,{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}]}})",
       "pre_tokenizer Metaspace after ByteLevel"},
      // A byte-level vocab missing byte chars, with byte_fallback or unk_token: HF would emit those.
      {R"({"model":{"type":"BPE","byte_fallback":true,"vocab":{"a":0},"merges":[]},"pre_tokenizer":)" + bl + "}",
       "byte_fallback"},
      {R"({"model":{"type":"BPE","unk_token":"a","vocab":{"a":0},"merges":[]},"pre_tokenizer":)" + bl + "}", "unk_token"},
      {R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"decoder":{"type":"ByteLevel"}})", "decoder 'ByteLevel'"},
      {R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"UnicodeScripts"}})", "UnicodeScripts"},
      {R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"decoder":{"type":"WordPiece","prefix":"##"}})", "WordPiece"},
  };
  for (const Case& c : cases) {
    auto t = Tokenizer::from_json(c.json, "v.json");
    ASSERT_FALSE(t.ok()) << c.json;
    EXPECT_EQ(t.status().code(), StatusCode::kUnimplemented) << t.status().to_string();
    EXPECT_NE(t.status().message().find("v.json"), std::string::npos) << t.status().to_string();
    EXPECT_NE(t.status().message().find(c.says), std::string::npos) << t.status().to_string();
  }
  // With the whole byte alphabet present byte_fallback / unk_token never fire: accepted.
  for (const char* opt : {R"("byte_fallback":true,)", R"("unk_token":"a",)"}) {
    auto t = Tokenizer::from_json(std::string(R"({"model":{"type":"BPE",)") + opt + R"("vocab":)" + bytes +
                                      R"(,"merges":[]},"pre_tokenizer":)" + bl + "}",
                                  "v.json");
    EXPECT_TRUE(t.ok()) << t.status().to_string();
  }
}

}  // namespace
}  // namespace st
