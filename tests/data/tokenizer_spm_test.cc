// SentencePiece-style BPE. Oracles: HF `tokenizers` ids/decodes for tokenizer.json fixtures that
// mimic Llama-2 / Mistral v0.1 (Prepend + Replace), Mistral v0.3 (Metaspace first), a Metaspace
// split + NFC + Metaspace-decoder variant and a partial-byte-table + unk variant; sentencepiece's
// own ids for the same model stored in a GGUF (tokenizer.ggml.model = "llama"). Regenerate with
// tools/tok/make_tokenizer_fixtures.py. Then hostile input: malformed components and GGUF keys
// must give a Status naming the file and the field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <string>

#include "core/json.h"
#include "data/model_tokenizer.h"
#include "data/tokenizer.h"
#include "io/gguf_checkpoint.h"

namespace st {
namespace {

std::string fixture(const std::string& name) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/tokenizers/" + name; }

std::vector<Json> expected(const std::string& name) {
  std::ifstream in(fixture(name) + "/expected.jsonl");
  std::vector<Json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(*parse_json(line, "expected.jsonl"));
  return out;
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

class SpmFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(SpmFixture, IdsAndDecodeMatchHf) {
  auto tok = Tokenizer::from_file(fixture(GetParam()) + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  int n = 0, bad = 0;
  for (const Json& j : expected(GetParam())) {
    std::string text = j["text"];
    auto got = tok->encode(text);
    auto got_sp = tok->encode(text, AddSpecial::kYes);
    // Decode HF's ids (not ours) so that a decode bug cannot hide behind an encode bug.
    auto want = j["ids"].get<std::vector<int32_t>>();
    bool ok = got == want && got_sp == j["ids_special"].get<std::vector<int32_t>>() &&
              tok->decode(want) == j["decoded"].get<std::string>() &&
              tok->decode(want, SkipSpecial::kYes) == j["decoded_skip"].get<std::string>();
    if (!ok && bad++ < 5)
      ADD_FAILURE() << GetParam() << " text " << Json(text).dump() << "\n got " << ids_str(got) << "\n want "
                    << j["ids"].dump() << "\n decoded " << Json(tok->decode(want)).dump() << " want "
                    << j["decoded"].dump();
    ++n;
  }
  EXPECT_GT(n, 150);
  EXPECT_EQ(bad, 0) << bad << " of " << n << " texts differ";
}

INSTANTIATE_TEST_SUITE_P(Families, SpmFixture, ::testing::Values("llama2", "mistral3", "spm_split", "spm_unk"));

TEST(SpmTokenizer, Lookups) {
  auto tok = Tokenizer::from_file(fixture("mistral3") + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->bos_id(), 1);  // from the TemplateProcessing post-processor
  EXPECT_EQ(tok->token_to_id("[INST]"), 3);
  EXPECT_TRUE(tok->is_special(3));
  EXPECT_EQ(tok->encode("[INST]"), std::vector<int32_t>{3});
  // Byte fallback decode: an invalid run gives one U+FFFD per byte, then the run restarts.
  auto e5 = tok->token_to_id("<0xE5>"), x8f = tok->token_to_id("<0x8F>"), xab = tok->token_to_id("<0xAB>");
  ASSERT_TRUE(e5 && x8f && xab);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{*e5, *x8f, *xab}), "\xE5\x8F\xAB");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{*e5, *x8f, 3, *xab}), "\xEF\xBF\xBD\xEF\xBF\xBD[INST]\xEF\xBF\xBD");
  // Invalid UTF-8 input bytes become their byte tokens.
  EXPECT_EQ(tok->encode("\xE5\x8F"), (std::vector<int32_t>{*tok->token_to_id("\xE2\x96\x81"), *e5, *x8f}));
}

// Unknown chars with a partial byte table (values from HF tokenizers 0.23): bytes are emitted at
// once, an unk only before the next known char or at the end (Note [unk order]); fuse_unk merges
// consecutive unks. No decoder: tokens joined with spaces.
TEST(SpmTokenizer, UnkAndPartialByteFallbackLikeHf) {
  for (bool fuse : {false, true}) {
    auto t = Tokenizer::from_json(std::string(R"({"model":{"type":"BPE","byte_fallback":true,"fuse_unk":)") +
                                      (fuse ? "true" : "false") +
                                      R"(,"unk_token":"<unk>","vocab":{"<unk>":0,"a":1,"<0x62>":2,"<0xC3>":3,"<0xA9>":4,"b":5,"ab":6},
                                      "merges":[["a","b"]]},"decoder":null})",
                                  "t.json");
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    using V = std::vector<int32_t>;
    EXPECT_EQ(t->encode("xxba\xC3\xA9"), fuse ? (V{0, 5, 1, 3, 4}) : (V{0, 0, 5, 1, 3, 4}));
    EXPECT_EQ(t->encode("xyz"), fuse ? V{0} : (V{0, 0, 0}));
    EXPECT_EQ(t->encode("aba"), (V{6, 1}));
    EXPECT_EQ(t->encode("x\xC3\xA9y"), fuse ? (V{3, 4, 0}) : (V{3, 4, 0, 0}));
    EXPECT_EQ(t->encode("x\xC3\xA9" "ab"), (V{3, 4, 0, 6}));
    EXPECT_EQ(t->decode(V{3, 4, 0, 6}), "<0xC3> <0xA9> <unk> ab");
  }
}

// Strip works per token (values from HF tokenizers 0.23; HF panics on a token made only of the
// stripped char, which gives "" here).
TEST(SpmTokenizer, StripDecoderLikeHf) {
  const std::string model = R"({"model":{"type":"BPE","byte_fallback":true,"unk_token":"<unk>",
      "vocab":{"<unk>":0,"a ":1," b  ":2," ":3,"xx":4},"merges":[]},"decoder":)";
  auto t = Tokenizer::from_json(model + R"({"type":"Strip","content":" ","start":1,"stop":1}})", "t.json");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->decode(std::vector<int32_t>{1, 2, 4, 2}), "ab xxb ");
  EXPECT_EQ(t->decode(std::vector<int32_t>{3, 1}), "a");
  t = Tokenizer::from_json(model + R"({"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"x"},"content":"yz"},
      {"type":"Strip","content":"y","start":2,"stop":2}]}})", "t.json");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->decode(std::vector<int32_t>{4, 1}), "zyza ");
}

// The GGUF fixture holds the sentencepiece model of the JSON fixtures; sentencepiece's ids
// (segments between control tokens encoded separately, each with the dummy prefix) and decode.
TEST(GgufSpm, MatchesSentencePiece) {
  int32_t eot = 0;
  auto tok = load_model_tokenizer(fixture("spm_gguf") + "/tiny_spm.gguf", &eot);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(eot, -1);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  int n = 0, bad = 0;
  for (const Json& j : expected("spm_gguf")) {
    std::string text = j["text"];
    auto got = tok->encode(text);
    auto want = j["ids"].get<std::vector<int32_t>>();
    bool ok = got == want && tok->encode(text, AddSpecial::kYes) == j["ids_special"].get<std::vector<int32_t>>() &&
              tok->decode(want, SkipSpecial::kYes) == j["decoded_skip"].get<std::string>();
    if (!ok && bad++ < 5)
      ADD_FAILURE() << "text " << Json(text).dump() << "\n got " << ids_str(got) << "\n want " << j["ids"].dump()
                    << "\n decoded " << Json(tok->decode(want, SkipSpecial::kYes)).dump() << " want "
                    << j["decoded_skip"].dump();
    ++n;
  }
  EXPECT_GT(n, 150);
  EXPECT_EQ(bad, 0) << bad << " of " << n << " texts differ";
}

TEST(SpmTokenizer, Throughput) {
  auto tok = Tokenizer::from_file(fixture("llama2") + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  std::string text;
  for (const Json& j : expected("llama2")) text += j["text"].get<std::string>() + "\n";
  while (text.size() < (2u << 20)) text += text;
  auto t0 = std::chrono::steady_clock::now();
  auto ids = tok->encode(text);  // no pre-tokenizer: the whole text is one BPE word
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("encode: %.1f MB in %.3f s = %.1f MB/s (%zu ids)\n", text.size() / 1e6, s, text.size() / 1e6 / s,
              ids.size());
  EXPECT_GT(text.size() / 1e6 / s, 0.5);
}

// ---- hostile input ----

std::string spm_json(const std::string& normalizer, const std::string& pre, const std::string& decoder,
                     const std::string& model_extra = "") {
  return R"({"model":{"type":"BPE","byte_fallback":true,"unk_token":"<unk>")" + model_extra +
         R"(,"vocab":{"<unk>":0,"a":1,"b":2,"ab":3},"merges":[["a","b"]]},"normalizer":)" + normalizer +
         R"(,"pre_tokenizer":)" + pre + R"(,"decoder":)" + decoder + "}";
}

void expect_error(const std::string& json, StatusCode code, const std::vector<std::string>& words) {
  auto t = Tokenizer::from_json(json, "bad.json");
  ASSERT_FALSE(t.ok()) << json;
  EXPECT_EQ(t.status().code(), code) << t.status().to_string();
  for (const std::string& w : words)
    EXPECT_NE(t.status().message().find(w), std::string::npos) << "'" << w << "' not in " << t.status().to_string();
}

TEST(SpmTokenizer, RejectsMalformedComponents) {
  const std::string ok_dec = R"({"type":"Fuse"})";
  ASSERT_TRUE(Tokenizer::from_json(spm_json("null", "null", ok_dec), "good.json").ok());
  const auto C = StatusCode::kCorruption, U = StatusCode::kUnimplemented;
  expect_error(spm_json(R"({"type":"Prepend"})", "null", ok_dec), C, {"bad.json", "Prepend", "'prepend'"});
  expect_error(spm_json(R"({"type":"Prepend","prepend":7})", "null", ok_dec), C, {"bad.json", "'prepend'"});
  expect_error(spm_json(R"({"type":"Replace","content":"x"})", "null", ok_dec), C, {"bad.json", "Replace", "'pattern'"});
  expect_error(spm_json(R"({"type":"Replace","pattern":{"String":""},"content":"x"})", "null", ok_dec), C, {"'pattern'"});
  expect_error(spm_json(R"({"type":"Replace","pattern":{"String":" "}})", "null", ok_dec), C, {"'content'"});
  expect_error(spm_json(R"({"type":"Replace","pattern":{"Regex":"(a)\\1"},"content":" "})", "null", ok_dec), U,
               {"backreference"});
  expect_error(spm_json(R"({"type":"Sequence","normalizers":[{"type":"Precompiled"}]})", "null", ok_dec), U, {"Precompiled"});
  expect_error(spm_json(R"({"type":"Strip","strip_left":"yes"})", "null", ok_dec), StatusCode::kCorruption, {"strip_left"});
  expect_error(spm_json("null", R"({"type":"Metaspace","replacement":"ab"})", ok_dec), C,
               {"bad.json", "Metaspace", "'replacement'"});
  expect_error(spm_json("null", R"({"type":"Metaspace","prepend_scheme":"first"})", ok_dec), C, {"'replacement'"});
  expect_error(spm_json("null", R"({"type":"Metaspace","replacement":"_","prepend_scheme":"sometimes"})", ok_dec), C,
               {"'prepend_scheme'", "sometimes"});
  expect_error(spm_json("null", R"({"type":"Metaspace","replacement":"_","split":"yes"})", ok_dec), C, {"'split'"});
  expect_error(spm_json("null", R"({"type":"UnicodeScripts"})", ok_dec), U, {"UnicodeScripts"});
  expect_error(spm_json("null", "null", R"({"type":"Strip","content":" ","start":1})"), C, {"Strip", "'stop'"});
  expect_error(spm_json("null", "null", R"({"type":"Strip","content":"","start":1,"stop":0})"), C, {"'content'"});
  expect_error(spm_json("null", "null", R"({"type":"Replace","pattern":{"Regex":"x"},"content":" "})"), U, {"Regex"});
  expect_error(spm_json("null", "null", R"({"type":"ByteLevel"})"), U, {"decoder", "ByteLevel"});
  expect_error(spm_json("null", "null", R"({"type":"WordPiece"})"), U, {"WordPiece"});
  expect_error(spm_json("null", "null", ok_dec, R"(,"continuing_subword_prefix":"##")"), U, {"continuing_subword_prefix"});
  expect_error(R"({"model":{"type":"BPE","unk_token":"<unk>","vocab":{"a":0},"merges":[]}})", C, {"unk_token", "<unk>"});
  expect_error(R"({"model":{"type":"BPE","byte_fallback":true,"vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"ByteLevel"}})",
               U, {"byte_fallback"});
}

GgufTokenizerParts spm_parts() {
  GgufTokenizerParts p;
  p.model = "llama";
  p.tokens = {"<unk>", "<s>", "</s>"};
  p.token_types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    p.tokens.push_back(name);
    p.token_types.push_back(6);
  }
  for (const char* s : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab"}) {
    p.tokens.push_back(s);
    p.token_types.push_back(1);
  }
  p.scores.assign(p.tokens.size(), 0.0f);
  p.scores[p.tokens.size() - 2] = -1;  // ▁a
  p.scores[p.tokens.size() - 1] = -2;  // ab
  p.bos_id = 1;
  p.add_bos = true;
  return p;
}

void expect_parts_error(const GgufTokenizerParts& p, const std::vector<std::string>& words) {
  auto t = Tokenizer::from_gguf_parts(p);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kCorruption) << t.status().to_string();
  for (const std::string& w : words)
    EXPECT_NE(t.status().message().find(w), std::string::npos) << "'" << w << "' not in " << t.status().to_string();
}

TEST(GgufSpm, BuildsFromPartsAndRejectsBadOnes) {
  auto good = Tokenizer::from_gguf_parts(spm_parts());
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  const int32_t sp_a = 259 + 3, b = 259 + 2, sp = 259;
  // "▁ab": ▁a (score -1) beats ab (-2); then ▁a + b has no piece. With the scores swapped: ▁ + ab.
  EXPECT_EQ(good->encode("ab", AddSpecial::kYes), (std::vector<int32_t>{1, sp_a, b}));
  EXPECT_EQ(good->encode("<s> c"), (std::vector<int32_t>{1, sp, sp, 3 + 'c'}));  // ▁ after special; c -> <0x63>
  EXPECT_EQ(good->decode(good->encode("ab  c")), "ab  c");
  auto swapped = spm_parts();
  std::swap(swapped.scores[262], swapped.scores[263]);
  auto t2 = Tokenizer::from_gguf_parts(swapped);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->encode("ab"), (std::vector<int32_t>{sp, 263}));

  auto p = spm_parts();
  p.scores.pop_back();
  expect_parts_error(p, {"tokenizer.ggml.scores", "entries"});
  p = spm_parts();
  p.scores[7] = std::nanf("");
  expect_parts_error(p, {"tokenizer.ggml.scores[7]", "finite"});
  p = spm_parts();
  p.token_types.clear();
  expect_parts_error(p, {"tokenizer.ggml.token_type"});
  p = spm_parts();
  p.token_types[3 + 0x41] = 1;  // <0x41> no longer a byte token
  expect_parts_error(p, {"<0x41>", "byte"});
  p = spm_parts();
  p.tokens[3 + 0x41] = "<0x4g>";
  expect_parts_error(p, {"tokenizer.ggml.tokens[68]", "<0x4g>"});
  p = spm_parts();
  p.tokens.back() = "a";
  expect_parts_error(p, {"duplicates"});
  p = spm_parts();
  p.model = "bert";
  EXPECT_EQ(Tokenizer::from_gguf_parts(p).status().code(), StatusCode::kUnimplemented);
}

// Hand-made GGUF files (metadata only) for read_gguf_tokenizer's checks.
struct GgufBytes {
  std::string b;
  template <typename T>
  GgufBytes& put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  GgufBytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b += s;
    return *this;
  }
};

std::string write_gguf(const std::string& name, const std::vector<float>& scores) {
  GgufBytes g;
  g.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(3);
  g.str("tokenizer.ggml.model").put<uint32_t>(8).str("llama");
  g.str("tokenizer.ggml.tokens").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("a").str("b");
  g.str("tokenizer.ggml.scores").put<uint32_t>(9).put<uint32_t>(6).put<uint64_t>(scores.size());
  for (float s : scores) g.put<float>(s);
  std::string path = std::string(::testing::TempDir()) + "/spm_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary).write(g.b.data(), static_cast<std::streamsize>(g.b.size()));
  return path;
}

TEST(GgufSpm, ReaderRejectsBadScores) {
  for (auto [name, scores, word] : {std::tuple{"short.gguf", std::vector<float>{0}, "1 entries for 2 tokens"},
                                    {"nan.gguf", std::vector<float>{0, std::nanf("")}, "entry 1"},
                                    {"inf.gguf", std::vector<float>{INFINITY, 0}, "entry 0"}}) {
    std::string path = write_gguf(name, scores);
    auto t = load_model_tokenizer(path);
    ASSERT_FALSE(t.ok()) << name;
    EXPECT_NE(t.status().message().find(path), std::string::npos) << t.status().to_string();
    EXPECT_NE(t.status().message().find("tokenizer.ggml.scores"), std::string::npos) << t.status().to_string();
    EXPECT_NE(t.status().message().find(word), std::string::npos) << t.status().to_string();
  }
  // Well-formed keys but no token types: refused by the builder, still naming the file.
  std::string path = write_gguf("ok.gguf", {0, 0});
  auto t = load_model_tokenizer(path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(path), std::string::npos) << t.status().to_string();
  EXPECT_NE(t.status().message().find("tokenizer.ggml.token_type"), std::string::npos) << t.status().to_string();
}

}  // namespace
}  // namespace st
