#include "train/evaluation.h"

#include <algorithm>

#include "core/check.h"

namespace st {

StatusOr<std::vector<Batch>> next_batches(BatchSource& data, int n) {
  std::vector<Batch> out;
  while (static_cast<int>(out.size()) < n) {
    Batch b;
    ASSIGN_OR_RETURN(bool got, data.next(&b));
    if (!got) break;
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<const Batch*> batch_pointers(const std::vector<Batch>& bs) {
  std::vector<const Batch*> out;
  for (const Batch& b : bs) out.push_back(&b);
  return out;
}

StatusOr<std::vector<EvalFigures>> eval_pass(BatchSource& data, int group, const GroupFigures& fn,
                                             const EvalProgress* progress) {
  RETURN_IF_ERROR(data.start_epoch(0));
  const int64_t total = data.micro_batches_per_epoch();
  std::vector<EvalFigures> out;
  for (;;) {
    ASSIGN_OR_RETURN(std::vector<Batch> bs, next_batches(data, std::max(group, 1)));
    if (bs.empty()) break;
    ASSIGN_OR_RETURN(std::vector<EvalFigures> f, fn(bs));
    CHECK(f.size() == bs.size(), "eval_pass: one figure set per batch");
    for (EvalFigures& x : f) out.push_back(std::move(x));
    const auto done = static_cast<int64_t>(out.size());
    if (progress && *progress) (*progress)(done, std::max(total, done));
  }
  return out;
}

StatusOr<std::vector<EvalFigures>> eval_loss_figures(Model& m, LayerSource& layers, const std::vector<Batch>& bs) {
  ASSIGN_OR_RETURN(std::vector<double> sums, m.eval_loss_sums(batch_pointers(bs), layers));
  std::vector<EvalFigures> out;
  for (size_t i = 0; i < bs.size(); ++i) out.push_back({sums[i], static_cast<double>(count_targets(bs[i]))});
  return out;
}

StatusOr<double> mean_loss_of(const std::vector<EvalFigures>& figures) {
  double sum = 0, n = 0;
  for (const EvalFigures& f : figures) {  // in batch order, as one at a time
    CHECK(f.size() == 2, "mean_loss_of: {loss sum, targets} figures");
    sum += f[0];
    n += f[1];
  }
  if (n == 0) return InvalidArgument("the eval dataset has no target tokens");
  return sum / n;
}

StatusOr<double> mean_eval_loss(Model& m, LayerSource& layers, BatchSource& data, const EvalProgress* progress) {
  ASSIGN_OR_RETURN(std::vector<EvalFigures> f,
                   eval_pass(data, m.eval_group_size(layers),
                             [&](const std::vector<Batch>& bs) { return eval_loss_figures(m, layers, bs); }, progress));
  return mean_loss_of(f);
}

}  // namespace st
