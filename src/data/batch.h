// A micro-batch as the trainer consumes it: host memory, B rows of T tokens (padded).
#pragma once

#include <cstdint>
#include <vector>

namespace st {

constexpr int32_t kIgnoreIndex = -100;

struct Batch {
  int64_t batch = 0;  // B
  int64_t seq = 0;    // T
  // All [B*T], row-major. labels are already aligned with inputs the HF way: labels[t] is the
  // target *of the token at t* (i.e. the next-token shift is done by the trainer, as HF does:
  // the loss at position t compares logits[t] with labels[t+1]). kIgnoreIndex masks a target.
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;
  std::vector<int32_t> positions;  // restart at 0 for each packed document
  std::vector<int32_t> doc_ids;    // distinct per document within a row
  // Number of target tokens that count in the loss (labels[t+1] != ignore within each row / doc).
  int64_t num_targets = 0;
  // Tokens of real samples (not padding); 0 = all B*T. What throughput figures count.
  int64_t real_tokens = 0;
  // Optional, [B*T] aligned with labels: the segment whose log-prob sum the target labels[t]
  // counts in (model/model.h Note [sequence weights]); ignored where labels[t] is. Empty: every
  // target of row r counts in segment r.
  std::vector<int32_t> segments;
  // KTO (data/data_loader.h Note [KTO batches]): the labels of rows 0..B/2-1, +1 desirable, -1
  // undesirable; rows B/2.. are their KL sequences. Empty otherwise.
  std::vector<int8_t> kto;
};

}  // namespace st
