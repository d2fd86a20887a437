// A micro-batch of preference pairs as the preference losses read it (train/preference_loss.h):
// rows 2j and 2j + 1 are pair j's chosen and rejected sequences (DataLoader pairs), one sequence a
// row, padding after it.
//
// Note [pair segments]: the head sums log p per segment (model/model.h Note [sequence weights]).
// Row r's trained response tokens are segment r. For ORPO, whose NLL covers the chosen sequence's
// prompt too (TRL: every attended token of the chosen row), the chosen row's other tokens --
// the prompt, and any untrained token of the template between or after the replies -- become
// targets (their own next tokens) in segment B + j: the NLL weighs them, the log odds do not.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "data/batch.h"
#include "train/preference_loss.h"

namespace st {

struct PairBatch {
  Batch batch;                        // the batch the model runs (ORPO: prompt targets added)
  std::vector<int64_t> reply_tokens;  // per row: its response's trained tokens
  int64_t nll_tokens = 0;             // the tokens the NLL term averages over (0 without one)
  int64_t pairs() const { return batch.batch / 2; }
};

// InvalidArgument when `b` is not (chosen, rejected) rows, or a row has no trained token.
StatusOr<PairBatch> pair_batch(const Batch& b, PreferenceLoss loss);

// The segment of pair j's chosen-row prompt tokens (ORPO), for a batch of `rows` rows.
inline int32_t prompt_segment(int64_t rows, int64_t pair) { return static_cast<int32_t>(rows + pair); }

}  // namespace st
