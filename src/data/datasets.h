// Dataset files -> tokenized samples with loss labels, and the train/val split.
//
// A file is JSON Lines (one object a line, blank lines skipped) or one JSON array of objects
// (told apart by its first non-blank byte), either possibly gzip-compressed (.jsonl.gz, .json.gz),
// or Parquet as the Hugging Face Hub serves datasets (one record a row: structs are objects, lists
// arrays, e.g. `messages` as list<struct<role, content>>; io/parquet.h), CSV / TSV (io/csv.h),
// Arrow IPC as `datasets` saves it (io/arrow.h), or .txt ({"text": line} a line). A directory stands for
// every such file directly in it, in name order (a downloaded dataset's shards). Record types:
//   text               {"text": s}                         all tokens trained; BOS per the tokenizer's
//                                                          post-processor, EOS appended; a text longer
//                                                          than sequence_len is split into windows
//                                                          (Note [long texts])
//   prompt_completion  {"prompt": p, "completion": c}      loss on completion + EOS only
//   alpaca             {"instruction", "input"?, "output"} the Stanford Alpaca prompt; loss on output + EOS
//   user_defined       axolotl's `type:` mapping: its own fields and formats, then as alpaca
//                                                          (data/prompt_format.h)
//   messages           {"messages": [{"role", "content"}]} loss on assistant turns + their end token
//   sharegpt           {"conversations": [{"from", "value"}]}  human/gpt/system: as messages
//   input_output       {"segments": [{"text", "label"}]}   template-free: texts joined as they are (no
//                                                          BOS/EOS added), loss on label-true segments
//   tokenized          {"input_ids": [...], "labels"?: [...]}  labels default to input_ids
// Preference pairs for DPO (data/preference.h): a record becomes TWO samples, its chosen and its
// rejected sequence (Sample::pair), each the prompt plus one response, loss on the response only:
//   preference         {"messages" | "prompt", "chosen", "rejected"}  through the chat template
//   chatml.intel, chatml.prompt_pairs, chatml.argilla, chatml.ultra, and the same four as llama3.*:
//                      axolotl's fixed-format DPO strategies (built-in chatml / llama3 template)
// train_on_inputs trains every token. labels[0] is always kIgnoreIndex (it is never a target, and
// this keeps packed documents from predicting across their border).
// Errors (InvalidArgument/Corruption) name the file and the 1-based line (record of an array, row
// of a Parquet file).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/chat_template.h"
#include "data/prompt_format.h"
#include "data/tokenizer.h"

namespace st {

// Where a record keeps its fields when they are not the type's own names (axolotl's
// field_messages, message_property_mappings, field); "" = the type's own name.
struct RecordFields {
  std::string messages = {};             // the list of turns ("messages"; "conversations" for sharegpt)
  std::string role = {}, content = {};   // inside each turn ("role" / "content"; "from" / "value" for sharegpt)
  std::string text = {};                 // type text ("text")
  // type preference: the two responses ("chosen" / "rejected"; axolotl's field_chosen / field_rejected)
  std::string chosen = {}, rejected = {};
  bool any() const {
    return !messages.empty() || !role.empty() || !content.empty() || !text.empty() || !chosen.empty() || !rejected.empty();
  }
};

struct DatasetSource {
  std::string path;
  // text | prompt_completion | alpaca | user_defined | messages | sharegpt | input_output | tokenized,
  // or a preference type (preference, chatml.intel, ..., llama3.ultra: data/preference.h)
  std::string type = "tokenized";
  RecordFields fields = {};
  // type text: tokens a window repeats from the one before it, as context only (axolotl's
  // overlap_len; Note [long texts]); 0 <= overlap_len < sequence_len.
  int64_t overlap_len = 0;
  PromptFormat format = {};  // type user_defined (data/prompt_format.h Note [user-defined prompt format])
  std::string chat_template = {};  // this dataset's template ("" = DatasetOptions::chat_template)
};

// Note [long texts]: a type text record longer than sequence_len tokens is split into windows of
// sequence_len tokens, each its own sample, as axolotl's `completion` type and HF's run_clm do
// (the rest of a book is training data, not something to cut off); every other type is truncated.
// With overlap_len k a window starts k tokens before the previous one ended, and those k tokens
// are context only (ignored labels): each token of the text is trained once. (axolotl trains the
// overlap in both windows, and also emits trailing windows inside the one before; we stop at the
// window that reaches the text's end.) A window's first label is ignored as every sample's is,
// so a split text loses one target per border. The windows of one record stay together in
// split_train_val, so an eval sample never shares a document with a training sample.

struct Sample {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;  // same length; kIgnoreIndex = not trained
  int32_t window = 0;           // a split text's window index (Note [long texts]); 0: a record's first sample
  // Preference pairs (data/preference.h): 0: not a pair; 1: a pair's chosen sequence; 2: its
  // rejected sequence, always right after its chosen (loading, the split and the loader keep them so).
  int8_t pair = 0;
  // KTO's unpaired examples (rl: kto; data/preference.h Note [unpaired records]): 1 desirable,
  // -1 undesirable; 0: not such an example.
  int8_t kto = 0;
};

struct DatasetOptions {
  int64_t sequence_len = 2048;  // longer samples are truncated, long texts split (and counted)
  int64_t max_prompt_len = 0;   // preference pairs: a longer prompt keeps its last tokens (data/preference.h); 0 = no limit
  // rl: kto: the preference types read unpaired records -- a prompt, one completion and its label
  // (data/preference.h Note [unpaired records]) -- one sample each.
  bool unpaired = false;
  bool train_on_inputs = false;
  std::string chat_template;    // "" = the tokenizer's own; a built-in name or a .jinja file
  std::string chat_template_kwargs;  // a JSON object's text: the template's extra variables ("" = none)
  int64_t vocab_size = 0;       // ids must be < this (0 = tokenizer.vocab_size()); the model's may be larger
  int threads = 0;              // tokenizing threads (0 = every hardware thread; the result is the same)
  // Long files: called with (path, records read so far, done) every ~2 s while a file is read, and
  // once at its end when it took longer than that. Unset: quiet.
  std::function<void(const std::string& path, int64_t records, bool done)> progress;
};

struct DatasetStats {
  int64_t samples = 0;          // kept
  int64_t truncated = 0;        // longer than sequence_len, cut (a pair once: data/preference.h Note [pair truncation])
  int64_t split = 0;            // type text records longer than sequence_len, split (Note [long texts])
  int64_t windows = 0;          // the samples those became (before dropping any without targets)
  int64_t dropped_no_targets = 0;  // nothing left to train on (e.g. truncated before the answer); a pair counts once
  int64_t tokens = 0;           // kept tokens
  int64_t target_tokens = 0;    // kept trained labels
  int64_t system_dropped = 0;   // conversations whose system message the template leaves out (Mistral v3/tekken)
  int64_t pairs = 0;            // kept preference pairs (their two sequences count in samples / tokens)
  int64_t desirable = 0, undesirable = 0;  // kept unpaired (KTO) examples by label
};

// Reads and tokenizes one dataset file, appending to `out`; stats are accumulated. Records are
// tokenized on opt.threads threads; the result does not depend on how many.
Status load_dataset(const DatasetSource& src, const Tokenizer& tok, const DatasetOptions& opt,
                    std::vector<Sample>* out, DatasetStats* stats);
// Tokenizes one parsed JSON record (exposed for tests and for `streamtune` previews). A preference
// type is refused here (two samples a record: data/preference.h tokenize_preference_record).
StatusOr<Sample> tokenize_record(const std::string& type, const std::string& json_line, const Tokenizer& tok,
                                 const ChatTemplate* chat, const DatasetOptions& opt, const std::string& what);

struct TrainValSplit {
  std::vector<Sample> train, val;
};
// val_set_size < 1: that fraction of samples (at least one when > 0); >= 1: that many samples.
// The held-out samples are chosen by a seeded permutation; both parts keep file order. The
// windows of a split text (window > 0 follows its record's window 0) count as one sample and go
// to the same side, and so does a preference pair (its rejected, pair 2, follows its chosen).
StatusOr<TrainValSplit> split_train_val(std::vector<Sample> all, double val_set_size, uint64_t seed);

}  // namespace st
