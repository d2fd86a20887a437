// Datasets, chat templates and loss masks. Oracle: the rendered strings are written out by hand
// from the published templates, and trained spans are checked by decoding exactly the trained ids.
#include <gtest/gtest.h>

#include <fstream>

#include "core/file.h"
#include "core/json.h"
#include "data/batch.h"
#include "data/chat_template.h"
#include "data/datasets.h"
#include "data_test_files.h"

namespace st {
namespace {

Tokenizer load_tok(const char* name) { return test::load_fixture_tokenizer(name); }
std::string write_tmp(const std::string& name, const std::string& body) { return test::write_temp_file(name, body); }

// Decodes the trained ids (labels != ignore) and all ids.
std::string trained_text(const Tokenizer& tok, const Sample& s) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < s.labels.size(); ++i)
    if (s.labels[i] != kIgnoreIndex) ids.push_back(s.labels[i]);
  return tok.decode(ids);
}

StatusOr<Sample> record(const Tokenizer& tok, const std::string& type, const std::string& line, const char* tmpl = "chatml",
                        bool on_inputs = false) {
  auto chat = chat_template_by_name(tmpl);
  DatasetOptions opt;
  opt.train_on_inputs = on_inputs;
  return tokenize_record(type, line, tok, &*chat, opt, "x.jsonl line 1");
}

const char* kConv = R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},)"
                    R"({"role":"user","content":"2+2?"},{"role":"assistant","content":"4"}]})";

TEST(ChatTemplate, ChatMLMaskAndText) {
  Tokenizer tok = load_tok("qwen2");
  ChatTemplate t;
  ASSERT_TRUE(chat_template_from_jinja("{% ... %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>").ok());
  t = *chat_template_from_jinja("<|im_start|>system\nYou are a helpful assistant.<|im_end|>");
  EXPECT_EQ(t.default_system, "You are a helpful assistant.");
  auto s = record(tok, "messages", kConv);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(tok.decode(s->input_ids),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n");
  EXPECT_EQ(trained_text(tok, *s), "Hello!<|im_end|>4<|im_end|>");
  // Segment-wise tokenization equals whole-string tokenization for this template.
  EXPECT_EQ(s->input_ids, tok.encode(tok.decode(s->input_ids)));
  auto smol = chat_template_from_jinja("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>");
  ASSERT_TRUE(smol.ok());
  auto segs = render_chat(*smol, {{"user", "q"}, {"assistant", "a"}}, "t");
  ASSERT_TRUE(segs.ok());
  EXPECT_EQ(segs->front().text, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n");
  auto gen = render_generation_prompt(*smol, {{"user", "q"}});
  ASSERT_TRUE(gen.ok());
  EXPECT_EQ(*gen, segs->front().text + "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama3AndMistral) {
  Tokenizer tok = load_tok("llama3");
  auto s = record(tok, "messages", kConv, "llama3");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(tok.decode(s->input_ids),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>");
  EXPECT_EQ(trained_text(tok, *s), "Hello!<|eot_id|>4<|eot_id|>");
  auto t31 = chat_template_from_jinja("<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023");
  ASSERT_TRUE(t31.ok());
  EXPECT_TRUE(t31->llama31_dates);
  auto m = record(tok, "messages",
                  R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Q"},{"role":"assistant","content":"A"}]})",
                  "mistral");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(tok.decode(m->input_ids), "<s>[INST] Be brief.\n\nQ [/INST]A</s>");
  EXPECT_EQ(trained_text(tok, *m), "A</s>");
  // Unrecognised templates go to the Jinja interpreter now (tests/data/chat_jinja_test.cc); this
  // one prints the message list, which changes as turns are added: no trained spans can be found.
  auto any = chat_template_from_jinja("{{ messages }}");
  ASSERT_TRUE(any.ok()) << any.status().to_string();
  EXPECT_EQ(any->format, ChatFormat::kJinja);
  auto segs = render_chat(*any, {{"user", "Q"}, {"assistant", "A"}}, "x.jsonl line 3");
  ASSERT_FALSE(segs.ok());
  EXPECT_EQ(segs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(segs.status().message().find("x.jsonl line 3"), std::string::npos) << segs.status().to_string();
  EXPECT_FALSE(chat_template_by_name("vicuna").ok());
}

// Mistral v3 / tekken, written out from their HF templates: system text before the LAST user
// message, v3's " " + trimmed reply. The ids are the whole rendered string's (Note [chat
// tokenization]), and the templates are told apart by their Jinja source.
TEST(ChatTemplate, MistralV3AndTekken) {
  Tokenizer tok = load_tok("llama3");
  const char* conv = R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Q"},)"
                     R"({"role":"assistant","content":"A"},{"role":"user","content":"Q2"},)"
                     R"({"role":"assistant","content":" A2 "}]})";
  auto v3 = record(tok, "messages", conv, "mistral_v3");
  ASSERT_TRUE(v3.ok()) << v3.status().to_string();
  // As HF's templates (`loop.last`): the system text only joins a user message that ends the
  // conversation, so this one (ending with the assistant) loses it -- and the dataset counts that.
  const std::string v3_text = "<s>[INST] Q[/INST] A</s>[INST] Q2[/INST] A2</s>";
  EXPECT_EQ(tok.decode(v3->input_ids), v3_text);
  EXPECT_EQ(v3->input_ids, tok.encode(v3_text));
  EXPECT_EQ(trained_text(tok, *v3), " A</s> A2</s>");
  auto tk = record(tok, "messages", conv, "mistral_tekken");
  ASSERT_TRUE(tk.ok()) << tk.status().to_string();
  const std::string tk_text = "<s>[INST]Q[/INST]A</s>[INST]Q2[/INST] A2 </s>";
  EXPECT_EQ(tok.decode(tk->input_ids), tk_text);
  EXPECT_EQ(tk->input_ids, tok.encode(tk_text));
  const std::string tk_trained = trained_text(tok, *tk);
  // "]A" is one pre-token of the Llama-3 regex: the token that straddles the border is trained.
  EXPECT_TRUE(tk_trained == "A</s> A2 </s>" || tk_trained == "]A</s> A2 </s>") << tk_trained;
  {
    std::vector<Sample> out;
    DatasetStats st;
    DatasetOptions opt;
    opt.chat_template = "mistral_v3";
    ASSERT_TRUE(load_dataset({write_tmp("m3.jsonl", std::string(conv) + "\n"), "messages"}, tok, opt, &out, &st).ok());
    EXPECT_EQ(st.system_dropped, 1);
    auto mid = record(tok, "messages",
                      R"({"messages":[{"role":"user","content":"Q"},{"role":"system","content":"S"},{"role":"assistant","content":"A"}]})",
                      "mistral_v3");
    EXPECT_FALSE(mid.ok());
    EXPECT_NE(mid.status().message().find("takes one only first"), std::string::npos) << mid.status().to_string();
  }
  auto gen = render_generation_prompt(*chat_template_by_name("mistral_v3"), {{"system", "S"}, {"user", "q"}});
  ASSERT_TRUE(gen.ok());
  EXPECT_EQ(*gen, "<s>[INST] S\n\nq[/INST]");
  EXPECT_FALSE(render_generation_prompt(*chat_template_by_name("mistral_tekken"), {{"user", "q"}, {"assistant", "a"}}).ok());
  EXPECT_FALSE(render_generation_prompt(*chat_template_by_name("mistral_v3"), {{"bot", "x"}, {"user", "q"}}).ok());

  const char* v1_jinja = "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}";
  const char* v3_jinja = "{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}";
  const char* tk_jinja = "{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}";
  EXPECT_EQ(chat_template_from_jinja(v1_jinja)->format, ChatFormat::kMistral);
  EXPECT_EQ(chat_template_from_jinja(v3_jinja)->format, ChatFormat::kMistralV3);
  EXPECT_EQ(chat_template_from_jinja(tk_jinja)->format, ChatFormat::kMistralTekken);
}

// Tokenizing segment by segment differs from the whole string where the tokenizer's treatment of a
// segment's start crosses a border: a Llama-2 / Mistral v1 SentencePiece tokenizer (Prepend "▁"
// normalizer) would give the reply after "[/INST]" a "▁" that the rendered string does not have.
// The dataset uses the whole string's ids (HF tokenizers: "▁[/INST]", "A", ... not "▁A").
// The models' own templates (tests/fixtures/chat/*.jinja: Qwen3 hybrid and thinking-only, Qwen2.5,
// SmolLM2, Llama-3 and Llama-3.1 with its fallback date, Mistral-Nemo (tekken)),
// rendered by jinja2 in transformers' environment (tools/ref/chat_template_ref.py): think blocks
// after the last user message, reasoning dropped from history turns, default and late system
// turns, generation prompts.
TEST(ChatTemplate, MatchesItsJinja) {
  const std::string dir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/chat/";
  struct Want {
    const char* file;
    const char* format;
    bool think_prompt;
  };
  for (const Want& w : {Want{"qwen3", "qwen3", false}, Want{"qwen3_thinking_2507", "qwen3", true},
                        Want{"qwen2_5", "chatml", false}, Want{"smollm2", "chatml", false},
                        Want{"llama3_1", "llama3", false}, Want{"llama3", "llama3", false},
                        Want{"mistral_nemo", "mistral_tekken", false}}) {
    const char* name = w.file;
    auto src = read_file_to_string(dir + name + ".jinja");
    ASSERT_TRUE(src.ok()) << src.status().to_string();
    auto checked = chat_template_from_jinja(*src);
    ASSERT_TRUE(checked.ok()) << checked.status().to_string();
    // The built-in rendering alone here (Note [built-in formats, checked] would otherwise hand a
    // mismatch to the interpreter); below, the checked template must agree with it.
    ASSERT_TRUE(checked->jinja != nullptr) << name << ": a real template is kept for the check";
    const bool llama = std::string(name).starts_with("llama3");
    const bool nemo = std::string(name) == "mistral_nemo";
    checked->bos_token = llama ? "<|begin_of_text|>" : nemo ? "<s>" : "";  // what resolve_chat_template sets
    checked->eos_token = nemo ? "</s>" : "";
    ChatTemplate builtin = *checked;
    builtin.jinja.reset();
    auto t = &builtin;
    EXPECT_EQ(t->name(), w.format) << name;
    EXPECT_EQ(t->think_prompt, w.think_prompt) << name;
    auto ref_text = read_file_to_string(dir + name + "_rendered.json");
    ASSERT_TRUE(ref_text.ok());
    auto ref = parse_ordered_json(*ref_text, name);
    ASSERT_TRUE(ref.ok());
    ASSERT_GE((*ref)["cases"].size(), 3u);  // Mistral's template refuses the non-alternating ones
    auto msgs_of = [](const OrderedJson& a) {
      std::vector<ChatMessage> m;
      for (const OrderedJson& x : a) m.push_back({x["role"].get<std::string>(), x["content"].get<std::string>()});
      return m;
    };
    Tokenizer tok = load_tok("qwen2");
    int i = 0;
    for (const OrderedJson& cs : (*ref)["cases"]) {
      if (cs.contains("record")) {
        // Tools: through the dataset path (tool_calls, tools, Python-style tojson); the ids decode
        // to the template's text, the tool calls are trained and the tool results are not.
        auto smp = tokenize_record("messages", cs["record"].dump(), tok, &*t, DatasetOptions{}, "case");
        ASSERT_TRUE(smp.ok()) << name << " case " << i << ": " << smp.status().to_string();
        EXPECT_EQ(tok.decode(smp->input_ids), cs["text"].get<std::string>()) << name << " case " << i;
        const std::string trained = trained_text(tok, *smp);
        EXPECT_NE(trained.find("</tool_call><|im_end|>"), std::string::npos) << trained;
        EXPECT_EQ(trained.find("<tool_response>"), std::string::npos) << trained;
        EXPECT_EQ(trained.find("# Tools"), std::string::npos) << trained;
        ++i;
        continue;
      }
      auto segs = render_chat(*t, msgs_of(cs["messages"]), "case");
      ASSERT_TRUE(segs.ok()) << segs.status().to_string();
      std::string text;
      for (const ChatSegment& g : *segs) text += g.text;
      EXPECT_EQ(text, cs["text"].get<std::string>()) << name << " case " << i;
      auto via_check = render_chat(*checked, msgs_of(cs["messages"]), "case");
      ASSERT_TRUE(via_check.ok()) << via_check.status().to_string();
      ASSERT_EQ(via_check->size(), segs->size()) << name << " case " << i << ": the check changed the segments";
      for (size_t k = 0; k < segs->size(); ++k)
        EXPECT_TRUE((*via_check)[k].text == (*segs)[k].text && (*via_check)[k].trained == (*segs)[k].trained)
            << name << " case " << i << " segment " << k;
      auto prompt = render_generation_prompt(*t, msgs_of(cs["prompt_messages"]));
      ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
      EXPECT_EQ(*prompt, cs["prompt"].get<std::string>()) << name << " prompt " << i;
      ++i;
    }
    EXPECT_GE(i, t->tools ? 8 : 3) << name;
  }
  // The think block is the model's output: trained with the answer.
  Tokenizer tok = load_tok("qwen2");
  auto s = record(tok, "messages", R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"}]})",
                  "qwen3");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(trained_text(tok, *s), "<think>\n\n</think>\n\nHello<|im_end|>");
}

TEST(ChatTemplate, WholeStringTokenizationAcrossBorders) {
  Tokenizer tok = load_tok("llama2");
  auto m = record(tok, "messages", R"({"messages":[{"role":"user","content":"Q"},{"role":"assistant","content":"Ahoy"}]})",
                  "mistral");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const std::string text = "<s>[INST] Q [/INST]Ahoy</s>";
  EXPECT_EQ(m->input_ids, tok.encode(text));
  std::vector<int32_t> pieces = tok.encode("<s>[INST] Q [/INST]");
  for (int32_t id : tok.encode("Ahoy</s>")) pieces.push_back(id);
  EXPECT_NE(pieces, m->input_ids) << "segment-wise tokenization would add a \"▁\" before the reply";
  EXPECT_EQ(trained_text(tok, *m), "Ahoy</s>");
  EXPECT_EQ(tok.id_to_token(m->input_ids[4]), "A");  // <s> ▁[INST] ▁Q ▁[/INST] A h o y </s>
}

TEST(Datasets, PromptCompletionTextTokenized) {
  Tokenizer tok = load_tok("llama3");
  int32_t eos = *tok.token_to_id("<|end_of_text|>");
  tok.set_special_ids(tok.bos_id(), eos, -1);
  auto pc = record(tok, "prompt_completion", R"({"prompt":"Q: 1+1=","completion":" 2"})");
  ASSERT_TRUE(pc.ok());
  EXPECT_EQ(tok.decode(pc->input_ids), "<|begin_of_text|>Q: 1+1= 2<|end_of_text|>");
  EXPECT_EQ(trained_text(tok, *pc), " 2<|end_of_text|>");
  auto all = record(tok, "prompt_completion", R"({"prompt":"Q: 1+1=","completion":" 2"})", "chatml", true);
  EXPECT_EQ(trained_text(tok, *all), "Q: 1+1= 2<|end_of_text|>");  // all but the first token (BOS)
  EXPECT_EQ(all->labels[0], kIgnoreIndex);
  auto tx = record(tok, "text", R"({"text":"hello world"})");
  EXPECT_EQ(tok.decode(tx->input_ids), "<|begin_of_text|>hello world<|end_of_text|>");
  auto tk = record(tok, "tokenized", R"({"input_ids":[5,6,7],"labels":[-100,6,7]})");
  ASSERT_TRUE(tk.ok());
  EXPECT_EQ(tk->labels, (std::vector<int32_t>{kIgnoreIndex, 6, 7}));
  auto tk2 = record(tok, "tokenized", R"({"input_ids":[5,6,7]})");
  EXPECT_EQ(tk2->labels, (std::vector<int32_t>{kIgnoreIndex, 6, 7}));
  // A null labels column (Parquet rows carry every column) means "no labels", as an absent key.
  auto tk3 = record(tok, "tokenized", R"({"input_ids":[5,6,7],"labels":null})");
  ASSERT_TRUE(tk3.ok()) << tk3.status().to_string();
  EXPECT_EQ(tk3->labels, (std::vector<int32_t>{kIgnoreIndex, 6, 7}));
}

// Alpaca records in the Stanford Alpaca prompt, written out by hand from the published template
// (github.com/tatsu-lab/stanford_alpaca, train.py PROMPT_DICT).
TEST(Datasets, AlpacaPrompt) {
  Tokenizer tok = load_tok("llama3");
  int32_t eos = *tok.token_to_id("<|end_of_text|>");
  tok.set_special_ids(tok.bos_id(), eos, -1);
  auto with_input = record(tok, "alpaca", R"({"instruction":"Add the numbers.","input":"2 and 3","output":"5"})");
  ASSERT_TRUE(with_input.ok()) << with_input.status().to_string();
  EXPECT_EQ(tok.decode(with_input->input_ids),
            "<|begin_of_text|>Below is an instruction that describes a task, paired with an input that provides "
            "further context. Write a response that appropriately completes the request.\n\n### Instruction:\nAdd "
            "the numbers.\n\n### Input:\n2 and 3\n\n### Response:\n5<|end_of_text|>");
  EXPECT_EQ(trained_text(tok, *with_input), "5<|end_of_text|>");
  // No input (absent, null or empty): the shorter prompt, no Input section.
  const std::string no_input =
      "<|begin_of_text|>Below is an instruction that describes a task. Write a response that appropriately "
      "completes the request.\n\n### Instruction:\nSay hi.\n\n### Response:\nhi<|end_of_text|>";
  for (const char* rec : {R"({"instruction":"Say hi.","output":"hi"})", R"({"instruction":"Say hi.","input":null,"output":"hi"})",
                          R"({"instruction":"Say hi.","input":"","output":"hi"})"}) {
    auto s = record(tok, "alpaca", rec);
    ASSERT_TRUE(s.ok()) << rec << ": " << s.status().to_string();
    EXPECT_EQ(tok.decode(s->input_ids), no_input) << rec;
    EXPECT_EQ(trained_text(tok, *s), "hi<|end_of_text|>") << rec;
  }
  auto all = record(tok, "alpaca", R"({"instruction":"Say hi.","output":"hi"})", "chatml", true);
  EXPECT_EQ(trained_text(tok, *all), no_input.substr(std::string("<|begin_of_text|>").size()));
}

// A ShareGPT record gives the ids and labels of the same conversation as "messages".
TEST(Datasets, ShareGptIsMessages) {
  Tokenizer tok = load_tok("qwen2");
  auto sg = record(tok, "sharegpt",
                   R"({"conversations":[{"from":"system","value":"Be brief."},{"from":"human","value":"Hi"},)"
                   R"({"from":"gpt","value":"Hello!"},{"from":"user","value":"2+2?"},{"from":"assistant","value":"4"}]})");
  auto ms = record(tok, "messages",
                   R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},)"
                   R"({"role":"assistant","content":"Hello!"},{"role":"user","content":"2+2?"},{"role":"assistant","content":"4"}]})");
  ASSERT_TRUE(sg.ok()) << sg.status().to_string();
  ASSERT_TRUE(ms.ok()) << ms.status().to_string();
  EXPECT_EQ(sg->input_ids, ms->input_ids);
  EXPECT_EQ(sg->labels, ms->labels);
  EXPECT_EQ(trained_text(tok, *sg), "Hello!<|im_end|>4<|im_end|>");
}

// Template-free segments: one string, no BOS/EOS added, loss on label-true text only; the same ids as
// the chatml conversation whose text it spells out.
TEST(Datasets, InputOutputSegments) {
  Tokenizer tok = load_tok("qwen2");
  auto io = record(tok, "input_output",
                   R"({"segments":[{"text":"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n","label":false},)"
                   R"({"text":"Hello!<|im_end|>","label":true},{"text":"\n","label":false}]})");
  ASSERT_TRUE(io.ok()) << io.status().to_string();
  auto ms = record(tok, "messages", R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}]})");
  ASSERT_TRUE(ms.ok());
  EXPECT_EQ(io->input_ids, ms->input_ids);
  EXPECT_EQ(io->labels, ms->labels);
  EXPECT_EQ(trained_text(tok, *io), "Hello!<|im_end|>");
  // ShareGPT exports with role/content keys inside "conversations" read the same.
  auto rc = record(tok, "sharegpt", R"({"conversations":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}]})");
  ASSERT_TRUE(rc.ok()) << rc.status().to_string();
  EXPECT_EQ(rc->input_ids, ms->input_ids);
}

// One JSON array of records loads the same samples as the JSON Lines file of those records.
TEST(Datasets, JsonArrayFileEqualsJsonLines) {
  Tokenizer tok = load_tok("qwen2");
  const std::string a = R"({"instruction":"Say hi.","output":"hi"})", b = R"({"instruction":"Add.","input":"1 1","output":"2"})";
  DatasetOptions opt;
  std::vector<Sample> lines, array;
  DatasetStats st1, st2;
  ASSERT_TRUE(load_dataset({write_tmp("a.jsonl", a + "\n\n" + b + "\n"), "alpaca"}, tok, opt, &lines, &st1).ok());
  Status s = load_dataset({write_tmp("a.json", "\xEF\xBB\xBF  \n[" + a + ",\n " + b + "]\n"), "alpaca"}, tok, opt, &array, &st2);
  ASSERT_TRUE(s.ok()) << s.to_string();  // a UTF-8 BOM first (read as JSON Lines before: session 23)
  ASSERT_EQ(lines.size(), 2u);
  ASSERT_EQ(array.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(lines[i].input_ids, array[i].input_ids);
    EXPECT_EQ(lines[i].labels, array[i].labels);
  }
  // Damaged arrays name the file and the record.
  auto err = [&](const std::string& body) {
    std::vector<Sample> out;
    DatasetStats st;
    return load_dataset({write_tmp("bad.json", body), "alpaca"}, tok, opt, &out, &st);
  };
  Status e1 = err("[" + a + ", 3]");
  EXPECT_NE(e1.message().find("bad.json record 2: not a JSON object"), std::string::npos) << e1.to_string();
  Status e2 = err("[" + a + R"(, {"instruction":"x"}])");
  EXPECT_NE(e2.message().find("bad.json record 2: missing field 'output'"), std::string::npos) << e2.to_string();
  // Parquet and gzip files are read (datasets_parquet_test.cc); damaged ones name the file.
  Status e4 = err(std::string("PAR1\x15\x04", 6));
  EXPECT_NE(e4.message().find("bad.json: a Parquet file of 6 bytes, too short"), std::string::npos) << e4.to_string();
  Status e5 = err(std::string("\x1f\x8b\x08\x00", 4));
  EXPECT_NE(e5.message().find("bad.json: gzip-compressed: truncated"), std::string::npos) << e5.to_string();
  Status e3 = err("[" + a + ",");
  EXPECT_FALSE(e3.ok());
  EXPECT_NE(e3.message().find("bad.json"), std::string::npos) << e3.to_string();
}

void expect_error(const Tokenizer& tok, const std::string& type, const std::string& body, const std::string& needle) {
  std::string path = write_tmp("bad.jsonl", "\n" + body + "\n");
  std::vector<Sample> out;
  DatasetStats st;
  DatasetOptions opt;
  opt.chat_template = "chatml";
  Status s = load_dataset({path, type}, tok, opt, &out, &st);
  ASSERT_FALSE(s.ok()) << body;
  EXPECT_NE(s.message().find("bad.jsonl line 2"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
}

TEST(Datasets, BadInputNamesFileAndLine) {
  Tokenizer tok = load_tok("qwen2");
  expect_error(tok, "text", R"({"txt":"a"})", "missing field 'text'");
  expect_error(tok, "prompt_completion", R"({"prompt":"a"})", "missing field 'completion'");
  expect_error(tok, "messages", R"({"messages":[{"role":"bot","content":"x"}]})", "unknown role 'bot'");
  expect_error(tok, "messages", R"({"messages":[]})", "empty conversation");
  expect_error(tok, "messages", R"({"messages":[{"role":"user"}]})", "missing field 'content'");
  expect_error(tok, "text", R"({"text": "a")", "");
  expect_error(tok, "tokenized", R"({"input_ids":[1, 99999]})", "outside the vocabulary");
  expect_error(tok, "tokenized", R"({"input_ids":[1,2],"labels":[1]})", "1 labels for 2");
  expect_error(tok, "tokenized", R"({"input_ids":[1, 18446744073709551615]})", "= 18446744073709551615 is outside");
  expect_error(tok, "alpaca", R"({"instruction":"a","input":3,"output":"b"})", "field 'input' is not a string");
  expect_error(tok, "sharegpt", R"({"conversations":[{"from":"bot","value":"x"}]})", "unknown speaker 'from': 'bot'");
  expect_error(tok, "sharegpt", R"({"conversations":{"from":"human"}})", "'conversations' is not a list");
  expect_error(tok, "sharegpt", R"({"conversations":[{"from":"human"}]})", "missing field 'value'");
  expect_error(tok, "input_output", R"({"segments":[{"text":"a"}]})", "'label' must be true (trained) or false");
  // Tools only where the template renders them (chatml by name is SmolLM2-style: no tool blocks).
  expect_error(tok, "messages", R"({"messages":[{"role":"tool","content":"x"},{"role":"assistant","content":"y"}]})",
               "has role 'tool' (the chatml template does not render tools");
  expect_error(tok, "messages", R"({"tools":[{"name":"f"}],"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]})",
               "'tools' (the chatml template does not render tools");
  expect_error(tok, "messages", R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f"}}]}]})",
               "tool_calls[0]: missing field 'arguments'");
  expect_error(tok, "messages", R"({"messages":[{"role":"assistant","tool_calls":{"name":"f"}}]})", "'tool_calls' is not a list");
  expect_error(tok, "input_output", R"({"segments":[]})", "'segments' is empty");
  expect_error(tok, "input_output", R"({"text":"a"})", "missing field 'segments'");
}

TEST(Datasets, TruncationAndSplit) {
  Tokenizer tok = load_tok("qwen2");
  std::string body;
  for (int i = 0; i < 20; ++i) body += R"({"input_ids":[)" + std::to_string(i + 1) + (i % 5 == 0 ? ",1,2,3,4,5,6,7,8,9]}\n" : ",3]}\n");
  std::string path = write_tmp("tok.jsonl", body);
  std::vector<Sample> out;
  DatasetStats st;
  DatasetOptions opt;
  opt.sequence_len = 6;
  ASSERT_TRUE(load_dataset({path, "tokenized"}, tok, opt, &out, &st).ok());
  EXPECT_EQ(st.samples, 20);
  EXPECT_EQ(st.truncated, 4);
  EXPECT_EQ(out[0].input_ids.size(), 6u);
  auto a = split_train_val(out, 0.25, 7), b = split_train_val(out, 0.25, 7), c = split_train_val(out, 3, 7);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->val.size(), 5u);
  EXPECT_EQ(a->train.size(), 15u);
  EXPECT_EQ(c->val.size(), 3u);
  std::vector<int32_t> firsts_a, firsts_b, all;
  for (auto& s : a->val) firsts_a.push_back(s.input_ids[0]);
  for (auto& s : b->val) firsts_b.push_back(s.input_ids[0]);
  EXPECT_EQ(firsts_a, firsts_b);  // deterministic by seed
  for (auto& s : a->train) all.push_back(s.input_ids[0]);
  all.insert(all.end(), firsts_a.begin(), firsts_a.end());
  std::sort(all.begin(), all.end());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(all[i], i + 1);  // disjoint and complete
  EXPECT_FALSE(split_train_val(out, 20, 7).ok());
}

// Note [long texts]: a text past sequence_len becomes windows that cover it once (each token a
// target exactly once, but a window's first), overlap_len tokens of context repeated; other types
// are truncated; a record's windows go to one side of the train/val split.
TEST(Datasets, LongTextsAreSplitIntoWindows) {
  Tokenizer tok = load_tok("qwen2");
  std::string words;
  for (int i = 0; i < 60; ++i) words += " w" + std::to_string(i);
  const std::vector<int32_t> whole = [&] {
    std::vector<int32_t> ids = tok.encode(words, AddSpecial::kYes);
    if (tok.eos_id() >= 0) ids.push_back(tok.eos_id());
    return ids;
  }();
  ASSERT_GT(whole.size(), 100u);
  const std::string body = "{\"text\":\"" + words + "\"}\n{\"text\":\"short\"}\n";
  const std::string path = write_tmp("long.jsonl", body);
  for (int64_t overlap : {0, 3, 15}) {
    SCOPED_TRACE(overlap);
    DatasetOptions opt;
    opt.sequence_len = 16;
    std::vector<Sample> out;
    DatasetStats st;
    DatasetSource src{path, "text"};
    src.overlap_len = overlap;
    ASSERT_TRUE(load_dataset(src, tok, opt, &out, &st).ok());
    EXPECT_EQ(st.split, 1);
    EXPECT_EQ(st.truncated, 0);
    ASSERT_EQ(static_cast<int64_t>(out.size()), st.windows + 1);  // + "short"
    const int64_t stride = 16 - overlap;
    std::vector<int> trained(whole.size(), 0);
    for (int64_t w = 0; w < st.windows; ++w) {
      const Sample& s = out[static_cast<size_t>(w)];
      EXPECT_EQ(s.window, w);
      const size_t start = static_cast<size_t>(w * stride);
      ASSERT_LE(s.input_ids.size(), 16u);
      ASSERT_LE(start + s.input_ids.size(), whole.size());
      EXPECT_TRUE(std::equal(s.input_ids.begin(), s.input_ids.end(), whole.begin() + static_cast<int64_t>(start)));
      for (size_t i = 0; i < s.labels.size(); ++i) {
        if (s.labels[i] == kIgnoreIndex) continue;
        EXPECT_EQ(s.labels[i], s.input_ids[i]);
        ++trained[start + i];
      }
      if (w + 1 < st.windows) EXPECT_EQ(s.input_ids.size(), 16u);
      else EXPECT_EQ(start + s.input_ids.size(), whole.size()) << w;  // the last window reaches the end, no further
    }
    // Every token is a target once but the text's first and, without overlap, each window's first.
    for (size_t i = 0; i < whole.size(); ++i)
      EXPECT_EQ(trained[i], i % 16 == 0 && (overlap == 0 || i == 0) ? 0 : 1) << "token " << i;
    EXPECT_EQ(out.back().window, 0);
    // The windows go to one side: with one of two records held out, either the short one or
    // every window is.
    for (uint64_t seed = 0; seed < 6; ++seed) {
      auto sp = split_train_val(out, 1, seed);
      ASSERT_TRUE(sp.ok());
      EXPECT_TRUE(sp->val.size() == 1 || static_cast<int64_t>(sp->val.size()) == st.windows) << sp->val.size();
      EXPECT_EQ(sp->val.size() + sp->train.size(), out.size());
    }
  }
  // Other types are truncated; overlap_len is refused there and where it is not below sequence_len.
  DatasetOptions opt;
  opt.sequence_len = 16;
  std::vector<Sample> out;
  DatasetStats st;
  const std::string pc = write_tmp("pc.jsonl", "{\"prompt\":\"a\",\"completion\":\"" + words + "\"}\n");
  ASSERT_TRUE(load_dataset({pc, "prompt_completion"}, tok, opt, &out, &st).ok());
  EXPECT_EQ(st.truncated, 1);
  EXPECT_EQ(st.split, 0);
  DatasetSource bad{pc, "prompt_completion"};
  bad.overlap_len = 2;
  Status s = load_dataset(bad, tok, opt, &out, &st);
  EXPECT_NE(s.message().find("overlap_len applies to type text"), std::string::npos) << s.to_string();
  DatasetSource big{path, "text"};
  big.overlap_len = 16;
  s = load_dataset(big, tok, opt, &out, &st);
  EXPECT_NE(s.message().find("overlap_len 16 must be >= 0 and below sequence_len 16"), std::string::npos) << s.to_string();
}

// Note [parallel tokenization]: the samples, counts and first error do not depend on the thread
// count -- over several batches (> 1024 records), a record big enough to be tokenized alone, long
// texts split into windows, and an error behind which later lines hold other errors.
TEST(Datasets, ParallelLoadMatchesOneThread) {
  Tokenizer tok = load_tok("qwen2");
  std::string body;
  for (int i = 0; i < 2600; ++i) {
    std::string text = "record " + std::to_string(i) + ":";
    for (int k = 0; k < i % 37; ++k) text += " w" + std::to_string(k * i % 101);
    if (i == 1500) text += std::string(1 << 21, 'x');  // > 1 MB: alone in its batch
    body += "{\"text\":\"" + text + "\"}\n";
  }
  const std::string path = write_tmp("many.jsonl", body);
  auto load = [&](const std::string& p, int threads, std::vector<Sample>* out, DatasetStats* st) {
    DatasetOptions opt;
    opt.sequence_len = 24;
    opt.threads = threads;
    return load_dataset({p, "text"}, tok, opt, out, st);
  };
  std::vector<Sample> one, four;
  DatasetStats s1, s4;
  ASSERT_TRUE(load(path, 1, &one, &s1).ok());
  ASSERT_TRUE(load(path, 4, &four, &s4).ok());
  EXPECT_GT(s1.split, 2000);
  EXPECT_EQ(s1.samples, s4.samples);
  EXPECT_EQ(s1.windows, s4.windows);
  EXPECT_EQ(s1.tokens, s4.tokens);
  EXPECT_EQ(s1.target_tokens, s4.target_tokens);
  ASSERT_EQ(one.size(), four.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].input_ids, four[i].input_ids) << i;
    ASSERT_EQ(one[i].labels, four[i].labels) << i;
    ASSERT_EQ(one[i].window, four[i].window) << i;
  }
  // Errors: line 1201 has no text, 1202 is not JSON, 1900 has no text either: 1201 is named.
  std::string bad;
  size_t line = 0, pos = 0;
  while (pos < body.size()) {
    const size_t e = body.find('\n', pos);
    ++line;
    std::string l = body.substr(pos, e - pos);
    if (line == 1201 || line == 1900) l = "{\"txt\":\"a\"}";
    if (line == 1202) l = "{not json";
    bad += l + "\n";
    pos = e + 1;
  }
  const std::string bad_path = write_tmp("bad.jsonl", bad);
  for (int threads : {1, 4}) {
    std::vector<Sample> out;
    DatasetStats st;
    Status s = load(bad_path, threads, &out, &st);
    EXPECT_NE(s.message().find("bad.jsonl line 1201: missing field 'text'"), std::string::npos) << threads << " " << s.to_string();
  }
}

TEST(Datasets, DemoDataLoads) {
  Tokenizer tok = load_tok("qwen2");
  std::vector<Sample> out;
  DatasetStats st;
  DatasetOptions opt;
  opt.chat_template = "chatml";
  Status s = load_dataset({std::string(ST_SOURCE_DIR) + "/data/demo_chat.jsonl", "messages"}, tok, opt, &out, &st);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_GE(st.samples, 200);
  EXPECT_EQ(st.truncated, 0);
  EXPECT_EQ(trained_text(tok, out[0]).rfind("CAPITAL: ", 0), 0u);
}

}  // namespace
}  // namespace st
