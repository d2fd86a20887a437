// Preference datasets (DPO): records of a prompt and two responses, chosen and rejected, each
// tokenized as the prompt followed by that response, with the loss mask on the response only.
// A record becomes two consecutive Samples, chosen (Sample::pair 1) then rejected (pair 2);
// load_dataset keeps or drops them together (Note [pair truncation]), split_train_val keeps them
// on one side and DataLoader (LoaderOptions::pairs) puts them in adjacent rows.
//
// Types (DatasetSource::type):
//   preference  TRL's standard preference format and axolotl's chat_template(.default) under rl: dpo:
//               the prompt is field "messages" (RecordFields::messages renames it), else "prompt":
//               a list of {role, content} turns (RecordFields::role / content rename those), or a
//               string (one user turn). "chosen" / "rejected" (RecordFields::chosen / rejected) are
//               each a string (the assistant's reply), a message {role: assistant, content}, or a
//               list of assistant messages appended after the prompt; a list that starts with the
//               prompt's turns (UltraFeedback-binarized stores whole conversations) drops them.
//               With no prompt field, chosen and rejected as whole conversations share their
//               prompt (TRL's implicit prompt: the turns both start with; Note [implicit prompt]).
//               Rendered by the chat template exactly as type messages renders a conversation.
//   chatml.intel         {system?, question, chosen, rejected}        axolotl's dpo/chatml.py and
//   chatml.prompt_pairs  {system?, prompt, chosen, rejected}          dpo/llama3.py: a system turn
//   chatml.argilla       {system?, instruction, chosen_response,      when "system" is non-empty,
//                         rejected_response}                          the user turn, the reply;
//   chatml.ultra         {system?, prompt, chosen: [user, assistant], always the built-in chatml
//                         rejected: [...]}: the reply is chosen[1]    (llama3) template, whatever
//   chatml.icr           {system?, input, chosen, rejected}
//   chatml.argilla_chat  {chosen: [user, assistant], rejected: [user, assistant]}: the user turn
//                         is chosen[0], the replies chosen[1] / rejected[1]; no system turn
//   llama3.intel, llama3.prompt_pairs, llama3.argilla, llama3.ultra,  the tokenizer's own.
//   llama3.icr, llama3.argilla_chat
//               (argilla, as axolotl: the prompt is the first of prompt / input / question /
//               instruction present, the replies chosen / rejected when present, else
//               chosen_response / rejected_response.)
// Trained: the trained segments of the response's assistant turns as the template marks them
// (content + the turn's end token: "<|im_end|>", "<|eot_id|>"); never the prompt, earlier
// assistant turns of the prompt included; train_on_inputs does not apply.
// Errors (InvalidArgument) name the file and the 1-based record as the other types do.
//
// Note [unpaired records]: under rl: kto (DatasetOptions::unpaired) the same types read KTO's
// unpaired examples, one sample each (Sample::kto): a prompt, ONE response and its boolean
// "label" (true: desirable). Type preference is TRL's unpaired preference format: the prompt as
// above (messages or prompt), the response in "completion" (a string, a message, or a list of
// assistant messages; a list repeating the prompt's turns drops them). The fixed-format types are
// axolotl's kto/chatml.py and kto/llama3.py: the prompt as the pair types read it, the reply in
// "completion" (a string); argilla_chat's "completion" is the whole conversation, its last
// message the reply and the turns before it the prompt (axolotl's llama3 form; its chatml form
// reads only [user, assistant], the same for such records). chatml.icr / llama3.icr have no KTO
// form and are refused. Truncation as Note [pair truncation], for the one sequence.
#pragma once

#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "data/chat_template.h"
#include "data/datasets.h"
#include "data/tokenizer.h"

namespace st {

// Note [pair truncation]: with DatasetOptions::max_prompt_len p > 0 (axolotl's max_prompt_len,
// TRL's max_prompt_length), a prompt longer than p tokens first keeps its last p (TRL's
// truncation_mode keep_end; the prompt is the sequence's tokens before its first trained label).
// Then each sequence of a pair longer than sequence_len is cut at its end
// (counted once a pair in DatasetStats::truncated); if either then has no trained label the whole
// pair is dropped (dropped_no_targets += 1), so a pair is never left half. A pair is never split
// into windows (Note [long texts]).

// Whether `type` is one of the preference types above; and their names, for messages.
bool is_preference_type(const std::string& type);
std::vector<std::string> preference_types();
// The built-in template a fixed-format type renders with ("chatml" for chatml.*, "llama3" for
// llama3.*); "" for type preference (the dataset's or the tokenizer's template) and other types.
std::string preference_fixed_template(const std::string& type);

struct PreferencePair {
  Sample chosen;    // pair 1
  Sample rejected;  // pair 2
};

// Tokenizes one parsed record of a preference type with `chat` (for a fixed-format type, the
// template preference_fixed_template names). `f` renames fields (type preference only). labels[0]
// is left to the caller (load_dataset sets it kIgnoreIndex as for every sample). system_dropped,
// if given, counts a pair whose system message the template leaves out (once a pair).
StatusOr<PreferencePair> tokenize_preference(const std::string& type, const OrderedJson& j, const RecordFields& f,
                                             const Tokenizer& tok, const ChatTemplate& chat, const std::string& what,
                                             int64_t* system_dropped = nullptr);

// Tokenizes one parsed unpaired record (Note [unpaired records]) as tokenize_preference does a
// pair: labels on the response only, Sample::kto from its label.
StatusOr<Sample> tokenize_unpaired(const std::string& type, const OrderedJson& j, const RecordFields& f,
                                   const Tokenizer& tok, const ChatTemplate& chat, const std::string& what,
                                   int64_t* system_dropped = nullptr);

// One JSON record's text as load_dataset tokenizes it, labels[0] ignored and ids checked against
// opt.vocab_size (exposed for tests and previews). Type preference renders with `chat`, or when it
// is null with opt.chat_template (and chat_template_kwargs) resolved for `tok`; a fixed-format
// type always with its built-in template.
StatusOr<PreferencePair> tokenize_preference_record(const std::string& type, const std::string& json_line,
                                                    const Tokenizer& tok, const ChatTemplate* chat,
                                                    const DatasetOptions& opt, const std::string& what,
                                                    const RecordFields& f = {});

namespace detail {
// datasets.cc's, shared with preference.cc.
// A rendered conversation tokenized as one string, labels where segments are trained (Note [chat
// tokenization]); `all`: every token trained.
Sample tokenize_chat(const std::vector<ChatSegment>& segs, const Tokenizer& tok, bool all);
// j[key] as a string; InvalidArgument naming `what` when it is missing, null or not a string.
StatusOr<std::string> string_field(const OrderedJson& j, const char* key, const std::string& what);
// A {"role", "content", "tool_calls"?} message as type messages reads it.
StatusOr<ChatMessage> chat_message(const OrderedJson& m, const std::string& what);
// The template a dataset of `type` renders with: a fixed-format preference type's built-in, else
// for messages / sharegpt / preference `name` ("" = the tokenizer's own) resolved for `tok` with
// opt.chat_template_kwargs; an empty ChatTemplate for the types that render none.
StatusOr<ChatTemplate> dataset_chat_template(const std::string& type, const std::string& name, const Tokenizer& tok,
                                             const DatasetOptions& opt);
// The checks every tokenized sample gets: labels[0] ignored, ids below opt.vocab_size.
Status finish_sample(Sample* s, const Tokenizer& tok, const DatasetOptions& opt, bool check_vocab,
                     const std::string& what);
}  // namespace detail

}  // namespace st
