// Chat rendering through the Jinja interpreter (ChatFormat::kJinja): the fallback for templates
// the built-in formats do not recognise. Expected strings are jinja2's renderings of the fixture
// templates (tools/jinja/jinja_oracle.py prints them), written out by hand.
#include <gtest/gtest.h>

#include <fstream>

#include "core/file.h"
#include "data/batch.h"
#include "data/chat_template.h"
#include "data/datasets.h"

namespace st {
namespace {

const std::string kRoot = ST_SOURCE_DIR;

ChatTemplate fixture(const std::string& name, const std::string& bos, const std::string& eos) {
  auto src = read_file_to_string(kRoot + "/tests/fixtures/chat/" + name + ".jinja");
  EXPECT_TRUE(src.ok()) << src.status().to_string();
  auto t = chat_template_from_jinja(*src, name);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->format, ChatFormat::kJinja) << name;
  t->bos_token = bos;
  t->eos_token = eos;
  return *t;
}

std::string joined(const std::vector<ChatSegment>& segs, bool trained_only = false, const char* sep = "") {
  std::string s;
  for (const ChatSegment& g : segs)
    if (!trained_only || g.trained) s += (s.empty() ? "" : sep) + g.text;
  return s;
}

const std::vector<ChatMessage> kConv = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"},
                                        {"user", "2+2?"}, {"assistant", "4"}};

TEST(ChatJinja, Llama2ChatSegments) {
  const ChatTemplate t = fixture("llama2_chat", "<s>", "</s>");
  auto segs = render_chat(t, kConv, "f.jsonl line 1");
  ASSERT_TRUE(segs.ok()) << segs.status().to_string();
  EXPECT_EQ(joined(*segs), "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] 2+2? [/INST] 4 </s>");
  EXPECT_EQ(joined(*segs, true, "|"), " Hello! </s>| 4 </s>");
  auto prompt = render_generation_prompt(t, {{"user", "Hi"}});
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  EXPECT_EQ(*prompt, "<s>[INST] Hi [/INST]");
  // The template's own raise_exception: an InvalidArgument carrying its message.
  auto bad = render_chat(t, {{"assistant", "x"}, {"assistant", "y"}}, "f.jsonl line 2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("Conversation roles must alternate"), std::string::npos) << bad.status().to_string();
  EXPECT_NE(bad.status().message().find("f.jsonl line 2"), std::string::npos) << bad.status().to_string();
}

TEST(ChatJinja, ZephyrPhi3GemmaSegments) {
  const ChatTemplate z = fixture("zephyr", "<s>", "</s>");
  auto segs = render_chat(z, kConv, "z");
  ASSERT_TRUE(segs.ok()) << segs.status().to_string();
  EXPECT_EQ(joined(*segs), "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n<|user|>\n2+2?</s>\n"
                           "<|assistant|>\n4</s>\n");
  EXPECT_EQ(joined(*segs, true, "|"), "Hello!</s>|4</s>");
  auto zp = render_generation_prompt(z, {{"user", "Hi"}});
  ASSERT_TRUE(zp.ok());
  EXPECT_EQ(*zp, "<|user|>\nHi</s>\n<|assistant|>\n");

  // Phi-3 writes eos_token only after the whole conversation: the last reply trains on it.
  const ChatTemplate p = fixture("phi3", "<s>", "<|endoftext|>");
  segs = render_chat(p, kConv, "p");
  ASSERT_TRUE(segs.ok()) << segs.status().to_string();
  EXPECT_EQ(joined(*segs), "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n"
                           "<|user|>\n2+2?<|end|>\n<|assistant|>\n4<|end|>\n<|endoftext|>");
  EXPECT_EQ(joined(*segs, true, "|"), "Hello!<|end|>|4<|end|>\n<|endoftext|>");

  const ChatTemplate g = fixture("gemma", "<bos>", "<eos>");
  segs = render_chat(g, {{"user", " Hi "}, {"assistant", "Hello!"}}, "g");
  ASSERT_TRUE(segs.ok()) << segs.status().to_string();
  EXPECT_EQ(joined(*segs), "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n");
  EXPECT_EQ(joined(*segs, true, "|"), "Hello!<end_of_turn>");
}

TEST(ChatJinja, TemplatesThatRewriteHistoryAreRefused) {
  // Reasoning dropped from earlier turns: the text before the second reply changes once it exists.
  auto t = chat_template_from_jinja(
      "{% for m in messages %}{% if m.role == 'assistant' and not loop.last %}[A]{{ m.content.split('</think>')[-1] }}"
      "{% else %}[{{ m.role }}]{{ m.content }}{% endif %}{% endfor %}{% if add_generation_prompt %}[A]{% endif %}", "r.jinja");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  auto segs = render_chat(*t, {{"user", "a"}, {"assistant", "<think>x</think>y"}, {"user", "b"}, {"assistant", "z"}},
                          "f.jsonl line 3");
  ASSERT_FALSE(segs.ok());
  EXPECT_NE(segs.status().message().find("f.jsonl line 3"), std::string::npos) << segs.status().to_string();
  EXPECT_NE(segs.status().message().find("named template"), std::string::npos) << segs.status().to_string();
}

TEST(ChatJinja, ToolCallsReachTheTemplateInHfShape) {
  auto t = chat_template_from_jinja(
      "{% if tools %}{{ tools|map(attribute='function.name')|join(',') }}{% endif %}"
      "{% for m in messages %}<{{ m.role }}>{% if m.tool_calls %}{{ m.content is none }}{% for c in m.tool_calls %}{{ c.type }}:"
      "{{ c.function.name }}{{ c.function.arguments|tojson }}{% endfor %}{% else %}{{ m.content }}{% endif %}</>{% endfor %}",
      "tools.jinja");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ChatMessage call("assistant", "", {{"get", "{\"city\": \"Paris\", \"n\": 1.5}", ""}});
  auto segs = render_chat(*t, {{"user", "q"}, call, {"tool", "sunny"}, {"assistant", "ok"}}, "x",
                          {"{\"type\": \"function\", \"function\": {\"name\": \"get\"}}"});
  ASSERT_TRUE(segs.ok()) << segs.status().to_string();
  EXPECT_EQ(joined(*segs), "get<user>q</><assistant>Truefunction:get{\"city\": \"Paris\", \"n\": 1.5}</><tool>sunny</><assistant>ok</>");
  // This template has no generation prompt: P (add_generation_prompt=True) has no assistant header,
  // so the header is trained with the reply, as the diff rule says.
  EXPECT_EQ(joined(*segs, true, "|"), "<assistant>Truefunction:get{\"city\": \"Paris\", \"n\": 1.5}</>|<assistant>ok</>");
}

TEST(ChatJinja, DatasetRecordLossMask) {
  auto tok = Tokenizer::from_file(kRoot + "/tests/fixtures/tokenizers/llama2/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto src = read_file_to_string(kRoot + "/tests/fixtures/chat/llama2_chat.jinja");
  ASSERT_TRUE(src.ok());
  tok->set_chat_template(*src);
  tok->set_special_ids(1, 2, -1);  // <s>, </s> (tokenizer_config.json's, which this fixture lacks)
  auto t = resolve_chat_template("", *tok);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->format, ChatFormat::kJinja);
  EXPECT_EQ(t->bos_token, "<s>");
  EXPECT_EQ(t->eos_token, "</s>");
  DatasetOptions opt;
  auto s = tokenize_record("messages",
                           R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello there"},)"
                           R"({"role":"user","content":"Bye"},{"role":"assistant","content":"Ciao"}]})",
                           *tok, &*t, opt, "f.jsonl line 1");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  // One string, tokenized whole (datasets.cc Note [chat tokenization]).
  EXPECT_EQ(s->input_ids, tok->encode("<s>[INST] Hi [/INST] Hello there </s><s>[INST] Bye [/INST] Ciao </s>"));
  // The trained ids are exactly the two replies with their </s>.
  std::vector<std::vector<int32_t>> runs;
  for (size_t i = 0; i < s->labels.size(); ++i) {
    if (s->labels[i] == kIgnoreIndex) continue;
    if (i == 0 || s->labels[i - 1] == kIgnoreIndex) runs.emplace_back();
    runs.back().push_back(s->labels[i]);
  }
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(tok->decode(runs[0]), "Hello there </s>");
  EXPECT_EQ(tok->decode(runs[1]), "Ciao </s>");
  EXPECT_EQ(runs[0].back(), 2);
  EXPECT_EQ(runs[1].back(), 2);
}

TEST(ChatJinja, TemplateFiles) {
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/mine.jinja") << "{% for m in messages %}#{{ m.role }}: {{ m.content }}\n{% endfor %}"
                                        "{% if add_generation_prompt %}#assistant: {% endif %}";
  auto t = chat_template_by_name(dir + "/mine.jinja");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->format, ChatFormat::kJinja);
  auto segs = render_chat(*t, {{"user", "q"}, {"assistant", "a"}}, "x");
  ASSERT_TRUE(segs.ok()) << segs.status().to_string();
  EXPECT_EQ(joined(*segs, true), "a");  // the newline after it is not trained
  EXPECT_EQ(joined(*segs), "#user: q\n#assistant: a\n");

  auto missing = chat_template_by_name(dir + "/nope.jinja");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.jinja"), std::string::npos) << missing.status().to_string();
  std::ofstream(dir + "/broken.jinja") << "line one\n{% for m in messages %}\n{{ m.content ";
  auto broken = chat_template_by_name(dir + "/broken.jinja");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(broken.status().message().find("broken.jinja:3:1"), std::string::npos) << broken.status().to_string();
}

// Note [built-in formats, checked]: a ChatML variant (its own default system prompt, which the
// built-in chatml format does not know) is recognised as chatml by its markers, but renders as
// the template itself does; the same template named as chatml keeps the built-in rendering.
TEST(ChatJinja, BuiltInFormatVariantRendersAsItsTemplate) {
  const std::string src =
      "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are Hermes.<|im_end|>\n{% endif %}"
      "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  auto t = chat_template_from_jinja(src, "hermes");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->format, ChatFormat::kChatML);
  ASSERT_TRUE(t->jinja != nullptr);
  const std::vector<ChatMessage> conv = {{"user", "Hi"}, {"assistant", "Hello!"}};
  auto segs = render_chat(*t, conv, "h.jsonl line 1");
  ASSERT_TRUE(segs.ok()) << segs.status().to_string();
  EXPECT_EQ(joined(*segs),
            "<|im_start|>system\nYou are Hermes.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            "Hello!<|im_end|>\n");
  EXPECT_EQ(joined(*segs, true, "|"), "Hello!<|im_end|>");
  auto prompt = render_generation_prompt(*t, {{"user", "Hi"}});
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  EXPECT_EQ(*prompt, "<|im_start|>system\nYou are Hermes.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Named, the built-in format renders without the template's system block.
  auto named = chat_template_by_name("chatml");
  ASSERT_TRUE(named.ok());
  auto plain = render_chat(*named, conv, "h.jsonl line 1");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(joined(*plain), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n");
}

TEST(ChatJinja, BuiltInFormatsStillRecognised) {
  for (const char* name : {"llama3", "qwen2_5", "mistral_nemo", "smollm2", "qwen3"}) {
    auto src = read_file_to_string(kRoot + "/tests/fixtures/chat/" + std::string(name) + ".jinja");
    ASSERT_TRUE(src.ok());
    auto t = chat_template_from_jinja(*src);
    ASSERT_TRUE(t.ok()) << name;
    EXPECT_NE(t->format, ChatFormat::kJinja) << name;
  }
  auto m = read_file_to_string(kRoot + "/tests/fixtures/chat/mistral_v01.jinja");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(chat_template_from_jinja(*m)->format, ChatFormat::kMistral);
}

}  // namespace
}  // namespace st
