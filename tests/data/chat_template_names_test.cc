// axolotl's chat template names (chat_template.cc Note [axolotl template names]) and
// chat_template_jinja ("jinja:" + text). Expected strings are jinja2's renderings of axolotl
// 0.19's own templates (utils/chat_templates/templates/*.jinja, rendered with transformers'
// sandboxed environment settings, bos <s>, eos </s>), written out by hand.
#include <gtest/gtest.h>

#include "data/chat_template.h"

namespace st {
namespace {

const std::vector<ChatMessage> kSys2 = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"},
                                        {"user", "2+2?"}, {"assistant", " 4 "}};
const std::vector<ChatMessage> kNoSys = {{"user", "Hi"}, {"assistant", "Hello!"}};

ChatTemplate named(const std::string& name) {
  StatusOr<ChatTemplate> t = chat_template_by_name(name);
  EXPECT_TRUE(t.ok()) << name << ": " << t.status().to_string();
  t->bos_token = "<s>";
  t->eos_token = "</s>";
  return *t;
}

std::string text(const ChatTemplate& t, const std::vector<ChatMessage>& m, const std::vector<std::string>& tools = {}) {
  StatusOr<std::vector<ChatSegment>> segs = render_chat(t, m, "conv", tools);
  EXPECT_TRUE(segs.ok()) << t.name() << ": " << segs.status().to_string();
  std::string s;
  if (segs.ok())
    for (const ChatSegment& g : *segs) s += g.text;
  return s;
}

std::string trained(const ChatTemplate& t, const std::vector<ChatMessage>& m) {
  StatusOr<std::vector<ChatSegment>> segs = render_chat(t, m, "conv");
  std::string s;
  if (segs.ok())
    for (const ChatSegment& g : *segs)
      if (g.trained) s += (s.empty() ? "" : "|") + g.text;
  return s;
}

TEST(ChatTemplateNames, MistralV1) {
  const ChatTemplate t = named("mistral_v1");
  EXPECT_EQ(t.name(), "mistral_v1");
  EXPECT_EQ(text(t, kSys2), "<s> [INST] Be brief.\n\nHi [/INST] Hello!</s> [INST] 2+2? [/INST]  4 </s>");
  EXPECT_EQ(text(t, kNoSys), "<s> [INST] Hi [/INST] Hello!</s>");
  EXPECT_EQ(trained(t, kSys2), " Hello!|</s>|  4 |</s>");
  // The template's raise_exception cases: turns out of alternation, a later system message.
  StatusOr<std::vector<ChatSegment>> bad = render_chat(t, {{"user", "a"}, {"user", "b"}, {"assistant", "c"}}, "f.jsonl line 4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("f.jsonl line 4: message 1 (user)"), std::string::npos) << bad.status().to_string();
  EXPECT_NE(bad.status().message().find("alternation"), std::string::npos) << bad.status().to_string();
  bad = render_chat(t, {{"user", "a"}, {"assistant", "b"}, {"system", "c"}, {"user", "d"}, {"assistant", "e"}}, "x");
  ASSERT_FALSE(bad.ok());
  StatusOr<std::string> prompt = render_generation_prompt(t, {{"user", "Hi"}});
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  EXPECT_EQ(*prompt, "<s> [INST] Hi [/INST]");
}

TEST(ChatTemplateNames, MistralV2V3AndV3TekkenAreOurs) {
  EXPECT_EQ(text(named("mistral_v2v3"), kSys2), "<s>[INST] Hi[/INST] Hello!</s>[INST] 2+2?[/INST] 4</s>");
  EXPECT_EQ(text(named("mistral_v2v3"), kNoSys), "<s>[INST] Hi[/INST] Hello!</s>");
  EXPECT_EQ(text(named("mistral_v3_tekken"), kSys2), "<s>[INST]Hi[/INST]Hello!</s>[INST]2+2?[/INST] 4 </s>");
  EXPECT_EQ(text(named("mistral_v3_tekken"), kNoSys), "<s>[INST]Hi[/INST]Hello!</s>");
}

TEST(ChatTemplateNames, Qwen25DefaultSystemAlsoWithTools) {
  const ChatTemplate t = named("qwen_25");
  EXPECT_EQ(t.name(), "qwen_25");
  EXPECT_EQ(text(t, kNoSys),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n");
  EXPECT_EQ(text(t, kSys2),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!"
            "<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n 4 <|im_end|>\n");
  const std::string tool = R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}})";
  EXPECT_EQ(text(t, kNoSys, {tool}),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou "
            "may call one or more functions to assist with the user query.\n\nYou are provided with function signatures "
            "within <tools></tools> XML tags:\n<tools>\n" + tool +
                "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
                "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                "Hello!<|im_end|>\n");
  // Plain chatml keeps no default system message.
  EXPECT_EQ(text(named("chatml"), kNoSys), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n");
}

TEST(ChatTemplateNames, Alpaca) {
  const ChatTemplate t = named("alpaca");
  EXPECT_EQ(t.name(), "alpaca");
  EXPECT_EQ(text(t, kSys2),
            "<s>Be brief.\n\n### Instruction:\nHi\n\n### Response:\nHello!</s>\n\n### Instruction:\n2+2?\n\n### "
            "Response:\n 4 </s>");
  EXPECT_EQ(text(t, kNoSys), "<s>### Instruction:\nHi\n\n### Response:\nHello!</s>");
  EXPECT_EQ(trained(t, kSys2), "Hello!</s>| 4 </s>");
}

TEST(ChatTemplateNames, InlineJinja) {
  const std::string src = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if m.role == 'assistant' %}"
                          "{{ eos_token }}{% endif %}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
  const ChatTemplate t = named("jinja:" + src);
  EXPECT_EQ(text(t, kNoSys), "<user>Hi<assistant>Hello!</s>");  // trim_blocks, as transformers renders
  EXPECT_EQ(trained(t, kNoSys), "Hello!</s>");
  StatusOr<ChatTemplate> bad = chat_template_by_name("jinja:{% for m in messages %}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("chat_template_jinja"), std::string::npos) << bad.status().to_string();
}

TEST(ChatTemplateNames, UnknownNameListsThem) {
  StatusOr<ChatTemplate> t = chat_template_by_name("gemma");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("qwen_25"), std::string::npos) << t.status().to_string();
}

// chat_template_kwargs: a Jinja template sees them (transformers' **kwargs); a built-in format
// without a template refuses them, but qwen3's enable_thinking (its generation prompt).
TEST(ChatTemplateNames, Kwargs) {
  ChatTemplate j = named("jinja:{% for m in messages %}{% if m.role == 'user' and tag is defined %}[{{ tag }}]{% endif %}"
                         "{{ m.content }}{% endfor %}");
  EXPECT_EQ(text(j, kNoSys), "HiHello!");
  ASSERT_TRUE(set_chat_template_kwargs(&j, *parse_ordered_json(R"({"tag": "q"})", "kw")).ok());
  EXPECT_EQ(text(j, kNoSys), "[q]HiHello!");
  ChatTemplate c = named("chatml");
  Status s = set_chat_template_kwargs(&c, *parse_ordered_json(R"({"tag": "q"})", "kw"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'tag' is a variable of a Jinja template"), std::string::npos) << s.to_string();
  ChatTemplate q = named("qwen3");
  ASSERT_TRUE(set_chat_template_kwargs(&q, *parse_ordered_json(R"({"enable_thinking": false})", "kw")).ok());
  StatusOr<std::string> p = render_generation_prompt(q, {{"user", "Hi"}});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(*p, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

}  // namespace
}  // namespace st
