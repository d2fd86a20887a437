// io/arrow.h: the rows of Arrow IPC streams and files written by pyarrow and `datasets`
// (tests/fixtures/arrow, tools/ref/make_arrow_fixture.py) against what the writer was given, and
// damaged files refused by name, never read past.
#include "io/arrow.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/file.h"
#include "core/json.h"

namespace st {
namespace {

std::string fixture(const std::string& rel) { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/arrow/" + rel; }

StatusOr<std::vector<OrderedJson>> rows_of(std::string_view bytes) {
  std::vector<OrderedJson> rows;
  Status st = for_each_arrow_row(bytes, "t.arrow", [&](OrderedJson&& j, int64_t i) {
    EXPECT_EQ(i, static_cast<int64_t>(rows.size()));
    rows.push_back(std::move(j));
    return Status::OK();
  });
  if (!st.ok()) return st;
  return rows;
}

std::vector<OrderedJson> expected(const std::string& name) {
  auto text = read_file_to_string(fixture(name));
  EXPECT_TRUE(text.ok());
  std::vector<OrderedJson> out;
  size_t pos = 0;
  while (text.ok() && pos < text->size()) {
    const size_t e = text->find('\n', pos);
    auto j = parse_ordered_json(std::string_view(*text).substr(pos, e - pos), name);
    EXPECT_TRUE(j.ok());
    if (j.ok()) out.push_back(*j);
    pos = e + 1;
  }
  return out;
}

TEST(Arrow, ReadsWhatPyarrowAndDatasetsWrote) {
  struct Case {
    const char* file;
    const char* want;
  } cases[] = {{"saved/data-00000-of-00001.arrow", "saved.expected.jsonl"},
               {"types.arrow", "types.expected.jsonl"},
               {"types_file.arrow", "types.expected.jsonl"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto bytes = read_file_to_string(fixture(c.file));
    ASSERT_TRUE(bytes.ok());
    EXPECT_TRUE(looks_like_arrow(*bytes));
    auto got = rows_of(*bytes);
    ASSERT_TRUE(got.ok()) << got.status().message();
    const std::vector<OrderedJson> want = expected(c.want);
    ASSERT_EQ(got->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ((*got)[i], want[i]) << "row " << i << "\n got  " << (*got)[i].dump() << "\n want " << want[i].dump();
      std::vector<std::string> got_keys, want_keys;  // schema order
      for (auto it = (*got)[i].begin(); it != (*got)[i].end(); ++it) got_keys.push_back(it.key());
      for (auto it = want[i].begin(); it != want[i].end(); ++it) want_keys.push_back(it.key());
      EXPECT_EQ(got_keys, want_keys);
    }
  }
}

TEST(Arrow, CutOffFilesAreRefused) {
  auto bytes = read_file_to_string(fixture("types.arrow"));
  ASSERT_TRUE(bytes.ok());
  // Without the end-of-stream marker (8 bytes): rows would be missing, so the file is refused.
  auto r = rows_of(std::string_view(*bytes).substr(0, bytes->size() - 8));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t.arrow: no end-of-stream marker after 3 rows"), std::string::npos)
      << r.status().message();
  auto f = read_file_to_string(fixture("types_file.arrow"));
  ASSERT_TRUE(f.ok());
  r = rows_of(std::string_view(*f).substr(0, f->size() - 1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("without its closing"), std::string::npos) << r.status().message();
  r = rows_of("");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no Arrow schema"), std::string::npos) << r.status().message();
}

// Every prefix and many one-byte changes of both files: an error or rows, never a crash, a hang or
// a read outside the bytes (the ASAN build checks the last).
TEST(Arrow, DamagedBytesNeverCrash) {
  for (const char* name : {"types.arrow", "types_file.arrow", "saved/data-00000-of-00001.arrow"}) {
    auto bytes = read_file_to_string(fixture(name));
    ASSERT_TRUE(bytes.ok());
    int errors = 0;
    for (size_t n = 0; n < bytes->size(); n += 3) errors += !rows_of(std::string_view(*bytes).substr(0, n)).ok();
    EXPECT_GT(errors, 0);
    for (size_t i = 0; i < bytes->size(); ++i)
      for (uint8_t x : {0x01, 0x80, 0xff}) {
        std::string m = *bytes;
        m[i] = static_cast<char>(static_cast<uint8_t>(m[i]) ^ x);
        (void)rows_of(m);
      }
  }
}

}  // namespace
}  // namespace st
