// The Jinja text of a chat template, for the tokenizer files saved beside an adapter
// (chat_template.h chat_template_jinja_text). Note [built-in formats as Jinja]: a template read
// from text (a tokenizer's, a .jinja file, chat_template_jinja) is that text; a built-in named in a
// train config (chatml, qwen_25, qwen3, llama3, mistral, mistral_v1, mistral_v3, mistral_tekken) has no
// text of its own, so HF's apply_chat_template could not render what was trained. The texts below
// are written here, one per built-in renderer of chat_template.cc, and render what that renderer
// renders: chat_template_jinja_test runs each through the interpreter (itself checked against
// Python's jinja2) beside the built-in over conversations with and without system messages, tool
// calls and tool results, generation prompts included. qwen3 included (its think blocks kept after
// the last real user turn); the variants only a tokenizer's template has (Llama-3.1's date lines,
// Qwen3-Thinking's generation prompt) are that template's own text.
#include <string>

#include "data/chat_template.h"

namespace st {
namespace {

// A single-quoted Jinja string literal.
std::string literal(const std::string& s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o + "'";
}

// The Qwen templates' tool schemas block after its system text, and a "tool" message as a
// <tool_response> turn (a run of them one user turn), shared by chatml (Qwen2.5) and qwen3.
constexpr const char* kToolsBlock =
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}";
constexpr const char* kToolResponse =
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}\n";

// ChatML; with `tools` the Qwen2.5 tool blocks (the system text then leads the tools block, or
// `tools_system` without a system message); `system` (may be empty) opens a conversation without one.
std::string chatml(const std::string& system, bool tools, const std::string& tools_system) {
  std::string j;
  if (tools) {
    j += "{%- if tools %}{{- '<|im_start|>system\\n' }}"
         "{%- if messages[0].role == 'system' %}{{- messages[0].content }}{%- else %}{{- " + literal(tools_system) +
         " }}{%- endif %}{{- '\\n\\n' }}" + std::string(kToolsBlock) + "\n";
    j += system.empty() ? "{%- endif %}\n" : "{%- elif messages[0].role != 'system' %}";
  } else if (!system.empty()) {
    j += "{%- if messages[0].role != 'system' %}";
  }
  if (!system.empty()) j += "{{- " + literal("<|im_start|>system\n" + system + "<|im_end|>\n") + " }}{%- endif %}\n";
  j += "{%- for message in messages %}\n";
  if (tools) {
    j += "{%- if tools and loop.first and message.role == 'system' %}\n" + std::string(kToolResponse) +
         "{%- elif message.role == 'assistant' and message.tool_calls %}{{- '<|im_start|>assistant' }}"
         "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
         "{%- for call in message.tool_calls %}"
         "{%- set f = call.function if call.function is defined else call %}"
         "{{- '\\n<tool_call>\\n{\"name\": \"' + f.name + '\", \"arguments\": ' + f.arguments | tojson + "
         "'}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}\n"
         "{%- else %}";
  }
  j += "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}";
  if (tools) j += "{%- endif %}";
  j += "\n{%- endfor %}\n{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}\n";
  return j;
}

// Llama-3 (no knowledge-cutoff lines): every message a header block, its content trimmed.
constexpr const char* kLlama3 =
    "{{- '<|begin_of_text|>' }}\n"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + message.content | trim + '<|eot_id|>' }}"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}\n";

// Mistral (v0.1 layout): a system message is put before the next user message.
constexpr const char* kMistral =
    "{{- '<s>' }}{%- set ns = namespace(system='') %}\n"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}{%- set ns.system = message.content %}"
    "{%- elif message.role == 'user' %}"
    "{{- '[INST] ' + (ns.system + '\\n\\n' if ns.system else '') + message.content + ' [/INST]' }}"
    "{%- set ns.system = '' %}"
    "{%- else %}{{- message.content + '</s>' }}{%- endif %}"
    "{%- endfor %}\n";

// axolotl's mistral_v1: " [INST] q [/INST] a</s>", the system text in the first user turn, turns
// in user / assistant alternation.
constexpr const char* kMistralV1 =
    "{{- '<s>' }}{%- set has_system = messages[0].role == 'system' %}\n"
    "{%- for message in (messages[1:] if has_system else messages) %}"
    "{%- if message.role not in ['user', 'assistant'] or (message.role == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('the mistral_v1 template takes user and assistant turns in alternation, the user first') }}"
    "{%- endif %}"
    "{%- if message.role == 'user' %}"
    "{{- ' [INST] ' + (messages[0].content + '\\n\\n' if loop.first and has_system else '') + message.content + ' [/INST]' }}"
    "{%- else %}{{- ' ' + message.content + '</s>' }}{%- endif %}"
    "{%- endfor %}\n";

// Mistral v3 / tekken: the system text joins the user message that ends the conversation only.
std::string mistral_v3(bool tekken) {
  return std::string("{{- '<s>' }}{%- set has_system = messages[0].role == 'system' %}\n"
                     "{%- for message in messages %}"
                     "{%- if loop.first and has_system %}"
                     "{%- elif message.role == 'user' %}{{- ") +
         (tekken ? "'[INST]'" : "'[INST] '") +
         " + (messages[0].content + '\\n\\n' + message.content if has_system and loop.last else message.content)"
         " + '[/INST]' }}"
         "{%- elif message.role == 'assistant' %}{{- " +
         (tekken ? "message.content" : "' ' + message.content | trim") +
         " + '</s>' }}{%- endif %}"
         "{%- endfor %}\n";
}

// Qwen3: ChatML whose assistant turns after the last real user message (one that is not a
// <tool_response> block) keep their reasoning as "<think>\nR\n</think>\n\n" (the last turn always);
// earlier turns drop it; a message's reasoning_content field, when there is one, is its reasoning (as
// in Qwen3's own template, which is also how chat_template_from_jinja knows the text for Qwen3's).
// Tool schemas, calls (string arguments as they are) and results as Qwen2.5's.
std::string qwen3() {
  return "{%- if tools %}{{- '<|im_start|>system\\n' }}"
         "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}" +
         std::string(kToolsBlock) + "{%- endif %}\n"
         "{%- set q = namespace(last=messages | length - 1, found=false) %}"
         "{%- for message in messages | reverse %}"
         "{%- if not q.found and message.role == 'user' and not (message.content.startswith('<tool_response>') and "
         "message.content.endswith('</tool_response>')) %}"
         "{%- set q.found = true %}{%- set q.last = messages | length - 1 - loop.index0 %}{%- endif %}"
         "{%- endfor %}\n"
         "{%- for message in messages %}\n"
         "{%- if tools and loop.first and message.role == 'system' %}\n" + std::string(kToolResponse) +
         "{%- elif message.role != 'assistant' %}"
         "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
         "{%- else %}"
         "{%- set content = message.content if message.content is string else '' %}{%- set reasoning = '' %}"
         "{%- if message.reasoning_content is string %}{%- set reasoning = message.reasoning_content %}"
         "{%- elif '</think>' in content %}"
         "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
         "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
         "{{- '<|im_start|>assistant\\n' }}"
         "{%- if loop.index0 > q.last and (loop.last or reasoning) %}"
         "{{- '<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}"
         "{%- else %}{{- content }}{%- endif %}"
         "{%- for call in message.tool_calls or [] %}"
         "{%- set f = call.function if call.function is defined else call %}"
         "{%- if not loop.first or content %}{{- '\\n' }}{%- endif %}"
         "{{- '<tool_call>\\n{\"name\": \"' + f.name + '\", \"arguments\": ' }}"
         "{%- if f.arguments is string %}{{- f.arguments }}{%- else %}{{- f.arguments | tojson }}{%- endif %}"
         "{{- '}\\n</tool_call>' }}{%- endfor %}"
         "{{- '<|im_end|>\\n' }}\n"
         "{%- endif %}\n"
         "{%- endfor %}\n"
         "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
         "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
         "{%- endif %}\n";
}

}  // namespace

StatusOr<std::string> chat_template_jinja_text(const ChatTemplate& t) {
  if (!t.source.empty()) return t.source;
  switch (t.format) {
    case ChatFormat::kChatML: return chatml(t.default_system, t.tools, t.tools_default_system);
    case ChatFormat::kLlama3:
      if (t.llama31_dates) break;  // only a tokenizer's template (with its text) has the date lines
      return std::string(kLlama3);
    case ChatFormat::kMistral: return std::string(kMistral);
    case ChatFormat::kMistralV1: return std::string(kMistralV1);
    case ChatFormat::kMistralV3: return mistral_v3(false);
    case ChatFormat::kMistralTekken: return mistral_v3(true);
    case ChatFormat::kQwen3:
      if (t.think_prompt) break;  // only a tokenizer's template (with its text) opens with <think>
      return qwen3();
    case ChatFormat::kJinja: break;
  }
  return Unimplemented(Str() << "the built-in " << t.name() << " chat template has no Jinja text here");
}

}  // namespace st
