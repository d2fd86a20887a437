// loss_curve.svg from metrics.jsonl: one polyline point per train line, one dot per eval line,
// ticks on 1/2/5 x 10^k, and an XML document a parser accepts (checked structurally here).
#include <unistd.h>

#include <cmath>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "core/file.h"
#include "train/loss_curve.h"
#include "train/metrics.h"

namespace st {
namespace {

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(NiceTicks, OneTwoFiveSpacingCoveringTheRange) {
  EXPECT_EQ(nice_ticks(0, 20, 8), (std::vector<double>{0, 5, 10, 15, 20}));
  EXPECT_EQ(nice_ticks(0, 100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(2.13, 5.61, 6), (std::vector<double>{3, 4, 5}));
  auto t = nice_ticks(2.13, 5.61, 8);  // step 0.5
  ASSERT_EQ(t.size(), 7u);
  EXPECT_NEAR(t.front(), 2.5, 1e-12);
  EXPECT_NEAR(t.back(), 5.5, 1e-12);
  EXPECT_TRUE(nice_ticks(3, 3, 5).empty());
}

TEST(LossCurve, DrawsTrainLineAndEvalDotsFromMetrics) {
  const std::string dir = Str() << "/tmp/st_curve_test_" << getpid();
  ASSERT_TRUE(make_dirs(dir).ok());
  const std::string m = dir + "/metrics.jsonl";
  std::string text;
  for (int s = 1; s <= 20; ++s) {
    text += metrics_json_line(StepMetrics{.step = s, .loss = 6.0 / std::sqrt(s), .lr = 1e-3, .grad_norm = 1});
    text += "\n";
    if (s % 5 == 0) text += metrics_json_line(EvalMetrics{.step = s, .loss = 6.5 / std::sqrt(s)}) + "\n";
  }
  text += "{\"step\":21,\"loss\":nan}\n{\"step\":22,\"lo";  // garbage / a line cut by a kill
  ASSERT_TRUE(write_file_atomic(m, text).ok());
  auto c = read_loss_curve(m);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->train.size(), 20u);
  EXPECT_EQ(c->eval.size(), 4u);

  ASSERT_TRUE(write_loss_curve_svg(m, dir + "/loss_curve.svg", "run <a&b>").ok());
  auto svg = read_file_to_string(dir + "/loss_curve.svg");
  ASSERT_TRUE(svg.ok());
  EXPECT_EQ(svg->rfind("<?xml", 0), 0u);
  EXPECT_NE(svg->find("</svg>"), std::string::npos);
  EXPECT_NE(svg->find("run &lt;a&amp;b&gt;"), std::string::npos);
  EXPECT_EQ(count(*svg, "<polyline"), 1);
  EXPECT_EQ(count(*svg, "class=\"eval\""), 4);
  std::smatch pts;
  ASSERT_TRUE(std::regex_search(*svg, pts, std::regex("class=\"train\"[^>]*points=\"([^\"]*)\"")));
  EXPECT_EQ(count(pts[1].str(), ","), 20);
  // x ticks 0..20 step 5 (x starts at 0).
  std::string xticks;
  const std::regex xtick("class=\"xtick\"[^>]*>([^<]*)<");
  for (auto it = std::sregex_iterator(svg->begin(), svg->end(), xtick);
       it != std::sregex_iterator(); ++it)
    xticks += (*it)[1].str() + " ";
  EXPECT_EQ(xticks, "0 5 10 15 20 ");
  EXPECT_GE(count(*svg, "class=\"ytick\""), 3);
  // Points sit inside the plot area (x in [80, 776], y in [48, 424]).
  std::regex xy("([0-9.]+),([0-9.]+)");
  const std::string p = pts[1].str();
  for (auto it = std::sregex_iterator(p.begin(), p.end(), xy); it != std::sregex_iterator(); ++it) {
    const double x = std::stod((*it)[1]), y = std::stod((*it)[2]);
    EXPECT_GE(x, 80.0);
    EXPECT_LE(x, 776.0);
    EXPECT_GE(y, 48.0);
    EXPECT_LE(y, 424.0);
  }

  ASSERT_TRUE(write_file_atomic(m, "").ok());
  EXPECT_FALSE(write_loss_curve_svg(m, dir + "/empty.svg", "x").ok());
}

TEST(Metrics, TruncateKeepsCompleteLinesUpToTheStep) {
  const std::string dir = Str() << "/tmp/st_curve_test_" << getpid();
  ASSERT_TRUE(make_dirs(dir).ok());
  const std::string m = dir + "/trunc.jsonl";
  std::string text;
  for (int s = 1; s <= 6; ++s) text += metrics_json_line(StepMetrics{.step = s, .loss = 1.0 * s}) + "\n";
  text += metrics_json_line(EvalMetrics{.step = 4, .loss = 2}) + "\n";
  text += "{\"step\":7,\"loss\":";  // cut by a kill
  ASSERT_TRUE(write_file_atomic(m, text).ok());
  ASSERT_TRUE(truncate_metrics(m, 4).ok());
  auto got = read_file_to_string(m);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(count(*got, "\n"), 5);
  EXPECT_EQ(count(*got, "\"step\":5"), 0);
  EXPECT_EQ(count(*got, "eval_loss"), 1);
  EXPECT_TRUE(truncate_metrics(dir + "/missing.jsonl", 3).ok());
  EXPECT_EQ(metrics_json_line(EvalMetrics{.step = 3, .loss = 1000}), "{\"step\":3,\"eval_loss\":1000,\"eval_ppl\":null}");
}

}  // namespace
}  // namespace st
