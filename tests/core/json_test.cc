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

}  // namespace
}  // namespace st
