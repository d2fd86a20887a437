// Preference (DPO) datasets: records to (chosen, rejected) sample pairs. Oracles: the rendered
// strings are written out by hand from the published templates and from axolotl's dpo/chatml.py
// and dpo/llama3.py f-strings; the loss mask is checked against type messages' mask of the same
// conversation (the response's turns keep theirs, everything before it is ignored); trained spans
// are checked by decoding exactly the trained ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/file.h"
#include "data/batch.h"
#include "data/chat_template.h"
#include "data/datasets.h"
#include "data/preference.h"
#include "data_test_files.h"

namespace st {
namespace {

Tokenizer load_tok(const char* name) { return test::load_fixture_tokenizer(name); }
std::string write_tmp(const std::string& name, const std::string& body) { return test::write_temp_file("pref_" + name, body); }

std::string trained_text(const Tokenizer& tok, const Sample& s) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < s.labels.size(); ++i)
    if (s.labels[i] != kIgnoreIndex) ids.push_back(s.labels[i]);
  return tok.decode(ids);
}

size_t first_trained(const Sample& s) {
  return static_cast<size_t>(std::find_if(s.labels.begin(), s.labels.end(), [](int32_t l) { return l != kIgnoreIndex; }) -
                             s.labels.begin());
}

StatusOr<PreferencePair> pair_of(const Tokenizer& tok, const std::string& type, const std::string& line,
                                 const char* tmpl = "chatml", const RecordFields& f = {}) {
  DatasetOptions opt;
  opt.chat_template = tmpl;
  return tokenize_preference_record(type, line, tok, nullptr, opt, "x.jsonl line 1", f);
}

void expect_same_pair(const PreferencePair& a, const PreferencePair& b, const std::string& what) {
  EXPECT_EQ(a.chosen.input_ids, b.chosen.input_ids) << what;
  EXPECT_EQ(a.chosen.labels, b.chosen.labels) << what;
  EXPECT_EQ(a.rejected.input_ids, b.rejected.input_ids) << what;
  EXPECT_EQ(a.rejected.labels, b.rejected.labels) << what;
}

const char* kPrompt = R"([{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"2+2?"}])";

TEST(Preference, TypeNames) {
  for (const char* t : {"preference", "chatml.intel", "chatml.prompt_pairs", "chatml.argilla", "chatml.ultra", "llama3.intel",
                        "llama3.prompt_pairs", "llama3.argilla", "llama3.ultra", "chatml.icr", "llama3.icr",
                        "chatml.argilla_chat", "llama3.argilla_chat"})
    EXPECT_TRUE(is_preference_type(t)) << t;
  for (const char* t : {"messages", "chatml", "chatml.", "chatml.default", "mistral.intel", "llama3.kto", ""})
    EXPECT_FALSE(is_preference_type(t)) << t;
  EXPECT_EQ(preference_fixed_template("chatml.ultra"), "chatml");
  EXPECT_EQ(preference_fixed_template("llama3.argilla"), "llama3");
  EXPECT_EQ(preference_fixed_template("preference"), "");
}

// The mask is type messages' mask of prompt + response with everything before the response
// ignored: the earlier assistant turn "Hello!" is not trained, the response and its <|im_end|> are.
TEST(Preference, ChatMLMaskIsTheResponseOnly) {
  Tokenizer tok = load_tok("qwen2");
  const std::string rec = std::string(R"({"messages":)") + kPrompt + R"(,"chosen":"4","rejected":"five"})";
  auto p = pair_of(tok, "preference", rec);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const std::string head = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                           "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(tok.decode(p->chosen.input_ids), head + "4<|im_end|>\n");
  EXPECT_EQ(tok.decode(p->rejected.input_ids), head + "five<|im_end|>\n");
  EXPECT_EQ(trained_text(tok, p->chosen), "4<|im_end|>");
  EXPECT_EQ(trained_text(tok, p->rejected), "five<|im_end|>");
  EXPECT_EQ(p->chosen.pair, 1);
  EXPECT_EQ(p->rejected.pair, 2);
  // The <|im_end|> after the response is trained, the "\n" after it is not.
  const int32_t im_end = *tok.token_to_id("<|im_end|>");
  ASSERT_GE(p->chosen.input_ids.size(), 2u);
  EXPECT_EQ(p->chosen.labels[p->chosen.labels.size() - 2], im_end);
  EXPECT_EQ(p->chosen.labels.back(), kIgnoreIndex);
  // Chosen and rejected share the prompt's tokens, none trained.
  const size_t k = first_trained(p->chosen);
  EXPECT_EQ(first_trained(p->rejected), k);
  EXPECT_EQ(k, tok.encode(head).size());
  EXPECT_TRUE(std::equal(p->chosen.input_ids.begin(), p->chosen.input_ids.begin() + static_cast<std::ptrdiff_t>(k),
                         p->rejected.input_ids.begin()));
  // Against type messages on the same conversation: same ids, same labels from the response on.
  auto chat = chat_template_by_name("chatml");
  auto m = tokenize_record("messages",
                           std::string(R"({"messages":)") + std::string(kPrompt).substr(0, std::string(kPrompt).size() - 1) +
                               R"(,{"role":"assistant","content":"4"}]})",
                           tok, &*chat, DatasetOptions{}, "m");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->input_ids, p->chosen.input_ids);
  ASSERT_EQ(m->labels.size(), p->chosen.labels.size());
  for (size_t i = 0; i < m->labels.size(); ++i) EXPECT_EQ(p->chosen.labels[i], i < k ? kIgnoreIndex : m->labels[i]) << i;
  EXPECT_EQ(trained_text(tok, *m), "Hello!<|im_end|>4<|im_end|>");  // messages trains the earlier turn: we do not
}

// Any template: the mask is type messages' mask of the same conversation from the response's
// first trained token on, and nothing before it -- through the Jinja interpreter (Zephyr) and
// the Mistral formats (v3 moves the system text to the last user turn, so the prompt rendered
// alone departs from the whole text inside the prompt: the earlier reply must stay untrained).
TEST(Preference, MaskMatchesMessagesOnAnyTemplate) {
  Tokenizer tok = load_tok("llama3");
  const std::string zephyr = std::string(ST_SOURCE_DIR) + "/tests/fixtures/chat/zephyr.jinja";
  const std::string prompt = R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},)"
                             R"({"role":"assistant","content":"Hello!"},{"role":"user","content":"2+2?"}])";
  for (const std::string& tmpl : {zephyr, std::string("mistral_v3"), std::string("mistral_tekken"), std::string("llama3")}) {
    SCOPED_TRACE(tmpl);
    auto p = pair_of(tok, "preference", R"({"messages":)" + prompt + R"(,"chosen":"Four.","rejected":"Five."})", tmpl.c_str());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    auto chat = chat_template_by_name(tmpl);
    ASSERT_TRUE(chat.ok());
    if (tok.bos_id() >= 0) chat->bos_token = tok.id_to_token(tok.bos_id());  // as resolve_chat_template sets them
    if (tok.eos_id() >= 0) chat->eos_token = tok.id_to_token(tok.eos_id());
    auto m = tokenize_record("messages",
                             R"({"messages":)" + prompt.substr(0, prompt.size() - 1) + R"(,{"role":"assistant","content":"Four."}]})",
                             tok, &*chat, DatasetOptions{}, "m");
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ASSERT_EQ(m->input_ids, p->chosen.input_ids);
    const size_t k = first_trained(p->chosen);
    ASSERT_LT(k, m->labels.size());
    for (size_t i = 0; i < m->labels.size(); ++i) EXPECT_EQ(p->chosen.labels[i], i < k ? kIgnoreIndex : m->labels[i]) << i;
    EXPECT_EQ(trained_text(tok, p->chosen).find("Hello"), std::string::npos) << trained_text(tok, p->chosen);
    EXPECT_NE(trained_text(tok, *m).find("Hello!"), std::string::npos);  // messages trains it
    // (Zephyr's "." merges with the "\n" after it, untrained: a straddling token goes with the text after.)
    EXPECT_NE(trained_text(tok, p->chosen).find("Four"), std::string::npos) << trained_text(tok, p->chosen);
    EXPECT_NE(trained_text(tok, p->rejected).find("Five"), std::string::npos) << trained_text(tok, p->rejected);
    EXPECT_EQ(first_trained(p->rejected), k);
  }
}

// A string, a message object and a list of messages give the same pair; so does a list that
// repeats the prompt's turns first (UltraFeedback-binarized), a string prompt vs a one-turn list,
// and "prompt" vs "messages".
TEST(Preference, ResponseAndPromptFormsAgree) {
  Tokenizer tok = load_tok("qwen2");
  auto base = pair_of(tok, "preference", R"({"prompt":"Q","chosen":"good","rejected":"bad"})");
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  EXPECT_EQ(tok.decode(base->chosen.input_ids), "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\ngood<|im_end|>\n");
  const char* same[] = {
      R"({"messages":"Q","chosen":"good","rejected":"bad"})",
      R"({"prompt":[{"role":"user","content":"Q"}],"chosen":"good","rejected":"bad"})",
      R"({"prompt":"Q","chosen":{"role":"assistant","content":"good"},"rejected":{"role":"assistant","content":"bad"}})",
      R"({"prompt":"Q","chosen":[{"role":"assistant","content":"good"}],"rejected":[{"role":"assistant","content":"bad"}]})",
      R"({"prompt":"Q","chosen":[{"role":"user","content":"Q"},{"role":"assistant","content":"good"}],)"
      R"("rejected":[{"role":"user","content":"Q"},{"role":"assistant","content":"bad"}]})",
      R"({"messages":[{"role":"user","content":"Q"}],"chosen":[{"role":"user","content":"Q"},{"role":"assistant","content":"good"}],)"
      R"("rejected":"bad"})",
  };
  for (const char* rec : same) {
    auto p = pair_of(tok, "preference", rec);
    ASSERT_TRUE(p.ok()) << rec << ": " << p.status().to_string();
    expect_same_pair(*base, *p, rec);
  }
  // Only an exact repetition of the prompt is dropped: another user turn is not a response.
  auto other = pair_of(tok, "preference",
                       R"({"prompt":"Q","chosen":[{"role":"user","content":"Q2"},{"role":"assistant","content":"good"}],"rejected":"bad"})");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("'chosen' has a message of role 'user'"), std::string::npos) << other.status().to_string();
  // Note [implicit prompt]: no prompt field, whole conversations: the turns both start with.
  auto implicit = pair_of(tok, "preference",
                          R"({"chosen":[{"role":"user","content":"Q"},{"role":"assistant","content":"good"}],)"
                          R"("rejected":[{"role":"user","content":"Q"},{"role":"assistant","content":"bad"}]})");
  ASSERT_TRUE(implicit.ok()) << implicit.status().to_string();
  expect_same_pair(*base, *implicit, "implicit prompt");
  // A longer shared prompt: both first turns and a shared reply, the prompt ends where they differ.
  auto longer = pair_of(tok, "preference",
                        R"({"chosen":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},)"
                        R"({"role":"user","content":"2+2?"},{"role":"assistant","content":"4"}],)"
                        R"("rejected":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},)"
                        R"({"role":"user","content":"2+2?"},{"role":"assistant","content":"5"}]})");
  auto explicit_prompt = pair_of(tok, "preference", std::string(R"({"prompt":)") + kPrompt + R"(,"chosen":"4","rejected":"5"})");
  ASSERT_TRUE(longer.ok() && explicit_prompt.ok()) << longer.status().to_string();
  expect_same_pair(*explicit_prompt, *longer, "implicit multi-turn prompt");
  // Renamed fields (axolotl's field_messages, message_property_mappings, field_chosen / field_rejected).
  RecordFields f{.messages = "conv", .role = "from", .content = "value", .chosen = "win", .rejected = "lose"};
  auto renamed = pair_of(tok, "preference",
                         R"({"conv":[{"from":"user","value":"Q"}],"win":{"from":"assistant","value":"good"},"lose":"bad"})",
                         "chatml", f);
  ASSERT_TRUE(renamed.ok()) << renamed.status().to_string();
  expect_same_pair(*base, *renamed, "renamed");
}

// A system turn and a multi-turn prompt through Llama 3: the content is trimmed as the template
// does, the end token <|eot_id|> is trained.
TEST(Preference, Llama3Template) {
  Tokenizer tok = load_tok("llama3");
  auto p = pair_of(tok, "preference",
                   R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Q"},)"
                   R"({"role":"assistant","content":"A"},{"role":"user","content":"Q2"}],"chosen":"Yes","rejected":"No"})",
                   "llama3");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const std::string head = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                           "<|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
                           "A<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(tok.decode(p->chosen.input_ids), head + "Yes<|eot_id|>");
  EXPECT_EQ(trained_text(tok, p->chosen), "Yes<|eot_id|>");
  EXPECT_EQ(trained_text(tok, p->rejected), "No<|eot_id|>");
}

// axolotl's fixed formats: the text is its f-strings' (plus the built-in's "\n" after the
// final <|im_end|>, untrained), whatever the configured template; the four record layouts agree.
TEST(Preference, FixedChatMLFormats) {
  Tokenizer tok = load_tok("qwen2");
  const std::string sys_prompt = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n";
  const char* recs[][2] = {
      {"chatml.intel", R"({"system":"S","question":"Q","chosen":"good","rejected":"bad"})"},
      {"chatml.prompt_pairs", R"({"system":"S","prompt":"Q","chosen":"good","rejected":"bad"})"},
      {"chatml.argilla", R"({"system":"S","instruction":"Q","chosen_response":"good","rejected_response":"bad"})"},
      {"chatml.argilla", R"({"system":"S","question":"Q","chosen":"good","rejected":"bad"})"},
      {"chatml.ultra", R"({"system":"S","prompt":"Q","chosen":[{"role":"user","content":"Q"},{"role":"assistant","content":"good"}],)"
                       R"("rejected":[{"role":"user","content":"Q"},{"role":"assistant","content":"bad"}]})"},
      {"chatml.icr", R"({"system":"S","input":"Q","chosen":"good","rejected":"bad"})"},
  };
  std::optional<PreferencePair> first;
  for (const auto& [type, rec] : recs) {
    // The configured template (Mistral, which this tokenizer cannot even render) does not matter.
    auto p = pair_of(tok, type, rec, "mistral");
    ASSERT_TRUE(p.ok()) << type << ": " << p.status().to_string();
    EXPECT_EQ(p->chosen.input_ids, tok.encode(sys_prompt + "good<|im_end|>\n")) << type;
    EXPECT_EQ(p->rejected.input_ids, tok.encode(sys_prompt + "bad<|im_end|>\n")) << type;
    EXPECT_EQ(trained_text(tok, p->chosen), "good<|im_end|>") << type;
    EXPECT_EQ(trained_text(tok, p->rejected), "bad<|im_end|>") << type;
    EXPECT_EQ(first_trained(p->chosen), tok.encode(sys_prompt).size()) << type;
    if (first) expect_same_pair(*first, *p, type);
    else first = *p;
  }
  // argilla_chat (axolotl's, for argilla/dpo-mix-7k): the user turn from chosen[0], no system turn
  // even where the record has one.
  auto ac = pair_of(tok, "chatml.argilla_chat",
                    R"({"system":"S","chosen":[{"role":"user","content":"Q"},{"role":"assistant","content":"good"}],)"
                    R"("rejected":[{"role":"user","content":"Q"},{"role":"assistant","content":"bad"}]})");
  ASSERT_TRUE(ac.ok()) << ac.status().to_string();
  EXPECT_EQ(tok.decode(ac->chosen.input_ids), "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\ngood<|im_end|>\n");
  EXPECT_EQ(trained_text(tok, ac->rejected), "bad<|im_end|>");
  auto no_list = pair_of(tok, "chatml.argilla_chat", R"({"chosen":"good","rejected":"bad"})");
  ASSERT_FALSE(no_list.ok());
  EXPECT_NE(no_list.status().message().find("'chosen' is not a list of [user, assistant] messages"), std::string::npos);
  // An empty or absent system: no system turn.
  for (const char* rec : {R"({"system":"","question":"Q","chosen":"good","rejected":"bad"})",
                          R"({"question":"Q","chosen":"good","rejected":"bad"})", R"({"system":null,"question":"Q","chosen":"good","rejected":"bad"})"}) {
    auto p = pair_of(tok, "chatml.intel", rec);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(tok.decode(p->chosen.input_ids), "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\ngood<|im_end|>\n") << rec;
  }
}

TEST(Preference, FixedLlama3Formats) {
  Tokenizer tok = load_tok("llama3");
  const std::string prompt = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
                             "<|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  const char* recs[][2] = {
      {"llama3.intel", R"({"system":"S","question":"Q","chosen":"good","rejected":"bad"})"},
      {"llama3.prompt_pairs", R"({"system":"S","prompt":"Q","chosen":"good","rejected":"bad"})"},
      {"llama3.argilla", R"({"system":"S","instruction":"Q","chosen_response":"good","rejected_response":"bad"})"},
      {"llama3.ultra", R"({"system":"S","prompt":"Q","chosen":[{"role":"user","content":"Q"},{"role":"assistant","content":"good"}],)"
                       R"("rejected":[{"role":"user","content":"Q"},{"role":"assistant","content":"bad"}]})"},
  };
  for (const auto& [type, rec] : recs) {
    auto p = pair_of(tok, type, rec, "chatml");  // (chatml: not this tokenizer's, and not used)
    ASSERT_TRUE(p.ok()) << type << ": " << p.status().to_string();
    EXPECT_EQ(tok.decode(p->chosen.input_ids), prompt + "good<|eot_id|>") << type;
    EXPECT_EQ(p->chosen.input_ids, tok.encode(prompt + "good<|eot_id|>")) << type;
    EXPECT_EQ(trained_text(tok, p->chosen), "good<|eot_id|>") << type;
    EXPECT_EQ(trained_text(tok, p->rejected), "bad<|eot_id|>") << type;
  }
}

Status load_file(const std::string& path, const std::string& type, const Tokenizer& tok, std::vector<Sample>* out,
                 DatasetStats* st, int64_t seq_len = 2048, const RecordFields& f = {}, int threads = 0) {
  DatasetOptions opt;
  opt.chat_template = "chatml";
  opt.sequence_len = seq_len;
  opt.threads = threads;
  DatasetSource src{path, type};
  src.fields = f;
  return load_dataset(src, tok, opt, out, st);
}

void expect_error(const Tokenizer& tok, const std::string& type, const std::string& bad, const std::string& needle) {
  const std::string good = R"({"prompt":"Q","chosen":"a","rejected":"b","question":"Q","instruction":"Q",)"
                           R"("chosen_response":"a","rejected_response":"b"})";
  const std::string good_ultra = R"({"prompt":"Q","chosen":[{"role":"user","content":"Q"},{"role":"assistant","content":"a"}],)"
                                 R"("rejected":[{"role":"user","content":"Q"},{"role":"assistant","content":"b"}]})";
  const std::string first = type.ends_with(".ultra") ? good_ultra : good;
  for (bool array : {false, true}) {
    const std::string path = write_tmp(array ? "bad.json" : "bad.jsonl", array ? "[" + first + ",\n" + bad + "]" : first + "\n" + bad + "\n");
    std::vector<Sample> out;
    DatasetStats st;
    Status s = load_file(path, type, tok, &out, &st);
    ASSERT_FALSE(s.ok()) << type << " " << bad;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(array ? "bad.json record 2" : "bad.jsonl line 2"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
  }
}

TEST(Preference, ErrorsNameFileAndRecord) {
  Tokenizer tok = load_tok("qwen2");
  expect_error(tok, "preference", R"({"prompt":"Q","rejected":"b"})", "missing field 'chosen'");
  expect_error(tok, "preference", R"({"prompt":"Q","chosen":"a"})", "missing field 'rejected'");
  expect_error(tok, "preference", R"({"chosen":"a","rejected":"b"})", "missing field 'prompt' (or 'messages')");
  expect_error(tok, "preference",
               R"({"chosen":[{"role":"user","content":"Q"},{"role":"assistant","content":"a"}],)"
               R"("rejected":[{"role":"user","content":"R"},{"role":"assistant","content":"b"}]})",
               "'chosen' and 'rejected' share no first turn to take as the prompt");
  expect_error(tok, "preference",
               R"({"chosen":[{"role":"user","content":"Q"},{"role":"assistant","content":"a"}],)"
               R"("rejected":[{"role":"user","content":"Q"}]})",
               "holds only turns the other starts with");
  expect_error(tok, "preference",
               R"({"chosen":[{"role":"user","content":"Q"},{"role":"assistant","content":"a"}],)"
               R"("rejected":[{"role":"user","content":"Q"},{"role":"user","content":"b"}]})",
               "'rejected' has a message of role 'user'");
  expect_error(tok, "preference", R"({"prompt":3,"chosen":"a","rejected":"b"})", "'prompt' is neither a string nor a list");
  expect_error(tok, "preference", R"({"prompt":"Q","chosen":3,"rejected":"b"})", "'chosen' is neither a string, a message");
  expect_error(tok, "preference", R"({"prompt":"Q","chosen":"a","rejected":{"role":"user","content":"b"}})",
               "'rejected' has a message of role 'user'");
  expect_error(tok, "preference", R"({"prompt":"Q","chosen":"","rejected":"b"})", "'chosen' is an empty response");
  expect_error(tok, "preference", R"({"prompt":"Q","chosen":[],"rejected":"b"})", "'chosen' is an empty list");
  expect_error(tok, "preference", R"({"prompt":"Q","chosen":[{"role":"user","content":"Q"}],"rejected":"b"})",
               "'chosen' repeats the prompt's turns and adds no response");
  expect_error(tok, "preference", R"({"prompt":"Q","chosen":{"role":"assistant"},"rejected":"b"})", "missing field 'content'");
  expect_error(tok, "preference", R"({"messages":[{"role":"bot","content":"x"}],"chosen":"a","rejected":"b"})",
               "unknown role 'bot'");
  expect_error(tok, "preference", R"({"messages":["x"],"chosen":"a","rejected":"b"})", "messages[0]: not a message");
  expect_error(tok, "chatml.intel", R"({"prompt":"Q","chosen":"a","rejected":"b"})", "missing field 'question'");
  expect_error(tok, "chatml.intel", R"({"question":"Q","chosen":"a","rejected":""})", "'rejected' is an empty response");
  expect_error(tok, "chatml.intel", R"({"question":"Q","chosen":"a","rejected":"b","system":1})", "field 'system' is not a string");
  expect_error(tok, "chatml.prompt_pairs", R"({"prompt":"Q","chosen":["a"],"rejected":"b"})", "field 'chosen' is not a string");
  expect_error(tok, "chatml.argilla", R"({"instruction":"Q","chosen_response":"a"})", "missing field 'rejected_response'");
  expect_error(tok, "chatml.ultra", R"({"prompt":"Q","chosen":"a","rejected":"b"})", "'chosen' is not a list of [user, assistant]");
  expect_error(tok, "chatml.ultra",
               R"({"prompt":"Q","chosen":[{"role":"user","content":"Q"},{"role":"user","content":"a"}],"rejected":"b"})",
               "chosen[1] has role \"user\"");
}

// Note [pair truncation]: each sequence is cut to sequence_len (one count a pair); a pair is
// dropped whole (one count) when either sequence is left without a trained label.
TEST(Preference, TruncationKeepsOrDropsWholePairs) {
  Tokenizer tok = load_tok("qwen2");
  // The chosen reply opens with newlines that merge with the prompt's last "\n" into one token
  // (tokenize_chat puts a straddling token with the reply): its first target comes one token
  // before the rejected's. sequence_len ends just before the rejected's first target.
  const std::string first = R"({"prompt":"Q q q q q q q q","chosen":"\n\nX","rejected":"Y"})";
  auto p = pair_of(tok, "preference", first);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const size_t kc = first_trained(p->chosen), kr = first_trained(p->rejected);
  ASSERT_LT(kc, kr);
  ASSERT_GT(p->chosen.input_ids.size(), kr);
  std::string words;
  for (int i = 0; i < 40; ++i) words += " w" + std::to_string(i);
  const std::string body = first + "\n" +
                           R"({"prompt":"Q","chosen":"a","rejected":"b"})" "\n"
                           R"({"prompt":"Q","chosen":")" + words + R"(","rejected":"b"})" "\n"
                           R"({"prompt":"Q","chosen":")" + words + R"(","rejected":")" + words + R"("})" "\n"
                           R"({"prompt":")" + words + R"(","chosen":"a","rejected":"b"})" "\n";
  std::vector<Sample> out;
  DatasetStats st;
  const auto seq = static_cast<int64_t>(kr);
  ASSERT_TRUE(load_file(write_tmp("trunc.jsonl", body), "preference", tok, &out, &st, seq).ok());
  // 1: both cut, the rejected left without a target -> dropped whole. 2: kept as it is. 3: the
  // chosen cut. 4: both cut, one count. 5: the prompt fills sequence_len: cut and dropped.
  EXPECT_EQ(st.pairs, 3);
  EXPECT_EQ(st.samples, 6);
  EXPECT_EQ(st.dropped_no_targets, 2);
  EXPECT_EQ(st.truncated, 4);
  ASSERT_EQ(out.size(), 6u);
  int64_t tokens = 0, targets = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].pair, i % 2 == 0 ? 1 : 2) << i;
    EXPECT_LE(static_cast<int64_t>(out[i].input_ids.size()), seq) << i;
    EXPECT_GT(first_trained(out[i]), 0u);
    EXPECT_LT(first_trained(out[i]), out[i].labels.size()) << i;
    tokens += static_cast<int64_t>(out[i].input_ids.size());
    targets += std::count_if(out[i].labels.begin(), out[i].labels.end(), [](int32_t l) { return l != kIgnoreIndex; });
  }
  EXPECT_EQ(st.tokens, tokens);
  EXPECT_EQ(st.target_tokens, targets);
  EXPECT_EQ(trained_text(tok, out[0]), "a<|im_end|>");  // pair 2, whole
  EXPECT_EQ(trained_text(tok, out[1]), "b<|im_end|>");
  EXPECT_EQ(static_cast<int64_t>(out[2].input_ids.size()), seq);  // pair 3's chosen, cut
  EXPECT_EQ(trained_text(tok, out[3]), "b<|im_end|>");
}

// The same records from each file kind give the same pairs; Parquet / Arrow rows name their row.
// max_prompt_len (TRL's max_prompt_length, keep_end): a longer prompt keeps its last tokens, the
// reply untouched; a shorter one is left as it is; the pair counts once as truncated.
TEST(Preference, MaxPromptLenKeepsThePromptsEnd) {
  Tokenizer tok = load_tok("qwen2");
  std::string words;
  for (int i = 0; i < 30; ++i) words += " w" + std::to_string(i);
  const std::string body = R"({"prompt":")" + words + R"(","chosen":"yes","rejected":"no"})" "\n"
                           R"({"prompt":"Q","chosen":"yes","rejected":"no"})" "\n";
  const std::string path = write_tmp("maxprompt.jsonl", body);
  std::vector<Sample> whole, cut;
  DatasetStats st_whole, st_cut;
  ASSERT_TRUE(load_file(path, "preference", tok, &whole, &st_whole).ok());
  ASSERT_EQ(whole.size(), 4u);
  const size_t lim = first_trained(whole[2]);  // the short prompt's length: the limit it just meets
  DatasetOptions opt;
  opt.chat_template = "chatml";
  opt.max_prompt_len = static_cast<int64_t>(lim);
  ASSERT_TRUE(load_dataset(DatasetSource{path, "preference"}, tok, opt, &cut, &st_cut).ok());
  ASSERT_EQ(cut.size(), 4u);
  EXPECT_EQ(st_whole.truncated, 0);
  EXPECT_EQ(st_cut.truncated, 1);
  for (size_t i = 0; i < 2; ++i) {  // the long prompt's pair: lim prompt tokens, the same tail
    const size_t p = first_trained(whole[i]);
    ASSERT_GT(p, lim + 20);
    EXPECT_EQ(first_trained(cut[i]), lim) << i;
    EXPECT_EQ(std::vector<int32_t>(cut[i].input_ids.begin(), cut[i].input_ids.end()),
              std::vector<int32_t>(whole[i].input_ids.begin() + static_cast<long>(p - lim), whole[i].input_ids.end()))
        << i;
    EXPECT_EQ(trained_text(tok, cut[i]), trained_text(tok, whole[i])) << i;
    EXPECT_EQ(cut[i].labels[0], kIgnoreIndex);
  }
  for (size_t i = 2; i < 4; ++i) EXPECT_EQ(cut[i].input_ids, whole[i].input_ids) << "a short prompt is kept whole";
}

TEST(Preference, EveryFileKind) {
  Tokenizer tok = load_tok("qwen2");
  const std::string a = R"({"prompt":"Q1","chosen":"good","rejected":"bad"})";
  const std::string b = R"({"prompt":"Q2, \"quoted\"","chosen":"yes","rejected":"no"})";
  std::vector<Sample> lines, array, csv, dir;
  DatasetStats s1, s2, s3, s4;
  ASSERT_TRUE(load_file(write_tmp("k.jsonl", a + "\n" + b + "\n"), "preference", tok, &lines, &s1).ok());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(s1.pairs, 2);
  Status st = load_file(write_tmp("k.json", "[" + a + "," + b + "]"), "preference", tok, &array, &s2);
  ASSERT_TRUE(st.ok()) << st.to_string();
  st = load_file(write_tmp("k.csv", "prompt,chosen,rejected\nQ1,good,bad\n\"Q2, \"\"quoted\"\"\",yes,no\n"), "preference", tok, &csv, &s3);
  ASSERT_TRUE(st.ok()) << st.to_string();
  const std::string d = ::testing::TempDir() + "/pref_dir";
  std::filesystem::create_directories(d);
  std::ofstream(d + "/b.jsonl") << b << "\n";
  std::ofstream(d + "/a.jsonl") << a << "\n";
  st = load_file(d, "preference", tok, &dir, &s4);
  ASSERT_TRUE(st.ok()) << st.to_string();
  for (const auto* v : {&array, &csv, &dir}) {
    ASSERT_EQ(v->size(), lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ((*v)[i].input_ids, lines[i].input_ids) << i;
      EXPECT_EQ((*v)[i].labels, lines[i].labels) << i;
      EXPECT_EQ((*v)[i].pair, lines[i].pair) << i;
    }
  }
  // gzip: a stored-block stream written here (the reader inflates any valid deflate stream).
  auto gzip_stored = [](const std::string& data) {
    uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char c : data) {
      crc ^= c;
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    crc ^= 0xFFFFFFFFu;
    std::string g("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
    const auto n = static_cast<uint16_t>(data.size());
    g += '\x01';
    for (uint16_t v : {n, static_cast<uint16_t>(~n)}) g += static_cast<char>(v & 0xff), g += static_cast<char>(v >> 8);
    g += data;
    for (uint32_t v : {crc, static_cast<uint32_t>(data.size())})
      for (int k = 0; k < 4; ++k) g += static_cast<char>((v >> (8 * k)) & 0xff);
    return g;
  };
  std::vector<Sample> gz;
  DatasetStats s5;
  st = load_file(write_tmp("k.jsonl.gz", gzip_stored(a + "\n" + b + "\n")), "preference", tok, &gz, &s5);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(gz.size(), lines.size());
  for (size_t i = 0; i < gz.size(); ++i) EXPECT_EQ(gz[i].input_ids, lines[i].input_ids) << i;
  // Arrow (datasets' save_to_disk): rows with instruction / output fields, read through renamed
  // fields; equal to the same rows as JSON Lines.
  const std::string arrow_dir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/arrow/";
  RecordFields f{.messages = "instruction", .chosen = "output", .rejected = "instruction"};
  std::vector<Sample> from_arrow, from_jsonl;
  DatasetStats s6, s7;
  st = load_file(arrow_dir + "saved", "preference", tok, &from_arrow, &s6, 2048, f);
  ASSERT_TRUE(st.ok()) << st.to_string();
  st = load_file(arrow_dir + "saved.expected.jsonl", "preference", tok, &from_jsonl, &s7, 2048, f);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_GT(from_arrow.size(), 0u);
  ASSERT_EQ(from_arrow.size(), from_jsonl.size());
  for (size_t i = 0; i < from_arrow.size(); ++i) EXPECT_EQ(from_arrow[i].input_ids, from_jsonl[i].input_ids) << i;
  // Parquet: a chat file has no preference fields, and the error names its row.
  std::vector<Sample> pq;
  DatasetStats s8;
  st = load_file(std::string(ST_SOURCE_DIR) + "/tests/fixtures/parquet/chat.parquet", "preference", tok, &pq, &s8);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("chat.parquet row 1: missing field 'chosen'"), std::string::npos) << st.to_string();
}

// Note [parallel tokenization] holds for pairs: the same pairs and counts on 1 and 4 threads, over
// more than one batch of records.
TEST(Preference, ParallelLoadMatchesOneThread) {
  Tokenizer tok = load_tok("qwen2");
  std::string body;
  for (int i = 0; i < 1300; ++i) {
    std::string r;
    for (int k = 0; k < i % 23; ++k) r += " w" + std::to_string(k * i % 97);
    body += R"({"prompt":"q)" + std::to_string(i) + R"(","chosen":"c)" + r + R"(","rejected":"r)" + std::to_string(i) + "\"}\n";
  }
  const std::string path = write_tmp("many.jsonl", body);
  std::vector<Sample> one, four;
  DatasetStats s1, s4;
  ASSERT_TRUE(load_file(path, "preference", tok, &one, &s1, 24, {}, 1).ok());
  ASSERT_TRUE(load_file(path, "preference", tok, &four, &s4, 24, {}, 4).ok());
  EXPECT_GT(s1.truncated, 100);
  EXPECT_EQ(s1.pairs, s4.pairs);
  EXPECT_EQ(s1.truncated, s4.truncated);
  EXPECT_EQ(s1.tokens, s4.tokens);
  ASSERT_EQ(one.size(), four.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].input_ids, four[i].input_ids) << i;
    ASSERT_EQ(one[i].labels, four[i].labels) << i;
    ASSERT_EQ(one[i].pair, four[i].pair) << i;
  }
}

// A pair is one group of split_train_val: its rejected goes where its chosen goes, and a count
// of val_set_size counts pairs.
TEST(Preference, SplitKeepsPairsTogether) {
  std::vector<Sample> all;
  for (int i = 0; i < 20; ++i) {
    for (int8_t side : {1, 2}) {
      Sample s;
      s.input_ids = {i, 100 + side};
      s.labels = {kIgnoreIndex, 100 + side};
      s.pair = side;
      all.push_back(s);
    }
  }
  for (uint64_t seed = 0; seed < 8; ++seed) {
    for (double v : {3.0, 0.25}) {
      auto sp = split_train_val(all, v, seed);
      ASSERT_TRUE(sp.ok()) << sp.status().to_string();
      const size_t want = v >= 1 ? 3 : 5;
      ASSERT_EQ(sp->val.size(), 2 * want) << v;
      ASSERT_EQ(sp->train.size(), all.size() - 2 * want);
      std::vector<int32_t> seen;
      for (const auto* part : {&sp->train, &sp->val}) {
        for (size_t i = 0; i < part->size(); i += 2) {
          const Sample& c = (*part)[i];
          const Sample& r = (*part)[i + 1];
          EXPECT_EQ(c.pair, 1);
          EXPECT_EQ(r.pair, 2);
          EXPECT_EQ(c.input_ids[0], r.input_ids[0]);  // the same pair
          seen.push_back(c.input_ids[0]);
        }
      }
      std::sort(seen.begin(), seen.end());
      ASSERT_EQ(seen.size(), 20u);
      for (int i = 0; i < 20; ++i) EXPECT_EQ(seen[i], i);
    }
  }
  EXPECT_FALSE(split_train_val(all, 20, 1).ok());  // 20 pairs: none left to train
}

// tokenize_record (one sample a record) refuses the pair types by name.
TEST(Preference, SingleSampleReaderRefusesPairs) {
  Tokenizer tok = load_tok("qwen2");
  auto chat = chat_template_by_name("chatml");
  auto s = tokenize_record("preference", R"({"prompt":"Q","chosen":"a","rejected":"b"})", tok, &*chat, DatasetOptions{}, "r");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("preference pair"), std::string::npos) << s.status().to_string();
}

// Note [unpaired records] (rl: kto): TRL's unpaired format and axolotl's kto/chatml.py and
// kto/llama3.py strategies give one sample each, rendered as the pair types render the chosen
// side; label true / false; truncation and counts as for pairs.
StatusOr<Sample> unpaired_of(const Tokenizer& tok, const std::string& type, const std::string& line,
                             const char* tmpl = "chatml") {
  DatasetOptions opt;
  opt.chat_template = tmpl;
  auto chat = detail::dataset_chat_template(type, tmpl, tok, opt);
  if (!chat.ok()) return chat.status();
  auto j = parse_ordered_json(line, "x.jsonl line 1");
  if (!j.ok()) return j.status();
  return tokenize_unpaired(type, *j, {}, tok, *chat, "x.jsonl line 1");
}

TEST(Preference, UnpairedRecords) {
  Tokenizer tok = load_tok("qwen2");
  const std::string sys_prompt = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n";
  const char* recs[][2] = {
      {"preference", R"({"prompt":[{"role":"system","content":"S"},{"role":"user","content":"Q"}],)"
                     R"("completion":[{"role":"assistant","content":"good"}],"label":true})"},
      {"preference", R"({"messages":[{"role":"system","content":"S"},{"role":"user","content":"Q"}],"completion":"good","label":true})"},
      {"chatml.intel", R"({"system":"S","question":"Q","completion":"good","label":true})"},
      {"chatml.prompt_pairs", R"({"system":"S","prompt":"Q","completion":"good","label":true})"},
      {"chatml.argilla", R"({"system":"S","instruction":"Q","completion":"good","label":true})"},
      {"chatml.ultra", R"({"system":"S","prompt":"Q","completion":"good","label":true})"},
      {"chatml.argilla_chat", R"({"completion":[{"role":"system","content":"S"},{"role":"user","content":"Q"},)"
                              R"({"role":"assistant","content":"good"}],"label":true})"},
  };
  for (const auto& [type, rec] : recs) {
    auto s = unpaired_of(tok, type, rec);
    ASSERT_TRUE(s.ok()) << type << ": " << s.status().to_string();
    EXPECT_EQ(s->input_ids, tok.encode(sys_prompt + "good<|im_end|>\n")) << type << " " << rec;
    EXPECT_EQ(trained_text(tok, *s), "good<|im_end|>") << type;
    EXPECT_EQ(first_trained(*s), tok.encode(sys_prompt).size()) << type;
    EXPECT_EQ(s->kto, 1);
    EXPECT_EQ(s->pair, 0);
  }
  auto bad = unpaired_of(tok, "chatml.intel", R"({"question":"Q","completion":"meh","label":false})");
  ASSERT_TRUE(bad.ok()) << bad.status().to_string();
  EXPECT_EQ(bad->kto, -1);
  EXPECT_EQ(tok.decode(bad->input_ids), "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nmeh<|im_end|>\n");
  Tokenizer l3 = load_tok("llama3");
  auto ll = unpaired_of(l3, "llama3.argilla_chat", R"({"completion":[{"role":"user","content":"Q"},{"role":"assistant","content":"A"},)"
                                                   R"({"role":"user","content":"R"},{"role":"assistant","content":"good"}],"label":true})");
  ASSERT_TRUE(ll.ok()) << ll.status().to_string();
  EXPECT_EQ(trained_text(l3, *ll), "good<|eot_id|>");  // the earlier assistant turn is prompt
  const std::pair<const char*, const char*> errors[] = {
      {R"({"prompt":"Q","completion":"a"})", "missing field 'label' (true: a desirable completion"},
      {R"({"prompt":"Q","completion":"a","label":1})", "'label' is 1, not true (desirable) or false (undesirable)"},
      {R"({"prompt":"Q","chosen":"a","rejected":"b"})", "missing field 'completion'"},
      {R"({"prompt":"Q","completion":"","label":true})", "'completion' is an empty response"},
      {R"({"prompt":"Q","completion":[{"role":"user","content":"a"}],"label":true})", "has a message of role 'user'"},
  };
  for (const auto& [rec, needle] : errors) {
    auto e = unpaired_of(tok, "preference", rec);
    ASSERT_FALSE(e.ok()) << rec;
    EXPECT_NE(e.status().message().find(needle), std::string::npos) << e.status().to_string();
    EXPECT_NE(e.status().message().find("x.jsonl line 1"), std::string::npos) << e.status().to_string();
  }
  auto icr = unpaired_of(tok, "chatml.icr", R"({"input":"Q","completion":"a","label":true})");
  ASSERT_FALSE(icr.ok());
  EXPECT_NE(icr.status().message().find("type chatml.icr has no unpaired (KTO) form"), std::string::npos);
  auto ac = unpaired_of(tok, "chatml.argilla_chat", R"({"completion":[{"role":"assistant","content":"a"},{"role":"user","content":"b"}],"label":true})");
  ASSERT_FALSE(ac.ok());
  EXPECT_NE(ac.status().message().find("the last message of 'completion' has role 'user'"), std::string::npos);
  // load_dataset with unpaired: one sample a record, counted by label; an over-long prompt keeps its end.
  const std::string path = write_tmp("kto.jsonl", std::string(R"({"prompt":"Q","completion":"good","label":true})") + "\n" +
                                                      R"({"prompt":"Q","completion":"bad","label":false})" + "\n" +
                                                      R"({"prompt":"Q","completion":"bad again","label":false})" + "\n");
  DatasetOptions opt;
  opt.chat_template = "chatml";
  opt.unpaired = true;
  opt.max_prompt_len = 3;
  std::vector<Sample> out;
  DatasetStats st;
  ASSERT_TRUE(load_dataset({path, "preference"}, tok, opt, &out, &st).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(st.desirable, 1);
  EXPECT_EQ(st.undesirable, 2);
  EXPECT_EQ(st.pairs, 0);
  EXPECT_EQ(st.truncated, 3);
  EXPECT_EQ(out[1].kto, -1);
  EXPECT_EQ(first_trained(out[0]), 3u);  // the prompt's last 3 tokens
  EXPECT_EQ(trained_text(tok, out[2]), "bad again<|im_end|>");
}

}  // namespace
}  // namespace st
