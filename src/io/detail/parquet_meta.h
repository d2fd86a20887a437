// Parquet footer and page-header structures (parquet.thrift), reduced to the fields the reader
// uses, and their decoding from the Thrift compact protocol. Unknown fields of any type are
// skipped. Required fields that are missing, and fields of the wrong type, are errors. Values are
// not range-checked here beyond what parsing needs (counts are checked against the bytes left);
// the reader checks offsets, sizes and levels against the file when it uses them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace st::parquet {

// Physical types (parquet.thrift Type).
enum PhysicalType : int32_t {
  kBoolean = 0, kInt32 = 1, kInt64 = 2, kInt96 = 3, kFloat = 4, kDouble = 5, kByteArray = 6, kFixedLenByteArray = 7,
};
enum Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };
// Legacy ConvertedType values the reader looks at.
enum ConvertedType : int32_t {
  kCtUtf8 = 0, kCtMap = 1, kCtMapKeyValue = 2, kCtList = 3, kCtEnum = 4, kCtDecimal = 5,
  kCtUint8 = 11, kCtUint16 = 12, kCtUint32 = 13, kCtUint64 = 14, kCtJson = 19, kCtBson = 20,
};
enum Codec : int32_t {
  kUncompressed = 0, kSnappy = 1, kGzip = 2, kLzo = 3, kBrotli = 4, kLz4 = 5, kZstd = 6, kLz4Raw = 7,
};
enum Encoding : int32_t {
  kPlain = 0, kPlainDictionary = 2, kRle = 3, kBitPacked = 4, kDeltaBinaryPacked = 5,
  kDeltaLengthByteArray = 6, kDeltaByteArray = 7, kRleDictionary = 8, kByteStreamSplit = 9,
};
enum PageType : int32_t { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };

// The LogicalType union member that is set (parquet.thrift field ids).
enum class Logical : int8_t {
  kNone, kString, kMap, kList, kEnum, kDecimal, kDate, kTime, kTimestamp, kInteger, kUnknown, kJson, kBson,
  kUuid, kFloat16, kOther,
};

const char* physical_type_name(int32_t t);
const char* codec_name(int32_t c);
const char* encoding_name(int32_t e);

struct SchemaElement {
  std::string name;
  int32_t type = -1;  // PhysicalType; -1 = not set (a group)
  int32_t type_length = 0;
  int32_t repetition = kRequired;
  int32_t num_children = -1;  // -1 = not set
  int32_t converted_type = -1;
  int32_t scale = 0;
  Logical logical = Logical::kNone;
  int8_t int_bit_width = 0;  // Logical::kInteger
  bool int_signed = true;
  int32_t decimal_scale = 0;  // Logical::kDecimal
};

struct ColumnChunkMeta {
  bool has_file_path = false;  // data in another file: refused
  bool has_meta_data = false;  // absent in encrypted files
  int32_t type = -1;
  std::vector<std::string> path_in_schema;
  int32_t codec = kUncompressed;
  int64_t num_values = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = -1;
  int64_t dictionary_page_offset = -1;  // -1 = not set
};

struct RowGroupMeta {
  std::vector<ColumnChunkMeta> columns;
  int64_t num_rows = 0;
};

struct FileMeta {
  int32_t version = 0;
  std::vector<SchemaElement> schema;
  int64_t num_rows = 0;
  std::vector<RowGroupMeta> row_groups;
  bool encrypted = false;  // encryption_algorithm set (plaintext-footer encryption)
};

struct PageHeader {
  int32_t type = -1;
  int32_t uncompressed_size = -1;
  int32_t compressed_size = -1;
  bool has_v1 = false, has_v2 = false, has_dict = false;
  int32_t num_values = 0;         // v1, v2 and dictionary pages
  int32_t encoding = kPlain;      // values (or dictionary) encoding
  int32_t def_encoding = kRle;    // v1 only
  int32_t rep_encoding = kRle;    // v1 only
  int32_t num_nulls = 0;          // v2
  int32_t num_rows = 0;           // v2
  int32_t def_bytes = 0;          // v2
  int32_t rep_bytes = 0;          // v2
  bool is_compressed = true;      // v2
};

// Decodes FileMetaData from the footer bytes [p, p + n). The message of an error says which
// struct and field and the byte offset in the footer.
Status parse_file_meta(const uint8_t* p, size_t n, FileMeta* out);
// Decodes one PageHeader from the start of [p, p + n); *header_len is its encoded length.
Status parse_page_header(const uint8_t* p, size_t n, PageHeader* out, size_t* header_len);

}  // namespace st::parquet
