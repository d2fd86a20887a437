#include "io/parquet.h"

#include <algorithm>
#include <cstring>

#include "core/file.h"
#include "io/detail/parquet_assemble.h"
#include "io/detail/parquet_codec.h"
#include "io/detail/parquet_column.h"
#include "io/detail/parquet_meta.h"
#include "io/detail/parquet_schema.h"

namespace st {

struct ParquetFile::Impl {
  MappedFile file;  // empty for from_bytes
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string name;
  parquet::FileMeta meta;
  parquet::Schema schema;
  size_t data_end = 0;  // the footer starts here

  Status parse();
};

namespace {

uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }

}  // namespace

Status ParquetFile::Impl::parse() {
  // Layout: "PAR1" | column chunks | FileMetaData | u32 footer length | "PAR1".
  if (size < 12) return Corruption(Str() << name << ": a Parquet file of " << size << " bytes, too short to hold a footer");
  if (std::memcmp(data, "PAR1", 4) != 0) return Corruption(name + ": not a Parquet file (no PAR1 magic at the start)");
  if (std::memcmp(data + size - 4, "PARE", 4) == 0) return Unimplemented(name + ": an encrypted Parquet file (PARE)");
  if (std::memcmp(data + size - 4, "PAR1", 4) != 0)
    return Corruption(name + ": no PAR1 magic at the end of the file (truncated or damaged)");
  const uint32_t footer = le32(data + size - 8);
  if (footer > size - 12)
    return Corruption(Str() << name << ": footer length " << footer << " reaches before the start of the " << size << "-byte file");
  data_end = size - 8 - footer;
  RETURN_IF_ERROR(parquet::parse_file_meta(data + data_end, footer, &meta), name);
  if (meta.encrypted) return Unimplemented(name + ": an encrypted Parquet file");
  ASSIGN_OR_RETURN(schema, parquet::Schema::build(meta.schema), name);
  const size_t ncols = schema.leaves().size();
  int64_t rows = 0;
  for (size_t g = 0; g < meta.row_groups.size(); ++g) {
    const auto& rg = meta.row_groups[g];
    if (rg.num_rows < 0 || rg.num_rows > INT64_MAX - rows)
      return Corruption(Str() << name << ": row group " << g << " has " << rg.num_rows << " rows");
    rows += rg.num_rows;
    if (rg.columns.size() != ncols)
      return Corruption(Str() << name << ": row group " << g << " has " << rg.columns.size() << " columns, the schema " << ncols);
  }
  if (rows != meta.num_rows)
    return Corruption(Str() << name << ": the footer says " << meta.num_rows << " rows, its row groups hold " << rows);
  return Status::OK();
}

ParquetFile::ParquetFile() = default;
ParquetFile::~ParquetFile() = default;
ParquetFile::ParquetFile(ParquetFile&&) noexcept = default;
ParquetFile& ParquetFile::operator=(ParquetFile&&) noexcept = default;

StatusOr<ParquetFile> ParquetFile::open(const std::string& path) {
  ParquetFile f;
  f.impl_ = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(f.impl_->file, MappedFile::open(path));
  f.impl_->data = f.impl_->file.data();
  f.impl_->size = f.impl_->file.size();
  f.impl_->name = path;
  RETURN_IF_ERROR(f.impl_->parse());
  return f;
}

StatusOr<ParquetFile> ParquetFile::from_bytes(std::string_view bytes, const std::string& name) {
  ParquetFile f;
  f.impl_ = std::make_unique<Impl>();
  f.impl_->data = reinterpret_cast<const uint8_t*>(bytes.data());
  f.impl_->size = bytes.size();
  f.impl_->name = name;
  RETURN_IF_ERROR(f.impl_->parse());
  return f;
}

int64_t ParquetFile::num_rows() const { return impl_->meta.num_rows; }
int ParquetFile::num_row_groups() const { return static_cast<int>(impl_->meta.row_groups.size()); }

std::vector<std::string> ParquetFile::column_paths() const {
  std::vector<std::string> out;
  for (const auto& leaf : impl_->schema.leaves()) out.push_back(leaf.path);
  return out;
}

Status ParquetFile::visit_row_group(int g, int64_t first_index, const std::function<Status(const OrderedJson&, int64_t)>& fn) const {
  const Impl& m = *impl_;
  const parquet::RowGroupMeta& rg = m.meta.row_groups[static_cast<size_t>(g)];
  if (rg.num_rows == 0) return Status::OK();
  // Note [entry caps]: what the row group's pages may claim, all columns together.
  int64_t budget = parquet::kGroupEntriesBase, byte_budget = parquet::kGroupBytesBase;
  for (const auto& c : rg.columns) {
    const int64_t bytes = std::min<int64_t>(std::max<int64_t>(c.total_compressed_size, 0), static_cast<int64_t>(m.data_end));
    budget = std::min<int64_t>(budget + 64 * bytes, INT64_MAX / 2);
    byte_budget = std::min<int64_t>(byte_budget + 2048 * bytes, INT64_MAX / 2);
  }
  const auto& leaves = m.schema.leaves();
  std::vector<parquet::ColumnData> cols(leaves.size());
  for (size_t c = 0; c < leaves.size(); ++c) {
    parquet::ChunkInput in;
    in.file = m.data;
    in.data_end = m.data_end;
    in.where = Str() << m.name << ": column '" << leaves[c].path << "', row group " << g;
    in.entry_budget = &budget;
    in.byte_budget = &byte_budget;
    RETURN_IF_ERROR(parquet::read_column_chunk(in, rg.columns[c], leaves[c], &cols[c]));
    if (cols[c].rows != rg.num_rows)
      return Corruption(Str() << in.where << ": " << cols[c].rows << " rows, the row group has " << rg.num_rows);
  }
  parquet::RowAssembler rows(m.schema, cols, Str() << m.name << ": row group " << g);
  OrderedJson row;
  for (int64_t i = 0; i < rg.num_rows; ++i) {
    RETURN_IF_ERROR(rows.next(&row));
    RETURN_IF_ERROR(fn(row, first_index + i));
  }
  return Status::OK();
}

Status ParquetFile::for_each_row(const std::function<Status(const OrderedJson& row, int64_t index)>& fn) const {
  int64_t index = 0;
  for (int g = 0; g < num_row_groups(); ++g) {
    RETURN_IF_ERROR(visit_row_group(g, index, fn));
    index += impl_->meta.row_groups[static_cast<size_t>(g)].num_rows;
  }
  return Status::OK();
}

Status ParquetFile::read_row_group(int g, std::vector<OrderedJson>* rows) const {
  if (g < 0 || g >= num_row_groups())
    return InvalidArgument(Str() << impl_->name << ": row group " << g << " of " << num_row_groups());
  return visit_row_group(g, 0, [&](const OrderedJson& row, int64_t) {
    rows->push_back(row);
    return Status::OK();
  });
}

Status gunzip_file(std::string_view data, const std::string& what, size_t max_bytes, std::string* out) {
  RETURN_IF_ERROR(parquet::gunzip(data, max_bytes, out), what << ": gzip-compressed");
  return Status::OK();
}

}  // namespace st
