// axolotl's user-defined prompt format: a dataset entry whose `type` is a mapping rather than a
// name (axolotl's prompt_strategies/user_defined.py, built on its alpaca_w_system prompter).
//
// Note [user-defined prompt format]
//   type:
//     field_instruction: question      # the record's fields (instruction, output by default;
//     field_input: context             #   input and system: none unless named)
//     field_output: answer
//     field_system: sys
//     system_prompt: "You are..."      # the system text when field_system is not set
//     system_format: "<|system|>{system}\n"
//     format: "[INST] {instruction}\n{input} [/INST]"
//     no_input_format: "[INST] {instruction} [/INST]"   # default: format
// The prompt is system_format with {system} (only when both the system text and system_format
// are non-empty) followed by format (when the input is non-empty) or no_input_format, the
// placeholders replaced as Python's str.format does ("{{" and "}}" are braces); the completion is
// the output field. Then as type alpaca: the prompt with the tokenizer's special tokens, not
// trained unless train_on_inputs; the output trained, then EOS. A placeholder a format may not
// hold ({input} in no_input_format), a format spec ({instruction:>10}), a positional {} or a lone
// brace is refused when the config is read, naming the key.
#pragma once

#include <string>
#include <utility>

#include "core/json.h"
#include "core/status.h"

namespace st {

struct PromptFormat {
  bool on = false;  // the entry's type was such a mapping
  std::string field_instruction = "instruction", field_input = {}, field_output = "output", field_system = {};
  std::string system_prompt = {}, system_format = {}, format = {}, no_input_format = {};
  bool has_no_input_format = false;
};

// The formats' placeholders as Note [user-defined prompt format] allows; InvalidArgument naming
// `what` (the config key) otherwise. format must be set.
Status check_prompt_format(const PromptFormat& f, const std::string& what);

// A record's (prompt, output) under f; a missing instruction or output field, or a field that is
// not a string, is InvalidArgument naming `what` (the record).
StatusOr<std::pair<std::string, std::string>> user_defined_prompt(const OrderedJson& j, const PromptFormat& f,
                                                                   const std::string& what);

}  // namespace st
