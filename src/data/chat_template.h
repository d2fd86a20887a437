// Chat templates for SFT: ChatML (Qwen2/2.5, SmolLM2), Qwen3 (ChatML with <think> blocks), Llama-3(.1)
// and Mistral ([INST]: v1 for
// Mistral-7B-Instruct-v0.1/v0.2 and Mixtral-8x7B, v3 for v0.3 / Mixtral-8x22B / Codestral, tekken
// for Nemo / Ministral; each as its HF chat_template renders it).
// A conversation is rendered into segments, each marked trained or not; the dataset code tokenizes
// the rendered text as one string and builds the loss mask from the segments' borders
// (datasets.cc Note [chat tokenization]).
// Trained: assistant content plus its end token (<|im_end|>, <|eot_id|>, </s>); for Qwen3 the
// content includes the <think> block the model writes.
// Any other template (Llama-2-chat, Zephyr, Gemma, Phi-3, DeepSeek, a user's .jinja file) is
// rendered by the Jinja interpreter (data/jinja.h) exactly as transformers renders it; see
// chat_template.cc Note [jinja segments] for how its trained spans are found.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/jinja.h"
#include "data/tokenizer.h"

namespace st {

enum class ChatFormat { kChatML, kQwen3, kLlama3, kMistral, kMistralV1, kMistralV3, kMistralTekken, kJinja };

struct ChatTemplate {
  ChatFormat format = ChatFormat::kChatML;
  // ChatML: system block inserted when the first message is not a system message ("" = none), and
  // the system text of a tools block without a system message (the Qwen2.5 templates differ).
  std::string default_system;
  std::string tools_default_system = "You are a helpful assistant.";
  // The name it was asked for when that is not the format's own (axolotl's qwen_25 is ChatML).
  std::string label;
  // Llama-3.1+: the system block always starts with the knowledge-cutoff / date lines.
  bool llama31_dates = false;
  // Qwen3 thinking-only templates (Qwen3-*-Thinking-2507) open the generation with "<think>\n".
  bool think_prompt = false;
  // Renders tool schemas, assistant tool calls and "tool" messages as the Qwen2.5 / Qwen3 templates
  // do (their <tool_call> / <tool_response> blocks); other formats refuse them by name.
  bool tools = false;
  // kJinja: the parsed template and the tokenizer's bos / eos token strings it is rendered with.
  std::shared_ptr<const JinjaTemplate> jinja;
  std::string bos_token, eos_token;
  // chat_template_kwargs: variables the Jinja template is rendered with besides messages, tools and
  // the special tokens (an object; set_chat_template_kwargs).
  OrderedJson kwargs = OrderedJson::object();
  // The Jinja text this template was made from (a tokenizer's, a .jinja file's, chat_template_jinja);
  // "" for a built-in named in a config.
  std::string source;
  // A tokenizer's "tool_use" template: transformers' apply_chat_template renders a conversation
  // given tools with it (its rule for a dict of named templates); the renderers below do the same.
  std::shared_ptr<const ChatTemplate> tool_use;
  std::string name() const;  // "chatml" | "qwen3" | "llama3" | "mistral" | "mistral_v3" | "mistral_tekken" | "jinja"
};

struct ToolCall {
  std::string name;
  std::string arguments_json;  // Python's json.dumps of the arguments: what the templates' `tojson` writes
  std::string arguments_text;  // the string itself when the arguments are a JSON string, else arguments_json
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c, std::vector<ToolCall> calls = {})
      : role(std::move(r)), content(std::move(c)), tool_calls(std::move(calls)) {}
  std::string role;  // system | user | assistant | tool (templates with `tools`)
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant only
};

struct ChatSegment {
  std::string text;
  bool trained = false;
};

// "chatml" | "qwen3" | "llama3" | "mistral" | "mistral_v3" | "mistral_tekken", axolotl's names
// (Note [axolotl template names]: qwen_25, mistral_v1, mistral_v2v3, mistral_v3_tekken, alpaca),
// a path ending in ".jinja" (a template file, rendered by the interpreter; NotFound / IOError /
// InvalidArgument naming the file), or "jinja:" + a template's text (axolotl's
// chat_template_jinja); InvalidArgument otherwise.
StatusOr<ChatTemplate> chat_template_by_name(const std::string& name);
// Recognises a tokenizer_config.json chat_template (Jinja) by its markers as one of the built-in
// formats; any other template is parsed for the interpreter (kJinja; InvalidArgument with
// line:column when it does not parse). `what` names the source in errors.
StatusOr<ChatTemplate> chat_template_from_jinja(const std::string& jinja, const std::string& what = "chat_template");
// name if non-empty, else the tokenizer's own template. Checks that the tokenizer has the
// format's special tokens (InvalidArgument naming the missing token).
StatusOr<ChatTemplate> resolve_chat_template(const std::string& name, const Tokenizer& tok);

// chat_template_kwargs for `t`: a Jinja template (or a built-in format checked against its
// template, Note [built-in formats, checked]) is rendered with them; a built-in format without one
// takes only what it renders itself (qwen3: enable_thinking, which changes its generation prompt),
// else InvalidArgument naming the key.
Status set_chat_template_kwargs(ChatTemplate* t, OrderedJson kwargs);

// The Jinja text that renders as `t` does under HF's apply_chat_template, for the tokenizer files
// saved with an adapter: `source` when there is one, else the built-in's own text
// (data/chat_template_jinja.cc Note [built-in formats as Jinja]); Unimplemented only for the
// variants a tokenizer's template brings (Llama-3.1 dates, Qwen3-Thinking), which have `source`.
StatusOr<std::string> chat_template_jinja_text(const ChatTemplate& t);

// Renders a conversation. InvalidArgument for an empty conversation, an unknown role, or an
// assistant-free conversation (nothing to train on); `what` names the source ("f.jsonl line 3").
// tools: the tool schemas as JSON text (python_json_dumps), rendered in the system block.
StatusOr<std::vector<ChatSegment>> render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                               const std::string& what, const std::vector<std::string>& tools = {});
// The whole conversation as text, as apply_chat_template(tokenize=False) gives it: a Jinja template
// renders it in one pass (no trained spans are looked for); a built-in joins its segments.
StatusOr<std::string> render_chat_text(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                       const std::vector<std::string>& tools = {});
// Whether the template leaves the conversation's system message out (Mistral v3 / tekken: only a
// conversation ending with a user message carries it, as in HF's templates).
bool mistral_drops_system(const ChatTemplate& t, const std::vector<ChatMessage>& msgs);
// Text for generation: the conversation followed by the assistant header (add_generation_prompt).
StatusOr<std::string> render_generation_prompt(const ChatTemplate& t, const std::vector<ChatMessage>& msgs,
                                               const std::vector<std::string>& tools = {});

}  // namespace st
