// python_json_dumps against Python's json.dumps(v, ensure_ascii=False) (the expected strings were
// printed by CPython 3.11: key order kept, ", " / ": " separators, floats as repr, escapes), and
// parse_ordered_json keeping key order and naming the source on bad input.
#include "core/json.h"

#include <gtest/gtest.h>

namespace st {
namespace {

TEST(Json, PythonDumpsMatchesCPython) {
  const std::string in =
      R"({"b":1,"a":[1.5,-0.0,1e16,1e15,0.0001,1e-05,123.0,3.141592653589793,9223372036854775807,-7,true,false,null],)"
      "\"s\":\"q\\\"\\\\\\n\\t\\u0001\xC3\xA9\xE2\x9C\x93\",\"e\":{},\"l\":[]}";
  auto v = parse_ordered_json(in, "in");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(python_json_dumps(*v),
            "{\"b\": 1, \"a\": [1.5, -0.0, 1e+16, 1000000000000000.0, 0.0001, 1e-05, 123.0, 3.141592653589793, "
            "9223372036854775807, -7, true, false, null], \"s\": \"q\\\"\\\\\\n\\t\\u0001\xC3\xA9\xE2\x9C\x93\", "
            "\"e\": {}, \"l\": []}");
  for (auto [text, want] : {std::pair{"0.1", "0.1"}, {"1e300", "1e+300"}, {"5e-324", "5e-324"},
                            {"12345678.9", "12345678.9"}, {"-2.5e-7", "-2.5e-07"}}) {
    auto f = parse_ordered_json(text, "f");
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(python_json_dumps(*f), want) << text;
  }
  auto bad = parse_ordered_json("{\"a\":", "tools of x.jsonl line 3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tools of x.jsonl line 3"), std::string::npos);
}

// Session 23 audit: a record nested 200,000 deep parsed, then overflowed the stack in
// python_dumps / dump(). Past 256 levels a document is refused by name; brackets inside strings
// (escaped quotes included) do not count.
TEST(Json, DeepNestingIsRefusedByName) {
  const auto nested = [](int n) { return std::string(static_cast<size_t>(n), '[') + std::string(static_cast<size_t>(n), ']'); };
  EXPECT_TRUE(parse_json(nested(200), "x.json").ok());
  for (int n : {257, 200000}) {
    for (bool ordered : {false, true}) {
      const Status s = ordered ? parse_ordered_json(nested(n), "x.json").status() : parse_json(nested(n), "x.json").status();
      ASSERT_FALSE(s.ok()) << n;
      EXPECT_NE(s.message().find("x.json: JSON nested deeper than 256 levels"), std::string::npos) << s.to_string();
    }
  }
  const std::string in_strings = "{\"a\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}";
  auto j = parse_json(in_strings, "s.json");
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  EXPECT_EQ((*j)["a"].get<std::string>().size(), 2001u);
}

// nlohmann reads a NUL byte as the end of input: "[1]\0junk" parsed as [1], dropping the rest.
TEST(Json, NulByteIsRefused) {
  const std::string text("{\"a\": 1}\0{\"b\": 2}", 17);
  auto j = parse_ordered_json(text, "n.jsonl line 4");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("n.jsonl line 4: a NUL byte at byte 8"), std::string::npos) << j.status().to_string();
}

// An unsigned integer past INT64_MAX is out of range, not wrapped negative (r = 2^63).
TEST(Json, IntPastInt64IsOutOfRange) {
  auto j = parse_json(R"({"r": 9223372036854775808, "s": 9223372036854775807})", "a.json");
  ASSERT_TRUE(j.ok());
  auto r = json_int(*j, "r", "a.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'r' = 9223372036854775808 is out of range"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(*json_int(*j, "s", "a.json"), INT64_MAX);
}

}  // namespace
}  // namespace st
