// Live oracle for the general split regex and HF's Split behaviors: tools/tok/split_check.py runs
// HF `tokenizers` on random strings for ~160 pre-tokenizer specs (DeepSeek-V3, GPT-4o, the
// families' patterns through the general matcher, every supported construct, every behavior,
// Punctuation / Whitespace / WhitespaceSplit / CharDelimiterSplit, 60 random patterns a run); our
// pre-tokenizer must give the same pieces, and refuse what HF refuses. Fails (never skips) when python3 or `tokenizers` is missing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "core/json.h"
#include "data/detail/tokenizer_json.h"
#include "../run_command.h"

namespace st {
namespace {

TEST(SplitRegexLive, MatchesHfPreTokenizers) {
  const std::string root = ST_SOURCE_DIR;
  const long seed = std::chrono::system_clock::now().time_since_epoch().count() % 1000000;
  int rc = -1;
  const std::string out = run_command("python3 " + root + "/tools/tok/split_check.py " + std::to_string(seed) + " 60 2>&1", &rc);
  ASSERT_EQ(rc, 0) << "split_check.py failed (python3 with the `tokenizers` package is required; run "
                      "tools/install_deps.sh):\n" << out.substr(0, 2000);
  int specs = 0, texts = 0, bad = 0, refused = 0, random_run = 0, norms = 0;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t e = out.find('\n', pos);
    if (e == std::string::npos) e = out.size();
    const std::string_view line = std::string_view(out).substr(pos, e - pos);
    pos = e + 1;
    if (line.empty() || line[0] != '{') continue;  // stderr: Oniguruma's retry-limit panics print here
    auto j = parse_json(line, "split_check output");
    ASSERT_TRUE(j.ok()) << j.status().to_string();
    if (j->contains("norm")) {  // a normalizer: HF's normalize_str
      Json tn = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", Json::array()}}},
                 {"normalizer", (*j)["norm"]}};
      auto impl = tok::impl_from_json(tn, "normalizer " + (*j)["norm"].dump());
      ASSERT_TRUE(impl.ok()) << impl.status().to_string();
      ++norms;
      const Json& ts = (*j)["texts"];
      for (size_t k = 0; k < ts.size(); ++k) {
        const std::string got = (*impl)->normalize(ts[k].get<std::string>());
        const std::string want = (*j)["out"][k].get<std::string>();
        if (got != want && bad++ < 8)
          ADD_FAILURE() << (*j)["norm"].dump() << "\n text " << Json(ts[k]).dump() << "\n hf   " << Json(want).dump()
                        << "\n ours " << Json(got).dump();
      }
      continue;
    }
    Json tj = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", Json::array()}}},
               {"pre_tokenizer", (*j)["pre"]}};
    auto impl = tok::impl_from_json(tj, "spec " + (*j)["pre"].dump());
    if (j->contains("hf_error")) {  // HF refuses the pattern: so must we
      EXPECT_FALSE(impl.ok()) << (*j)["pre"].dump() << " compiles here; HF: " << (*j)["hf_error"].dump();
      continue;
    }
    if (!impl.ok() && j->contains("random") && impl.status().code() == StatusCode::kUnimplemented) {
      ++refused;  // a random pattern outside the subset: refused by name, never run differently
      continue;
    }
    ASSERT_TRUE(impl.ok()) << impl.status().to_string();
    ++specs;
    if (j->contains("random")) ++random_run;
    const Json& ts = (*j)["texts"];
    for (size_t k = 0; k < ts.size(); ++k, ++texts) {
      std::vector<std::string> got;
      (*impl)->pre_tokenize(ts[k].get<std::string>(), true, &got);
      const auto want = (*j)["pieces"][k].get<std::vector<std::string>>();
      if (got != want && bad++ < 8)
        ADD_FAILURE() << (*j)["pre"].dump() << "\n text " << Json(ts[k]).dump() << "\n hf   " << Json(want).dump()
                      << "\n ours " << Json(got).dump() << " (seed " << seed << ")";
    }
  }
  std::printf("%d specs, %d texts; %d random patterns run, %d refused by name (seed %ld)\n", specs, texts, random_run,
              refused, seed);
  EXPECT_GT(specs, 190);
  EXPECT_EQ(norms, 15);
  EXPECT_GE(random_run, 2 * refused) << "too many random patterns refused: " << refused << " vs " << random_run << " run";
  EXPECT_EQ(bad, 0) << bad << " of " << texts << " texts differ (seed " << seed << ")";
}

}  // namespace
}  // namespace st
