// DataLoader: padding, packing, epochs, shuffling and exact resume. Oracle: invariants checked
// against the sample list (every sample exactly once per epoch, tokens copied verbatim).
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "data/data_loader.h"

namespace st {
namespace {

// Sample i has tokens [1000*i + 1, ..., 1000*i + len], with len cycling 1..7.
std::shared_ptr<std::vector<Sample>> make_samples(int n) {
  auto v = std::make_shared<std::vector<Sample>>();
  for (int i = 0; i < n; ++i) {
    Sample s;
    int len = 1 + (i * 3) % 7;
    for (int k = 0; k < len; ++k) {
      s.input_ids.push_back(1000 * i + k + 1);
      s.labels.push_back(k == 0 ? kIgnoreIndex : 1000 * i + k + 1);
    }
    v->push_back(s);
  }
  return v;
}

// Checks a batch's structure and returns sample index -> count seen.
void check_batch(const Batch& b, const LoaderOptions& o, std::map<int, int>* seen) {
  ASSERT_EQ(b.input_ids.size(), static_cast<size_t>(b.batch * b.seq));
  ASSERT_LE(b.batch, o.micro_batch_size);
  int64_t targets = 0;
  for (int64_t r = 0; r < b.batch; ++r) {
    for (int64_t t = 0; t < b.seq; ++t) {
      size_t i = r * b.seq + t;
      bool doc_start = t == 0 || b.doc_ids[i] != b.doc_ids[i - 1];
      if (doc_start) {
        EXPECT_EQ(b.positions[i], 0);
        if (t > 0) {
          EXPECT_EQ(b.doc_ids[i], b.doc_ids[i - 1] + 1);
        }
        EXPECT_EQ(b.labels[i], kIgnoreIndex);
        if (b.input_ids[i] != o.pad_id) (*seen)[b.input_ids[i] / 1000]++;
      } else {
        EXPECT_EQ(b.positions[i], b.positions[i - 1] + 1);
      }
      if (b.input_ids[i] == o.pad_id) EXPECT_EQ(b.labels[i], kIgnoreIndex);
      else EXPECT_EQ(b.input_ids[i] % 1000, b.positions[i] + 1);  // tokens copied in order
      targets += b.labels[i] != kIgnoreIndex;
    }
  }
  EXPECT_EQ(b.num_targets, targets);
}

TEST(DataLoader, PaddingNoPacking) {
  auto s = make_samples(10);
  LoaderOptions o{.sequence_len = 16, .micro_batch_size = 3, .sample_packing = false, .shuffle = false, .seed = 1,
                  .num_epochs = 1, .pad_id = 0};
  DataLoader dl(s, o);
  Batch b;
  std::map<int, int> seen;
  int batches = 0;
  while (true) {
    auto r = dl.next(&b);
    ASSERT_TRUE(r.ok());
    if (!*r) break;
    ++batches;
    check_batch(b, o, &seen);
    if (batches == 1) {
      EXPECT_EQ(b.batch, 3);
      EXPECT_EQ(b.seq, 7);  // longest of lengths 1, 4, 7
      EXPECT_EQ(b.input_ids[0 * 7 + 1], 0);  // row 0 (len 1) padded
      EXPECT_EQ(b.labels[0 * 7 + 1], kIgnoreIndex);
    }
  }
  EXPECT_EQ(batches, 4);
  EXPECT_EQ(b.batch, 1);  // last partial batch
  EXPECT_EQ(dl.batches_in_epoch(0), 4);
  EXPECT_EQ(seen.size(), 10u);
}

TEST(DataLoader, PaddingToAMultipleCappedAtSequenceLen) {
  auto s = make_samples(10);  // first batch: lengths 1, 4, 7
  for (auto [multiple, expect] : {std::pair<int64_t, int64_t>{4, 8}, {6, 10}, {1, 7}}) {
    LoaderOptions o{.sequence_len = 10, .micro_batch_size = 3, .sample_packing = false,
                    .pad_to_multiple_of = multiple, .shuffle = false, .seed = 1, .num_epochs = 1, .pad_id = 0};
    DataLoader dl(s, o);
    Batch b;
    std::map<int, int> seen;
    auto r = dl.next(&b);
    ASSERT_TRUE(r.ok() && *r);
    EXPECT_EQ(b.seq, expect) << "multiple " << multiple;
    check_batch(b, o, &seen);  // padding: pad ids, ignored labels, targets unchanged
    EXPECT_EQ(b.num_targets, 0 + 3 + 6);
  }
}

// Note [padding-free batches]: the same samples as PaddingNoPacking's batches, one row each, back
// to back, padded only at the end; every sample exactly once; the same targets; real tokens counted.
TEST(DataLoader, PaddingFree) {
  auto s = make_samples(10);
  LoaderOptions o{.sequence_len = 16, .micro_batch_size = 3, .sample_packing = false, .pad_to_multiple_of = 4,
                  .padding_free = true, .shuffle = false, .seed = 1, .num_epochs = 1, .pad_id = 0};
  DataLoader dl(s, o);
  LoaderOptions padded = o;
  padded.padding_free = false;
  DataLoader ref(s, padded);
  Batch b, rb;
  std::map<int, int> seen;
  int batches = 0;
  while (true) {
    auto r = dl.next(&b);
    auto rr = ref.next(&rb);
    ASSERT_TRUE(r.ok() && rr.ok());
    ASSERT_EQ(*r, *rr);
    if (!*r) break;
    ++batches;
    check_batch(b, o, &seen);
    EXPECT_EQ(b.num_targets, rb.num_targets);
    EXPECT_EQ(b.real_tokens, rb.real_tokens);
    EXPECT_LE(b.batch * b.seq, rb.batch * rb.seq);
    if (batches == 1) {
      EXPECT_EQ(b.batch, 1);
      EXPECT_EQ(b.real_tokens, 1 + 4 + 7);
      EXPECT_EQ(b.seq, 12);  // 12 tokens, a multiple of 4 already: no padding at all (padded: 3 x 8)
      EXPECT_EQ(b.doc_ids[0], 0);
      EXPECT_EQ(b.doc_ids[1], 1);   // the second sample starts right after the first's one token
      EXPECT_EQ(b.positions[1], 0);
      EXPECT_EQ(b.doc_ids[5], 2);
    }
  }
  EXPECT_EQ(batches, 4);
  EXPECT_EQ(seen.size(), 10u);
  for (auto& [idx, n] : seen) EXPECT_EQ(n, 1) << "sample " << idx;
}

TEST(DataLoader, PackingEpochsShuffleResume) {
  auto s = make_samples(50);
  LoaderOptions o{.sequence_len = 12, .micro_batch_size = 2, .sample_packing = true, .shuffle = true, .seed = 5,
                  .num_epochs = 3, .pad_id = 0};
  DataLoader dl(s, o);
  std::vector<Batch> all;
  std::vector<LoaderPosition> pos;
  std::map<int64_t, std::map<int, int>> seen;  // epoch -> counts
  std::vector<std::vector<int32_t>> first_ids_per_epoch(3);
  Batch b;
  while (true) {
    pos.push_back(dl.position());
    auto r = dl.next(&b);
    ASSERT_TRUE(r.ok());
    if (!*r) break;
    int64_t ep = dl.epoch();
    EXPECT_EQ(b.seq, 12);
    check_batch(b, o, &seen[ep]);
    first_ids_per_epoch[ep].push_back(b.input_ids[0]);
    all.push_back(b);
  }
  ASSERT_EQ(seen.size(), 3u);
  for (auto& [ep, m] : seen) {
    EXPECT_EQ(m.size(), 50u) << "epoch " << ep;
    for (auto& [i, c] : m) EXPECT_EQ(c, 1) << "sample " << i << " epoch " << ep;
  }
  EXPECT_NE(first_ids_per_epoch[0], first_ids_per_epoch[1]);  // reshuffled per epoch
  int64_t total = dl.batches_in_epoch(0) + dl.batches_in_epoch(1) + dl.batches_in_epoch(2);
  EXPECT_EQ(static_cast<int64_t>(all.size()), total);
  // Resume from a saved position mid-epoch-1: the rest of the stream is identical.
  size_t k = all.size() / 2;
  DataLoader dl2(s, o);
  ASSERT_TRUE(dl2.seek(pos[k]).ok());
  for (size_t i = k; i < all.size(); ++i) {
    auto r = dl2.next(&b);
    ASSERT_TRUE(r.ok() && *r);
    EXPECT_EQ(b.input_ids, all[i].input_ids) << i;
    EXPECT_EQ(b.labels, all[i].labels);
    EXPECT_EQ(b.doc_ids, all[i].doc_ids);
  }
  EXPECT_FALSE(*dl2.next(&b));
  EXPECT_FALSE(dl2.seek({.epoch = 9, .index = 0}).ok());
}

TEST(DataLoader, SameSeedSameOrder) {
  auto s = make_samples(30);
  LoaderOptions o{.sequence_len = 8, .micro_batch_size = 1, .sample_packing = false, .shuffle = true, .seed = 11,
                  .num_epochs = 1, .pad_id = 0};
  DataLoader a(s, o), b(s, o);
  o.seed = 12;
  DataLoader c(s, o);
  Batch x, y, z;
  bool differs = false;
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(*a.next(&x) && *b.next(&y) && *c.next(&z));
    EXPECT_EQ(x.input_ids, y.input_ids);
    differs |= x.input_ids != z.input_ids;
  }
  EXPECT_TRUE(differs);
}

// make_samples(2n) as n preference pairs: sample 2k is pair k's chosen, 2k+1 its rejected.
std::shared_ptr<std::vector<Sample>> make_pairs(int n) {
  auto v = make_samples(2 * n);
  for (size_t i = 0; i < v->size(); ++i) (*v)[i].pair = static_cast<int8_t>(i % 2 == 0 ? 1 : 2);
  return v;
}

// LoaderOptions::pairs: rows 2i / 2i+1 are one pair's chosen / rejected, every pair once an epoch,
// the pairs (not the samples) shuffled per epoch and seed, and seek(position()) replays the stream.
TEST(DataLoader, PairsStayAdjacent) {
  auto s = make_pairs(11);
  LoaderOptions o{.sequence_len = 16, .micro_batch_size = 3, .sample_packing = false, .pad_to_multiple_of = 4,
                  .pairs = true, .shuffle = true, .seed = 7, .num_epochs = 3, .pad_id = 0};
  LoaderOptions rows = o;
  rows.micro_batch_size = 2 * o.micro_batch_size;  // check_batch's bound on rows
  DataLoader dl(s, o);
  std::vector<Batch> all;
  std::vector<LoaderPosition> pos;
  std::map<int64_t, std::map<int, int>> seen;                // epoch -> sample counts
  std::map<int64_t, std::vector<int>> chosen_order;          // epoch -> chosen sample indices in order
  std::map<int64_t, int64_t> batches;
  Batch b;
  while (true) {
    pos.push_back(dl.position());
    EXPECT_EQ(dl.position().index % 2, 0);
    auto r = dl.next(&b);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    if (!*r) break;
    const int64_t ep = dl.epoch();
    ++batches[ep];
    check_batch(b, rows, &seen[ep]);
    ASSERT_EQ(b.batch % 2, 0);
    int64_t longest = 0;
    for (int64_t row = 0; row < b.batch; row += 2) {
      const int c = b.input_ids[row * b.seq] / 1000, rj = b.input_ids[(row + 1) * b.seq] / 1000;
      EXPECT_EQ(c % 2, 0) << "row " << row << " is not a chosen sample";
      EXPECT_EQ(rj, c + 1) << "row " << row + 1 << " is not the rejected of row " << row;
      EXPECT_EQ((*s)[c].pair, 1);
      chosen_order[ep].push_back(c);
      longest = std::max<int64_t>({longest, static_cast<int64_t>((*s)[c].input_ids.size()),
                                   static_cast<int64_t>((*s)[rj].input_ids.size())});
    }
    EXPECT_EQ(b.seq, std::min<int64_t>(16, (longest + 3) / 4 * 4));  // padded to the longest row, as without pairs
    all.push_back(b);
  }
  ASSERT_EQ(seen.size(), 3u);
  for (int64_t ep = 0; ep < 3; ++ep) {
    EXPECT_EQ(seen[ep].size(), 22u) << "epoch " << ep;
    for (auto& [i, c] : seen[ep]) EXPECT_EQ(c, 1) << "sample " << i << " epoch " << ep;
    EXPECT_EQ(batches[ep], 4);  // 11 pairs, 3 a batch
    EXPECT_EQ(dl.batches_in_epoch(ep), 4);
  }
  EXPECT_EQ(all[3].batch, 4);  // the epoch's last batch: 2 pairs
  std::vector<int> file_order;
  for (int k = 0; k < 11; ++k) file_order.push_back(2 * k);
  EXPECT_NE(chosen_order[0], file_order);  // shuffled
  EXPECT_NE(chosen_order[0], chosen_order[1]);  // per epoch
  // The same options give the same stream; another seed another one.
  DataLoader again(s, o);
  LoaderOptions other = o;
  other.seed = 8;
  DataLoader reseeded(s, other);
  bool differs = false;
  for (const Batch& want : all) {
    Batch x, y;
    ASSERT_TRUE(*again.next(&x) && *reseeded.next(&y));
    EXPECT_EQ(x.input_ids, want.input_ids);
    differs |= y.input_ids != want.input_ids;
  }
  EXPECT_TRUE(differs);
  // Resume mid-epoch-1 from a saved position: the rest is identical.
  const size_t k = 6;
  DataLoader resumed(s, o);
  ASSERT_TRUE(resumed.seek(pos[k]).ok());
  EXPECT_EQ(pos[k].epoch, 1);
  EXPECT_GT(pos[k].index, 0);
  for (size_t i = k; i < all.size(); ++i) {
    auto r = resumed.next(&b);
    ASSERT_TRUE(r.ok() && *r);
    EXPECT_EQ(b.input_ids, all[i].input_ids) << i;
    EXPECT_EQ(b.labels, all[i].labels) << i;
  }
  EXPECT_FALSE(*resumed.next(&b));
  // An odd index would split a pair.
  Status odd = resumed.seek({.epoch = 0, .index = 3});
  EXPECT_EQ(odd.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(odd.message().find("splits a preference pair"), std::string::npos) << odd.to_string();
  // Without pairs the same samples are rows of their own (micro_batch_size rows).
  LoaderOptions single = o;
  single.pairs = false;
  DataLoader plain(s, single);
  auto r = plain.next(&b);
  ASSERT_TRUE(r.ok() && *r);
  EXPECT_EQ(b.batch, 3);
}

// Pairs refuse packing and padding-free rows, and samples that are not (chosen, rejected) pairs.
TEST(DataLoader, PairsRefusals) {
  auto s = make_pairs(4);
  for (int which = 0; which < 2; ++which) {
    LoaderOptions o{.sequence_len = 16, .micro_batch_size = 2, .sample_packing = which == 0, .padding_free = which == 1,
                    .pairs = true, .shuffle = false};
    DataLoader dl(s, o);
    Batch b;
    auto r = dl.next(&b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(which == 0 ? "sample_packing" : "padding_free"), std::string::npos)
        << r.status().to_string();
    EXPECT_EQ(dl.batches_in_epoch(0), 0);
    EXPECT_FALSE(dl.seek({.epoch = 0, .index = 0}).ok());
  }
  const std::vector<std::pair<std::vector<int8_t>, const char*>> bad = {
      {{1, 1, 2}, "sample 0 is a chosen sequence not followed by its rejected one"},
      {{2, 1}, "sample 0 is a rejected sequence without its chosen"},
      {{1, 2, 2, 1}, "sample 2 is a rejected sequence without its chosen"},
      {{1, 2, 1}, "sample 2 is a chosen sequence not followed"},
      {{1, 2, 0, 0}, "sample 2 is not part of a preference pair"},
  };
  for (const auto& [marks, needle] : bad) {
    auto v = make_samples(static_cast<int>(marks.size()));
    for (size_t i = 0; i < marks.size(); ++i) (*v)[i].pair = marks[i];
    DataLoader dl(v, {.sequence_len = 16, .micro_batch_size = 1, .pairs = true, .shuffle = false});
    Batch b;
    auto r = dl.next(&b);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
  }
  // Well-formed pairs with pairs on: fine.
  DataLoader ok(s, {.sequence_len = 16, .micro_batch_size = 2, .pairs = true, .shuffle = false});
  Batch b;
  auto r = ok.next(&b);
  ASSERT_TRUE(r.ok() && *r) << r.status().to_string();
  EXPECT_EQ(b.batch, 4);
  EXPECT_EQ(ok.batches_in_epoch(0), 2);
}

// Note [KTO batches]: k examples, then k KL rows (example j's prompt + example j-1's reply, mod k).
TEST(DataLoader, KtoBatchesCarryTheirKlRows) {
  auto v = std::make_shared<std::vector<Sample>>();
  const int prompt[5] = {2, 3, 4, 2, 6}, reply[5] = {3, 3, 3, 6, 2};
  for (int i = 0; i < 5; ++i) {  // prompt tokens 100 i + k, reply tokens 100 i + 50 + k
    Sample s;
    for (int k = 0; k < prompt[i]; ++k) {
      s.input_ids.push_back(100 * i + k);
      s.labels.push_back(kIgnoreIndex);
    }
    for (int k = 0; k < reply[i]; ++k) {
      s.input_ids.push_back(100 * i + 50 + k);
      s.labels.push_back(100 * i + 50 + k);
    }
    s.kto = i % 2 == 0 ? 1 : -1;
    v->push_back(s);
  }
  DataLoader dl(v, {.sequence_len = 8, .micro_batch_size = 3, .pad_to_multiple_of = 1, .kto = true, .shuffle = false});
  Batch b;
  ASSERT_TRUE(*dl.next(&b));
  ASSERT_EQ(b.batch, 6);
  EXPECT_EQ(b.kto, (std::vector<int8_t>{1, -1, 1}));
  EXPECT_EQ(b.seq, 7);  // the longest of the six rows: example 2 and its KL row (4 + 3 tokens)
  auto row = [&](int64_t r) {
    std::vector<int32_t> ids, labels;
    for (int64_t t = 0; t < b.seq; ++t)
      if (b.doc_ids[r * b.seq + t] == 0) {
        ids.push_back(b.input_ids[r * b.seq + t]);
        labels.push_back(b.labels[r * b.seq + t]);
      }
    return std::make_pair(ids, labels);
  };
  EXPECT_EQ(row(0).first, (*v)[0].input_ids);
  EXPECT_EQ(row(2).first, (*v)[2].input_ids);
  const int32_t I = kIgnoreIndex;
  // KL row 0: example 0's prompt + example 2's reply; row 1: example 1's prompt + example 0's reply.
  EXPECT_EQ(row(3).first, (std::vector<int32_t>{0, 1, 250, 251, 252}));
  EXPECT_EQ(row(3).second, (std::vector<int32_t>{I, I, 250, 251, 252}));
  EXPECT_EQ(row(4).first, (std::vector<int32_t>{100, 101, 102, 50, 51, 52}));
  EXPECT_EQ(row(5).first, (std::vector<int32_t>{200, 201, 202, 203, 150, 151, 152}));
  EXPECT_EQ(b.num_targets, 6 * 3);
  // The epoch's last micro-batch (examples 3, 4), and a KL row cut at sequence_len.
  ASSERT_TRUE(*dl.next(&b));
  ASSERT_EQ(b.batch, 4);
  EXPECT_EQ(b.seq, 8);
  EXPECT_EQ(row(2).first, (std::vector<int32_t>{300, 301, 450, 451}));
  EXPECT_EQ(row(3).first, (std::vector<int32_t>{400, 401, 402, 403, 404, 405, 350, 351}));  // 6 + 6 cut at 8
  EXPECT_EQ(row(3).second, (std::vector<int32_t>{I, I, I, I, I, I, 350, 351}));
  EXPECT_FALSE(*dl.next(&b));
  // Refusals: an unlabelled sample, packing.
  (*v)[3].kto = 0;
  DataLoader bad(v, {.sequence_len = 8, .micro_batch_size = 2, .kto = true, .shuffle = false});
  auto r = bad.next(&b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sample 3 is not an unpaired example"), std::string::npos) << r.status().to_string();
  DataLoader packed(v, {.sequence_len = 8, .micro_batch_size = 2, .sample_packing = true, .kto = true});
  EXPECT_NE(packed.next(&b).status().message().find("KTO takes one sequence a row"), std::string::npos);
}

}  // namespace
}  // namespace st
