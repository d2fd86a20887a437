#include "io/detail/parquet_meta.h"

#include "io/detail/thrift_compact.h"

namespace st::parquet {
namespace {

using thrift::CompactReader;
using thrift::FieldHeader;

// Calls on_field(f) for each field of the struct at the reader's position; fields it does not
// consume (returns false) are skipped, whatever their type.
template <class Fn>
void read_struct(CompactReader& r, Fn&& on_field) {
  r.begin_struct();
  FieldHeader f;
  while (r.next_field(&f)) {
    if (!on_field(f)) r.skip(f.type);
  }
  r.end_struct();
}

// Field-type-checked scalar reads: on a type mismatch the reader fails (with the names).
void get_i32(CompactReader& r, const FieldHeader& f, const char* s, const char* name, int32_t* v) {
  if (r.expect(f, thrift::kI32, s, name)) *v = r.read_i32();
}
void get_i64(CompactReader& r, const FieldHeader& f, const char* s, const char* name, int64_t* v) {
  if (r.expect(f, thrift::kI64, s, name)) *v = r.read_i64();
}
void get_bool(CompactReader& r, const FieldHeader& f, const char* s, const char* name, bool* v) {
  if (r.expect(f, thrift::kTrue, s, name)) *v = r.field_bool(f);
}

// Reads a list field whose elements have compact type `elem`, calling read_elem(out->back()).
template <class T, class Fn>
void get_list(CompactReader& r, const FieldHeader& f, const char* s, const char* name, uint8_t elem, std::vector<T>* out,
              Fn&& read_elem) {
  if (!r.expect(f, thrift::kList, s, name)) return;
  uint8_t et = 0;
  const uint32_t n = r.read_list_header(&et);
  if (n > 0 && et != elem) {
    r.fail(Str() << s << "." << name << ": list of " << thrift::ctype_name(et) << ", expected " << thrift::ctype_name(elem));
    return;
  }
  for (uint32_t i = 0; i < n && !r.failed(); ++i) {
    out->emplace_back();
    read_elem(out->back());
  }
}

// Fails the reader when a required field (bit id of `seen`) is missing.
void require(CompactReader& r, uint32_t seen, std::initializer_list<int> ids, const char* s) {
  for (int id : ids) {
    if (!(seen & (1u << id))) {
      r.fail(Str() << s << ": required field " << id << " missing");
      return;
    }
  }
}

uint32_t bit(const FieldHeader& f) { return f.id > 0 && f.id < 32 ? 1u << f.id : 0; }

void read_logical_type(CompactReader& r, SchemaElement* e) {
  static const Logical kById[] = {
      Logical::kOther,  Logical::kString, Logical::kMap,     Logical::kList,    Logical::kEnum,   Logical::kDecimal,
      Logical::kDate,   Logical::kTime,   Logical::kTimestamp, Logical::kOther, Logical::kInteger, Logical::kUnknown,
      Logical::kJson,   Logical::kBson,   Logical::kUuid,    Logical::kFloat16,
  };
  read_struct(r, [&](const FieldHeader& f) {
    e->logical = f.id >= 0 && f.id < static_cast<int>(sizeof(kById) / sizeof(kById[0])) ? kById[f.id] : Logical::kOther;
    if (e->logical == Logical::kInteger && r.expect(f, thrift::kStruct, "LogicalType", "INTEGER")) {
      read_struct(r, [&](const FieldHeader& g) {
        if (g.id == 1 && r.expect(g, thrift::kByte, "IntType", "bitWidth")) e->int_bit_width = r.read_byte();
        else if (g.id == 2) get_bool(r, g, "IntType", "isSigned", &e->int_signed);
        else return false;
        return true;
      });
      return true;
    }
    if (e->logical == Logical::kDecimal && r.expect(f, thrift::kStruct, "LogicalType", "DECIMAL")) {
      read_struct(r, [&](const FieldHeader& g) {
        if (g.id != 1) return false;
        get_i32(r, g, "DecimalType", "scale", &e->decimal_scale);
        return true;
      });
      return true;
    }
    return false;  // other members: empty structs or parameters we do not need
  });
}

void read_schema_element(CompactReader& r, SchemaElement* e) {
  uint32_t seen = 0;
  read_struct(r, [&](const FieldHeader& f) {
    seen |= bit(f);
    const char* s = "SchemaElement";
    switch (f.id) {
      case 1: get_i32(r, f, s, "type", &e->type); return true;
      case 2: get_i32(r, f, s, "type_length", &e->type_length); return true;
      case 3: get_i32(r, f, s, "repetition_type", &e->repetition); return true;
      case 4:
        if (r.expect(f, thrift::kBinary, s, "name")) e->name = std::string(r.read_binary());
        return true;
      case 5: get_i32(r, f, s, "num_children", &e->num_children); return true;
      case 6: get_i32(r, f, s, "converted_type", &e->converted_type); return true;
      case 7: get_i32(r, f, s, "scale", &e->scale); return true;
      case 10:
        if (r.expect(f, thrift::kStruct, s, "logicalType")) read_logical_type(r, e);
        return true;
      default: return false;
    }
  });
  require(r, seen, {4}, "SchemaElement");
  if (e->logical == Logical::kDecimal && e->decimal_scale == 0) e->decimal_scale = e->scale;
  if (e->logical == Logical::kNone && e->converted_type == kCtDecimal) e->decimal_scale = e->scale;
}

void read_column_meta(CompactReader& r, ColumnChunkMeta* c) {
  uint32_t seen = 0;
  const char* s = "ColumnMetaData";
  read_struct(r, [&](const FieldHeader& f) {
    seen |= bit(f);
    switch (f.id) {
      case 1: get_i32(r, f, s, "type", &c->type); return true;
      case 3:
        get_list(r, f, s, "path_in_schema", thrift::kBinary, &c->path_in_schema,
                 [&](std::string& p) { p = std::string(r.read_binary()); });
        return true;
      case 4: get_i32(r, f, s, "codec", &c->codec); return true;
      case 5: get_i64(r, f, s, "num_values", &c->num_values); return true;
      case 7: get_i64(r, f, s, "total_compressed_size", &c->total_compressed_size); return true;
      case 9: get_i64(r, f, s, "data_page_offset", &c->data_page_offset); return true;
      case 11: get_i64(r, f, s, "dictionary_page_offset", &c->dictionary_page_offset); return true;
      default: return false;
    }
  });
  require(r, seen, {1, 3, 4, 5, 7, 9}, s);
}

void read_column_chunk(CompactReader& r, ColumnChunkMeta* c) {
  read_struct(r, [&](const FieldHeader& f) {
    if (f.id == 1) {
      c->has_file_path = true;
      return false;
    }
    if (f.id != 3) return false;
    c->has_meta_data = true;
    if (r.expect(f, thrift::kStruct, "ColumnChunk", "meta_data")) read_column_meta(r, c);
    return true;
  });
}

void read_row_group(CompactReader& r, RowGroupMeta* g) {
  uint32_t seen = 0;
  read_struct(r, [&](const FieldHeader& f) {
    seen |= bit(f);
    if (f.id == 1) {
      get_list(r, f, "RowGroup", "columns", thrift::kStruct, &g->columns,
               [&](ColumnChunkMeta& c) { read_column_chunk(r, &c); });
      return true;
    }
    if (f.id == 3) {
      get_i64(r, f, "RowGroup", "num_rows", &g->num_rows);
      return true;
    }
    return false;
  });
  require(r, seen, {1, 3}, "RowGroup");
}

}  // namespace

const char* physical_type_name(int32_t t) {
  static const char* const k[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  return t >= 0 && t < 8 ? k[t] : "(unknown type)";
}

const char* codec_name(int32_t c) {
  static const char* const k[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
  return c >= 0 && c < 8 ? k[c] : "(unknown codec)";
}

const char* encoding_name(int32_t e) {
  static const char* const k[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED", "DELTA_BINARY_PACKED",
                                  "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
  return e >= 0 && e < 10 ? k[e] : "(unknown encoding)";
}

Status parse_file_meta(const uint8_t* p, size_t n, FileMeta* out) {
  CompactReader r(p, n);
  uint32_t seen = 0;
  const char* s = "FileMetaData";
  read_struct(r, [&](const FieldHeader& f) {
    seen |= bit(f);
    switch (f.id) {
      case 1: get_i32(r, f, s, "version", &out->version); return true;
      case 2:
        get_list(r, f, s, "schema", thrift::kStruct, &out->schema, [&](SchemaElement& e) { read_schema_element(r, &e); });
        return true;
      case 3: get_i64(r, f, s, "num_rows", &out->num_rows); return true;
      case 4:
        get_list(r, f, s, "row_groups", thrift::kStruct, &out->row_groups, [&](RowGroupMeta& g) { read_row_group(r, &g); });
        return true;
      case 8: out->encrypted = true; return false;
      default: return false;
    }
  });
  require(r, seen, {2, 3, 4}, s);
  if (r.failed()) return Corruption("footer (FileMetaData): " + r.error());
  return Status::OK();
}

Status parse_page_header(const uint8_t* p, size_t n, PageHeader* out, size_t* header_len) {
  CompactReader r(p, n);
  uint32_t seen = 0;
  const char* s = "PageHeader";
  read_struct(r, [&](const FieldHeader& f) {
    seen |= bit(f);
    switch (f.id) {
      case 1: get_i32(r, f, s, "type", &out->type); return true;
      case 2: get_i32(r, f, s, "uncompressed_page_size", &out->uncompressed_size); return true;
      case 3: get_i32(r, f, s, "compressed_page_size", &out->compressed_size); return true;
      case 5:
        out->has_v1 = true;
        if (!r.expect(f, thrift::kStruct, s, "data_page_header")) return true;
        read_struct(r, [&](const FieldHeader& g) {
          const char* t = "DataPageHeader";
          switch (g.id) {
            case 1: get_i32(r, g, t, "num_values", &out->num_values); return true;
            case 2: get_i32(r, g, t, "encoding", &out->encoding); return true;
            case 3: get_i32(r, g, t, "definition_level_encoding", &out->def_encoding); return true;
            case 4: get_i32(r, g, t, "repetition_level_encoding", &out->rep_encoding); return true;
            default: return false;
          }
        });
        return true;
      case 7:
        out->has_dict = true;
        if (!r.expect(f, thrift::kStruct, s, "dictionary_page_header")) return true;
        read_struct(r, [&](const FieldHeader& g) {
          const char* t = "DictionaryPageHeader";
          switch (g.id) {
            case 1: get_i32(r, g, t, "num_values", &out->num_values); return true;
            case 2: get_i32(r, g, t, "encoding", &out->encoding); return true;
            default: return false;
          }
        });
        return true;
      case 8:
        out->has_v2 = true;
        if (!r.expect(f, thrift::kStruct, s, "data_page_header_v2")) return true;
        read_struct(r, [&](const FieldHeader& g) {
          const char* t = "DataPageHeaderV2";
          switch (g.id) {
            case 1: get_i32(r, g, t, "num_values", &out->num_values); return true;
            case 2: get_i32(r, g, t, "num_nulls", &out->num_nulls); return true;
            case 3: get_i32(r, g, t, "num_rows", &out->num_rows); return true;
            case 4: get_i32(r, g, t, "encoding", &out->encoding); return true;
            case 5: get_i32(r, g, t, "definition_levels_byte_length", &out->def_bytes); return true;
            case 6: get_i32(r, g, t, "repetition_levels_byte_length", &out->rep_bytes); return true;
            case 7: get_bool(r, g, t, "is_compressed", &out->is_compressed); return true;
            default: return false;
          }
        });
        return true;
      default: return false;
    }
  });
  require(r, seen, {1, 2, 3}, s);
  if (r.failed()) return Corruption("page header: " + r.error());
  *header_len = r.pos();
  return Status::OK();
}

}  // namespace st::parquet
