#include "io/arrow.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/utf8.h"

namespace st {
namespace {

// Every check below that fails throws this; for_each_arrow_row turns it into a Corruption (or
// Unimplemented) naming the file. It never leaves this file.
struct ArrowError {
  bool unimplemented;
  std::string msg;
};
[[noreturn]] void corrupt(const std::string& m) { throw ArrowError{false, m}; }
[[noreturn]] void unsupported(const std::string& m) { throw ArrowError{true, m}; }

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// ---- flatbuffers (the Message metadata), bounds-checked --------------------------------------

class Flat {
 public:
  struct Table {
    size_t pos = 0, vt = 0, vt_len = 0;
  };
  Flat(const uint8_t* b, size_t n) : b_(b), n_(n) {}

  Table root() const { return table(u32(0)); }

  // Field `id` of table t: its position, 0 when absent.
  size_t field(const Table& t, int id) const {
    const size_t slot = 4 + 2 * static_cast<size_t>(id);
    if (slot + 2 > t.vt_len) return 0;
    const size_t off = u16(t.vt + slot);
    if (off == 0) return 0;
    need(t.pos + off, 1);
    return t.pos + off;
  }
  template <typename T>
  T scalar(const Table& t, int id, T dflt) const {
    const size_t at = field(t, id);
    if (at == 0) return dflt;
    need(at, sizeof(T));
    return load<T>(b_ + at);
  }
  bool has(const Table& t, int id) const { return field(t, id) != 0; }
  // The table an offset field points to.
  Table sub(const Table& t, int id, const char* what) const {
    const size_t at = field(t, id);
    if (at == 0) corrupt(std::string("missing ") + what);
    return table(deref(at));
  }
  // A vector field: its element count and first element's position (count 0 when absent).
  std::pair<size_t, size_t> vec(const Table& t, int id, size_t elem_size) const {
    const size_t at = field(t, id);
    if (at == 0) return {0, 0};
    const size_t v = deref(at);
    const size_t count = u32(v);
    if (count > (n_ - v - 4) / elem_size) corrupt("a metadata vector runs past its message");
    return {count, v + 4};
  }
  Table table_at_elem(size_t elem_pos) const { return table(deref(elem_pos)); }
  std::string str(const Table& t, int id) const {
    const size_t at = field(t, id);
    if (at == 0) return {};
    const size_t s = deref(at);
    const size_t len = u32(s);
    need(s + 4, len);
    return std::string(reinterpret_cast<const char*>(b_ + s + 4), len);
  }
  int64_t i64(size_t at) const {
    need(at, 8);
    return load<int64_t>(b_ + at);
  }

 private:
  void need(size_t at, size_t len) const {
    if (at > n_ || len > n_ - at) corrupt("a metadata offset points past its message");
  }
  uint32_t u32(size_t at) const {
    need(at, 4);
    return load<uint32_t>(b_ + at);
  }
  uint16_t u16(size_t at) const {
    need(at, 2);
    return load<uint16_t>(b_ + at);
  }
  size_t deref(size_t at) const {
    const size_t target = at + u32(at);
    need(target, 4);
    return target;
  }
  Table table(size_t pos) const {
    need(pos, 4);
    const int64_t vt = static_cast<int64_t>(pos) - load<int32_t>(b_ + pos);
    if (vt < 0 || static_cast<size_t>(vt) + 4 > n_) corrupt("a metadata table's vtable is out of range");
    Table t{pos, static_cast<size_t>(vt), u16(static_cast<size_t>(vt))};
    if (t.vt_len < 4 || t.vt_len % 2 != 0) corrupt("a metadata vtable has a bad size");
    need(t.vt, t.vt_len);
    return t;
  }

  const uint8_t* b_;
  size_t n_;
};

// ---- the schema ------------------------------------------------------------------------------

enum class Kind { kNull, kBool, kInt, kFloat, kUtf8, kBinary, kFixedBinary, kList, kFixedList, kStruct, kMap, kOpaque };

// Schema.fbs's Type union tags used here.
enum TypeTag : uint8_t {
  kTNull = 1, kTInt = 2, kTFloat = 3, kTBinary = 4, kTUtf8 = 5, kTBool = 6, kTDecimal = 7, kTDate = 8, kTTime = 9,
  kTTimestamp = 10, kTInterval = 11, kTList = 12, kTStruct = 13, kTUnion = 14, kTFixedBinary = 15, kTFixedList = 16,
  kTMap = 17, kTDuration = 18, kTLargeBinary = 19, kTLargeUtf8 = 20, kTLargeList = 21, kTRunEnd = 22,
};

struct FieldDesc {
  std::string name;
  Kind kind = Kind::kNull;
  int width = 0;        // bytes a value: Int / Float / fixed-width / opaque; FixedSizeBinary's width
  bool is_signed = true;
  bool large = false;   // 64-bit offsets
  bool as_int = false;  // Date / Time / Timestamp / Duration: read as their integer
  int64_t list_size = 0;  // FixedSizeList
  std::vector<FieldDesc> children;
};

constexpr int kMaxDepth = 64;

FieldDesc read_field(const Flat& f, const Flat::Table& t, int depth) {
  if (depth > kMaxDepth) corrupt("the schema nests deeper than 64 levels");
  FieldDesc d;
  d.name = f.str(t, 0);
  if (!valid_utf8(d.name)) corrupt("a column name is not valid UTF-8");
  const std::string col = "column '" + d.name + "': ";
  if (f.has(t, 4)) unsupported(col + "dictionary-encoded columns are not read");
  const uint8_t tag = f.scalar<uint8_t>(t, 2, 0);
  auto type = [&] { return f.sub(t, 3, "a field's type"); };
  switch (tag) {
    case kTNull: d.kind = Kind::kNull; break;
    case kTBool: d.kind = Kind::kBool; break;
    case kTInt: {
      const Flat::Table ty = type();
      const int32_t bits = f.scalar<int32_t>(ty, 0, 0);
      if (bits != 8 && bits != 16 && bits != 32 && bits != 64) corrupt(col + "an Int of " + std::to_string(bits) + " bits");
      d.kind = Kind::kInt, d.width = bits / 8, d.is_signed = f.scalar<uint8_t>(ty, 1, 0) != 0;
      break;
    }
    case kTFloat: {
      const int16_t p = f.scalar<int16_t>(type(), 0, 0);
      if (p < 0 || p > 2) corrupt(col + "a FloatingPoint of unknown precision");
      d.kind = Kind::kFloat, d.width = 2 << p;
      break;
    }
    case kTUtf8: case kTLargeUtf8: d.kind = Kind::kUtf8, d.large = tag == kTLargeUtf8; break;
    case kTBinary: case kTLargeBinary: d.kind = Kind::kBinary, d.large = tag == kTLargeBinary; break;
    case kTFixedBinary: {
      const int32_t w = f.scalar<int32_t>(type(), 0, 0);
      if (w < 0 || w > (1 << 20)) corrupt(col + "a FixedSizeBinary of width " + std::to_string(w));
      d.kind = Kind::kFixedBinary, d.width = w;
      break;
    }
    case kTList: case kTLargeList: d.kind = Kind::kList, d.large = tag == kTLargeList; break;
    case kTFixedList: {
      const int32_t n = f.scalar<int32_t>(type(), 0, 0);
      if (n < 0) corrupt(col + "a FixedSizeList of negative size");
      d.kind = Kind::kFixedList, d.list_size = n;
      break;
    }
    case kTStruct: d.kind = Kind::kStruct; break;
    case kTMap: d.kind = Kind::kMap; break;
    case kTDate: d.kind = Kind::kOpaque, d.as_int = true, d.width = f.scalar<int16_t>(type(), 0, 1) == 0 ? 4 : 8; break;
    case kTTime: {
      const int32_t bits = f.scalar<int32_t>(type(), 1, 32);
      if (bits != 32 && bits != 64) corrupt(col + "a Time of " + std::to_string(bits) + " bits");
      d.kind = Kind::kOpaque, d.as_int = true, d.width = bits / 8;
      break;
    }
    case kTTimestamp: case kTDuration: d.kind = Kind::kOpaque, d.as_int = true, d.width = 8; break;
    case kTDecimal: {
      const int32_t bits = f.scalar<int32_t>(type(), 2, 128);
      if (bits != 32 && bits != 64 && bits != 128 && bits != 256) corrupt(col + "a Decimal of " + std::to_string(bits) + " bits");
      d.kind = Kind::kOpaque, d.width = bits / 8;
      break;
    }
    case kTInterval: {
      const int16_t u = f.scalar<int16_t>(type(), 0, 0);
      d.kind = Kind::kOpaque, d.width = u == 0 ? 4 : u == 1 ? 8 : 16;
      break;
    }
    case kTUnion: unsupported(col + "union columns are not read");
    case kTRunEnd: unsupported(col + "run-end encoded columns are not read");
    default: unsupported(col + "Arrow type " + std::to_string(tag) + " is not read (views and newer types)");
  }
  const auto [count, at] = f.vec(t, 5, 4);
  for (size_t i = 0; i < count; ++i) d.children.push_back(read_field(f, f.table_at_elem(at + 4 * i), depth + 1));
  const size_t want = d.kind == Kind::kList || d.kind == Kind::kFixedList || d.kind == Kind::kMap ? 1
                      : d.kind == Kind::kStruct                                                  ? d.children.size()
                                                                                                 : 0;
  if (d.children.size() != want) corrupt(col + "has " + std::to_string(d.children.size()) + " child fields");
  if (d.kind == Kind::kMap) {
    const FieldDesc& e = d.children[0];
    if (e.kind != Kind::kStruct || e.children.size() != 2) corrupt(col + "a Map whose entries are not {key, value}");
  }
  return d;
}

// ---- a record batch's columns ----------------------------------------------------------------

struct Buf {
  const uint8_t* p = nullptr;
  int64_t len = 0;
};

struct Column {
  const FieldDesc* f = nullptr;
  int64_t length = 0;
  Buf validity, offsets, data;
  std::vector<Column> children;
};

class BatchReader {
 public:
  BatchReader(const Flat& meta, const Flat::Table& rb, const uint8_t* body, int64_t body_len)
      : body_(body), body_len_(body_len) {
    std::tie(node_count_, nodes_at_) = meta.vec(rb, 1, 16);
    std::tie(buf_count_, bufs_at_) = meta.vec(rb, 2, 16);
    meta_ = &meta;
  }

  Column column(const FieldDesc& f, int depth) {
    if (depth > kMaxDepth) corrupt("nesting deeper than 64 levels");
    Column c;
    c.f = &f;
    const std::string col = "column '" + f.name + "': ";
    if (next_node_ >= node_count_) corrupt(col + "the batch has fewer field nodes than the schema has fields");
    c.length = meta_->i64(nodes_at_ + 16 * next_node_);
    const int64_t nulls = meta_->i64(nodes_at_ + 16 * next_node_ + 8);
    ++next_node_;
    if (c.length < 0 || nulls < 0 || nulls > c.length) corrupt(col + "a field node with a bad length or null count");
    // As a batch's row count: only Null columns hold no bytes a value, and those few.
    if (c.length / 8 > body_len_ + 512) corrupt(col + "a length of " + std::to_string(c.length) + " that the body cannot hold");
    if (f.kind != Kind::kNull) {
      c.validity = buffer(col);
      if (nulls > 0 && c.validity.len < (c.length + 7) / 8) corrupt(col + "its validity bitmap is too short");
      if (nulls == 0) c.validity = {};
    }
    auto need_data = [&](int64_t bytes_per, const char* what) {
      if (bytes_per > 0 && c.length > c.data.len / bytes_per) corrupt(col + what + " buffer is too short");
    };
    switch (f.kind) {
      case Kind::kNull: break;
      case Kind::kBool:
        c.data = buffer(col);
        if (c.data.len < (c.length + 7) / 8) corrupt(col + "its data bitmap is too short");
        break;
      case Kind::kInt: case Kind::kFloat: case Kind::kOpaque: case Kind::kFixedBinary:
        c.data = buffer(col);
        need_data(f.width, "its data");
        break;
      case Kind::kUtf8: case Kind::kBinary: case Kind::kList: case Kind::kMap: {
        c.offsets = buffer(col);
        const int64_t w = f.large ? 8 : 4;
        if (c.length > 0 && c.offsets.len / w < c.length + 1) corrupt(col + "its offsets buffer is too short");
        if (f.kind == Kind::kUtf8 || f.kind == Kind::kBinary) c.data = buffer(col);
        break;
      }
      case Kind::kFixedList: case Kind::kStruct: break;
    }
    for (const FieldDesc& ch : f.children) c.children.push_back(column(ch, depth + 1));
    if (f.kind == Kind::kStruct)
      for (const Column& ch : c.children)
        if (ch.length < c.length) corrupt(col + "a struct child is shorter than the struct");
    if (f.kind == Kind::kFixedList && f.list_size > 0 && c.children[0].length / f.list_size < c.length)
      corrupt(col + "a fixed-size list's values are too few");
    return c;
  }

  // Every node and buffer taken: a batch that holds more than its schema describes is damaged.
  void check_all_used() const {
    if (next_node_ != node_count_) corrupt("the batch has more field nodes than the schema has fields");
    if (next_buf_ != buf_count_) corrupt("the batch has more buffers than its columns use");
  }

 private:
  Buf buffer(const std::string& col) {
    if (next_buf_ >= buf_count_) corrupt(col + "the batch has fewer buffers than its columns need");
    const int64_t off = meta_->i64(bufs_at_ + 16 * next_buf_), len = meta_->i64(bufs_at_ + 16 * next_buf_ + 8);
    ++next_buf_;
    if (off < 0 || len < 0 || off > body_len_ || len > body_len_ - off) corrupt(col + "a buffer lies outside the message body");
    return {body_ + off, len};
  }

  const Flat* meta_ = nullptr;
  const uint8_t* body_;
  int64_t body_len_;
  size_t node_count_ = 0, nodes_at_ = 0, buf_count_ = 0, bufs_at_ = 0, next_node_ = 0, next_buf_ = 0;
};

bool bit(const Buf& b, int64_t i) { return (b.p[i / 8] >> (i % 8)) & 1; }

// [begin, end) of element i of a variable-length column, checked against `limit`.
std::pair<int64_t, int64_t> span(const Column& c, int64_t i, int64_t limit) {
  int64_t a, b;
  if (c.f->large) a = load<int64_t>(c.offsets.p + 8 * i), b = load<int64_t>(c.offsets.p + 8 * (i + 1));
  else a = load<int32_t>(c.offsets.p + 4 * i), b = load<int32_t>(c.offsets.p + 4 * (i + 1));
  if (a < 0 || b < a || b > limit) corrupt("column '" + c.f->name + "': offsets out of order or past its values");
  return {a, b};
}

double half_to_double(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : s * std::numeric_limits<double>::infinity();
  return s * std::ldexp(m + 1024, e - 25);
}

OrderedJson bytes_value(const Column& c, const uint8_t* p, int64_t n, bool must_be_text) {
  std::string_view s(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  if (valid_utf8(s)) return std::string(s);
  if (must_be_text) corrupt("column '" + c.f->name + "': a string value is not valid UTF-8");
  return nullptr;
}

// Row i of column c (depth bounded by the schema: read_field caps it).
OrderedJson value(const Column& c, int64_t i) {
  const FieldDesc& f = *c.f;
  if (i >= c.length) corrupt("column '" + f.name + "': a value index past its length");
  if (c.validity.p && !bit(c.validity, i)) return nullptr;
  const uint8_t* p = c.data.p + i * f.width;
  switch (f.kind) {
    case Kind::kNull: return nullptr;
    case Kind::kBool: return bit(c.data, i);
    case Kind::kInt:
      switch (f.width) {
        case 1: return f.is_signed ? OrderedJson(load<int8_t>(p)) : OrderedJson(load<uint8_t>(p));
        case 2: return f.is_signed ? OrderedJson(load<int16_t>(p)) : OrderedJson(load<uint16_t>(p));
        case 4: return f.is_signed ? OrderedJson(load<int32_t>(p)) : OrderedJson(load<uint32_t>(p));
        default: return f.is_signed ? OrderedJson(load<int64_t>(p)) : OrderedJson(load<uint64_t>(p));
      }
    case Kind::kFloat: {
      const double v = f.width == 2 ? half_to_double(load<uint16_t>(p)) : f.width == 4 ? load<float>(p) : load<double>(p);
      return std::isfinite(v) ? OrderedJson(v) : OrderedJson(nullptr);  // JSON has no NaN / inf
    }
    case Kind::kOpaque:
      if (!f.as_int) return nullptr;
      return f.width == 4 ? OrderedJson(load<int32_t>(p)) : OrderedJson(load<int64_t>(p));
    case Kind::kFixedBinary: return bytes_value(c, p, f.width, false);
    case Kind::kUtf8: case Kind::kBinary: {
      const auto [a, b] = span(c, i, c.data.len);
      return bytes_value(c, c.data.p + a, b - a, f.kind == Kind::kUtf8);
    }
    case Kind::kList: case Kind::kFixedList: {
      const Column& ch = c.children[0];
      int64_t a, b;
      if (f.kind == Kind::kList) std::tie(a, b) = span(c, i, ch.length);
      else a = i * f.list_size, b = a + f.list_size;
      OrderedJson arr = OrderedJson::array();
      for (int64_t j = a; j < b; ++j) arr.push_back(value(ch, j));
      return arr;
    }
    case Kind::kStruct: {
      OrderedJson obj = OrderedJson::object();
      for (const Column& ch : c.children) obj[ch.f->name] = value(ch, i);
      return obj;
    }
    case Kind::kMap: {  // an object; keys as text (a string key as itself, another as its JSON)
      const Column& entries = c.children[0];
      const auto [a, b] = span(c, i, entries.length);
      OrderedJson obj = OrderedJson::object();
      for (int64_t j = a; j < b; ++j) {
        const OrderedJson k = value(entries.children[0], j);
        obj[k.is_string() ? k.get<std::string>() : k.dump()] = value(entries.children[1], j);
      }
      return obj;
    }
  }
  return nullptr;
}

// ---- messages --------------------------------------------------------------------------------

enum HeaderTag : uint8_t { kSchema = 1, kDictionaryBatch = 2, kRecordBatch = 3 };

}  // namespace

bool looks_like_arrow(std::string_view b) {
  return b.starts_with("ARROW1") || b.starts_with(std::string_view("\xff\xff\xff\xff", 4));
}

Status for_each_arrow_row(std::string_view bytes, const std::string& name,
                          const std::function<Status(OrderedJson&&, int64_t)>& fn) {
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size();
  const bool file = bytes.starts_with("ARROW1");
  if (file) {  // "ARROW1" + pad, the stream, the footer, its 32-bit length, "ARROW1": read the stream
    if (n < 18 || !bytes.ends_with("ARROW1"))
      return Corruption(Str() << name << ": an Arrow file without its closing \"ARROW1\" (cut off?)");
    const int64_t footer = load<int32_t>(b + n - 10);
    if (footer < 0 || static_cast<size_t>(footer) > n - 18)
      return Corruption(Str() << name << ": an Arrow file footer length out of range");
    n = n - 10 - static_cast<size_t>(footer);
  }
  size_t pos = file ? 8 : 0;
  bool ended = false;
  std::vector<FieldDesc> fields;
  bool have_schema = false;
  int64_t row = 0;
  int message = 0;
  try {
    while (pos + 4 <= n) {
      const std::string where = "message " + std::to_string(message) + ": ";
      uint32_t len = load<uint32_t>(b + pos);
      pos += 4;
      if (len == 0xFFFFFFFFu) {
        if (pos + 4 > n) corrupt(where + "cut off after its marker");
        len = load<uint32_t>(b + pos);
        pos += 4;
      }
      if (len == 0) {  // end of stream
        ended = true;
        break;
      }
      if (len > n - pos) corrupt(where + "its metadata runs past the end of the file");
      const Flat meta(b + pos, len);
      pos += len;
      const Flat::Table msg = meta.root();
      const int16_t version = meta.scalar<int16_t>(msg, 0, 0);
      if (version < 3) unsupported(where + "metadata version " + std::to_string(version) + " (before Arrow 0.15) is not read");
      const uint8_t tag = meta.scalar<uint8_t>(msg, 1, 0);
      const int64_t body_len = meta.scalar<int64_t>(msg, 3, 0);
      if (body_len < 0 || static_cast<uint64_t>(body_len) > n - pos) corrupt(where + "its body runs past the end of the file");
      const uint8_t* body = b + pos;
      pos += static_cast<size_t>(body_len);
      ++message;
      if (tag == kSchema) {
        if (have_schema) corrupt(where + "a second schema");
        const Flat::Table schema = meta.sub(msg, 2, "the schema");
        if (meta.scalar<int16_t>(schema, 0, 0) != 0) unsupported(where + "big-endian data is not read");
        const auto [count, at] = meta.vec(schema, 1, 4);
        for (size_t i = 0; i < count; ++i) fields.push_back(read_field(meta, meta.table_at_elem(at + 4 * i), 0));
        have_schema = true;
        continue;
      }
      if (!have_schema) corrupt(where + "a batch before the schema");
      if (tag == kDictionaryBatch) unsupported(where + "dictionary batches are not read");
      if (tag != kRecordBatch) unsupported(where + "message type " + std::to_string(tag) + " is not read");
      const Flat::Table rb = meta.sub(msg, 2, "the record batch");
      if (meta.has(rb, 3)) unsupported(where + "compressed record batches are not read");
      const int64_t length = meta.scalar<int64_t>(rb, 0, 0);
      // Every column but a Null one needs >= 1 bit a row in the body; a batch claiming more rows
      // than that allows (beyond a few thousand rows of nothing but nulls) is damaged, not big.
      if (length < 0 || length / 8 > body_len + 512) corrupt(where + "a row count of " + std::to_string(length) + " that its body cannot hold");
      BatchReader reader(meta, rb, body, body_len);
      std::vector<Column> cols;
      for (const FieldDesc& f : fields) {
        cols.push_back(reader.column(f, 0));
        if (cols.back().length < length) corrupt(where + "column '" + f.name + "' is shorter than the batch");
      }
      reader.check_all_used();
      for (int64_t r = 0; r < length; ++r, ++row) {
        OrderedJson obj = OrderedJson::object();
        for (const Column& c : cols) obj[c.f->name] = value(c, r);
        Status st = fn(std::move(obj), row);
        if (!st.ok()) return st;
      }
    }
  } catch (const ArrowError& e) {
    const std::string m = name + ": " + e.msg + (row > 0 ? " (after " + std::to_string(row) + " rows)" : "");
    return e.unimplemented ? Unimplemented(m) : Corruption(m);
  }
  if (!have_schema) return Corruption(Str() << name << ": no Arrow schema (an empty or cut-off file)");
  // pyarrow and `datasets` always end a stream with the marker; without it the file was cut off at
  // a message boundary and rows are missing. A file's stream may end at its footer.
  if (!ended && !(file && pos == n))
    return Corruption(Str() << name << ": no end-of-stream marker after " << row << " rows (a cut-off file?)");
  return Status::OK();
}

}  // namespace st
