// The best evaluation of a run and early stopping on it, as HF's Trainer keeps them with
// metric_for_best_model "loss" (the only metric computed here: eval_loss, lower is better).
//
// Note [best eval and early stopping]: two rules, deliberately not the same (HF's, transformers
// 5.x trainer.py _determine_best_metric and trainer_callback.py EarlyStoppingCallback):
//   * the best eval is any strictly lower eval_loss (no threshold);
//   * early stopping counts the evals in a row that did not improve on the best *before* them by
//     more than early_stopping_threshold, and stops when that count reaches the patience. The
//     first eval never counts (there is no best yet).
// So with a threshold an eval can become the best and still count as "not improved". A NaN loss
// never becomes the best and always counts. The state is saved in checkpoints (trainer_state.json
// "best_eval"), so a resumed run stops where the uninterrupted one would.
#pragma once

#include <cstdint>
#include <optional>

namespace st {

struct BestEval {
  std::optional<double> loss;  // the lowest eval_loss so far; none before the first eval
  int64_t step = 0;            // the step of that eval
  int64_t evals_not_improved = 0;

  struct Verdict {
    bool new_best = false;
    bool stop = false;  // patience > 0 and it is used up
  };
  // Takes the eval of `step`. patience 0 = never stop.
  Verdict observe(double eval_loss, int64_t step, int64_t patience, double threshold);
};

}  // namespace st
