// Parquet reader. Oracle: pyarrow. tools/ref/parquet_fixtures.py wrote the fixtures under
// tests/fixtures/parquet/ (every codec we read, dictionary and plain, DELTA_* and
// BYTE_STREAM_SPLIT, data pages v1 and v2, several row groups and pages per column, nulls at
// every nesting level, maps, list<list>, the legacy 2-level LIST layouts) and expected.json: the
// rows as pyarrow reads them back. Hostile input: files built byte by byte here (a Thrift compact
// writer), truncations and random byte flips: each must give a Status naming the file, never a
// crash.
#include "io/parquet.h"

#include <gtest/gtest.h>
#include <lz4.h>

#include <fstream>
#include <iterator>
#include <random>

#include "core/file.h"
#include "../fuzz_env.h"

namespace st {
namespace {

const std::string kDir = std::string(ST_SOURCE_DIR) + "/tests/fixtures/parquet/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

OrderedJson expected() {
  static const OrderedJson e = *parse_ordered_json(slurp(kDir + "expected.json"), "expected.json");
  return e;
}

StatusOr<std::vector<OrderedJson>> all_rows(const ParquetFile& f) {
  std::vector<OrderedJson> rows;
  Status s = f.for_each_row([&](const OrderedJson& row, int64_t i) {
    EXPECT_EQ(i, static_cast<int64_t>(rows.size()));
    rows.push_back(row);
    return Status::OK();
  });
  if (!s.ok()) return s;
  return rows;
}

TEST(Parquet, FixturesMatchPyarrow) {
  const OrderedJson e = expected();
  ASSERT_EQ(e.size(), 13u);
  for (const auto& [name, want] : e.items()) {
    SCOPED_TRACE(name);
    auto f = ParquetFile::open(kDir + name);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(f->num_row_groups(), want["row_groups"].get<int>());
    EXPECT_EQ(f->num_rows(), static_cast<int64_t>(want["rows"].size()));
    auto rows = all_rows(*f);
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    ASSERT_EQ(rows->size(), want["rows"].size());
    for (size_t i = 0; i < rows->size(); ++i)
      EXPECT_EQ((*rows)[i], want["rows"][i]) << "row " << i << "\n got: " << (*rows)[i].dump() << "\nwant: " << want["rows"][i].dump();
  }
}

TEST(Parquet, MessagesShapeAndColumns) {
  auto f = ParquetFile::open(kDir + "messages_snappy_v1.parquet");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->column_paths(),
            (std::vector<std::string>{"id", "prompt", "messages.list.element.role", "messages.list.element.content"}));
  std::vector<OrderedJson> rows;
  ASSERT_TRUE(f->read_row_group(0, &rows).ok());
  ASSERT_EQ(rows.size(), 16u);
  EXPECT_EQ(rows[1]["messages"][2].dump(), R"({"role":"assistant","content":"4 — quatre. 🎉"})");
  EXPECT_EQ(rows[2]["messages"], OrderedJson::array());  // empty list
  EXPECT_TRUE(rows[3]["messages"].is_null());           // null list
  EXPECT_TRUE(rows[4]["messages"][0].is_null());        // null element
  EXPECT_TRUE(rows[4]["messages"][1]["content"].is_null());
  EXPECT_EQ(rows[0].begin().key(), "id");               // schema order
  EXPECT_FALSE(f->read_row_group(3, &rows).ok());
}

// ---- hand-built files --------------------------------------------------------------------------

// Thrift compact protocol writer (the mirror of io/detail/thrift_compact).
struct Thrift {
  std::string b;
  std::vector<int> last{0};
  Thrift& varint(uint64_t v) {
    for (; v >= 0x80; v >>= 7) b += static_cast<char>((v & 0x7f) | 0x80);
    b += static_cast<char>(v);
    return *this;
  }
  Thrift& zz(int64_t v) { return varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  Thrift& field(int id, int type) {
    const int d = id - last.back();
    if (d > 0 && d <= 15) {
      b += static_cast<char>(d << 4 | type);
    } else {
      b += static_cast<char>(type);
      zz(id);
    }
    last.back() = id;
    return *this;
  }
  Thrift& i32(int id, int64_t v) { return field(id, 5).zz(v); }
  Thrift& i64(int id, int64_t v) { return field(id, 6).zz(v); }
  Thrift& bin(int id, const std::string& s) {
    field(id, 8).varint(s.size());
    b += s;
    return *this;
  }
  Thrift& begin(int id = -1) {
    if (id >= 0) field(id, 12);
    last.push_back(0);
    return *this;
  }
  Thrift& end() {
    b += '\0';
    last.pop_back();
    return *this;
  }
  Thrift& list(int id, int etype, uint64_t n) {
    field(id, 9);
    if (n < 15) {
      b += static_cast<char>(n << 4 | etype);
    } else {
      b += static_cast<char>(0xf0 | etype);
      varint(n);
    }
    return *this;
  }
};

std::string le32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }

struct PageSpec {
  int type = 0;  // 0 data v1, 2 dictionary, 3 data v2
  int num_values = 0;
  int encoding = 0;
  std::string body;
  int64_t compressed = -1, uncompressed = -1;  // -1: body.size()
  int def_encoding = 3;
};

std::string page(const PageSpec& p) {
  Thrift h;
  h.begin().i32(1, p.type).i32(2, p.uncompressed >= 0 ? p.uncompressed : static_cast<int64_t>(p.body.size()));
  h.i32(3, p.compressed >= 0 ? p.compressed : static_cast<int64_t>(p.body.size()));
  if (p.type == 2) h.begin(7).i32(1, p.num_values).i32(2, 0).end();
  if (p.type == 0) h.begin(5).i32(1, p.num_values).i32(2, p.encoding).i32(3, p.def_encoding).i32(4, 3).end();
  if (p.type == 3) h.begin(8).i32(1, p.num_values).i32(2, 0).i32(3, p.num_values).i32(4, p.encoding).i32(5, 0).i32(6, 0).end();
  h.end();
  return h.b + p.body;
}

struct FileSpec {
  int repetition = 0;  // of column x (INT32)
  int codec = 0;
  int64_t num_values = -1;  // -1: rows
  int64_t rows = 4;
  std::string extra_footer_fields;  // raw bytes inserted before FileMetaData's stop byte
  FileSpec& optional() { repetition = 1; return *this; }
  FileSpec& with_codec(int c) { codec = c; return *this; }
  FileSpec& with_rows(int64_t r, int64_t values = -1) { rows = r; num_values = values; return *this; }
  FileSpec& with_footer(std::string b) { extra_footer_fields = std::move(b); return *this; }
};

PageSpec data_page(int n, std::string body, int encoding = 0) {
  PageSpec p;
  p.num_values = n;
  p.body = std::move(body);
  p.encoding = encoding;
  return p;
}

// "PAR1" | pages of one INT32 column "x" | FileMetaData | length | "PAR1".
std::string parquet_file(const std::vector<PageSpec>& pages, const FileSpec& fs = {}) {
  std::string data = "PAR1";
  for (const PageSpec& p : pages) data += page(p);
  const int64_t chunk = static_cast<int64_t>(data.size()) - 4;
  Thrift t;
  t.begin().i32(1, 2);
  t.list(2, 12, 2);
  t.begin().bin(4, "schema").i32(5, 1).end();
  t.begin().i32(1, 1).i32(3, fs.repetition).bin(4, "x").end();
  t.i64(3, fs.rows);
  t.list(4, 12, 1).begin().list(1, 12, 1);
  t.begin().i64(2, 4).begin(3).i32(1, 1).list(2, 5, 1).zz(0).list(3, 8, 1).varint(1);
  t.b += "x";
  t.i32(4, fs.codec).i64(5, fs.num_values >= 0 ? fs.num_values : fs.rows).i64(6, chunk).i64(7, chunk).i64(9, 4).end().end();
  t.i64(2, chunk).i64(3, fs.rows).end();
  t.b += fs.extra_footer_fields;
  t.end();
  return data + t.b + le32(static_cast<uint32_t>(t.b.size())) + "PAR1";
}

std::string plain_i32(std::vector<int32_t> v) {
  std::string s;
  for (int32_t x : v) s += le32(static_cast<uint32_t>(x));
  return s;
}

// Rows of a file, or its error message (prefixed "ERROR ").
std::string read_all(const std::string& bytes, const std::string& name = "t.parquet") {
  auto f = ParquetFile::from_bytes(bytes, name);
  if (!f.ok()) return "ERROR " + f.status().to_string();
  auto rows = all_rows(*f);
  if (!rows.ok()) return "ERROR " + rows.status().to_string();
  OrderedJson a = OrderedJson::array();
  for (auto& r : *rows) a.push_back(r);
  return a.dump();
}

// Dictionary {10, 20}; indices (bit width 1, one bit-packed group): 0 1 1 0.
PageSpec dict_page(std::vector<int32_t> v) {
  PageSpec p = data_page(static_cast<int>(v.size()), plain_i32(v));
  p.type = 2;
  return p;
}
const PageSpec kDict = dict_page({10, 20});
PageSpec dict_data(char bits) { return data_page(4, std::string("\x01\x03", 2) + bits, 8); }

TEST(ParquetHostile, HandBuiltFileReads) {
  EXPECT_EQ(read_all(parquet_file({kDict, dict_data(0x06)})), R"([{"x":10},{"x":20},{"x":20},{"x":10}])");
  EXPECT_EQ(read_all(parquet_file({data_page(4, plain_i32({1, -2, 3, 4}))})), R"([{"x":1},{"x":-2},{"x":3},{"x":4}])");
  // Optional column, v1 page: def levels (4-byte length, RLE run of 4 x 1), then the values.
  const std::string defs = le32(2) + std::string("\x08\x01", 2);
  EXPECT_EQ(read_all(parquet_file({data_page(4, defs + plain_i32({5, 6, 7, 8}))}, FileSpec().optional())),
            R"([{"x":5},{"x":6},{"x":7},{"x":8}])");
  const std::string some = le32(3) + std::string("\x03\x05", 2) + std::string(1, 0);  // bit-packed 1 0 1 0 ...
  EXPECT_EQ(read_all(parquet_file({data_page(4, some + plain_i32({5, 6}))}, FileSpec().optional())),
            R"([{"x":5},{"x":null},{"x":6},{"x":null}])");
}

TEST(ParquetHostile, DictionaryIndexOutOfRange) {
  // Indices 0 1 1 0 at bit width 3 in one group: index 5 replaces the third.
  const std::string s = read_all(parquet_file({kDict, data_page(4, std::string("\x03\x03", 2) + std::string("\x48\x01\x00", 3), 8)}),
                                 "data.parquet");
  EXPECT_NE(s.find("ERROR Corruption: data.parquet: column 'x', row group 0, page 1: dictionary index 5 >= 2"), std::string::npos) << s;
}

TEST(ParquetHostile, PageSizesThatLie) {
  auto err = [](const std::string& s, const std::string& want) {
    EXPECT_EQ(s.rfind("ERROR ", 0), 0u) << s;
    EXPECT_NE(s.find("t.parquet"), std::string::npos) << s;
    EXPECT_NE(s.find(want), std::string::npos) << s;
  };
  PageSpec p = data_page(4, plain_i32({1, 2, 3, 4}));
  p.compressed = 1 << 20;  // more than the column chunk holds
  err(read_all(parquet_file({p})), "only 16 left in the column chunk");
  p.compressed = -1;
  p.uncompressed = 1 << 30;  // UNCOMPRESSED, sizes disagree
  err(read_all(parquet_file({p})), "uncompressed page of 16 bytes, header says 1073741824");
  for (int codec : {1, 2, 6}) {  // snappy, gzip, zstd: garbage claiming 1 GiB
    SCOPED_TRACE(codec);
    err(read_all(parquet_file({p}, FileSpec().with_codec(codec))), "page 0");
  }
  PageSpec many = data_page(1 << 30, plain_i32({1}));  // a billion values in 4 bytes
  err(read_all(parquet_file({many}, FileSpec().with_rows(1 << 30))), "page claims 1073741824 values in 4 bytes");
  PageSpec few = data_page(3, plain_i32({1, 2, 3}));  // chunk ends early
  err(read_all(parquet_file({few})), "column chunk ends after 3 of its 4 values");
  PageSpec shortv = data_page(4, plain_i32({1, 2}));  // values run out
  err(read_all(parquet_file({shortv})), "PLAIN INT32: 4 values need 4 bytes each, the page holds 8 bytes");
  err(read_all(parquet_file({kDict, dict_data(0x06)}, FileSpec().with_rows(5, 4))), "4 rows, the row group has 5");
}

TEST(ParquetHostile, LevelsAndEncodings) {
  auto err = [](const std::string& s, const std::string& want) {
    EXPECT_EQ(s.rfind("ERROR ", 0), 0u) << s;
    EXPECT_NE(s.find(want), std::string::npos) << s;
  };
  const std::string bad_def = le32(2) + std::string("\x08\x02", 2);  // level 2 > max 1
  err(read_all(parquet_file({data_page(4, bad_def + plain_i32({1, 2, 3, 4}))}, FileSpec().optional())),
      "definition levels: level 2 > the column's maximum 1");
  err(read_all(parquet_file({data_page(4, le32(100) + "xx")}, FileSpec().optional())), "levels of 100 bytes");
  PageSpec bitpacked = data_page(4, le32(1) + "x");
  bitpacked.def_encoding = 4;
  err(read_all(parquet_file({bitpacked}, FileSpec().optional())),
      "Unimplemented: t.parquet: column 'x', row group 0, page 0: definition levels: levels in the deprecated BIT_PACKED encoding");
  err(read_all(parquet_file({data_page(4, plain_i32({1, 2, 3, 4}), 1)})),
      "Unimplemented: t.parquet: column 'x', row group 0, page 0: encoding GROUP_VAR_INT");
  err(read_all(parquet_file({data_page(4, plain_i32({1, 2, 3, 4}), 8)})),
      "dictionary-encoded page, but the column chunk has no dictionary page");
  err(read_all(parquet_file({data_page(4, plain_i32({1, 2, 3, 4}))}, FileSpec().with_codec(3))),
      "Unimplemented: t.parquet: column 'x', row group 0: codec LZO is not supported");
  err(read_all(parquet_file({data_page(4, "\x80\x01\x04\x04", 5)})), "DELTA_BINARY_PACKED");
}

// LZ4_RAW (one block) and the deprecated LZ4 codec in both of its framings -- Hadoop's blocks of
// [BE decompressed size][BE compressed size][block], one or several, and a bare block (older
// writers) -- decode to the page; damaged, truncated and over-claiming streams are Corruption.
// (pyarrow's files: FixturesMatchPyarrow, messages_lz4_v2 and messages_brotli_v1.)
TEST(ParquetCodecs, Lz4Framings) {
  const std::string plain = plain_i32({1, 2, 3, 4, 5, 6, 7, 8});
  auto lz4 = [](const std::string& in) {
    std::string out(static_cast<size_t>(LZ4_compressBound(static_cast<int>(in.size()))), '\0');
    const int n = LZ4_compress_default(in.data(), out.data(), static_cast<int>(in.size()), static_cast<int>(out.size()));
    out.resize(static_cast<size_t>(n));
    return out;
  };
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
  };
  auto frame = [&](const std::string& part) { return be32(static_cast<uint32_t>(part.size())) + be32(static_cast<uint32_t>(lz4(part).size())) + lz4(part); };
  auto file = [&](const std::string& body, int codec, int64_t uncompressed = -1) {
    PageSpec p = data_page(8, body);
    p.uncompressed = uncompressed >= 0 ? uncompressed : static_cast<int64_t>(plain.size());
    return read_all(parquet_file({p}, FileSpec().with_codec(codec).with_rows(8)));
  };
  const std::string want = file(plain, 0);
  ASSERT_EQ(want.rfind("ERROR", 0), std::string::npos) << want;
  EXPECT_EQ(file(lz4(plain), 7), want);                                           // LZ4_RAW
  EXPECT_EQ(file(frame(plain), 5), want);                                         // LZ4, Hadoop, one block
  EXPECT_EQ(file(frame(plain.substr(0, 12)) + frame(plain.substr(12)), 5), want);  // two blocks
  EXPECT_EQ(file(lz4(plain), 5), want);                                           // LZ4, a bare block
  auto corrupt = [](const std::string& s, const char* what) {
    EXPECT_EQ(s.rfind("ERROR Corruption: t.parquet: column 'x', row group 0", 0), 0u) << s;
    EXPECT_NE(s.find(what), std::string::npos) << s;
  };
  std::string bad = lz4(plain);
  bad.resize(bad.size() - 3);
  corrupt(file(bad, 7), "lz4: damaged block");
  corrupt(file(frame(plain).substr(0, frame(plain).size() - 2), 5), "lz4: damaged stream");
  corrupt(file(lz4(plain), 7, int64_t{1} << 30), "cannot hold");
  corrupt(file(lz4(plain), 7, static_cast<int64_t>(plain.size()) + 4), "lz4: damaged block");  // shorter than claimed
}

// BROTLI pages from pyarrow's fixture, cut short or flipped: Corruption, never a crash.
TEST(ParquetCodecs, DamagedBrotli) {
  const std::string good = slurp(kDir + "messages_brotli_v1.parquet");
  EXPECT_EQ(read_all(good, "b.parquet").rfind("ERROR", 0), std::string::npos);
  std::mt19937 rng(static_cast<uint32_t>(testing_util::fuzz_seed(77)));
  int errors = 0;
  for (int it = 0; it < testing_util::fuzz_iters(200); ++it) {
    std::string bad = good;
    const size_t at = 4 + rng() % (good.size() / 2);  // the first row group's pages
    bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
    const std::string s = read_all(bad, "b.parquet");
    if (s.rfind("ERROR ", 0) == 0) {
      ++errors;
      EXPECT_NE(s.find("b.parquet"), std::string::npos) << s;
    }
  }
  EXPECT_GT(errors, 20);
}

TEST(ParquetHostile, ThriftSkipsUnknownFieldsOfEveryType) {
  Thrift x;
  x.last.back() = 4;  // FileMetaData's last written field
  x.field(40, 1).field(41, 2).field(42, 3);
  x.b += '\x7f';
  x.field(43, 4).zz(-3).field(44, 5).zz(1 << 20).field(45, 6).zz(int64_t{1} << 40).field(46, 7);
  x.b += std::string(8, '\x01');
  x.bin(47, "unknown");
  x.list(48, 12, 2).begin().i32(1, 5).begin(2).bin(1, "nested").end().end().begin().end();
  x.list(49, 1, 3);  // list<bool>
  x.b += std::string("\x01\x02\x01", 3);
  x.field(50, 10);  // set<i64> of 16 (size in a varint)
  x.b += '\xf6';
  x.varint(16);
  for (int i = 0; i < 16; ++i) x.zz(i);
  x.field(51, 11).varint(2);  // map<binary, list<i32>>
  x.b += '\x89';
  for (int i = 0; i < 2; ++i) {
    x.varint(1);
    x.b += "k";
    x.b += '\x25';
    x.zz(1).zz(2);
  }
  x.field(52, 11).varint(0);  // empty map
  x.field(53, 13);
  x.b += std::string(16, 'u');
  x.begin(300).begin(1).begin(1).i64(7, 1).end().end().end();  // long-form field id
  const std::string ok = read_all(parquet_file({kDict, dict_data(0x06)}, FileSpec().with_footer(x.b)));
  EXPECT_EQ(ok, R"([{"x":10},{"x":20},{"x":20},{"x":10}])");
}

TEST(ParquetHostile, ThriftLimits) {
  auto err = [](const std::string& extra, const std::string& want) {
    const std::string s = read_all(parquet_file({kDict, dict_data(0x06)}, FileSpec().with_footer(extra)));
    EXPECT_EQ(s.rfind("ERROR Corruption: t.parquet: footer (FileMetaData): ", 0), 0u) << s;
    EXPECT_NE(s.find(want), std::string::npos) << s;
  };
  Thrift deep;
  deep.last.back() = 4;
  for (int i = 0; i < 100; ++i) deep.begin(i == 0 ? 40 : 1);
  err(deep.b, "nesting deeper than 64");
  Thrift big;
  big.last.back() = 4;
  big.list(40, 5, uint64_t{1} << 40);
  err(big.b, "list of 1099511627776 elements");
  Thrift str;
  str.last.back() = 4;
  str.field(40, 8).varint(uint64_t{1} << 62);
  err(str.b, "string of 4611686018427387904 bytes");
  Thrift vint;
  vint.last.back() = 4;
  vint.field(40, 5);
  vint.b += std::string(12, '\xff');
  err(vint.b, "varint longer than 10 bytes");
  Thrift type;
  type.last.back() = 4;
  type.field(40, 14);
  err(type.b, "unknown type 14");
}

TEST(ParquetHostile, SchemaLimits) {
  // 100 nested groups: levels would not fit a byte.
  Thrift t;
  t.begin().i32(1, 2).list(2, 12, 101);
  for (int i = 0; i < 100; ++i) t.begin().i32(3, 1).bin(4, "g").i32(5, 1).end();
  t.begin().i32(1, 1).i32(3, 1).bin(4, "x").end();
  t.i64(3, 0).list(4, 12, 0).end();
  const std::string f = "PAR1" + t.b + le32(static_cast<uint32_t>(t.b.size())) + "PAR1";
  const std::string s = read_all(f);
  EXPECT_NE(s.find("nested deeper than 64 levels"), std::string::npos) << s;
  // A group whose children claim more elements than follow (found by fuzzing: read past the list).
  Thrift u;
  u.begin().i32(1, 2).list(2, 12, 3);
  u.begin().bin(4, "schema").i32(5, 2).end();
  u.begin().i32(3, 1).bin(4, "g").i32(5, 1).end();  // root: 2 children, g takes the only one left
  u.begin().i32(1, 1).i32(3, 1).bin(4, "x").end();
  u.i64(3, 0).list(4, 12, 0).end();
  const std::string s2 = read_all("PAR1" + u.b + le32(static_cast<uint32_t>(u.b.size())) + "PAR1");
  EXPECT_EQ(s2, "ERROR Corruption: t.parquet: schema: the groups' children run past the end of the element list");
}

TEST(ParquetHostile, MagicFooterAndTruncation) {
  const std::string good = slurp(kDir + "messages_snappy_v1.parquet");
  ASSERT_GT(good.size(), 1000u);
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_EQ(read_all(bad), "ERROR Corruption: t.parquet: not a Parquet file (no PAR1 magic at the start)");
  bad = good;
  bad[bad.size() - 1] = 'X';
  EXPECT_EQ(read_all(bad), "ERROR Corruption: t.parquet: no PAR1 magic at the end of the file (truncated or damaged)");
  bad = good;
  const uint32_t huge = static_cast<uint32_t>(good.size());
  bad.replace(bad.size() - 8, 4, le32(huge));
  EXPECT_NE(read_all(bad).find("footer length " + std::to_string(huge) + " reaches before the start"), std::string::npos);
  for (size_t cut : {size_t{0}, size_t{3}, size_t{11}, good.size() / 3, good.size() / 2, good.size() - 9, good.size() - 1}) {
    const std::string s = read_all(good.substr(0, cut));
    EXPECT_EQ(s.rfind("ERROR Corruption: t.parquet: ", 0), 0u) << cut << ": " << s;
  }
  // The footer kept, the data cut out: offsets now point past the data section.
  const uint32_t footer = static_cast<uint32_t>(good[good.size() - 8] & 0xff) | (good[good.size() - 7] & 0xff) << 8;
  const std::string gutted = "PAR1" + good.substr(good.size() - 8 - footer);
  const std::string s = read_all(gutted);
  EXPECT_EQ(s.rfind("ERROR Corruption: t.parquet: column 'id', row group 0: column data at", 0), 0u) << s;
}

// Random byte flips in the footer (corrupt Thrift) and anywhere: a Status or rows, never a crash.
TEST(ParquetHostile, RandomFlips) {
  std::mt19937 rng(static_cast<uint32_t>(testing_util::fuzz_seed(1234)));
  int errors = 0, runs = 0;
  for (const char* name : {"messages_snappy_v1.parquet", "messages_zstd_v2.parquet", "messages_gzip_plain.parquet",
                           "types_split_v2.parquet", "tokenized_delta_v2.parquet", "legacy_2level.parquet"}) {
    const std::string good = slurp(kDir + name);
    const uint32_t footer = static_cast<uint32_t>(static_cast<uint8_t>(good[good.size() - 8])) |
                            static_cast<uint32_t>(static_cast<uint8_t>(good[good.size() - 7])) << 8;
    for (int it = 0; it < testing_util::fuzz_iters(300); ++it) {
      std::string bad = good;
      const bool in_footer = it % 2 == 0;
      const size_t lo = in_footer ? good.size() - 8 - footer : 4, hi = in_footer ? good.size() - 8 : good.size() - 8;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) bad[lo + rng() % (hi - lo)] = static_cast<char>(rng());
      const std::string s = read_all(bad, name);
      ++runs;
      if (s.rfind("ERROR ", 0) == 0) {
        ++errors;
        EXPECT_NE(s.find(name), std::string::npos) << s;
      }
    }
  }
  EXPECT_GT(errors, runs / 4);  // most damage is noticed
}

TEST(Gunzip, MembersTruncationAndCap) {
  const std::string gz = slurp(kDir + "chat.jsonl.gz"), plain = slurp(kDir + "chat.jsonl");
  std::string out;
  ASSERT_TRUE(gunzip_file(gz, "c.gz", 1 << 20, &out).ok());
  EXPECT_EQ(out, plain);
  ASSERT_TRUE(gunzip_file(gz + gz, "c.gz", 1 << 20, &out).ok());  // two members
  EXPECT_EQ(out, plain + plain);
  Status s = gunzip_file(gz.substr(0, gz.size() / 2), "c.gz", 1 << 20, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("c.gz: gzip-compressed: truncated deflate stream"), std::string::npos) << s.to_string();
  std::string bad = gz;
  bad[gz.size() / 2] ^= 0x55;
  bad[gz.size() / 2 + 1] ^= 0x55;
  s = gunzip_file(bad, "c.gz", 1 << 20, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("c.gz: gzip-compressed"), std::string::npos) << s.to_string();
  s = gunzip_file(gz, "c.gz", 100, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("more than 100 bytes"), std::string::npos) << s.to_string();
  EXPECT_TRUE(gunzip_file(gz, "c.gz", plain.size(), &out).ok());  // exactly at the cap
  s = gunzip_file(gz + "junk", "c.gz", 1 << 20, &out);
  EXPECT_FALSE(s.ok()) << "trailing garbage";
}

}  // namespace
}  // namespace st
