// Apache Parquet reader: a file's rows as JSON objects, for dataset files as the Hugging Face Hub
// serves them (docs: parquet.apache.org, parquet.thrift; written from the format specification).
//
// Reads: the footer (Thrift compact protocol); every physical type (INT96 as nanoseconds since
// the epoch); codecs UNCOMPRESSED, SNAPPY, GZIP, ZSTD, LZ4_RAW, LZ4 (Hadoop-framed or a bare
// block), BROTLI; data pages v1 and v2 and dictionary pages;
// encodings PLAIN, PLAIN_DICTIONARY / RLE_DICTIONARY, RLE (levels, booleans),
// DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT; nesting of
// any depth (optional fields, structs, LIST in the standard 3-level and the legacy 2-level
// layouts, MAP, un-annotated repeated fields). Refused by name (Unimplemented): codec LZO; the
// deprecated BIT_PACKED levels; dictionary pages not PLAIN-encoded; encrypted files; column
// data in other files.
//
// A row is an OrderedJson object, keys in schema order (Note [JSON shape] in
// detail/parquet_schema.h): structs are objects, lists arrays, maps objects (keys as text), null
// is null. Strings (STRING / ENUM / JSON annotations) must be UTF-8 (else Corruption); other
// byte arrays become strings when they are UTF-8 and null when not; integers stay integers
// (unsigned ones unsigned), decimals become doubles, FLOAT16 a float, UUID its 36-char text.
//
// Memory: the file is mapped; one row group at a time is decoded (its columns' levels and values),
// and rows are built one by one from it. Hostile input: every offset, length, count, level,
// dictionary index and decompressed size is checked before use; what page headers may claim is
// capped against the bytes that carry it (Note [entry caps] in detail/parquet_column.h). Errors
// are Corruption (or Unimplemented / InvalidArgument) naming the file, and where it applies the
// column, row group and page: "d.parquet: column 'messages.list.element.content', row group 0,
// page 3: dictionary index 17 >= 12". A ParquetFile is move-only; const methods may run from
// several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/status.h"

namespace st {

class ParquetFile {
 public:
  ParquetFile();
  ~ParquetFile();
  ParquetFile(ParquetFile&&) noexcept;
  ParquetFile& operator=(ParquetFile&&) noexcept;

  // Maps `path` and reads its footer and schema.
  static StatusOr<ParquetFile> open(const std::string& path);
  // The same over bytes the caller owns (they must outlive the object); `name` names it in errors.
  static StatusOr<ParquetFile> from_bytes(std::string_view bytes, const std::string& name);

  int64_t num_rows() const;
  int num_row_groups() const;
  // Leaf column paths in file order ("messages.list.element.role").
  std::vector<std::string> column_paths() const;

  // Calls fn(row, index) for every row in file order (index 0-based across the file); stops at
  // the first error, or the first non-OK status fn returns, and returns it.
  Status for_each_row(const std::function<Status(const OrderedJson& row, int64_t index)>& fn) const;
  // Decodes row group g into *rows (appended).
  Status read_row_group(int g, std::vector<OrderedJson>* rows) const;

 private:
  struct Impl;
  Status visit_row_group(int g, int64_t first_index, const std::function<Status(const OrderedJson&, int64_t)>& fn) const;
  std::unique_ptr<Impl> impl_;
};

// Gunzips a whole .gz file image (one or more members) into *out; errors start "WHAT: gzip-compressed: ":
// InvalidArgument past max_bytes, Corruption for a damaged or truncated stream.
Status gunzip_file(std::string_view data, const std::string& what, size_t max_bytes, std::string* out);

}  // namespace st
