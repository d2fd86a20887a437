#include "data/packing.h"

namespace st {

int64_t take_rows(const std::vector<Sample>& samples, const std::vector<int64_t>& order, int64_t start, int64_t rows,
                  int64_t seq_len, bool packing, std::vector<std::vector<int64_t>>* out) {
  out->clear();
  int64_t i = start, n = static_cast<int64_t>(order.size());
  int64_t used = 0;
  while (i < n) {
    int64_t len = static_cast<int64_t>(samples[order[i]].input_ids.size());
    bool fits = !out->empty() && packing && used + len <= seq_len;
    if (!fits) {
      if (static_cast<int64_t>(out->size()) == rows) break;
      out->emplace_back();
      used = 0;
    }
    out->back().push_back(order[i]);
    used += len;
    ++i;
  }
  return i;
}

void build_batch(const std::vector<Sample>& samples, const std::vector<std::vector<int64_t>>& rows, int64_t seq,
                 int32_t pad_id, Batch* out) {
  out->batch = static_cast<int64_t>(rows.size());
  out->seq = seq;
  size_t total = static_cast<size_t>(out->batch * seq);
  out->input_ids.assign(total, pad_id);
  out->labels.assign(total, kIgnoreIndex);
  out->positions.assign(total, 0);
  out->doc_ids.assign(total, 0);
  out->num_targets = 0;
  out->real_tokens = 0;
  out->segments.clear();
  out->kto.clear();
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t t = static_cast<int64_t>(r) * seq, end = t + seq;
    int32_t doc = 0;
    for (int64_t idx : rows[r]) {
      const Sample& s = samples[idx];
      for (size_t k = 0; k < s.input_ids.size(); ++k, ++t) {
        out->input_ids[t] = s.input_ids[k];
        out->labels[t] = s.labels[k];
        out->positions[t] = static_cast<int32_t>(k);
        out->doc_ids[t] = doc;
        out->num_targets += s.labels[k] != kIgnoreIndex && k > 0;
      }
      out->real_tokens += static_cast<int64_t>(s.input_ids.size());
      ++doc;
    }
    for (int32_t p = 0; t < end; ++t, ++p) {
      out->positions[t] = p;
      out->doc_ids[t] = doc;
    }
  }
}

Batch batch_rows(const Batch& b, int64_t first, int64_t n) {
  Batch r;
  r.batch = n;
  r.seq = b.seq;
  const auto lo = static_cast<std::ptrdiff_t>(first * b.seq), hi = static_cast<std::ptrdiff_t>((first + n) * b.seq);
  r.input_ids.assign(b.input_ids.begin() + lo, b.input_ids.begin() + hi);
  r.labels.assign(b.labels.begin() + lo, b.labels.begin() + hi);
  r.positions.assign(b.positions.begin() + lo, b.positions.begin() + hi);
  r.doc_ids.assign(b.doc_ids.begin() + lo, b.doc_ids.begin() + hi);
  for (size_t t = 0; t < r.labels.size(); ++t) {
    r.num_targets += r.labels[t] != kIgnoreIndex && r.positions[t] > 0;
    r.real_tokens += r.doc_ids[t] == 0;
  }
  return r;
}

}  // namespace st
