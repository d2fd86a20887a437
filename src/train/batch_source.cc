#include "train/batch_source.h"

#include <algorithm>

#include "core/file.h"
#include "core/json.h"

namespace st {
namespace {

uint64_t splitmix64(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

StatusOr<std::vector<int32_t>> int_array(const Json& j, const char* key, const std::string& what) {
  if (!j.contains(key) || !j[key].is_array()) return InvalidArgument(Str() << what << ": missing array '" << key << "'");
  std::vector<int32_t> out;
  out.reserve(j[key].size());
  for (const Json& v : j[key]) {
    if (!v.is_number_integer()) return InvalidArgument(Str() << what << ": '" << key << "' holds a non-integer");
    out.push_back(v.get<int32_t>());
  }
  return out;
}

}  // namespace

int64_t count_targets(const Batch& b) {
  int64_t n = 0;
  for (int64_t r = 0; r < b.batch; ++r)
    for (int64_t t = 0; t + 1 < b.seq; ++t) n += b.labels[r * b.seq + t + 1] != kIgnoreIndex;
  return n;
}

StatusOr<std::unique_ptr<TokenizedJsonlSource>> TokenizedJsonlSource::open(const TokenizedJsonlOptions& o) {
  if (o.micro_batch_size <= 0 || o.sequence_len <= 1)
    return InvalidArgument("tokenized dataset: micro_batch_size and sequence_len must be positive");
  std::unique_ptr<TokenizedJsonlSource> s(new TokenizedJsonlSource());
  s->o_ = o;
  for (const std::string& path : o.paths) {
    ASSIGN_OR_RETURN(std::string text, read_file_to_string(path));
    size_t start = 0, line = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      ++line;
      std::string_view sv(text.data() + start, end - start);
      start = end + 1;
      if (sv.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      const std::string what = Str() << path << " line " << line;
      ASSIGN_OR_RETURN(Json j, parse_json(sv, what));
      Row r;
      ASSIGN_OR_RETURN(r.ids, int_array(j, "input_ids", what));
      if (j.contains("labels")) {
        ASSIGN_OR_RETURN(r.labels, int_array(j, "labels", what));
        if (r.labels.size() != r.ids.size())
          return InvalidArgument(Str() << what << ": labels and input_ids differ in length");
      } else {
        r.labels = r.ids;
      }
      if (r.ids.empty()) continue;
      if (static_cast<int64_t>(r.ids.size()) > o.sequence_len) {
        r.ids.resize(static_cast<size_t>(o.sequence_len));
        r.labels.resize(static_cast<size_t>(o.sequence_len));
      }
      s->rows_.push_back(std::move(r));
    }
  }
  if (s->rows_.empty()) return InvalidArgument("tokenized dataset has no rows");
  return s;
}

Status TokenizedJsonlSource::start_epoch(int64_t epoch) {
  order_.resize(rows_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  if (o_.shuffle) {
    uint64_t st = o_.seed ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(epoch + 1));
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[splitmix64(&st) % i]);
  }
  cursor_ = 0;
  return Status::OK();
}

StatusOr<bool> TokenizedJsonlSource::next(Batch* out) {
  if (cursor_ >= order_.size()) return false;
  const size_t n = std::min<size_t>(static_cast<size_t>(o_.micro_batch_size), order_.size() - cursor_);
  size_t T = 0;
  for (size_t i = 0; i < n; ++i) T = std::max(T, rows_[order_[cursor_ + i]].ids.size());
  Batch b;
  b.batch = static_cast<int64_t>(n);
  b.seq = static_cast<int64_t>(T);
  b.input_ids.assign(n * T, o_.pad_id);
  b.labels.assign(n * T, kIgnoreIndex);
  b.positions.resize(n * T);
  for (size_t i = 0; i < n; ++i) {
    const Row& r = rows_[order_[cursor_ + i]];
    std::copy(r.ids.begin(), r.ids.end(), b.input_ids.begin() + i * T);
    std::copy(r.labels.begin(), r.labels.end(), b.labels.begin() + i * T);
    for (size_t t = 0; t < T; ++t) b.positions[i * T + t] = static_cast<int32_t>(t);
  }
  b.num_targets = count_targets(b);
  cursor_ += n;
  *out = std::move(b);
  return true;
}

int64_t TokenizedJsonlSource::micro_batches_per_epoch() const {
  const int64_t n = static_cast<int64_t>(rows_.size());
  return (n + o_.micro_batch_size - 1) / o_.micro_batch_size;
}

}  // namespace st
