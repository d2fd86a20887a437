#include "io/detail/parquet_column.h"

#include <algorithm>

#include "io/detail/parquet_codec.h"

namespace st::parquet {
namespace {

uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }

// State while walking the pages of one chunk.
class ChunkReader {
 public:
  ChunkReader(const ChunkInput& in, const ColumnChunkMeta& meta, const LeafColumn& leaf, ColumnData* out)
      : in_(in), meta_(meta), leaf_(leaf), out_(out) {}

  Status page(const PageHeader& h, Span body);

 private:
  Status dictionary_page(const PageHeader& h, Span body);
  Status data_page_v1(const PageHeader& h, Span body);
  Status data_page_v2(const PageHeader& h, Span body);
  Status check_entries(int64_t n, int64_t page_bytes);
  Status charge_bytes(int64_t n);
  Status decode(int32_t encoding, Span in, size_t count);
  // Levels of one page: a v1 section (4-byte length + RLE) or a v2 section (RLE, given length).
  Status levels_v1(Span buf, size_t* pos, int32_t encoding, int max, size_t n, std::vector<uint8_t>* out);
  Status values(int32_t encoding, Span in, size_t first_entry);

  const ChunkInput& in_;
  const ColumnChunkMeta& meta_;
  const LeafColumn& leaf_;
  ColumnData* out_;
  Values dict_;  // numeric types; byte arrays keep theirs in out_->values (Values::by_ref)
  size_t dict_size_ = 0;
  bool have_dict_ = false;
  std::string buf_, vbuf_;  // decompressed page, decompressed v2 values
};

Status ChunkReader::check_entries(int64_t n, int64_t page_bytes) {
  if (n < 0) return Corruption(Str() << "negative value count " << n);
  if (n > kPageEntriesBase + 8 * page_bytes)
    return Corruption(Str() << "page claims " << n << " values in " << page_bytes << " bytes (more than this reader accepts)");
  const int64_t have = static_cast<int64_t>(out_->def.size());
  if (n > meta_.num_values - have)
    return Corruption(Str() << "pages hold more values than the column chunk's " << meta_.num_values);
  if (n > *in_.entry_budget)
    return Corruption(Str() << "the row group holds more values than its bytes can describe (cap reached at " << have + n << ")");
  *in_.entry_budget -= n;
  return Status::OK();
}

Status ChunkReader::charge_bytes(int64_t n) {
  if (n > *in_.byte_budget)
    return Corruption("the row group decodes to more bytes than its column data can describe (cap reached)");
  *in_.byte_budget -= n;
  return Status::OK();
}

Status ChunkReader::page(const PageHeader& h, Span body) {
  switch (h.type) {
    case kDictionaryPage: return dictionary_page(h, body);
    case kDataPage: return data_page_v1(h, body);
    case kDataPageV2: return data_page_v2(h, body);
    default: return Status::OK();  // INDEX_PAGE and unknown kinds carry nothing we need
  }
}

Status ChunkReader::dictionary_page(const PageHeader& h, Span body) {
  if (!h.has_dict) return Corruption("dictionary page without a DictionaryPageHeader");
  if (have_dict_) return Corruption("a second dictionary page");
  if (!out_->def.empty()) return Corruption("dictionary page after data pages");
  if (h.encoding != kPlain && h.encoding != kPlainDictionary)
    return Unimplemented(Str() << "dictionary page in encoding " << encoding_name(h.encoding));
  if (h.num_values < 0 || h.num_values / 8 > h.uncompressed_size)
    return Corruption(Str() << "dictionary claims " << h.num_values << " values in " << h.uncompressed_size << " bytes");
  RETURN_IF_ERROR(charge_bytes(h.uncompressed_size));
  RETURN_IF_ERROR(decompress(meta_.codec, body.p, body.n, static_cast<size_t>(h.uncompressed_size), &buf_));
  const bool bytes = leaf_.type == kByteArray || leaf_.type == kFixedLenByteArray;
  Values* target = bytes ? &out_->values : &dict_;
  dict_.type = leaf_.type;
  RETURN_IF_ERROR(decode_values(leaf_.type, leaf_.type_length, kPlain, Span{reinterpret_cast<const uint8_t*>(buf_.data()), buf_.size()},
                                static_cast<size_t>(h.num_values), target),
                  "dictionary");
  RETURN_IF_ERROR(charge_bytes(static_cast<int64_t>(target->bytes.size())));
  if (target->stored() > UINT32_MAX) return Corruption("dictionary of more than 2^32 values");
  out_->values.by_ref = bytes;
  dict_size_ = bytes ? out_->values.stored() : dict_.size();
  have_dict_ = true;
  return Status::OK();
}

Status ChunkReader::levels_v1(Span buf, size_t* pos, int32_t encoding, int max, size_t n, std::vector<uint8_t>* out) {
  if (max == 0) {
    out->insert(out->end(), n, 0);
    return Status::OK();
  }
  if (encoding == kBitPacked) return Unimplemented("levels in the deprecated BIT_PACKED encoding");
  if (encoding != kRle) return Corruption(Str() << "levels in encoding " << encoding_name(encoding));
  if (buf.left(*pos) < 4) return Corruption("truncated level length");
  const uint32_t len = le32(buf.p + *pos);
  *pos += 4;
  if (len > buf.left(*pos)) return Corruption(Str() << "levels of " << len << " bytes, only " << buf.left(*pos) << " left");
  RETURN_IF_ERROR(decode_levels(Span{buf.p + *pos, len}, bit_width_of(static_cast<uint32_t>(max)), n, max, out));
  *pos += len;
  return Status::OK();
}

Status ChunkReader::values(int32_t encoding, Span in, size_t first_entry) {
  const uint8_t max_def = static_cast<uint8_t>(leaf_.max_def);
  const size_t count = static_cast<size_t>(std::count(out_->def.begin() + static_cast<ptrdiff_t>(first_entry), out_->def.end(), max_def));
  const size_t bytes_before = out_->values.bytes.size();
  RETURN_IF_ERROR(decode(encoding, in, count));
  return charge_bytes(static_cast<int64_t>(out_->values.bytes.size() - bytes_before));
}

// Appends the page's `count` values; dictionary indices become copies (numbers) or references
// into the stored dictionary (byte arrays).
Status ChunkReader::decode(int32_t encoding, Span in, size_t count) {
  Values& v = out_->values;
  if (encoding != kPlainDictionary && encoding != kRleDictionary) {
    const size_t stored_before = v.stored();
    RETURN_IF_ERROR(decode_values(leaf_.type, leaf_.type_length, encoding, in, count, &v));
    if (!v.by_ref) return Status::OK();
    if (v.stored() > UINT32_MAX) return Corruption("more than 2^32 values in one column chunk");
    for (size_t k = stored_before; k < v.stored(); ++k) v.refs.push_back(static_cast<uint32_t>(k));
    return Status::OK();
  }
  if (!have_dict_) return Corruption("dictionary-encoded page, but the column chunk has no dictionary page");
  if (count == 0) return Status::OK();
  if (in.n < 1) return Corruption("dictionary-encoded page without a bit width byte");
  std::vector<uint32_t> idx;
  RETURN_IF_ERROR(decode_hybrid(Span{in.p + 1, in.n - 1}, in.p[0], count, UINT32_MAX, &idx), "dictionary indices");
  for (uint32_t i : idx) {
    if (i >= dict_size_) return Corruption(Str() << "dictionary index " << i << " >= " << dict_size_);
    if (v.by_ref) v.refs.push_back(i);
    else v.append_from(dict_, i);
  }
  return Status::OK();
}

Status ChunkReader::data_page_v1(const PageHeader& h, Span body) {
  if (!h.has_v1) return Corruption("data page without a DataPageHeader");
  RETURN_IF_ERROR(check_entries(h.num_values, h.uncompressed_size));
  RETURN_IF_ERROR(charge_bytes(h.uncompressed_size));
  RETURN_IF_ERROR(decompress(meta_.codec, body.p, body.n, static_cast<size_t>(h.uncompressed_size), &buf_));
  const Span buf{reinterpret_cast<const uint8_t*>(buf_.data()), buf_.size()};
  const size_t n = static_cast<size_t>(h.num_values), first = out_->def.size();
  size_t pos = 0;
  RETURN_IF_ERROR(levels_v1(buf, &pos, h.rep_encoding, leaf_.max_rep, n, &out_->rep), "repetition levels");
  RETURN_IF_ERROR(levels_v1(buf, &pos, h.def_encoding, leaf_.max_def, n, &out_->def), "definition levels");
  return values(h.encoding, Span{buf.p + pos, buf.n - pos}, first);
}

Status ChunkReader::data_page_v2(const PageHeader& h, Span body) {
  if (!h.has_v2) return Corruption("data page v2 without a DataPageHeaderV2");
  RETURN_IF_ERROR(check_entries(h.num_values, h.uncompressed_size));
  RETURN_IF_ERROR(charge_bytes(h.uncompressed_size));
  if (h.rep_bytes < 0 || h.def_bytes < 0 || static_cast<uint64_t>(h.rep_bytes) + static_cast<uint64_t>(h.def_bytes) > body.n ||
      h.rep_bytes + static_cast<int64_t>(h.def_bytes) > h.uncompressed_size)
    return Corruption(Str() << "level sections of " << h.rep_bytes << " + " << h.def_bytes << " bytes in a page of " << body.n);
  const size_t n = static_cast<size_t>(h.num_values), first = out_->def.size();
  const size_t rb = static_cast<size_t>(h.rep_bytes), db = static_cast<size_t>(h.def_bytes);
  if (leaf_.max_rep > 0) {
    RETURN_IF_ERROR(decode_levels(Span{body.p, rb}, bit_width_of(static_cast<uint32_t>(leaf_.max_rep)), n, leaf_.max_rep, &out_->rep),
                    "repetition levels");
  } else {
    out_->rep.insert(out_->rep.end(), n, 0);
  }
  if (leaf_.max_def > 0) {
    RETURN_IF_ERROR(decode_levels(Span{body.p + rb, db}, bit_width_of(static_cast<uint32_t>(leaf_.max_def)), n, leaf_.max_def, &out_->def),
                    "definition levels");
  } else {
    out_->def.insert(out_->def.end(), n, 0);
  }
  Span v{body.p + rb + db, body.n - rb - db};
  if (h.is_compressed && meta_.codec != kUncompressed) {
    const size_t expected = static_cast<size_t>(h.uncompressed_size) - rb - db;
    RETURN_IF_ERROR(decompress(meta_.codec, v.p, v.n, expected, &vbuf_));
    v = Span{reinterpret_cast<const uint8_t*>(vbuf_.data()), vbuf_.size()};
  }
  return values(h.encoding, v, first);
}

Status check_chunk(const ChunkInput& in, const ColumnChunkMeta& meta, const LeafColumn& leaf, size_t* start, size_t* end) {
  if (meta.has_file_path) return Unimplemented("column data in another file (ColumnChunk.file_path)");
  if (!meta.has_meta_data) return Unimplemented("no column metadata (an encrypted column?)");
  if (meta.type != leaf.type)
    return Corruption(Str() << "type " << physical_type_name(meta.type) << ", the schema says " << physical_type_name(leaf.type));
  if (meta.path_in_schema != leaf.parts) return Corruption("path_in_schema differs from the schema's column path");
  if (!codec_supported(meta.codec))
    return Unimplemented(Str() << "codec " << codec_name(meta.codec)
                               << " is not supported (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are); rewrite the file with one of them");
  if (meta.num_values < 0) return Corruption(Str() << "num_values " << meta.num_values);
  int64_t s = meta.data_page_offset;
  if (meta.dictionary_page_offset > 0 && meta.dictionary_page_offset < s) s = meta.dictionary_page_offset;
  const int64_t n = meta.total_compressed_size;
  if (s < 4 || n < 0 || static_cast<uint64_t>(s) > in.data_end || static_cast<uint64_t>(n) > in.data_end - static_cast<uint64_t>(s))
    return Corruption(Str() << "column data at [" << s << ", +" << n << ") is outside the file's data section [4, " << in.data_end << ")");
  *start = static_cast<size_t>(s);
  *end = *start + static_cast<size_t>(n);
  return Status::OK();
}

}  // namespace

Status read_column_chunk(const ChunkInput& in, const ColumnChunkMeta& meta, const LeafColumn& leaf, ColumnData* out) {
  *out = ColumnData{};
  out->values.type = leaf.type;
  size_t pos = 0, end = 0;
  RETURN_IF_ERROR(check_chunk(in, meta, leaf, &pos, &end), in.where);
  ChunkReader reader(in, meta, leaf, out);
  for (int page = 0; static_cast<int64_t>(out->def.size()) < meta.num_values; ++page) {
    const std::string where = Str() << in.where << ", page " << page;
    if (pos >= end)
      return Corruption(Str() << in.where << ": the column chunk ends after " << out->def.size() << " of its " << meta.num_values
                              << " values");
    PageHeader h;
    size_t hlen = 0;
    RETURN_IF_ERROR(parse_page_header(in.file + pos, end - pos, &h, &hlen), where);
    pos += hlen;
    if (h.compressed_size < 0 || h.uncompressed_size < 0 || static_cast<size_t>(h.compressed_size) > end - pos)
      return Corruption(Str() << where << ": page of " << h.compressed_size << " bytes (uncompressed " << h.uncompressed_size
                              << "), only " << end - pos << " left in the column chunk");
    const Span body{in.file + pos, static_cast<size_t>(h.compressed_size)};
    pos += body.n;
    RETURN_IF_ERROR(reader.page(h, body), where);
  }
  if (out->rep.size() != out->def.size()) return Internal(in.where + ": level counts differ");
  out->rows = std::count(out->rep.begin(), out->rep.end(), uint8_t{0});
  if (!out->rep.empty() && out->rep[0] != 0) return Corruption(in.where + ": the first value continues a row (repetition level > 0)");
  return Status::OK();
}

}  // namespace st::parquet
