// Reading one column chunk of one row group: its pages (dictionary, data v1 and v2; index pages
// skipped), decompressed and decoded into repetition levels, definition levels and the values of
// the entries that are defined.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/detail/parquet_encoding.h"
#include "io/detail/parquet_meta.h"
#include "io/detail/parquet_schema.h"

namespace st::parquet {

// One column chunk, decoded: entry i has levels rep[i] and def[i]; the entries whose def is the
// column's max_def have, in order, one value each in `values`.
struct ColumnData {
  std::vector<uint8_t> rep, def;
  Values values;
  int64_t rows = 0;  // entries with rep == 0
};

// Note [entry caps]: RLE lets a few bytes claim millions of levels, so what page headers may
// claim is capped: a page's entries at most kPageEntriesBase + 8 per decompressed byte, one row
// group's entries (all columns together) at most kGroupEntriesBase + 64 per byte of its column
// data. Real files stay far below (a 1 MiB page of non-null INT64 holds 131072); a small hostile
// file can make us allocate some hundreds of MB, not terabytes. Bytes are capped the same
// way: a row group's decompressed page sizes plus the bytes of its decoded byte arrays at most
// kGroupBytesBase + 2048 per byte of column data (deflate cannot expand more than ~1032 times).
constexpr int64_t kPageEntriesBase = int64_t{1} << 24;
constexpr int64_t kGroupEntriesBase = int64_t{1} << 25;
constexpr int64_t kGroupBytesBase = int64_t{1} << 30;

struct ChunkInput {
  const uint8_t* file = nullptr;  // the whole file
  size_t data_end = 0;            // where the footer starts: column data lies in [4, data_end)
  std::string where;              // "PATH: column 'x', row group 0": prefixes every error
  int64_t* entry_budget = nullptr;  // entries the row group may still hold; decremented
  int64_t* byte_budget = nullptr;   // bytes it may still decompress and decode; decremented
};

// Reads every page of the chunk described by `meta` into *out (cleared first). Errors are
// Corruption (or Unimplemented for a codec or encoding we do not read, named) prefixed with
// in.where and ", page N" (0-based, dictionary page included).
Status read_column_chunk(const ChunkInput& in, const ColumnChunkMeta& meta, const LeafColumn& leaf, ColumnData* out);

}  // namespace st::parquet
