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
  if (!f.field_system.empty()) RETURN_IF_ERROR(optional(f.field_system, &system));
  else system = f.system_prompt;
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

}  // namespace st
