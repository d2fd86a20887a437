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
//
// Note [axolotl prompt strategies]: axolotl's named alpaca-family dataset types are such formats
// with its prompters' texts (axolotl 0.19 prompters.py AlpacaPrompter.match_prompt_style and
// prompt_strategies/alpaca_chat.py, alpaca_instruct.py, alpaca_w_system.py), built by
// axolotl_prompt_strategy:
//   alpaca_chat                       instruction/input/output, the "chat" style (USER: ... ASSISTANT:),
//                                     Alpaca's system texts; an entry's `conversation` picks another
//                                     style (instruct | chat | chatml | phi)
//   alpaca_chat.load_qa / load_camel_ai   question/answer, message_1/message_2; no input; the chat
//                                     style with the "instruction from a USER" system texts
//   alpaca_chat.load_concise          instruction/input/output with those texts
//   alpaca_chat.load_no_prompt, alpaca_instruct.load_no_prompt   no system text
//   alpaca_instruct                   our alpaca (the instruct style)
//   alpaca_w_system(.load_chat | .load_instruct)   the record's "system" field (required; empty:
//                                     none) as the system text, chat or instruct style
//   alpaca_w_system.load_open_orca(_chatml)   question/response/system_prompt in OpenOrca's layout
// The system text differs with and without an input (system_no_input_prompt), as the prompters'
// system_prompt / system_no_input_prompt do.
#pragma once

#include <optional>
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
  // Presets only (Note [axolotl prompt strategies]): the system text of a record without an input,
  // a system field every record must have, and the strategy's name for reports.
  std::optional<std::string> system_no_input_prompt = {};
  bool system_required = false;
  std::string preset = {}, preset_conversation = {};
};

// axolotl's named strategy `type` (lower case) with the entry's `conversation` ("" = the
// strategy's own style) as a format; nullopt when `type` names none of them. InvalidArgument for a
// conversation style it does not take.
StatusOr<std::optional<PromptFormat>> axolotl_prompt_strategy(const std::string& type, const std::string& conversation);

// The formats' placeholders as Note [user-defined prompt format] allows; InvalidArgument naming
// `what` (the config key) otherwise. format must be set.
Status check_prompt_format(const PromptFormat& f, const std::string& what);

// A record's (prompt, output) under f; a missing instruction or output field, or a field that is
// not a string, is InvalidArgument naming `what` (the record).
StatusOr<std::pair<std::string, std::string>> user_defined_prompt(const OrderedJson& j, const PromptFormat& f,
                                                                   const std::string& what);

}  // namespace st
