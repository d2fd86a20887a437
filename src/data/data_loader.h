// DataLoader: turns tokenized samples into micro-batches for the trainer, epoch after epoch,
// with a position (epoch, index) that can be saved and restored for an exact resume.
//
// Order: each epoch visits every sample once, in a permutation drawn from (seed, epoch) when
// shuffling (identical on every platform: mt19937_64 + our own Fisher-Yates), else in file order.
// `index` counts samples of that order already handed out. Batches are a pure function of
// (samples, options, position), so seek(position()) after a restart reproduces the same stream.
// Preference pairs (LoaderOptions::pairs): the permutation is of pairs, each pair's chosen and
// rejected stay adjacent (rows 2i and 2i+1 of a batch), and `index` still counts samples (always
// even between batches).
//
// Note [KTO batches]: with LoaderOptions::kto every sample is an unpaired example (Sample::kto)
// and a micro-batch of k of them has 2k rows: rows 0..k-1 the examples (Batch::kto their labels),
// rows k..2k-1 their KL sequences -- row k+j is example j's prompt followed by the response of
// example j-1 (mod k), trained on that response (cut at sequence_len). These are the KTO paper's
// mismatched pairs "in the same microbatch" for the reference point's estimate (train/kto_loss.h).
// TRL instead takes the response of the example before it in the dataset (in chunks of the batch
// size, before shuffling): the same estimator over other neighbours. A micro-batch of one example
// (the epoch's last, with an odd count) pairs it with itself.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "data/batch.h"
#include "data/datasets.h"

namespace st {

struct LoaderOptions {
  int64_t sequence_len = 2048;  // T with packing; rows without packing are padded to the longest
  int64_t micro_batch_size = 1; // rows per batch (the last batch of an epoch may have fewer)
  bool sample_packing = false;
  // Without packing, a batch's length is its longest row rounded up to this multiple (capped at
  // sequence_len): fewer distinct shapes, so recorded launch plans are replayed more often
  // (model/launch_plans.h). Padding is masked from the loss and, being at the end of each row,
  // is never attended by a real token.
  int64_t pad_to_multiple_of = 1;
  // Note [padding-free batches]: a micro-batch's rows run as ONE row holding their samples back
  // to back (each its own document: positions restart, attention stays inside it), padded only
  // at its end to pad_to_multiple_of. No padded position is computed between samples; what each
  // sample sees and is trained on is unchanged (its bits are not: other shapes, and LoRA dropout
  // masks follow token positions).
  bool padding_free = false;
  // Preference pairs (DPO, data/preference.h): every sample is a pair's chosen (Sample::pair 1)
  // followed by its rejected (2); micro_batch_size counts pairs, so a batch has 2k rows, row 2i
  // pair i's chosen and row 2i+1 its rejected, padded as without pairs. Packing and padding-free
  // batches would merge the rows and are refused, as are samples not in such pairs.
  bool pairs = false;
  // KTO's unpaired examples (rl: kto, Sample::kto): Note [KTO batches].
  bool kto = false;
  bool shuffle = true;
  uint64_t seed = 42;
  int64_t num_epochs = 1;       // next() returns false after this many epochs
  int32_t pad_id = 0;           // input id of padding (tokenizer pad, else eos, else 0)
};

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t index = 0;  // samples of this epoch's order already consumed
  bool operator==(const LoaderPosition&) const = default;
};

class DataLoader {
 public:
  // `samples` are shared (not copied) and must outlive nothing: the loader holds a reference.
  DataLoader(std::shared_ptr<const std::vector<Sample>> samples, const LoaderOptions& opt);

  // Fills `out` with the next micro-batch and returns true; returns false when every epoch is
  // done (and leaves `out` untouched). InvalidArgument if a sample exceeds sequence_len, or with
  // pairs, for options or samples that do not make pairs (see LoaderOptions::pairs).
  StatusOr<bool> next(Batch* out);

  LoaderPosition position() const { return pos_; }
  // InvalidArgument if the position is outside [0, num_epochs] x [0, num_samples] (with pairs: an
  // odd index, or the pairs' error as next() reports it).
  Status seek(const LoaderPosition& p);
  int64_t epoch() const { return pos_.epoch; }
  int64_t num_samples() const { return static_cast<int64_t>(samples_->size()); }
  // Micro-batches in epoch `epoch` (packing makes it depend on the epoch's order); 0 when the
  // samples or options make no pairs that pairs asks for.
  int64_t batches_in_epoch(int64_t epoch) const;

 private:
  std::vector<int64_t> order_for(int64_t epoch) const;
  Status check_pairs() const;
  Status check_kto() const;
  int64_t rows_per_batch() const { return opt_.micro_batch_size * (opt_.pairs ? 2 : 1); }

  std::shared_ptr<const std::vector<Sample>> samples_;
  LoaderOptions opt_;
  Status pairs_status_;  // check_pairs() / check_kto(), once
  LoaderPosition pos_;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace st
