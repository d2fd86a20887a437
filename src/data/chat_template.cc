#include "data/chat_template.h"

#include <algorithm>
#include <optional>

#include "core/file.h"
#include "core/json.h"

namespace st {
namespace {

constexpr const char* kSmolSystem = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
constexpr const char* kQwen25System = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
constexpr const char* kQwen2System = "You are a helpful assistant.";
constexpr const char* kLlama31Dates = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

std::string strip(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n\r"), e = s.find_last_not_of(" \t\n\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

void add(std::vector<ChatSegment>* out, std::string text, bool trained) {
  if (!text.empty()) out->push_back({std::move(text), trained});
}

// The Qwen templates' tool schemas block (inside the system turn).
std::string tools_block(const std::vector<std::string>& tools) {
  std::string s = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
                  "with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const std::string& t : tools) s += "\n" + t;
  return s + "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
             "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
             "<args-json-object>}\n</tool_call><|im_end|>\n";
}

// A run of "tool" messages is one user turn of <tool_response> blocks (the Qwen templates).
void render_tool_result(const std::vector<ChatMessage>& m, size_t i, std::vector<ChatSegment>* out) {
  std::string s;
  if (i == 0 || m[i - 1].role != "tool") s += "<|im_start|>user";
  s += "\n<tool_response>\n" + m[i].content + "\n</tool_response>";
  if (i + 1 == m.size() || m[i + 1].role != "tool") s += "<|im_end|>\n";
  add(out, std::move(s), false);
}

std::string tool_call_text(const ToolCall& c, bool raw_string_arguments) {
  return "<tool_call>\n{\"name\": \"" + c.name + "\", \"arguments\": " +
         (raw_string_arguments ? c.arguments_text : c.arguments_json) + "}\n</tool_call>";
}

// ChatML (Qwen2/2.5, SmolLM2). With t.tools (the Qwen2.5 template): a tools list moves the system
// text into the tools block ("You are a helpful assistant." when there is none), an assistant turn
// with tool calls is "<|im_start|>assistant" + "\n" content (if any) + "\n<tool_call>..." per call.
void render_chatml(const ChatTemplate& t, const std::vector<ChatMessage>& m, const std::vector<std::string>& tools,
                   std::vector<ChatSegment>* out) {
  size_t first = 0;
  if (!tools.empty()) {
    const bool sys = m[0].role == "system";
    add(out, "<|im_start|>system\n" + (sys ? m[0].content : t.tools_default_system) + "\n\n" + tools_block(tools), false);
    first = sys ? 1 : 0;
  } else if (!t.default_system.empty() && m[0].role != "system") {
    add(out, "<|im_start|>system\n" + t.default_system + "<|im_end|>\n", false);
  }
  for (size_t i = first; i < m.size(); ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role == "tool") {
      render_tool_result(m, i, out);
      continue;
    }
    bool a = msg.role == "assistant";
    if (a && !msg.tool_calls.empty()) {
      add(out, "<|im_start|>assistant", false);
      std::string s;  // (appends, not "\n" + ...: GCC 12's -Wrestrict misfires on operator+)
      if (!msg.content.empty()) s.append("\n").append(msg.content);
      for (const ToolCall& c : msg.tool_calls) s.append("\n").append(tool_call_text(c, false));
      add(out, std::move(s), true);
    } else {
      add(out, "<|im_start|>" + msg.role + "\n", false);
      add(out, msg.content, a);
    }
    add(out, "<|im_end|>", a);
    add(out, "\n", false);
  }
}

std::string strip_nl_left(const std::string& s) { return s.substr(std::min(s.find_first_not_of('\n'), s.size())); }
std::string strip_nl_right(const std::string& s) {
  const size_t e = s.find_last_not_of('\n');
  return e == std::string::npos ? "" : s.substr(0, e + 1);
}

// Qwen3 (its HF template; tools/ref/chat_template_ref.py renders it for the tests): ChatML where an
// assistant turn's "<think>...</think>" in the content is split off as reasoning. Turns after the
// last user message keep it as "<think>\nR\n</think>\n\n" + answer (the last turn always, even
// with R empty); earlier turns drop it. A first system message opens the text; later ones are turns.
void render_qwen3(const std::vector<ChatMessage>& m, const std::vector<std::string>& tools,
                  std::vector<ChatSegment>* out) {
  size_t first = 0;
  if (!tools.empty()) {
    const bool sys = m[0].role == "system";
    add(out, "<|im_start|>system\n" + (sys ? m[0].content + "\n\n" : std::string()) + tools_block(tools), false);
    first = sys ? 1 : 0;
  }
  size_t last_query = m.size() - 1;
  for (size_t i = m.size(); i-- > 0;) {
    const std::string& c = m[i].content;
    const bool tool_response = c.rfind("<tool_response>", 0) == 0 && c.size() >= 16 &&
                               c.compare(c.size() - 16, 16, "</tool_response>") == 0;
    if (m[i].role == "user" && !tool_response) {
      last_query = i;
      break;
    }
  }
  for (size_t i = first; i < m.size(); ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role == "tool") {
      render_tool_result(m, i, out);
      continue;
    }
    if (msg.role != "assistant") {
      add(out, "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n", false);
      continue;
    }
    std::string content = msg.content, reasoning;
    const size_t first_close = content.find("</think>");
    if (first_close != std::string::npos) {
      std::string before = strip_nl_right(content.substr(0, first_close));
      const size_t open = before.rfind("<think>");
      if (open != std::string::npos) before = before.substr(open + 7);
      reasoning = strip_nl_left(before);
      content = strip_nl_left(content.substr(content.rfind("</think>") + 8));
    }
    add(out, "<|im_start|>assistant\n", false);
    std::string text = i > last_query && (i + 1 == m.size() || !reasoning.empty())
                           ? "<think>\n" + strip_nl_left(strip_nl_right(reasoning)) + "\n</think>\n\n" + strip_nl_left(content)
                           : content;
    for (size_t k = 0; k < msg.tool_calls.size(); ++k) {
      if (k > 0 || !content.empty()) text += "\n";
      text += tool_call_text(msg.tool_calls[k], true);
    }
    add(out, std::move(text), true);
    add(out, "<|im_end|>", true);
    add(out, "\n", false);
  }
}

void render_llama3(const ChatTemplate& t, const std::vector<ChatMessage>& m, std::vector<ChatSegment>* out) {
  add(out, "<|begin_of_text|>", false);
  size_t first = 0;
  if (t.llama31_dates) {
    std::string sys = m[0].role == "system" ? strip(m[0].content) : "";
    if (m[0].role == "system") first = 1;
    add(out, "<|start_header_id|>system<|end_header_id|>\n\n" + std::string(kLlama31Dates) + sys + "<|eot_id|>", false);
  }
  for (size_t i = first; i < m.size(); ++i) {
    bool a = m[i].role == "assistant";
    add(out, "<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n", false);
    add(out, strip(m[i].content), a);
    add(out, "<|eot_id|>", a);
  }
}

// Mistral v3 ("[INST] q[/INST] a</s>", Mistral-7B-Instruct-v0.3, Mixtral-8x22B, Codestral) and
// tekken ("[INST]q[/INST]a</s>", Mistral-Nemo, Ministral), as their HF templates render them: a
// first system message goes before the user message only when that message ends the conversation
// (the templates' `loop.last`), so a conversation that ends with the assistant's reply loses it --
// HF's behaviour, counted by mistral_drops_system so the dataset report says so. v3 puts " " +
// trimmed content before the assistant's </s>.
void render_mistral_v3(const std::vector<ChatMessage>& m, bool tekken, std::vector<ChatSegment>* out) {
  add(out, "<s>", false);
  const bool has_system = m[0].role == "system";
  for (size_t i = has_system ? 1 : 0; i < m.size(); ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role == "user") {
      std::string c = has_system && i + 1 == m.size() ? m[0].content + "\n\n" + msg.content : msg.content;
      add(out, (tekken ? "[INST]" : "[INST] ") + c + "[/INST]", false);
    } else if (msg.role == "assistant") {
      std::string reply = tekken ? msg.content : std::string(" ");  // (not " " + ...: GCC 12's -Wrestrict misfires)
      if (!tekken) reply += strip(msg.content);
      add(out, std::move(reply), true);
      add(out, "</s>", true);
    }
  }
}

// axolotl's mistral_v1 (mistral-common's v1 layout): "<s> [INST] q [/INST] a</s> [INST] ...", a
// first system message before the first user message (the template's loop.first; check_roles
// holds the turns to user / assistant alternation, as the template's raise_exception does).
void render_mistral_v1(const std::vector<ChatMessage>& m, std::vector<ChatSegment>* out) {
  add(out, "<s>", false);
  const bool has_system = m[0].role == "system";
  for (size_t i = has_system ? 1 : 0; i < m.size(); ++i) {
    if (m[i].role == "user") {
      const bool first = i == (has_system ? 1u : 0u);
      add(out, " [INST] " + (first && has_system ? m[0].content + "\n\n" : std::string()) + m[i].content + " [/INST]", false);
    } else {
      add(out, " " + m[i].content, true);
      add(out, "</s>", true);
    }
  }
}

// System text is prepended to the first user message (the Mistral templates have no system role).
void render_mistral(const std::vector<ChatMessage>& m, std::vector<ChatSegment>* out) {
  add(out, "<s>", false);
  std::string system;
  for (const ChatMessage& msg : m) {
    if (msg.role == "system") {
      system = msg.content;
    } else if (msg.role == "user") {
      std::string c = system.empty() ? msg.content : system + "\n\n" + msg.content;
      system.clear();
      add(out, "[INST] " + c + " [/INST]", false);
    } else {
      add(out, msg.content, true);
      add(out, "</s>", true);
    }
  }
}

}  // namespace

std::string ChatTemplate::name() const {
  if (!label.empty()) return label;
  switch (format) {
    case ChatFormat::kChatML: return "chatml";
    case ChatFormat::kQwen3: return "qwen3";
    case ChatFormat::kLlama3: return "llama3";
    case ChatFormat::kMistral: return "mistral";
    case ChatFormat::kMistralV1: return "mistral_v1";
    case ChatFormat::kMistralV3: return "mistral_v3";
    case ChatFormat::kMistralTekken: return "mistral_tekken";
    case ChatFormat::kJinja: return "jinja";
  }
  return "?";
}

namespace {

StatusOr<ChatTemplate> jinja_template(const std::string& source, const std::string& what) {
  ASSIGN_OR_RETURN(JinjaTemplate parsed, JinjaTemplate::parse(source, what));
  ChatTemplate t;
  t.format = ChatFormat::kJinja;
  t.tools = true;  // tools and tool calls go to the template in HF's shape; it renders them or not
  t.jinja = std::make_shared<const JinjaTemplate>(std::move(parsed));
  t.source = source;
  return t;
}

}  // namespace

// Note [axolotl template names]: axolotl's named templates for the families trained here, checked
// against its templates' text (axolotl 0.19, utils/chat_templates/templates):
//   qwen_25            ChatML; without a system message, Qwen2.5's default one, also in a tools block
//   mistral_v2v3       our mistral_v3 ("[INST] q[/INST] a</s>", the system text with the last user turn)
//   mistral_v3_tekken  our mistral_tekken ("[INST]q[/INST]a</s>")
//   mistral_v1         its own layout: "<s> [INST] q [/INST] a</s>" (render_mistral_v1), not HF's
//                      Mistral-7B-Instruct-v0.1 template (our mistral: "<s>[INST] q [/INST]a</s>")
//   alpaca             a system text, "### Instruction:\n" user and "### Response:\n" assistant +
//                      eos, "\n\n" between turns: kAlpacaJinja below, our own text of that layout
//   llama3, chatml, qwen3  the same names here (axolotl's qwen3 differs only in generation prompts)
// Their other names (gemma, phi_3, cohere, ...) are for architectures not trained here; a .jinja
// file or chat_template_jinja renders any of them.
constexpr const char* kAlpacaJinja =
    "{{ bos_token }}{% for m in messages %}"
    "{% if m.role == 'system' and loop.first %}{{ m.content }}"
    "{% elif m.role == 'user' %}{{ '### Instruction:\n' + m.content }}"
    "{% elif m.role == 'assistant' %}{{ '### Response:\n' + m.content + eos_token }}{% endif %}"
    "{% if not loop.last %}{{ '\n\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '\n\n### Response:\n' }}{% endif %}";

StatusOr<ChatTemplate> chat_template_by_name(const std::string& name) {
  ChatTemplate t;
  if (name.size() > 6 && name.ends_with(".jinja")) {
    ASSIGN_OR_RETURN(std::string source, read_file_to_string(name), "chat_template " << name);
    return jinja_template(source, name);
  }
  if (name.starts_with("jinja:")) return jinja_template(name.substr(6), "chat_template_jinja");
  if (name == "alpaca") {
    ASSIGN_OR_RETURN(t, jinja_template(kAlpacaJinja, "the alpaca chat template"));
    t.label = "alpaca";
    return t;
  }
  if (name == "qwen_25") {
    t.format = ChatFormat::kChatML;
    t.tools = true;
    t.default_system = t.tools_default_system = kQwen25System;
    t.label = name;
    return t;
  }
  if (name == "chatml") t.format = ChatFormat::kChatML;
  else if (name == "qwen3") t.format = ChatFormat::kQwen3, t.tools = true;
  else if (name == "llama3") t.format = ChatFormat::kLlama3;
  else if (name == "mistral") t.format = ChatFormat::kMistral;
  else if (name == "mistral_v3" || name == "mistral_v2v3") t.format = ChatFormat::kMistralV3;
  else if (name == "mistral_tekken" || name == "mistral_v3_tekken") t.format = ChatFormat::kMistralTekken;
  else if (name == "mistral_v1") t.format = ChatFormat::kMistralV1;
  else return InvalidArgument(Str() << "chat_template '" << name << "': expected chatml, qwen3, qwen_25, llama3, mistral, "
                                       "mistral_v1, mistral_v3 (mistral_v2v3), mistral_tekken (mistral_v3_tekken), alpaca "
                                       "or a .jinja file");
  return t;
}

StatusOr<ChatTemplate> chat_template_from_jinja(const std::string& j, const std::string& what) {
  ChatTemplate t;
  if (j.find("<|im_start|>") != std::string::npos && j.find("reasoning_content") != std::string::npos &&
      j.find("</think>") != std::string::npos) {
    // Qwen3: the think-block logic; the thinking-only variant opens generations with "<think>\n".
    t.format = ChatFormat::kQwen3;
    t.tools = true;
    t.think_prompt = j.find("'<|im_start|>assistant\\n<think>\\n'") != std::string::npos;
  } else if (j.find("<|im_start|>") != std::string::npos) {
    t.format = ChatFormat::kChatML;
    t.tools = j.find("<tool_call>") != std::string::npos;  // Qwen2.5's tool blocks
    for (const char* s : {kSmolSystem, kQwen25System, kQwen2System})
      if (j.find(s) != std::string::npos) { t.default_system = s; break; }
  } else if (j.find("<|start_header_id|>") != std::string::npos) {
    t.format = ChatFormat::kLlama3;
    t.llama31_dates = j.find("Cutting Knowledge Date") != std::string::npos;
  } else if (j.find("[INST]") != std::string::npos && j.find("<<SYS>>") == std::string::npos) {
    // (Llama-2-chat's [INST] template, with its <<SYS>> block, is not Mistral's: the interpreter's.)
    // v1 closes the user turn with ' [/INST]' (a space before it); tekken opens it with "[INST]"
    // and no space; v3 with "[INST] " (quotes of either kind).
    auto has = [&](std::initializer_list<const char*> v) {
      for (const char* x : v)
        if (j.find(x) != std::string::npos) return true;
      return false;
    };
    if (has({"' [/INST]'", "\" [/INST]\""})) t.format = ChatFormat::kMistral;
    else if (has({"'[INST]' +", "\"[INST]\" +"})) t.format = ChatFormat::kMistralTekken;
    else if (has({"'[INST] ' +", "\"[INST] \" +"})) t.format = ChatFormat::kMistralV3;
    else t.format = ChatFormat::kMistral;
  } else {
    return jinja_template(j, what);
  }
  // Note [built-in formats, checked]: a tokenizer's template recognised by its markers is also kept
  // parsed, and render_chat / render_generation_prompt compare the built-in rendering with the
  // template's own (transformers') on every conversation. A variant of a known family (another
  // default system prompt, other whitespace, extra blocks) then renders as HF renders it instead
  // of as the family's usual template. Only a template that refers to `messages` is kept: marker
  // snippets (tests) and unparseable ones (nothing to compare with) keep the built-in alone.
  if (j.find("messages") != std::string::npos) {
    StatusOr<ChatTemplate> parsed = jinja_template(j, what);
    if (parsed.ok()) t.jinja = parsed->jinja;
  }
  t.source = j;
  return t;
}

StatusOr<ChatTemplate> resolve_chat_template(const std::string& name, const Tokenizer& tok) {
  ChatTemplate t;
  // axolotl's tokenizer_default_fallback_chatml: the tokenizer's own template, else chatml.
  const bool fallback = name == "tokenizer_default_fallback_chatml";
  const bool own = name.empty() || name == "tokenizer_default" || fallback;
  if (fallback && tok.chat_template().empty()) {
    ASSIGN_OR_RETURN(t, chat_template_by_name("chatml"));
  } else if (!own) {
    ASSIGN_OR_RETURN(t, chat_template_by_name(name));
  } else if (!tok.chat_template().empty()) {
    ASSIGN_OR_RETURN(t, chat_template_from_jinja(tok.chat_template(), tok.chat_template_origin()));
  } else {
    return InvalidArgument("the tokenizer has no chat_template (neither chat_template.jinja nor tokenizer_config.json has a default one); "
                           "a train config can name one: "
                           "chat_template: chatml | llama3 | mistral | PATH.jinja");
  }
  std::vector<const char*> need;
  if (t.format == ChatFormat::kChatML || t.format == ChatFormat::kQwen3) need = {"<|im_start|>", "<|im_end|>"};
  if (t.format == ChatFormat::kLlama3) need = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
  if (t.format == ChatFormat::kMistral || t.format == ChatFormat::kMistralV1 || t.format == ChatFormat::kMistralV3 ||
      t.format == ChatFormat::kMistralTekken)
    need = {"<s>", "</s>"};
  for (const char* s : need)
    if (!tok.token_to_id(s)) return InvalidArgument(Str() << "chat template " << t.name() << " needs token " << s << ", which the tokenizer lacks");
  if (tok.bos_id() >= 0) t.bos_token = tok.id_to_token(tok.bos_id());
  if (tok.eos_id() >= 0) t.eos_token = tok.id_to_token(tok.eos_id());
  if (own && !tok.tool_use_template().empty() && !(fallback && tok.chat_template().empty())) {
    ASSIGN_OR_RETURN(ChatTemplate tu, chat_template_from_jinja(tok.tool_use_template(), tok.tool_use_origin()));
    tu.bos_token = t.bos_token;
    tu.eos_token = t.eos_token;
    t.tool_use = std::make_shared<const ChatTemplate>(std::move(tu));
  }
  return t;
}

namespace {

// A non-empty conversation of system / user / assistant messages; tool messages, tool calls and
// tool schemas only where the template renders them.
Status check_roles(const ChatTemplate& t, const std::vector<ChatMessage>& msgs, const std::vector<std::string>& tools,
                   const std::string& what) {
  if (msgs.empty()) return InvalidArgument(Str() << what << ": empty conversation");
  const std::string no_tools = Str() << " (the " << t.name() << " template does not render tools; the Qwen2.5 and "
                                     << "Qwen3 templates do)";
  if (!tools.empty() && !t.tools) return InvalidArgument(Str() << what << ": 'tools'" << no_tools);
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string& r = msgs[i].role;
    if (r == "tool" && !t.tools) return InvalidArgument(Str() << what << ": message " << i << " has role 'tool'" << no_tools);
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      return InvalidArgument(Str() << what << ": message " << i << " has unknown role '" << r
                                   << "' (system, user, assistant" << (t.tools ? ", tool" : "") << ")");
    if (!msgs[i].tool_calls.empty() && r != "assistant")
      return InvalidArgument(Str() << what << ": message " << i << " (" << r << ") has tool_calls; only assistant turns may");
    if (!msgs[i].tool_calls.empty() && !t.tools)
      return InvalidArgument(Str() << what << ": message " << i << " has tool_calls" << no_tools);
    if (r == "system" && i > 0 &&
        (t.format == ChatFormat::kMistralV1 || t.format == ChatFormat::kMistralV3 || t.format == ChatFormat::kMistralTekken))
      return InvalidArgument(Str() << what << ": message " << i << " is a system message; the " << t.name()
                                   << " template takes one only first");
    if (t.format == ChatFormat::kMistralV1 && r != "system") {
      const size_t turn = i - (msgs[0].role == "system" ? 1 : 0);
      if ((r == "user") != (turn % 2 == 0))
        return InvalidArgument(Str() << what << ": message " << i << " (" << r << "): the " << t.name()
                                     << " template takes user and assistant turns in alternation, the user first");
    }
  }
  return Status::OK();
}

std::vector<ChatSegment> render(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                const std::vector<std::string>& tools) {
  std::vector<ChatSegment> out;
  switch (t.format) {
    case ChatFormat::kChatML: render_chatml(t, msgs, tools, &out); break;
    case ChatFormat::kQwen3: render_qwen3(msgs, tools, &out); break;
    case ChatFormat::kLlama3: render_llama3(t, msgs, &out); break;
    case ChatFormat::kMistral: render_mistral(msgs, &out); break;
    case ChatFormat::kMistralV1: render_mistral_v1(msgs, &out); break;
    case ChatFormat::kMistralV3: render_mistral_v3(msgs, false, &out); break;
    case ChatFormat::kMistralTekken: render_mistral_v3(msgs, true, &out); break;
    case ChatFormat::kJinja: break;  // render_jinja_chat: it can fail
  }
  return out;
}

}  // namespace

namespace {

// The context transformers' apply_chat_template gives a template: messages ({"role", "content"},
// an assistant's tool calls as [{"type": "function", "function": {"name", "arguments": object}}]
// with a null content when it has none), tools (when given), bos_token, eos_token and
// add_generation_prompt; and date_string (below).
StatusOr<OrderedJson> jinja_context(const ChatTemplate& t, const std::vector<ChatMessage>& msgs, size_t n,
                                    const std::vector<std::string>& tools, bool gen) {
  OrderedJson ctx = OrderedJson::object();
  OrderedJson m = OrderedJson::array();
  for (size_t i = 0; i < n; ++i) {
    OrderedJson j = {{"role", msgs[i].role}, {"content", msgs[i].content}};
    if (!msgs[i].tool_calls.empty()) {
      if (msgs[i].content.empty()) j["content"] = nullptr;
      OrderedJson calls = OrderedJson::array();
      for (const ToolCall& c : msgs[i].tool_calls) {
        ASSIGN_OR_RETURN(OrderedJson args, parse_ordered_json(c.arguments_json, "tool call arguments"));
        calls.push_back({{"type", "function"}, {"function", {{"name", c.name}, {"arguments", std::move(args)}}}});
      }
      j["tool_calls"] = std::move(calls);
    }
    m.push_back(std::move(j));
  }
  ctx["messages"] = std::move(m);
  if (!tools.empty()) {
    OrderedJson ts = OrderedJson::array();
    for (const std::string& x : tools) {
      ASSIGN_OR_RETURN(OrderedJson tj, parse_ordered_json(x, "tool schema"));
      ts.push_back(std::move(tj));
    }
    ctx["tools"] = std::move(ts);
  }
  // Llama-3.1+ templates date their system block with date_string, else strftime_now (today):
  // the template's own fallback date keeps a dataset's tokens the same on every day it is read
  // (resume, fingerprints), as the built-in llama3 format does.
  ctx["date_string"] = "26 Jul 2024";
  ctx["bos_token"] = t.bos_token;
  ctx["eos_token"] = t.eos_token;
  ctx["add_generation_prompt"] = gen;
  for (const auto& [k, v] : t.kwargs.items()) ctx[k] = v;  // as transformers' **kwargs: last, so they win
  return ctx;
}

StatusOr<std::string> render_jinja(const ChatTemplate& t, const std::vector<ChatMessage>& msgs, size_t n,
                                   const std::vector<std::string>& tools, bool gen) {
  ASSIGN_OR_RETURN(OrderedJson ctx, jinja_context(t, msgs, n, tools, gen));
  return t.jinja->render(ctx);
}

// Note [jinja segments]: a template is a black box, so an assistant turn's span is found by
// rendering prefixes of the conversation, as HF's assistant masks would be without generation
// tags. For assistant message i: P = messages[:i] with add_generation_prompt, Q = messages[:i+1]
// without. P must be a prefix of Q and of the whole rendering W, and Q a prefix of W -- or Q less
// the template's footer F (what it writes after an empty conversation: Phi-3's eos_token, written
// only after the last message) a prefix of W. The trained text is Q[len(P):] (less F), less its
// trailing whitespace: the built-in formats' rule, the reply plus the end-of-turn token the
// template writes after it ("</s>", "<|end|>", "<|im_end|>"), not the newline that follows.
// Everything else is untrained. A template whose rendering of earlier turns changes with later
// ones (e.g. reasoning dropped from history) is refused, naming the record.
StatusOr<std::vector<ChatSegment>> render_jinja_chat(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                                     const std::vector<std::string>& tools, const std::string& what) {
  ASSIGN_OR_RETURN(std::string whole, render_jinja(t, msgs, msgs.size(), tools, false), what);
  auto not_incremental = [&](size_t i) {
    return InvalidArgument(Str() << what << ": the chat template (" << t.jinja->what() << ") does not render this "
                                 << "conversation turn by turn (the text around assistant message " << i
                                 << " changes with later messages), so its trained spans cannot be found; set "
                                 << "chat_template to a named template or a .jinja file that does");
  };
  std::optional<std::string> footer;  // rendered on first need
  std::vector<ChatSegment> out;
  size_t pos = 0;
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (msgs[i].role != "assistant") continue;
    ASSIGN_OR_RETURN(std::string p, render_jinja(t, msgs, i, tools, true), what << ": messages before assistant message " << i);
    ASSIGN_OR_RETURN(std::string q, render_jinja(t, msgs, i + 1, tools, false), what << ": messages up to assistant message " << i);
    if (p.size() < pos || !whole.starts_with(p) || !q.starts_with(p)) return not_incremental(i);
    size_t end = q.size();
    if (!whole.starts_with(q)) {
      if (!footer) {
        StatusOr<std::string> f = render_jinja(t, msgs, 0, tools, false);
        footer = f.ok() ? *f : "";
      }
      if (footer->empty() || !q.ends_with(*footer) || q.size() - footer->size() < p.size() ||
          !whole.starts_with(std::string_view(q).substr(0, q.size() - footer->size())))
        return not_incremental(i);
      end = q.size() - footer->size();
    }
    while (end > p.size() && (whole[end - 1] == '\n' || whole[end - 1] == ' ' || whole[end - 1] == '\t' || whole[end - 1] == '\r')) --end;
    add(&out, whole.substr(pos, p.size() - pos), false);
    add(&out, whole.substr(p.size(), end - p.size()), true);
    pos = end;
  }
  add(&out, whole.substr(pos), false);
  return out;
}

}  // namespace

Status set_chat_template_kwargs(ChatTemplate* t, OrderedJson kwargs) {
  if (!kwargs.is_object()) return InvalidArgument("chat_template_kwargs: expected a mapping");
  if (t->tool_use) {
    ChatTemplate tu = *t->tool_use;
    RETURN_IF_ERROR(set_chat_template_kwargs(&tu, kwargs), "the tool_use template");
    t->tool_use = std::make_shared<const ChatTemplate>(std::move(tu));
  }
  if (!t->jinja) {
    for (const auto& [k, v] : kwargs.items()) {
      const bool thinking = t->format == ChatFormat::kQwen3 && k == "enable_thinking" && v.is_boolean();
      if (!thinking)
        return InvalidArgument(Str() << "chat_template_kwargs: '" << k << "' is a variable of a Jinja template, and the "
                                     << t->name() << " template here is built in (qwen3 takes enable_thinking; the "
                                     << "tokenizer's own template, a .jinja file or chat_template_jinja take any)");
    }
  }
  t->kwargs = std::move(kwargs);
  return Status::OK();
}

bool mistral_drops_system(const ChatTemplate& t, const std::vector<ChatMessage>& msgs) {
  return (t.format == ChatFormat::kMistralV3 || t.format == ChatFormat::kMistralTekken) && msgs.size() > 1 &&
         msgs[0].role == "system" && msgs.back().role != "user";
}

StatusOr<std::vector<ChatSegment>> render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                               const std::string& what, const std::vector<std::string>& tools) {
  if (!tools.empty() && t.tool_use) return render_chat(*t.tool_use, msgs, what, tools);
  RETURN_IF_ERROR(check_roles(t, msgs, tools, what));
  if (std::none_of(msgs.begin(), msgs.end(), [](const ChatMessage& m) { return m.role == "assistant"; }))
    return InvalidArgument(Str() << what << ": conversation has no assistant message");
  if (t.format == ChatFormat::kJinja) return render_jinja_chat(t, msgs, tools, what);
  std::vector<ChatSegment> segs = render(t, msgs, tools);
  if (!t.jinja) return segs;
  // Note [built-in formats, checked]. A template that refuses the conversation (HF would too) or
  // that the interpreter cannot run leaves the built-in rendering.
  StatusOr<std::string> ref = render_jinja(t, msgs, msgs.size(), tools, false);
  std::string text;
  for (const ChatSegment& g : segs) text += g.text;
  if (!ref.ok() || *ref == text) return segs;
  StatusOr<std::vector<ChatSegment>> own = render_jinja_chat(t, msgs, tools, what);
  if (own.ok()) return own;
  return InvalidArgument(Str() << what << ": the tokenizer's chat template renders this conversation differently from "
                               << "the built-in " << t.name() << " format, and not turn by turn ("
                               << own.status().message() << "); set chat_template: " << t.name()
                               << " to train on the built-in rendering");
}

StatusOr<std::string> render_chat_text(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                       const std::vector<std::string>& tools) {
  if (!tools.empty() && t.tool_use) return render_chat_text(*t.tool_use, msgs, tools);
  RETURN_IF_ERROR(check_roles(t, msgs, tools, "conversation"));
  if (t.format == ChatFormat::kJinja) return render_jinja(t, msgs, msgs.size(), tools, false);
  std::string s;
  for (const ChatSegment& g : render(t, msgs, tools)) s += g.text;
  return s;
}

StatusOr<std::string> render_generation_prompt(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                               const std::vector<std::string>& tools) {
  if (!tools.empty() && t.tool_use) return render_generation_prompt(*t.tool_use, msgs, tools);
  if (t.format == ChatFormat::kJinja) {
    RETURN_IF_ERROR(check_roles(t, msgs, tools, "generation prompt"));
    return render_jinja(t, msgs, msgs.size(), tools, true);
  }
  if (t.jinja) {  // Note [built-in formats, checked]: the template's own prompt when it renders one
    RETURN_IF_ERROR(check_roles(t, msgs, tools, "generation prompt"));
    StatusOr<std::string> ref = render_jinja(t, msgs, msgs.size(), tools, true);
    if (ref.ok()) return ref;
  }
  if (t.format == ChatFormat::kQwen3) {
    // The conversation as it is (its last turn decides its own think block), then the header.
    RETURN_IF_ERROR(check_roles(t, msgs, tools, "generation prompt"));
    std::string s;
    for (const ChatSegment& g : render(t, msgs, tools)) s += g.text;
    // enable_thinking false (chat_template_kwargs): Qwen3's template opens the answer with an empty think block.
    const bool no_thinking = t.kwargs.contains("enable_thinking") && t.kwargs["enable_thinking"] == false;
    return s + "<|im_start|>assistant\n" + (no_thinking ? "<think>\n\n</think>\n\n" : t.think_prompt ? "<think>\n" : "");
  }
  if (t.format == ChatFormat::kMistralV1 || t.format == ChatFormat::kMistralV3 || t.format == ChatFormat::kMistralTekken) {
    // These templates have no assistant header: the prompt ends with the last "[/INST]".
    RETURN_IF_ERROR(check_roles(t, msgs, tools, "generation prompt"));
    if (msgs.back().role != "user")
      return InvalidArgument("generation prompt: the conversation must end with a user message");
    std::string s;
    for (const ChatSegment& g : render(t, msgs, tools)) s += g.text;
    return s;
  }
  std::vector<ChatMessage> m = msgs;
  m.push_back({"assistant", "", {}});
  ASSIGN_OR_RETURN(std::vector<ChatSegment> segs, render_chat(t, m, "generation prompt", tools));
  // Drop the empty assistant turn's end: keep everything up to and including its header.
  std::string s;
  for (const ChatSegment& g : segs) s += g.text;
  const char* tail = t.format == ChatFormat::kChatML ? "<|im_end|>\n" : t.format == ChatFormat::kLlama3 ? "<|eot_id|>" : "</s>";
  s.resize(s.size() - std::string(tail).size());
  return s;
}

}  // namespace st
