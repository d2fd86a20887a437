#include "data/data_loader.h"

#include <algorithm>
#include <random>

#include "data/packing.h"

namespace st {

DataLoader::DataLoader(std::shared_ptr<const std::vector<Sample>> samples, const LoaderOptions& opt)
    : samples_(std::move(samples)), opt_(opt) {
  if (opt_.pairs) pairs_status_ = check_pairs();
  else if (opt_.kto) pairs_status_ = check_kto();
}

Status DataLoader::check_kto() const {
  if (opt_.sample_packing || opt_.padding_free)
    return InvalidArgument(Str() << "KTO takes one sequence a row: " << (opt_.sample_packing ? "sample_packing" : "padding_free")
                                 << " would put several in one row; turn it off");
  const std::vector<Sample>& s = *samples_;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i].kto == 0)
      return InvalidArgument(Str() << "sample " << i << " is not an unpaired example with a label; KTO needs "
                                   << "{prompt, completion, label} records");
  return Status::OK();
}

namespace {

// The index of s's first trained token: its prompt is the tokens before it.
int64_t reply_start(const Sample& s) {
  return std::find_if(s.labels.begin(), s.labels.end(), [](int32_t l) { return l != kIgnoreIndex; }) - s.labels.begin();
}

// Note [KTO batches]: example j's prompt followed by example `other`'s response, cut at seq_len.
Sample kl_sequence(const Sample& self, const Sample& other, int64_t seq_len) {
  const int64_t p = reply_start(self), q = reply_start(other);
  Sample kl;
  kl.input_ids.assign(self.input_ids.begin(), self.input_ids.begin() + p);
  kl.labels.assign(static_cast<size_t>(p), kIgnoreIndex);
  kl.input_ids.insert(kl.input_ids.end(), other.input_ids.begin() + q, other.input_ids.end());
  kl.labels.insert(kl.labels.end(), other.labels.begin() + q, other.labels.end());
  if (static_cast<int64_t>(kl.input_ids.size()) > seq_len) {
    kl.input_ids.resize(static_cast<size_t>(seq_len));
    kl.labels.resize(static_cast<size_t>(seq_len));
  }
  return kl;
}

}  // namespace

// With pairs, sample 2k is pair k's chosen and 2k+1 its rejected: anything else is refused.
Status DataLoader::check_pairs() const {
  if (opt_.sample_packing || opt_.padding_free)
    return InvalidArgument(Str() << "preference pairs (DPO) take one sequence a row: "
                                 << (opt_.sample_packing ? "sample_packing" : "padding_free")
                                 << " would put several in one row; turn it off");
  const std::vector<Sample>& s = *samples_;
  for (size_t i = 0; i < s.size(); i += 2) {
    if (s[i].pair != 1)
      return InvalidArgument(Str() << "sample " << i << (s[i].pair == 2 ? " is a rejected sequence without its chosen"
                                                                         : " is not part of a preference pair")
                                   << "; preference training needs (chosen, rejected) pairs");
    if (i + 1 == s.size() || s[i + 1].pair != 2)
      return InvalidArgument(Str() << "sample " << i << " is a chosen sequence not followed by its rejected one");
  }
  return Status::OK();
}

// A permutation of the samples, or with pairs of the pairs (each pair's two samples kept in
// order), drawn the same way.
std::vector<int64_t> DataLoader::order_for(int64_t epoch) const {
  const int64_t group = opt_.pairs ? 2 : 1;
  const int64_t n = num_samples() / group;
  std::vector<int64_t> units(n);
  for (int64_t i = 0; i < n; ++i) units[i] = i;
  if (opt_.shuffle) {
    std::mt19937_64 rng(opt_.seed * 0x100000001b3ULL + static_cast<uint64_t>(epoch) + 1);
    for (int64_t i = n - 1; i > 0; --i) std::swap(units[i], units[rng() % static_cast<uint64_t>(i + 1)]);
  }
  if (group == 1) return units;
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(n * group));
  for (int64_t u : units)
    for (int64_t k = 0; k < group; ++k) order.push_back(u * group + k);
  return order;
}

StatusOr<bool> DataLoader::next(Batch* out) {
  RETURN_IF_ERROR(pairs_status_);
  while (pos_.epoch < opt_.num_epochs) {
    if (order_epoch_ != pos_.epoch) {
      order_ = order_for(pos_.epoch);
      order_epoch_ = pos_.epoch;
    }
    if (pos_.index < num_samples()) break;
    ++pos_.epoch;
    pos_.index = 0;
  }
  if (pos_.epoch >= opt_.num_epochs || num_samples() == 0) return false;
  std::vector<std::vector<int64_t>> rows;
  int64_t end = take_rows(*samples_, order_, pos_.index, rows_per_batch(), opt_.sequence_len,
                          opt_.sample_packing, &rows);
  int64_t seq = 0, total = 0;
  for (const auto& row : rows) {
    int64_t len = 0;
    for (int64_t idx : row) len += static_cast<int64_t>((*samples_)[idx].input_ids.size());
    if (len > opt_.sequence_len)
      return InvalidArgument(Str() << "sample " << row[0] << " has " << len << " tokens, more than sequence_len "
                                   << opt_.sequence_len);
    seq = std::max(seq, len);
    total += len;
  }
  const int64_t m = std::max<int64_t>(1, opt_.pad_to_multiple_of);
  const auto round_up = [m](int64_t n) { return (n + m - 1) / m * m; };
  if (opt_.padding_free && rows.size() > 1) {  // Note [padding-free batches]: every sample in one row
    std::vector<int64_t> all;
    for (const auto& row : rows) all.insert(all.end(), row.begin(), row.end());
    rows.assign(1, std::move(all));
    seq = std::min(opt_.micro_batch_size * opt_.sequence_len, round_up(total));
  } else {
    if (opt_.sample_packing) seq = opt_.sequence_len;
    seq = std::min(opt_.sequence_len, round_up(seq));
  }
  if (opt_.kto) {  // Note [KTO batches]
    const size_t k = rows.size();
    std::vector<Sample> both;
    both.reserve(2 * k);
    for (const auto& row : rows) both.push_back((*samples_)[static_cast<size_t>(row[0])]);
    for (size_t j = 0; j < k; ++j) {
      both.push_back(kl_sequence(both[j], both[(j + k - 1) % k], opt_.sequence_len));
      seq = std::max(seq, std::min(opt_.sequence_len, round_up(static_cast<int64_t>(both.back().input_ids.size()))));
    }
    std::vector<std::vector<int64_t>> kl_rows(2 * k);
    for (size_t i = 0; i < 2 * k; ++i) kl_rows[i] = {static_cast<int64_t>(i)};
    build_batch(both, kl_rows, seq, opt_.pad_id, out);
    out->kto.clear();
    for (size_t j = 0; j < k; ++j) out->kto.push_back(both[j].kto);
  } else {
    build_batch(*samples_, rows, seq, opt_.pad_id, out);
  }
  pos_.index = end;
  return true;
}

Status DataLoader::seek(const LoaderPosition& p) {
  RETURN_IF_ERROR(pairs_status_);
  if (p.epoch < 0 || p.epoch > opt_.num_epochs || p.index < 0 || p.index > num_samples())
    return InvalidArgument(Str() << "data position (epoch " << p.epoch << ", index " << p.index << ") is outside "
                                 << opt_.num_epochs << " epochs of " << num_samples() << " samples");
  if (opt_.pairs && p.index % 2 != 0)
    return InvalidArgument(Str() << "data position (epoch " << p.epoch << ", index " << p.index
                                 << ") splits a preference pair (an odd sample index)");
  pos_ = p;
  return Status::OK();
}

int64_t DataLoader::batches_in_epoch(int64_t epoch) const {
  if (!pairs_status_.ok()) return 0;  // next() reports it
  std::vector<int64_t> order = order_for(epoch);
  std::vector<std::vector<int64_t>> rows;
  int64_t n = 0;
  for (int64_t i = 0; i < num_samples(); ++n) {
    int64_t j = take_rows(*samples_, order, i, rows_per_batch(), opt_.sequence_len, opt_.sample_packing, &rows);
    if (j == i) break;  // a sample longer than sequence_len: next() reports it
    i = j;
  }
  return n;
}

}  // namespace st
