// A model directory with tokenizer.model and no tokenizer.json. Oracle: transformers 5.17 (and
// 5.24, the same ids) AutoTokenizer on the same files, in tests/fixtures/tokenizers/spm_model
// (tools/tok/make_spm_model_fixture.py). Then the reader against damaged and crafted protos:
// every failure a Status naming the file (and the field), never a crash.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/file.h"
#include "core/json.h"
#include "data/tokenizer.h"
#include "io/spm_model.h"

namespace st {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& rel) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/tokenizers/" + rel; }

std::string read_all(const std::string& path) {
  auto s = read_file_to_string(path);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : std::string();
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A fresh directory holding `model` as tokenizer.model and `config` as tokenizer_config.json
// (none when config is null).
std::string model_dir(const std::string& name, const std::string& model, const Json& config) {
  const std::string dir = ::testing::TempDir() + "/spm_model_" + std::to_string(::getpid()) + "_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_all(dir + "/tokenizer.model", model);
  if (!config.is_null()) write_all(dir + "/tokenizer_config.json", config.dump());
  return dir;
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

class SpmModelVariant : public ::testing::TestWithParam<std::string> {};

TEST_P(SpmModelVariant, IdsAndDecodeMatchTransformers) {
  const Json meta = *parse_json(read_all(fixture("spm_model/variants.json")), "variants.json");
  const Json& v = meta["variants"][GetParam()];
  const std::string dir = model_dir(GetParam(), read_all(fixture(v["model"].get<std::string>())), v["config"]);
  auto tok = Tokenizer::from_dir(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  std::ifstream in(fixture("spm_model/" + GetParam() + ".jsonl"));
  std::string line;
  int n = 0, bad = 0;
  while (std::getline(in, line)) {
    const Json j = *parse_json(line, "expected");
    const std::string text = j["text"];
    const auto want = j["ids"].get<std::vector<int32_t>>();
    const auto got = tok->encode(text), got_sp = tok->encode(text, AddSpecial::kYes);
    // HF's ids decoded, so a decode bug cannot hide behind an encode bug.
    const bool ok = got == want && got_sp == j["ids_special"].get<std::vector<int32_t>>() &&
                    tok->decode(want) == j["decoded"].get<std::string>() &&
                    tok->decode(want, SkipSpecial::kYes) == j["decoded_skip"].get<std::string>();
    if (!ok && bad++ < 5)
      ADD_FAILURE() << GetParam() << " text " << Json(text).dump() << "\n got " << ids_str(got) << "\n want "
                    << j["ids"].dump() << "\n got+special " << ids_str(got_sp) << " want " << j["ids_special"].dump()
                    << "\n decoded " << Json(tok->decode(want)).dump() << " want " << j["decoded"].dump();
    ++n;
  }
  EXPECT_GT(n, 200);
  EXPECT_EQ(bad, 0) << bad << " of " << n << " texts differ";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Configs, SpmModelVariant,
                         ::testing::Values("default", "legacy", "no_prefix", "eos_only", "llama2_config", "user_defined"));

TEST(SpmModel, ReadsTheFieldsAnEncoderNeeds) {
  auto m = read_spm_model(fixture("spm_model/tiny_user.model"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->pieces.size(), 900u);
  EXPECT_EQ(m->model_type, SpmModel::kBpe);
  EXPECT_TRUE(m->byte_fallback);
  EXPECT_EQ(m->pad_id, 3);
  EXPECT_EQ(m->pieces[0].piece, "<unk>");
  EXPECT_EQ(m->pieces[0].type, SpmPiece::kUnknown);
  EXPECT_EQ(m->pieces[1].type, SpmPiece::kControl);
  int user = 0;
  for (const SpmPiece& p : m->pieces) user += p.type == SpmPiece::kUserDefined;
  EXPECT_EQ(user, 3);
  EXPECT_EQ(m->normalizer_name, "identity");
  EXPECT_FALSE(m->remove_extra_whitespaces);
}

TEST(SpmModel, TokenizerJsonWinsAndTheModelFileAlsoLoadsAlone) {
  const std::string model = read_all(fixture("spm_gguf/tiny_spm.model"));
  const std::string dir = model_dir("both", model, Json());
  write_all(dir + "/tokenizer.json", read_all(fixture("llama2/tokenizer.json")));
  auto a = Tokenizer::from_dir(dir);
  auto b = Tokenizer::from_file(fixture("llama2/tokenizer.json"));
  ASSERT_TRUE(a.ok() && b.ok());
  // llama2's tokenizer.json prepends with a normalizer (a space after [INST] stays a piece of its own);
  // the tokenizer.model recipe's Metaspace "first" does not: the two differ on this text.
  const std::string text = "[INST] Question [/INST] Answer";
  EXPECT_EQ(a->encode(text), b->encode(text));
  auto c = Tokenizer::from_file(dir + "/tokenizer.model");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_NE(c->encode(text), b->encode(text));
  EXPECT_EQ(c->bos_id(), 1);
  EXPECT_EQ(c->eos_id(), 2);
  EXPECT_EQ(c->encode("hi", AddSpecial::kYes), c->encode("hi"));  // transformers 5.x: add_bos_token defaults to false
  fs::remove_all(dir);
}

// ---- hostile input ----------------------------------------------------------------------------

std::string varint(uint64_t v) {
  std::string s;
  do {
    uint8_t b = v & 0x7F;
    v >>= 7;
    s.push_back(static_cast<char>(b | (v ? 0x80 : 0)));
  } while (v);
  return s;
}
std::string key(int field, int wire) { return varint(static_cast<uint64_t>(field) << 3 | wire); }
std::string len_field(int field, const std::string& v) { return key(field, 2) + varint(v.size()) + v; }
std::string int_field(int field, int64_t v) { return key(field, 0) + varint(static_cast<uint64_t>(v)); }
std::string float_field(int field, float f) {
  std::string s = key(field, 5);
  char b[4];
  std::memcpy(b, &f, 4);
  return s + std::string(b, 4);
}
std::string piece(const std::string& p, float score, int type) {
  return len_field(1, len_field(1, p) + float_field(2, score) + int_field(3, type));
}
// A small BPE model: <unk> <s> </s>, the 256 byte pieces, "▁", "a", "b", "▁a", "ab".
std::string crafted(const std::string& trainer_extra = "", const std::string& more_pieces = "") {
  std::string m = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3);
  char hex[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    m += piece(hex, 0, 6);
  }
  float s = 0;
  for (const char* p : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab"}) m += piece(p, s -= 1, 1);
  m += more_pieces;
  m += len_field(2, int_field(3, 2) + int_field(35, 1) + trainer_extra);
  m += len_field(3, len_field(1, "identity") + int_field(3, 1));
  return m;
}

Status dir_status(const std::string& name, const std::string& model, const Json& cfg = Json()) {
  const std::string dir = model_dir(name, model, cfg);
  Status st = Tokenizer::from_dir(dir).status();
  fs::remove_all(dir);
  return st;
}

TEST(SpmModelHostile, CraftedModelLoads) {
  const std::string dir = model_dir("crafted", crafted(), Json());
  auto t = Tokenizer::from_dir(dir);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  // "▁a▁ab▁b": the merge (▁, a) ranks first (its piece's id is lower), so "▁a" twice, then b ▁ b.
  EXPECT_EQ(t->encode("a ab b"), (std::vector<int32_t>{262, 262, 261, 259, 261}));
  EXPECT_EQ(t->decode(t->encode("a ab b")), "a ab b");
  fs::remove_all(dir);
}

TEST(SpmModelHostile, DamageIsNamed) {
  auto expect_error = [](const Status& st, const std::string& want) {
    EXPECT_FALSE(st.ok()) << want;
    EXPECT_NE(st.to_string().find("tokenizer.model"), std::string::npos) << st.to_string();
    EXPECT_NE(st.to_string().find(want), std::string::npos) << st.to_string();
  };
  expect_error(dir_status("unigram", crafted(int_field(3, 1))), "unigram");
  expect_error(dir_status("badtype", crafted("", piece("zz", -9, 9))), "type 9");
  expect_error(dir_status("nan", crafted("", piece("zz", std::nanf(""), 1))), "score");
  expect_error(dir_status("dup", crafted("", piece("ab", -9, 1))), "listed twice");
  expect_error(dir_status("bos", crafted(int_field(41, 5000))), "bos_id");
  expect_error(dir_status("utf8", crafted("", piece("\xC3", -9, 1))), "UTF-8");
  expect_error(dir_status("empty", crafted("", piece("", -9, 1))), "empty");
  expect_error(dir_status("group", crafted() + key(7, 3)), "wire type 3");
  expect_error(dir_status("longlen", crafted() + key(9, 2) + varint(1u << 30)), "runs past the end");
  expect_error(dir_status("nopieces", len_field(2, int_field(3, 2))), "no pieces");
  expect_error(dir_status("json", "{\"model\": {}}"), "tokenizer.model");
  // tokenizer_config.json: a class whose recipe is another, a flag of the wrong type, a bos that is no piece.
  expect_error(dir_status("class", crafted(), Json{{"tokenizer_class", "T5Tokenizer"}}), "T5Tokenizer");
  Status st = dir_status("legacy", crafted(), Json{{"legacy", "yes"}});
  EXPECT_NE(st.to_string().find("'legacy'"), std::string::npos) << st.to_string();
  st = dir_status("nobos", crafted(), Json{{"bos_token", "<bos>"}});
  EXPECT_NE(st.to_string().find("<bos>"), std::string::npos) << st.to_string();
}

// Every truncation and a sweep of single-byte changes of a real model: a Status or a tokenizer,
// never a crash (a cut at a field boundary is a shorter valid proto, as for sentencepiece).
TEST(SpmModelHostile, TruncationsAndFlipsNeverCrash) {
  const std::string model = read_all(fixture("spm_gguf/tiny_spm.model"));
  int failed = 0, loaded = 0;
  for (size_t cut = 0; cut < model.size(); cut += 97) {
    auto m = parse_spm_model(model.substr(0, cut), "cut.model");
    if (m.ok()) ++loaded;
    else {
      ++failed;
      EXPECT_NE(m.status().to_string().find("cut.model"), std::string::npos);
    }
  }
  EXPECT_GT(failed, 150);
  for (size_t at = 0; at < model.size(); at += 61) {
    std::string bad = model;
    bad[at] = static_cast<char>(bad[at] ^ 0xA5);
    if (!parse_spm_model(bad, "flip.model").ok()) continue;
    // It still parses: the tokenizer is built from it, or refused with a Status.
    const std::string dir = model_dir("flip", bad, Json());
    auto t = Tokenizer::from_dir(dir);
    if (t.ok()) t->encode("[INST] flipped bytes, 123 \xC3\xA9");
    else EXPECT_NE(t.status().to_string().find("tokenizer.model"), std::string::npos) << t.status().to_string();
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace st
