// Rows of a micro-batch: which samples go in which row, and how rows become a padded Batch.
#pragma once

#include <cstdint>
#include <vector>

#include "data/batch.h"
#include "data/datasets.h"

namespace st {

// Takes samples in `order` from position `start` and fills up to `rows` rows. Without packing,
// one sample per row. With packing, samples are added to the current row while they fit in
// `seq_len` tokens; one that does not fit opens the next row, and when no row is left it waits
// for the next call. Returns the position after the last sample taken. Every sample must have
// 1..seq_len tokens (the dataset loader truncates).
int64_t take_rows(const std::vector<Sample>& samples, const std::vector<int64_t>& order, int64_t start, int64_t rows,
                  int64_t seq_len, bool packing, std::vector<std::vector<int64_t>>* out);

// Fills `out` (B = rows.size(), T = `seq`): tokens of each row's samples back to back, positions
// restarting at 0 per sample, doc_ids 0,1,2,... per sample within the row. The padding tail gets
// input `pad_id`, label kIgnoreIndex, its own doc id and positions from 0 (so attention over the
// padding stays well defined and never reaches a real document).
void build_batch(const std::vector<Sample>& samples, const std::vector<std::vector<int64_t>>& rows, int64_t seq,
                 int32_t pad_id, Batch* out);

// Rows [first, first + n) of `b` as a batch of their own (B = n, the same T), for batches of one
// sample a row (KTO's halves: data/data_loader.h Note [KTO batches]): num_targets and real_tokens
// (each row's first document) recounted; segments and kto are not carried.
Batch batch_rows(const Batch& b, int64_t first, int64_t n);

}  // namespace st
