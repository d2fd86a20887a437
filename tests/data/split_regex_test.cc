// The general split regex (data/detail/split_regex.h): what it refuses and how, hostile patterns
// staying polynomial, and matches checked by hand. Agreement with HF `tokenizers` on real and
// exotic patterns is split_regex_live_test's job.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "data/detail/split_regex.h"
#include "data/detail/unicode.h"

namespace st::tok {
namespace {

using Spans = std::vector<std::pair<size_t, size_t>>;

Spans find(const std::string& pattern, const std::string& text) {
  auto re = SplitPattern::compile(pattern);
  EXPECT_TRUE(re.ok()) << re.status().to_string();
  if (!re.ok()) return {};
  return (*re)->find_all(utf8_decode(text));
}

void expect_refused(const std::string& pattern, StatusCode code, const std::string& word) {
  auto re = SplitPattern::compile(pattern);
  ASSERT_FALSE(re.ok()) << pattern;
  EXPECT_EQ(re.status().code(), code) << re.status().to_string();
  EXPECT_NE(re.status().message().find(word), std::string::npos) << "'" << word << "' not in " << re.status().to_string();
  EXPECT_NE(re.status().message().find(pattern), std::string::npos) << re.status().to_string();
}

TEST(SplitRegex, RefusesByName) {
  const auto U = StatusCode::kUnimplemented;
  expect_refused(R"((a)\1)", U, "backreference");
  expect_refused(R"(\p{Han}+)", U, "'Han'");
  expect_refused(R"([[:alpha:]])", U, "POSIX");
  expect_refused(R"([a-z&&[^b]])", U, "intersection");
  expect_refused(R"([a[^bc]])", U, "nested");
  expect_refused(R"((?x) a)", U, "(?x)");
  expect_refused(R"((?<=a+)b)", U, "variable length");
  expect_refused(R"(a\Kb)", U, "'\\K'");
  expect_refused(R"(\R)", U, "'\\R'");
  expect_refused(R"(\pL)", U, "without braces");
  expect_refused(R"((?i)straße)", U, "multi-character");
  expect_refused(R"((?i:ss))", U, "multi-character");
  expect_refused(R"((?i)[ß])", U, "folds to several");
  expect_refused(R"(a{2}?)", U, "{n}?");
  expect_refused(R"((?|a))", U, "group kind");
}

TEST(SplitRegex, RejectsMalformed) {
  const auto I = StatusCode::kInvalidArgument;
  expect_refused("(ab", I, "missing ')'");
  expect_refused("ab)", I, "unmatched ')'");
  expect_refused("*a", I, "not specified");
  expect_refused("a|+", I, "not specified");
  expect_refused("[z-a]", I, "empty range");
  expect_refused("[abc", I, "premature end");
  expect_refused(R"(\x{110000})", I, "out of range");
  expect_refused(R"(\u12)", I, "hexadecimal");
  expect_refused("a{3,2}", I, "smaller");
  expect_refused("^*", I, "invalid");
  expect_refused("(?=a)*", I, "invalid");
  expect_refused("(?:(?:^))*", I, "invalid");
  expect_refused("(?:^|a)*", I, "invalid");  // an alternation with an anchor branch
  expect_refused("a\\", I, "ending in");
  // Session 22 audit: 10,000 nested groups overflowed the stack; real pre-tokenizers nest 2-3 deep.
  expect_refused(std::string(10000, '(') + "a" + std::string(10000, ')'), I, "nested deeper than 200");
  std::string flags;
  for (int k = 0; k < 5000; ++k) flags += "(?i:";
  expect_refused(flags + "a" + std::string(5000, ')'), I, "nested deeper than 200");
  EXPECT_TRUE(SplitPattern::compile(std::string(150, '(') + "a" + std::string(150, ')')).ok());
  std::string stacked = "a";
  for (int k = 0; k < 5000; ++k) stacked += "{1}";
  expect_refused(stacked, I, "repeats nested deeper than 200");
  auto bad_utf8 = SplitPattern::compile("a\xff");
  ASSERT_FALSE(bad_utf8.ok());
  EXPECT_EQ(bad_utf8.status().code(), I);
}

// What Oniguruma lets a quantifier follow: an enclosing capturing / option / atomic group or a
// concatenation makes a lookaround or anchor repeatable (those are then refused by name here, as
// every repeat of something that can match empty is: Oniguruma ends such a loop on an empty
// iteration, which this matcher does not model), while a bare one is a syntax error.
TEST(SplitRegex, RepeatTargetsAsOniguruma) {
  for (const char* empty : {"(?:^$)*", "((?=a))*", "(?i:(?<!\\s))*?", "(?>^)*", "(?<n>^)*", "(?:)*", "(a*)*", "(?:a?|b)+"}) {
    auto re = SplitPattern::compile(empty);
    ASSERT_FALSE(re.ok()) << empty;
    EXPECT_EQ(re.status().code(), StatusCode::kUnimplemented) << re.status().to_string();
    EXPECT_NE(re.status().message().find("can match empty"), std::string::npos) << re.status().to_string();
  }
  EXPECT_EQ(find("(?:a(?=b))*b", "aab"), (Spans{{1, 3}}));
  EXPECT_EQ(find("(?:a?){1}", "a"), (Spans{{0, 1}}));  // at most once: nothing to end; no empty match at 1
}

// Oniguruma's two \w: bare \w takes U+00B2 (No) and [\w] does not; both take U+24B6 (So, circled A).
TEST(SplitRegex, WordInAndOutOfBrackets) {
  EXPECT_EQ(find(R"(\w)", "\u00B2\u24B6\u00B7"), (Spans{{0, 1}, {1, 2}}));
  EXPECT_EQ(find(R"([\w])", "\u00B2\u24B6\u00B7"), (Spans{{1, 2}}));
  EXPECT_EQ(find(R"([\W])", "\u00B2\u24B6"), (Spans{{0, 1}}));
  EXPECT_EQ(find(R"(\bx)", "\u00B2x x"), (Spans{{3, 4}}));  // U+00B2 is a word character for \b
}

TEST(SplitRegex, HandChecked) {
  EXPECT_EQ(find(R"(\p{N}{1,3})", "a12345b"), (Spans{{1, 4}, {4, 6}}));
  EXPECT_EQ(find("a*", "baab"), (Spans{{0, 0}, {1, 3}, {4, 4}}));  // onig's find_iter: no empty match at 3
  EXPECT_EQ(find("a*?", "aa"), (Spans{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(find(R"(\s+(?!\S)|\s+)", "a   b  "), (Spans{{1, 3}, {3, 4}, {5, 7}}));
  EXPECT_EQ(find("(?<=a|bc)x", "axbcxcx"), (Spans{{1, 2}, {4, 5}}));
  EXPECT_EQ(find("(?>a+)a", "aaa"), Spans{});
  EXPECT_EQ(find("a++|b", "aab"), (Spans{{0, 2}, {2, 3}}));
  EXPECT_EQ(find("x(?i)a|b", "xAB xb"), (Spans{{0, 2}, {4, 6}}));       // a(?i)b|c is a(?i:b|c)
  EXPECT_EQ(find("(?i)'s", "'S'\u017F's"), (Spans{{0, 2}, {2, 4}, {4, 6}}));  // U+017F folds to s
  EXPECT_EQ(find(R"((?i)\p{Lu})", "aB"), (Spans{{1, 2}}));               // no widening outside brackets
  EXPECT_EQ(find(R"((?i)[K])", "kK\u212A"), (Spans{{0, 1}, {1, 2}, {2, 3}}));  // ... but inside (KELVIN SIGN too)
  EXPECT_EQ(find(R"(\b\w+\b)", "ab, c_d"), (Spans{{0, 2}, {4, 7}}));
  EXPECT_EQ(find(R"(^\s+|\s+$)", " a \n b"), (Spans{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(find(R"([^]a]+)", "b]a"), (Spans{{0, 1}}));
  EXPECT_EQ(find(R"([\w-]+)", "a-b c"), (Spans{{0, 3}, {4, 5}}));
  EXPECT_EQ(find(".", "a\nb"), (Spans{{0, 1}, {2, 3}}));
  EXPECT_EQ(find("(?m:.)", "a\n"), (Spans{{0, 1}, {1, 2}}));
  EXPECT_EQ(find(R"(\p{^L}+|\P{N}+)", "ab12"), (Spans{{0, 2}, {2, 4}}));
  EXPECT_EQ(find(R"(\p{Lowercase_Letter}+)", "aBc"), (Spans{{0, 1}, {2, 3}}));
  EXPECT_EQ(find(R"( ?[^(\s|[.,!?])]+)", "ab, c(d)"), (Spans{{0, 2}, {3, 5}, {6, 7}}));  // nested class: union
}

// Catastrophic-backtracking shapes finish in instructions x positions (each state visited once).
TEST(SplitRegex, HostilePatternsStayPolynomial) {
  const std::string as(20000, 'a');
  EXPECT_EQ(find("(a+)+b", as).size(), 0u);
  EXPECT_EQ(find("(a|a)*b", as).size(), 0u);
  EXPECT_EQ(find("(a|aa)+$", as), (Spans{{0, 20000}}));
  EXPECT_EQ(find("((a+)+)+c|a", as.substr(0, 5000)).size(), 5000u);
  auto big = SplitPattern::compile("a{1000}{1000}");
  ASSERT_FALSE(big.ok());  // expands past the instruction limit: refused, not run
  EXPECT_EQ(big.status().code(), StatusCode::kUnimplemented);
}

// Hostile input: random strings over the syntax's own alphabet either compile or are refused with
// InvalidArgument / Unimplemented; what compiles runs on a text without crashing or looping, and
// its matches are ordered, in range and never overlapping.
TEST(SplitRegex, GarbagePatternsAreRefusedOrRunSafely) {
  const std::string alphabet = "()[]{}|*+?\\^$.-,:=!<>#aZ09pPdswhbAzk&_i{}^";
  std::mt19937 rng(7);
  const std::vector<uint32_t> text = utf8_decode("ab  Zz09_\n.-k(a)[b]{1,2} \xC3\xA9\xE4\xB8\xAD!");
  int compiled = 0;
  for (int it = 0; it < 20000; ++it) {
    std::string p;
    const int len = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
    auto re = SplitPattern::compile(p);
    if (!re.ok()) {
      const StatusCode c = re.status().code();
      ASSERT_TRUE(c == StatusCode::kInvalidArgument || c == StatusCode::kUnimplemented) << p << ": " << re.status().to_string();
      continue;
    }
    ++compiled;
    size_t last = 0;
    for (auto [a, b] : (*re)->find_all(text)) {
      ASSERT_LE(a, b) << p;
      ASSERT_LE(b, text.size()) << p;
      ASSERT_GE(a, last) << p;
      last = b;
    }
  }
  EXPECT_GT(compiled, 2000);
}

}  // namespace
}  // namespace st::tok
