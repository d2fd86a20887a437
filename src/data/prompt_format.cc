#include "data/prompt_format.h"

#include <map>

namespace st {
namespace {

// Python's str.format with named fields only: "{name}" from `values` (a name not there is an
// error), "{{" / "}}" as braces; nothing else inside braces. Returns the error text, or "" and
// the result in *out.
std::string python_format(const std::string& fmt, const std::map<std::string, std::string>& values, std::string* out) {
  out->clear();
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        *out += '}';
        ++i;
        continue;
      }
      return "a single '}' (write '}}' for a brace)";
    }
    if (c != '{') {
      *out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      *out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i + 1);
    if (close == std::string::npos) return "a '{' without its '}' (write '{{' for a brace)";
    const std::string name = fmt.substr(i + 1, close - i - 1);
    const auto it = values.find(name);
    if (it == values.end()) {
      std::string known;
      for (const auto& [k, v] : values) known += (known.empty() ? "{" : ", {") + k + "}";
      return "'{" + name + "}' is not a placeholder it may hold (" + known + ")";
    }
    *out += it->second;
    i = close;
  }
  return {};
}

StatusOr<std::string> text_field(const OrderedJson& j, const std::string& key, const std::string& what) {
  if (!j.is_object() || !j.contains(key)) return InvalidArgument(Str() << what << ": missing field '" << key << "'");
  if (!j[key].is_string()) return InvalidArgument(Str() << what << ": field '" << key << "' is not a string");
  return j[key].get<std::string>();
}

}  // namespace

Status check_prompt_format(const PromptFormat& f, const std::string& what) {
  if (f.format.empty()) return InvalidArgument(Str() << what << ".format: required (the prompt, with {instruction})");
  if (f.field_instruction.empty()) return InvalidArgument(Str() << what << ".field_instruction: empty");
  if (f.field_output.empty()) return InvalidArgument(Str() << what << ".field_output: empty");
  std::string scratch;
  const struct {
    const char* key;
    const std::string& fmt;
    std::map<std::string, std::string> names;
  } checks[] = {{"format", f.format, {{"instruction", ""}, {"input", ""}}},
                {"no_input_format", f.no_input_format, {{"instruction", ""}}},
                {"system_format", f.system_format, {{"system", ""}}}};
  for (const auto& c : checks) {
    const std::string err = python_format(c.fmt, c.names, &scratch);
    if (!err.empty()) return InvalidArgument(Str() << what << "." << c.key << ": " << err);
  }
  return Status::OK();
}

StatusOr<std::pair<std::string, std::string>> user_defined_prompt(const OrderedJson& j, const PromptFormat& f,
                                                                   const std::string& what) {
  ASSIGN_OR_RETURN(std::string instruction, text_field(j, f.field_instruction, what));
  ASSIGN_OR_RETURN(std::string output, text_field(j, f.field_output, what));
  auto optional = [&](const std::string& key, std::string* v) -> Status {
    if (key.empty() || !j.contains(key) || j[key].is_null()) return Status::OK();
    ASSIGN_OR_RETURN(*v, text_field(j, key, what));
    return Status::OK();
  };
  std::string input, system;
  RETURN_IF_ERROR(optional(f.field_input, &input));
  if (f.system_required && (!j.is_object() || !j.contains(f.field_system)))
    return InvalidArgument(Str() << what << ": missing field '" << f.field_system << "' (type " << f.preset << ")");
  if (!f.field_system.empty()) RETURN_IF_ERROR(optional(f.field_system, &system));
  else system = input.empty() && f.system_no_input_prompt ? *f.system_no_input_prompt : f.system_prompt;
  std::string prompt, part;
  if (!system.empty() && !f.system_format.empty()) {
    (void)python_format(f.system_format, {{"system", system}}, &part);  // checked by check_prompt_format
    prompt = part;
  }
  if (!input.empty()) {
    (void)python_format(f.format, {{"instruction", instruction}, {"input", input}}, &part);
  } else {
    (void)python_format(f.has_no_input_format ? f.no_input_format : f.format, {{"instruction", instruction}, {"input", ""}},
                        &part);
  }
  prompt += part;
  return std::make_pair(std::move(prompt), std::move(output));
}

namespace {

// AlpacaPrompter.match_prompt_style's layouts: (format, no_input_format, system_format).
struct Style {
  const char* name;
  const char* format;
  const char* no_input;
  const char* system;
};
constexpr Style kStyles[] = {
    {"instruct", "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n",
     "### Instruction:\n{instruction}\n\n### Response:\n", "{system}\n\n"},
    {"chat", "USER: {instruction}\n{input}\nASSISTANT:", "USER: {instruction}\nASSISTANT:", "SYSTEM: {system}\n"},
    {"chatml", "<|im_start|>user\n{instruction}\n{input}<|im_end|>\n<|im_start|>assistant\n",
     "<|im_start|>user\n{instruction}<|im_end|>\n<|im_start|>assistant\n", "<|im_start|>system\n{system}<|im_end|>\n"},
    {"phi", "<|user|>\n{instruction}<|end|>{input}<|assistant|>", "<|user|>\n{instruction}<|end|>\n<|assistant|>\n",
     "<|system|>\n{system}<|end|>\n"},
};
// OpenOrcaSystemDataPrompter's instruct layout.
constexpr Style kOpenOrca = {"instruct", "### Human:\n{instruction}\n### Additional Context:\n{input}\n### Assistant:\n",
                             "### Human:\n{instruction}\n### Assistant:\n", "### System:\n{system}\n"};

constexpr const char* kAlpacaSystem =
    "Below is an instruction that describes a task, paired with an input that provides further context. Write a "
    "response that appropriately completes the request.";
constexpr const char* kAlpacaSystemNoInput =
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.";
constexpr const char* kUserSystem =
    "Below is an instruction from a USER that describes a task, paired with an input that provides further context. "
    "The ASSISTANT writes a response that concisely and appropriately completes the request.\n\n";
constexpr const char* kUserSystemNoInput =
    "Below is an instruction from a USER that describes a task. The ASSISTANT writes a response that appropriately "
    "and concisely completes the request.\n\n";

PromptFormat styled(const Style& st, const std::string& preset) {
  PromptFormat f;
  f.on = true;
  f.preset = preset;
  f.format = st.format;
  f.no_input_format = st.no_input;
  f.has_no_input_format = true;
  f.system_format = st.system;
  f.field_input = "input";
  return f;
}

void set_system(PromptFormat* f, const char* with_input, const char* without) {
  f->system_prompt = with_input;
  f->system_no_input_prompt = std::string(without);
}

}  // namespace

StatusOr<std::optional<PromptFormat>> axolotl_prompt_strategy(const std::string& type, const std::string& conversation) {
  const Style* style = nullptr;
  if (!conversation.empty()) {
    for (const Style& st : kStyles)
      if (conversation == st.name) style = &st;
    if (type != "alpaca_chat" || !style)
      return InvalidArgument(Str() << "conversation '" << conversation << "' with type " << type
                                   << ": a prompt style (instruct, chat, chatml, phi) applies to type alpaca_chat");
  }
  const Style& instruct = kStyles[0];
  const Style& chat = kStyles[1];
  PromptFormat f;
  if (type == "alpaca_chat") {
    f = styled(style ? *style : chat, type);
    set_system(&f, kAlpacaSystem, kAlpacaSystemNoInput);
    f.preset_conversation = conversation;
  } else if (type == "alpaca_chat.load_qa" || type == "alpaca_chat.load_camel_ai") {
    f = styled(chat, type);
    set_system(&f, kUserSystem, kUserSystemNoInput);
    const bool qa = type == "alpaca_chat.load_qa";
    f.field_instruction = qa ? "question" : "message_1";
    f.field_output = qa ? "answer" : "message_2";
    f.field_input.clear();
  } else if (type == "alpaca_chat.load_concise") {
    f = styled(chat, type);
    set_system(&f, kUserSystem, kUserSystemNoInput);
  } else if (type == "alpaca_chat.load_no_prompt" || type == "alpaca_instruct.load_no_prompt") {
    f = styled(type.starts_with("alpaca_chat") ? chat : instruct, type);
  } else if (type == "alpaca_instruct" || type == "alpaca_instruct.load") {
    f = styled(instruct, type);
    set_system(&f, kAlpacaSystem, kAlpacaSystemNoInput);
  } else if (type == "alpaca_w_system" || type == "alpaca_w_system.load" || type == "alpaca_w_system.load_chat" ||
             type == "alpaca_w_system.load_instruct") {
    f = styled(type.ends_with("load_instruct") ? instruct : chat, type);
    f.field_system = "system";
    f.system_required = true;
  } else if (type == "alpaca_w_system.load_open_orca" || type == "alpaca_w_system.load_open_orca_chatml") {
    f = styled(type.ends_with("chatml") ? kStyles[2] : kOpenOrca, type);
    f.field_instruction = "question";
    f.field_output = "response";
    f.field_input.clear();
    f.field_system = "system_prompt";
    f.system_required = true;
  } else {
    return std::optional<PromptFormat>();
  }
  return std::optional<PromptFormat>(std::move(f));
}

}  // namespace st
