// io/csv.h: CSV / TSV records against what Hugging Face `datasets` reads from the same bytes
// (tests/fixtures/csv, written by tools/ref/make_csv_fixture.py), and hostile files refused
// naming the file and the line.
#include "io/csv.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/file.h"
#include "core/json.h"

namespace st {
namespace {

std::string fixture(const std::string& rel) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/csv/" + rel; }

StatusOr<std::vector<OrderedJson>> read_csv(std::string_view text, char delim, const std::string& path = "t.csv") {
  std::vector<OrderedJson> rows;
  Status st = for_each_csv_record(text, delim, path, [&](OrderedJson&& j, int64_t) {
    rows.push_back(std::move(j));
    return Status::OK();
  });
  if (!st.ok()) return st;
  return rows;
}

TEST(Csv, MatchesDatasetsOnTheFixtures) {
  for (const char* name : {"alpaca.csv", "header.csv", "short.csv", "tabs.tsv", "bom.csv"}) {
    SCOPED_TRACE(name);
    auto bytes = read_file_to_string(fixture(name));
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    const std::string stem = std::string(name).substr(0, std::string(name).rfind('.'));
    auto want_text = read_file_to_string(fixture(stem + ".expected.jsonl"));
    ASSERT_TRUE(want_text.ok());
    std::vector<OrderedJson> want;
    size_t pos = 0;
    while (pos < want_text->size()) {
      const size_t e = want_text->find('\n', pos);
      auto j = parse_ordered_json(std::string_view(*want_text).substr(pos, e - pos), "expected");
      ASSERT_TRUE(j.ok());
      want.push_back(*j);
      pos = e + 1;
    }
    auto got = read_csv(*bytes, csv_delimiter_for(name), name);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ((*got)[i].dump(), want[i].dump()) << "record " << i + 1;  // keys in column order too
    }
  }
}

TEST(Csv, LinesNameWhereEachRecordStarts) {
  std::vector<int64_t> lines;
  Status st = for_each_csv_record("a,b\n\n1,\"two\nlines\"\r\n3,4\n", ',', "t.csv", [&](OrderedJson&&, int64_t line) {
    lines.push_back(line);
    return Status::OK();
  });
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(lines, (std::vector<int64_t>{3, 5}));
}

TEST(Csv, DelimiterByName) {
  EXPECT_EQ(csv_delimiter_for("d.csv"), ',');
  EXPECT_EQ(csv_delimiter_for("d.csv.gz"), ',');
  EXPECT_EQ(csv_delimiter_for("dir/d.tsv"), '\t');
  EXPECT_EQ(csv_delimiter_for("d.jsonl"), 0);
  EXPECT_EQ(csv_delimiter_for("csv"), 0);
}

TEST(Csv, HostileFilesAreRefusedNamingTheLine) {
  struct Case {
    std::string text, want;
  } cases[] = {
      {"", "t.csv: no header row"},
      {"\n \n", "t.csv: no header row"},
      {"a,b\n1,2\n1,2,3\n", "t.csv line 3: 3 fields, but the header names 2 columns"},
      {"a,b\n1,2\n\"open,3\n4,5\n", "t.csv line 3: column 1: a quoted field opened here is never closed"},
      {"a,b\n1,\"x\xff\"\n", "t.csv line 2: column 2: not valid UTF-8"},
      {"a\n\xc0\xaf\n", "t.csv line 2: column 1: not valid UTF-8"},  // overlong '/'
      {"a,\"b\n", "t.csv line 1: column 2: a quoted field opened here is never closed"},
  };
  for (const Case& c : cases) {
    auto r = read_csv(c.text, ',');
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
  std::string wide(kCsvMaxColumns + 1, ',');
  auto r = read_csv(wide, ',');
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than 65536 columns"), std::string::npos) << r.status().message();
}

// Every prefix and every one-byte change of a valid file: an error or records, never a crash or a
// read past the text (ASAN builds check the latter).
TEST(Csv, DamagedBytesNeverCrash) {
  auto bytes = read_file_to_string(fixture("alpaca.csv"));
  ASSERT_TRUE(bytes.ok());
  for (size_t n = 0; n <= bytes->size(); ++n) (void)read_csv(std::string_view(*bytes).substr(0, n), ',');
  for (size_t i = 0; i < bytes->size(); ++i)
    for (char c : {'"', ',', '\n', '\r', '\xff', '\0'}) {
      std::string m = *bytes;
      m[i] = c;
      (void)read_csv(m, ',');
    }
}

}  // namespace
}  // namespace st
