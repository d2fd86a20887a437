#include "train/pair_batch.h"

namespace st {

StatusOr<PairBatch> pair_batch(const Batch& b, PreferenceLoss loss) {
  if (b.batch % 2 != 0)
    return Internal(Str() << "preference training: a micro-batch of " << b.batch
                          << " rows is not (chosen, rejected) pairs");
  PairBatch pb;
  pb.batch = b;
  pb.reply_tokens.assign(static_cast<size_t>(b.batch), 0);
  const int64_t T = b.seq;
  for (int64_t r = 0; r < b.batch; ++r) {
    for (int64_t t = 1; t < T; ++t) pb.reply_tokens[r] += b.labels[r * T + t] != kIgnoreIndex;
    if (pb.reply_tokens[r] == 0)
      return Internal(Str() << "preference training: row " << r << " of a micro-batch has no trained token");
  }
  const bool prompt = nll_covers_prompt(loss);
  for (int64_t j = 0; 2 * j < b.batch; ++j) pb.nll_tokens += pb.reply_tokens[2 * j];
  if (!prompt) return pb;
  if (b.doc_ids.empty())
    return Internal("preference training: ORPO needs the batch's document ids to tell a sequence from its padding");
  // Note [pair segments]: the chosen rows' other tokens become targets in their own segments. A
  // row's sequence is its first document (doc_ids 0); the padding after it is another.
  Batch& o = pb.batch;
  o.segments.assign(static_cast<size_t>(b.batch * T), -1);
  for (int64_t r = 0; r < b.batch; ++r) {
    for (int64_t t = 1; t < T; ++t) {
      const size_t i = static_cast<size_t>(r * T + t);
      const bool real = b.doc_ids[i] == b.doc_ids[static_cast<size_t>(r * T)];
      if (b.labels[i] != kIgnoreIndex) {
        o.segments[i] = static_cast<int32_t>(r);
      } else if (r % 2 == 0 && real) {
        o.labels[i] = b.input_ids[i];
        o.segments[i] = prompt_segment(b.batch, r / 2);
        ++pb.nll_tokens;
        ++o.num_targets;
      }
    }
  }
  return pb;
}

}  // namespace st
