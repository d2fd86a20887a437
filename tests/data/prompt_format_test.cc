// data/prompt_format.h: axolotl's user-defined prompt format (prompt_strategies/user_defined.py on
// alpaca_w_system's prompter), the expected prompts as Python's str.format gives them.
#include "data/prompt_format.h"

#include <gtest/gtest.h>

#include <string>

#include "core/file.h"

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

// Note [axolotl prompt strategies]: every named strategy against the prompts axolotl's own
// prompters build (tools/ref/make_prompt_strategy_fixture.py), with and without an input, with a
// null input and system, and braces in a field (not formatted again).
TEST(PromptFormat, AxolotlStrategiesAsItsPromptersBuildThem) {
  StatusOr<std::string> text = read_file_to_string(std::string(ST_SOURCE_DIR) + "/tests/fixtures/prompt_strategies/axolotl_prompts.json");
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  const OrderedJson all = *parse_ordered_json(*text, "fixture");
  int n = 0;
  for (const OrderedJson& c : all["cases"]) {
    const std::string type = c["type"].get<std::string>(), conv = c["conversation"].get<std::string>();
    StatusOr<std::optional<PromptFormat>> f = axolotl_prompt_strategy(type, conv);
    ASSERT_TRUE(f.ok()) << type << ": " << f.status().to_string();
    ASSERT_TRUE(f->has_value()) << type;
    EXPECT_TRUE(check_prompt_format(**f, type).ok()) << type;
    StatusOr<std::pair<std::string, std::string>> p = user_defined_prompt(c["record"], **f, "rec");
    ASSERT_TRUE(p.ok()) << type << ": " << p.status().to_string();
    EXPECT_EQ(p->first, c["prompt"].get<std::string>()) << type << " " << conv << " " << c["record"].dump();
    EXPECT_EQ(p->second, c["output"].get<std::string>()) << type;
    ++n;
  }
  EXPECT_EQ(n, 45);
}

TEST(PromptFormat, AxolotlStrategyRefusals) {
  StatusOr<std::optional<PromptFormat>> none = axolotl_prompt_strategy("alpaca", "");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());  // our own type, not a preset
  StatusOr<std::optional<PromptFormat>> bad = axolotl_prompt_strategy("alpaca_w_system", "chatml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("applies to type alpaca_chat"), std::string::npos) << bad.status().to_string();
  bad = axolotl_prompt_strategy("alpaca_chat", "vicuna");
  ASSERT_FALSE(bad.ok());
  // alpaca_w_system's system field is required (axolotl reads prompt["system"]).
  StatusOr<std::optional<PromptFormat>> w = axolotl_prompt_strategy("alpaca_w_system", "");
  ASSERT_TRUE(w.ok() && w->has_value());
  StatusOr<std::pair<std::string, std::string>> p = user_defined_prompt(rec(R"({"instruction": "a", "output": "b"})"), **w, "f.jsonl line 3");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("f.jsonl line 3: missing field 'system' (type alpaca_w_system)"), std::string::npos)
      << p.status().to_string();
}

}  // namespace
}  // namespace st
