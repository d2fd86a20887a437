// The training data of a run, assembled from TrainConfig: every `datasets` entry tokenised (or
// read pre-tokenised), the optional val_set_size split, the `eval_datasets`, and the pad id.
// Shared by the single-device run (cli/run_train.cc) and the data-parallel one (dist/).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "data/data_loader.h"
#include "data/datasets.h"
#include "io/hf_config.h"
#include "train/train_config.h"

namespace st {

struct TrainData {
  std::shared_ptr<std::vector<Sample>> train, eval;  // eval: null when there is none
  DatasetStats stats;                                 // of the training datasets (before the split)
  int32_t pad_id = 0;
  std::optional<Tokenizer> tokenizer;                 // the base's, when a dataset needed it
};

// True when some dataset (train or eval) is not pre-tokenised, so the base model's tokenizer
// must be loaded.
bool needs_tokenizer(const TrainConfig& cfg);

// special_tokens (TrainConfig::SpecialTokens) onto a loaded tokenizer: eos and pad set to the named
// tokens, bos only as the tokenizer's own, unk accepted (no effect); a token the tokenizer lacks
// is Unimplemented (adding one resizes the embeddings), naming the key.
Status apply_special_tokens(const TrainConfig::SpecialTokens& st, Tokenizer* tok);

// InvalidArgument when there is no dataset or no sample with a trained token; load errors name
// the dataset path.
StatusOr<TrainData> load_train_data(const TrainConfig& cfg, const ModelConfig& mc);

// The tokenizer saved beside the adapter in output_dir, as axolotl saves it there: the base's
// tokenizer files with, when the config names a chat_template, that template as the tokenizer's
// own (data/model_tokenizer.h save_model_tokenizer), so that transformers' apply_chat_template,
// `generate --adapter` and `merge` render conversations as they were trained. Returns the banner
// line that says what was saved, or why nothing was (a base without tokenizer files, a built-in
// template without Jinja text): a missing tokenizer is a note, not a failed run. `tok`: the
// tokenizer load_train_data loaded (TrainData::tokenizer), else null to load it here.
std::string save_train_tokenizer(const TrainConfig& cfg, const Tokenizer* tok);

// `train --preview-data`: every training dataset's counts and its first n samples as text, the
// trained tokens between ⟦ and ⟧ (decoded run by run), so a loss mask can be checked by eye.
Status preview_train_data(const TrainConfig& cfg, int n, std::FILE* out);

// Whether micro-batches run padding-free (data/data_loader.h Note [padding-free batches]):
// padding_free true, or auto with micro_batch_size > 1 and no sample_packing.
bool padding_free_on(const TrainConfig& cfg);

// The DataLoader options for the training (`train`: shuffled when cfg.shuffle) or eval samples,
// on backend `be` (which resolves pad_to_multiple_of: 0).
LoaderOptions loader_options(const TrainConfig& cfg, int32_t pad_id, bool train, Backend& be);

}  // namespace st
