#include "train/evaluation.h"

#include <algorithm>

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

StatusOr<double> mean_eval_loss(Model& m, LayerSource& layers, BatchSource& data, const EvalProgress* progress) {
  RETURN_IF_ERROR(data.start_epoch(0));
  const int64_t total = data.micro_batches_per_epoch();
  double sum = 0;
  int64_t n = 0, done = 0;
  for (;;) {
    ASSIGN_OR_RETURN(std::vector<Batch> bs, next_batches(data, m.eval_group_size(layers)));
    if (bs.empty()) break;
    ASSIGN_OR_RETURN(std::vector<double> sums, m.eval_loss_sums(batch_pointers(bs), layers));
    for (size_t i = 0; i < bs.size(); ++i) {  // in batch order, as one at a time
      sum += sums[i];
      n += count_targets(bs[i]);
    }
    done += static_cast<int64_t>(bs.size());
    if (progress && *progress) (*progress)(done, std::max(total, done));
  }
  if (n == 0) return InvalidArgument("the eval dataset has no target tokens");
  return sum / static_cast<double>(n);
}

}  // namespace st
