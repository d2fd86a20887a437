// Where the trainer's micro-batches come from. data/ implements this for text, prompt/completion
// and chat datasets; TokenizedJsonlSource below covers type `tokenized` (pre-tokenized JSONL) so
// the trainer works without data/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/batch.h"

namespace st {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Starts epoch `epoch` (0-based) from its first micro-batch; a shuffling source reorders here,
  // deterministically in (its seed, epoch). The trainer calls it before the first next().
  virtual Status start_epoch(int64_t epoch) = 0;
  // Fills *out with the next micro-batch of the epoch; false (and *out untouched) at its end.
  virtual StatusOr<bool> next(Batch* out) = 0;
  // Micro-batches per epoch, or -1 when unknown (then the run needs max_steps).
  virtual int64_t micro_batches_per_epoch() const { return -1; }
};

struct TokenizedJsonlOptions {
  std::vector<std::string> paths;
  int64_t micro_batch_size = 1;
  int64_t sequence_len = 2048;  // longer rows are truncated
  bool shuffle = false;
  uint64_t seed = 42;
  int32_t pad_id = 0;
};

// JSONL rows {"input_ids": [...], "labels": [...] (optional, default = input_ids, -100 masks)}.
// Micro-batches take rows in order (or a seeded permutation per epoch: Fisher-Yates driven by
// splitmix64(seed ^ epoch); it does not reproduce torch's sampler), right-padded to the longest
// row of the batch (pad_id, label -100). The last batch of an epoch may have fewer rows.
class TokenizedJsonlSource : public BatchSource {
 public:
  static StatusOr<std::unique_ptr<TokenizedJsonlSource>> open(const TokenizedJsonlOptions& o);
  Status start_epoch(int64_t epoch) override;
  StatusOr<bool> next(Batch* out) override;
  int64_t micro_batches_per_epoch() const override;
  size_t num_rows() const { return rows_.size(); }

 private:
  struct Row {
    std::vector<int32_t> ids, labels;
  };
  TokenizedJsonlOptions o_;
  std::vector<Row> rows_;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
};

// Target count of a batch the HF way: positions t whose next label labels[t+1] (same row) counts.
int64_t count_targets(const Batch& b);

}  // namespace st
