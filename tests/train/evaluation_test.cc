// mean_eval_loss (train/evaluation.h, model/model.h Note [layer-major evaluation]) over a data
// source: where the layers load, the batches go in groups and the mean is that of one batch at a
// time, with the pass's progress reported after each group.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "../model/model_step.h"
#include "train/batch_source.h"
#include "train/evaluation.h"

namespace st {
namespace {

// mean_eval_loss (train/evaluation.h) over a data source: the mean of one batch at a time, with
// the pass's progress reported after each group.
TEST(Evaluation, MeanEvalLossInGroupsReportsEachGroup) {
  test::FixtureModel f = test::open_fixture_model("llama_layers", 2, {.act_dtype = DType::kF32, .max_tokens = 16, .seed = 9});
  const std::string path = ::testing::TempDir() + "/eval_group_rows.jsonl";
  {
    std::FILE* out = std::fopen(path.c_str(), "w");
    ASSERT_NE(out, nullptr);
    for (int r = 0; r < 5; ++r) {
      std::string ids;
      for (int32_t id : test::fixture_tokens(9 + r, f.config.vocab_size, 31 + r, 5 * r)) {
        if (!ids.empty()) ids += ',';
        ids += std::to_string(id);
      }
      std::fprintf(out, "{\"input_ids\": [%s]}\n", ids.c_str());
    }
    std::fclose(out);
  }
  auto data = TokenizedJsonlSource::open({.paths = {path}, .micro_batch_size = 1, .sequence_len = 16});
  ASSERT_TRUE(data.ok());
  auto want = mean_eval_loss(*f.model, *f.src, **data);  // resident: one at a time
  ASSERT_TRUE(want.ok());
  test::LoadingSource loading(f.src.get());
  std::vector<std::pair<int64_t, int64_t>> calls;
  const EvalProgress progress = [&](int64_t done, int64_t total) { calls.emplace_back(done, total); };
  auto got = mean_eval_loss(*f.model, loading, **data, &progress);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, *want);
  EXPECT_EQ(calls, (std::vector<std::pair<int64_t, int64_t>>{{3, 5}, {5, 5}})) << "groups of 3 (one per layer)";
}

}  // namespace
}  // namespace st
