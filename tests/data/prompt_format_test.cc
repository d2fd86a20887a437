// data/prompt_format.h: axolotl's user-defined prompt format (prompt_strategies/user_defined.py on
// alpaca_w_system's prompter), the expected prompts as Python's str.format gives them.
#include "data/prompt_format.h"

#include <gtest/gtest.h>

#include <string>

namespace st {
namespace {

OrderedJson rec(const std::string& text) { return *parse_ordered_json(text, "rec"); }

PromptFormat fmt() {  // built from std::string temporaries: g++ 12's -Wrestrict misfires on literal assignment
  PromptFormat f;
  f.on = true;
  f.field_instruction = std::string("q");
  f.field_input = std::string("ctx");
  f.field_output = std::string("a");
  f.system_prompt = std::string("Be brief.");
  f.system_format = std::string("<|system|>{system}\n");
  f.format = std::string("[INST] {{x}} {instruction}\n{input} [/INST]");
  f.no_input_format = std::string("[INST] {instruction} [/INST]");
  f.has_no_input_format = true;
  return f;
}

TEST(PromptFormat, AsPythonFormatsIt) {
  const PromptFormat f = fmt();
  ASSERT_TRUE(check_prompt_format(f, "type").ok());
  auto r = user_defined_prompt(rec(R"({"q": "Add", "ctx": "1 2", "a": "3"})"), f, "r");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->first, "<|system|>Be brief.\n[INST] {x} Add\n1 2 [/INST]");
  EXPECT_EQ(r->second, "3");
  // No input (absent, null or ""): no_input_format.
  for (const char* t : {R"({"q": "Hi", "a": "Hello"})", R"({"q": "Hi", "ctx": null, "a": "Hello"})",
                        R"({"q": "Hi", "ctx": "", "a": "Hello"})"}) {
    r = user_defined_prompt(rec(t), f, "r");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->first, "<|system|>Be brief.\n[INST] Hi [/INST]") << t;
  }
  // Without no_input_format, format with an empty {input}; without system_format, no system.
  PromptFormat g = fmt();
  g.has_no_input_format = false;
  g.no_input_format.clear();
  g.format = std::string("Q: {instruction}{input}");
  g.system_format.clear();
  r = user_defined_prompt(rec(R"({"q": "Hi", "a": "x"})"), g, "r");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, "Q: Hi");
}

TEST(PromptFormat, SystemFromTheRecordOnlyWhenFieldSystemIsSet) {
  PromptFormat f = fmt();
  f.field_system = std::string("sys");  // system_prompt then unused, as in axolotl
  auto r = user_defined_prompt(rec(R"({"q": "Hi", "a": "x", "sys": "Own."})"), f, "r");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, "<|system|>Own.\n[INST] Hi [/INST]");
  r = user_defined_prompt(rec(R"({"q": "Hi", "a": "x"})"), f, "r");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, "[INST] Hi [/INST]");
}

TEST(PromptFormat, RefusesWhatPythonWouldNotFormat) {
  struct Case {
    const char* key;
    std::string value, want;
  } cases[] = {{"no_input_format", "[INST] {instruction} {input}", "type.no_input_format: '{input}' is not a placeholder"},
               {"format", "{instruction:>10}", "type.format: '{instruction:>10}' is not a placeholder"},
               {"format", "{} {instruction}", "type.format: '{}' is not a placeholder"},
               {"format", "a } b", "type.format: a single '}'"},
               {"format", "{instruction", "type.format: a '{' without its '}'"},
               {"system_format", "{instruction}", "type.system_format: '{instruction}' is not a placeholder"},
               {"format", "", "type.format: required"}};
  for (const Case& c : cases) {
    PromptFormat f = fmt();
    const std::string key = c.key;
    std::string* slot = key == "format" ? &f.format : key == "no_input_format" ? &f.no_input_format : &f.system_format;
    slot->assign(c.value);
    Status st = check_prompt_format(f, "type");
    ASSERT_FALSE(st.ok()) << c.value;
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st.message();
  }
  auto r = user_defined_prompt(rec(R"({"q": "Hi"})"), fmt(), "d.jsonl line 3");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("d.jsonl line 3: missing field 'a'"), std::string::npos);
  r = user_defined_prompt(rec(R"({"q": "Hi", "a": 3})"), fmt(), "r");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("field 'a' is not a string"), std::string::npos);
}

}  // namespace
}  // namespace st
