// Record assembly: the decoded columns of one row group back into rows of JSON, one row at a
// time, following Note [JSON shape] (parquet_schema.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "core/utf8.h"
#include "io/detail/parquet_column.h"
#include "io/detail/parquet_schema.h"

namespace st::parquet {

class RowAssembler {
 public:
  // `schema` and `columns` (one per leaf, each holding the same number of rows) must outlive
  // this object. `where` prefixes errors ("PATH: row group 2").
  RowAssembler(const Schema& schema, const std::vector<ColumnData>& columns, std::string where);

  // Builds the next row into *row (replacing it). Errors (Corruption, naming the column and the
  // row's index in the row group) come from levels that contradict each other, a string that is
  // not UTF-8, or a row of more than kMaxRowBytes of text (dictionary references can repeat one
  // long string without bound).
  static constexpr size_t kMaxRowBytes = size_t{1} << 30;
  Status next(OrderedJson* row);

 private:
  struct Cursor {
    size_t entry = 0, value = 0;
    std::vector<size_t> index;  // current element of each array on the column's path
  };
  Status insert(size_t column, int rep, int def, OrderedJson* row);
  Status leaf_value(size_t column, OrderedJson* out);
  void convert_maps(int shape, OrderedJson* v) const;

  const Schema& schema_;
  const std::vector<ColumnData>& columns_;
  std::string where_;
  std::vector<std::vector<int>> paths_;  // per column: shape ids from the row object to its leaf
  std::vector<Cursor> cursors_;
  int64_t row_ = 0;
  size_t row_bytes_ = 0;
};

using st::valid_utf8;  // core/utf8.h

}  // namespace st::parquet
