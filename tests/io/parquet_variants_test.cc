// Parquet reader against pyarrow on writer options and column types that the differential fuzz
// (tools/ref/parquet_fuzz.py) covers: decimal256 columns (once refused as "DECIMAL of 26 bytes",
// which made a whole dataset file unreadable), dictionary pages falling back to PLAIN mid-chunk,
// one row per page with page index / CRC / bloom filters, content-defined chunking, the
// non-compliant `list.item` naming, large_* and view types, INT96 timestamps, tool-call chats with
// maps inside lists of structs, decimals stored as integers, an empty file, NaN / inf floats.
// tools/ref/parquet_variants.py wrote tests/fixtures/parquet/variants/ and expected.json (pyarrow's
// rows, in the reader's JSON conventions); pyarrow is not needed here.
#include <gtest/gtest.h>

#include <cmath>

#include "core/file.h"
#include "io/parquet.h"

namespace st {
namespace {

const std::string kDir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/parquet/variants/";

// Equal as JSON, except that doubles may differ in the last bits (a decimal's value is computed
// differently from Python's correctly rounded float(Decimal)) and a NaN / inf double matches null
// (JSON has neither; the expected file writes them as null).
bool same(const OrderedJson& a, const OrderedJson& b) {
  if (a.is_number_float() && !std::isfinite(a.get<double>())) return b.is_null();
  if (a.is_number_float() || b.is_number_float()) {
    if (!a.is_number() || !b.is_number()) return false;
    const double x = a.get<double>(), y = b.get<double>();
    return x == y || std::fabs(x - y) <= 1e-12 * std::max(std::fabs(x), std::fabs(y));
  }
  if (a.is_object()) {
    if (!b.is_object() || a.size() != b.size()) return false;
    auto i = a.begin();
    auto j = b.begin();
    for (; i != a.end(); ++i, ++j)
      if (i.key() != j.key() || !same(i.value(), j.value())) return false;  // schema order too
    return true;
  }
  if (a.is_array()) {
    if (!b.is_array() || a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (!same(a[k], b[k])) return false;
    return true;
  }
  return a == b;
}

TEST(ParquetVariants, MatchPyarrow) {
  auto text = read_file_to_string(kDir + "expected.json");
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  auto e = parse_ordered_json(*text, "expected.json");
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_EQ(e->size(), 10u);
  for (const auto& [name, want] : e->items()) {
    SCOPED_TRACE(name);
    auto f = ParquetFile::open(kDir + name);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    ASSERT_EQ(f->num_row_groups(), want["row_groups"].get<int>());
    ASSERT_EQ(f->num_rows(), static_cast<int64_t>(want["rows"].size()));
    std::vector<OrderedJson> rows;
    Status s = f->for_each_row([&](const OrderedJson& row, int64_t i) {
      EXPECT_EQ(i, static_cast<int64_t>(rows.size()));
      rows.push_back(row);
      return Status::OK();
    });
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(rows.size(), want["rows"].size());
    for (size_t i = 0; i < rows.size(); ++i)
      EXPECT_TRUE(same(rows[i], want["rows"][i])) << "row " << i << "\n got: " << rows[i].dump() << "\nwant: " << want["rows"][i].dump();
    // Row group by row group: the same rows (no state carried between groups).
    std::vector<OrderedJson> again;
    for (int g = 0; g < f->num_row_groups(); ++g) ASSERT_TRUE(f->read_row_group(g, &again).ok());
    ASSERT_EQ(again.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(again[i].dump(), rows[i].dump()) << "row " << i;  // NaN != NaN
  }
}

// The values a decimal256 column must give, checked independently of the JSON file: exact
// powers of two and their negations survive the long double path bit for bit.
TEST(ParquetVariants, Decimal256Values) {
  auto f = ParquetFile::open(kDir + "decimal256.parquet");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<OrderedJson> rows;
  ASSERT_TRUE(f->read_row_group(0, &rows).ok());
  ASSERT_EQ(rows.size(), 12u);
  const double want[] = {0, -1, 1, std::ldexp(1.0, 200), -std::ldexp(1.0, 200), 255, -256};
  for (size_t i = 0; i < std::size(want); ++i) EXPECT_EQ(rows[i]["d256s0"].get<double>(), want[i]) << "row " << i;
  EXPECT_EQ(rows[10]["d256"].get<double>(), -1.0);
  EXPECT_DOUBLE_EQ(rows[11]["d256"].get<double>(), 1e-5);
  EXPECT_TRUE(rows[3]["d256"].is_null());
}

}  // namespace
}  // namespace st
