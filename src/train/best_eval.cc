#include "train/best_eval.h"

#include <cmath>

namespace st {

BestEval::Verdict BestEval::observe(double eval_loss, int64_t at_step, int64_t patience, double threshold) {
  Verdict v;
  // Comparisons with NaN are false: a NaN neither improves nor becomes the best.
  const bool improved = !loss || (eval_loss < *loss && std::fabs(eval_loss - *loss) > threshold);
  evals_not_improved = improved ? 0 : evals_not_improved + 1;
  if (!std::isnan(eval_loss) && (!loss || eval_loss < *loss)) {
    loss = eval_loss;
    step = at_step;
    v.new_best = true;
  }
  v.stop = patience > 0 && evals_not_improved >= patience;
  return v;
}

}  // namespace st
