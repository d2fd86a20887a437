// Oracle: the single-device Trainer with the same global batch (gradient_accumulation_steps x N
// micro-batches from the same data). DataParallelTrainer with N CPU replicas over ONE shared RAM
// store (the llama_gqa fixture, sharded to f32) must give:
//   * kExact: bit-identical step losses, grad norms and final LoRA parameters, for N = 1..4
//     (N = 4 with 6 rows leaves ranks without a micro-batch in some windows), also with dropout;
//   * kFast: the same up to f32 summation order (tight tolerance), and run-to-run identical bits.
// Plus: only rank 0 writes metrics.jsonl and the adapter; a failing replica fails the run
// without hanging the others.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/file.h"
#include "dist/data_parallel.h"
#include "store/sharder.h"
#include "train/loader_source.h"

namespace st {
namespace {

const std::string kFixture = std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_gqa";

struct RunResult {
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  std::vector<float> params;
  bool interrupted = false;
};

class DataParallel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new std::string(Str() << "/tmp/st_dist_test_" << getpid());
    ASSERT_TRUE(make_dirs(*tmp_).ok());
    ShardOptions so;
    so.dtype = DType::kF32;
    so.out_dir = *tmp_ + "/store";
    auto sr = shard_model_path(kFixture + "/model", so);
    ASSERT_TRUE(sr.ok()) << sr.status().to_string();
    host_be_ = make_backend(DeviceKind::kCpu, {.num_threads = 1}).value().release();
    RamStoreOptions ro;
    ro.pin = false;
    auto store = RamStore::open(sr->dir, host_be_, ro);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    store_ = store->release();
  }
  static void TearDownTestSuite() {
    delete store_;
    delete host_be_;
    std::error_code ec;
    std::filesystem::remove_all(*tmp_, ec);
    delete tmp_;
  }

  TrainConfig config(int64_t accum, const std::string& out) {
    TrainConfig tc;
    tc.base_model = kFixture + "/model";
    tc.dtype = "float32";
    tc.lora_model_dir = kFixture + "/adapter";  // r 4, alpha 8, all seven projections
    tc.lora_r = 4;
    tc.lora_alpha = 8;
    tc.lora_target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    tc.learning_rate = 1e-3;
    tc.lr_scheduler = "linear";
    tc.weight_decay = 0.01;
    tc.micro_batch_size = 1;
    tc.gradient_accumulation_steps = accum;
    tc.max_steps = 4;
    tc.sequence_len = 64;
    tc.shuffle = false;
    tc.output_dir = *tmp_ + "/" + out;
    return tc;
  }
  // Preference data (train/preference_step.h): 6 pairs, or 12 KTO examples (every third undesirable),
  // prompts of 3-5 tokens and replies of 2-4, ids inside the fixture's vocabulary.
  std::unique_ptr<BatchSource> preference_data(bool kto, int64_t micro_batch_size) {
    auto v = std::make_shared<std::vector<Sample>>();
    auto seq = [](int32_t first, int n) {
      std::vector<int32_t> ids;
      for (int k = 0; k < n; ++k) ids.push_back(first + 7 * k);
      return ids;
    };
    auto sample = [&](int i, int32_t reply_first, int reply_len) {
      Sample s;
      s.input_ids = seq(3 + 11 * i, 3 + i % 3);
      s.labels.assign(s.input_ids.size(), kIgnoreIndex);
      for (int32_t id : seq(reply_first, reply_len)) {
        s.input_ids.push_back(id);
        s.labels.push_back(id);
      }
      return s;
    };
    for (int i = 0; i < (kto ? 12 : 6); ++i) {
      if (kto) {
        v->push_back(sample(i, 100 + i, 2 + i % 3));
        v->back().kto = i % 3 == 2 ? -1 : 1;
      } else {
        v->push_back(sample(i, 100 + i, 2 + i % 3));
        v->back().pair = 1;
        v->push_back(sample(i, 180 + i, 2 + (i + 1) % 3));
        v->back().pair = 2;
      }
    }
    return std::make_unique<DataLoaderSource>(
        v, LoaderOptions{.sequence_len = 64, .micro_batch_size = micro_batch_size, .pairs = !kto, .kto = kto,
                         .shuffle = false});
  }
  std::unique_ptr<BatchSource> data() {
    if (preference_) return preference_data(kto_, micro_batch_);
    return TokenizedJsonlSource::open({.paths = {kFixture + "/data.jsonl"}, .micro_batch_size = 1,
                                       .sequence_len = 64, .shuffle = false})
        .value();
  }

  // The oracle: one device, gradient_accumulation_steps = accum x n.
  RunResult single(TrainConfig tc, int n) {
    tc.gradient_accumulation_steps *= n;
    auto be = make_backend(DeviceKind::kCpu, {.num_threads = 1}).value();
    auto parts = hf_resident_parts(tc.base_model);
    EXPECT_TRUE(parts.ok());
    auto t = Trainer::create(tc, be.get(), std::move(*parts));
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    RunResult r;
    (*t)->on_step = [&](const StepMetrics& m) { r.steps.push_back(m); };
    (*t)->on_eval = [&](const EvalMetrics& e) { r.evals.push_back(e); };
    auto d = data();
    auto ev = data();  // the eval set: the same rows
    if (eval_) (*t)->set_eval_data(ev.get());
    Status s = (*t)->train(*d);
    EXPECT_TRUE(s.ok()) << s.to_string();
    r.params = (*t)->model().lora().params_to_host();
    return r;
  }

  RunResult parallel(const TrainConfig& tc, int n, DpReduction red, const ReplicaPartsFactory* parts_override = nullptr,
               Status* status = nullptr) {
    std::vector<std::unique_ptr<Backend>> owned;
    std::vector<Backend*> bes;
    for (int i = 0; i < n; ++i) {
      owned.push_back(make_backend(DeviceKind::kCpu, {.num_threads = 1}).value());
      bes.push_back(owned.back().get());
    }
    StreamedSourceOptions so;
    ReplicaPartsFactory parts = parts_override ? *parts_override : shared_ram_store_parts(store_, so, tc.base_model);
    DataParallelOptions o;
    o.reduction = red;
    o.verify_replicas = true;
    o.on_thread_start = [](int) { omp_set_num_threads(1); };  // N replicas on 2 CI cores: no spinning teams
    auto t = DataParallelTrainer::create(tc, bes, make_thread_communicators(bes), parts, o);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    RunResult r;
    if (!t.ok()) return r;
    EXPECT_EQ((*t)->world_size(), n);
    (*t)->on_step = [&](const StepMetrics& m) { r.steps.push_back(m); };
    (*t)->on_eval = [&](const EvalMetrics& e) { r.evals.push_back(e); };
    auto d = data();
    auto ev = data();
    if (eval_) (*t)->set_eval_data(ev.get());
    (*t)->stop_requested = stop_;
    Status s = (*t)->train(*d);
    r.interrupted = (*t)->interrupted();
    if (status) {
      *status = s;
    } else {
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
    r.params = (*t)->model(0).lora().params_to_host();
    for (int i = 1; i < n; ++i) {
      std::vector<float> p = (*t)->model(i).lora().params_to_host();
      EXPECT_EQ(std::memcmp(p.data(), r.params.data(), p.size() * 4), 0) << "replica " << i << " drifted";
    }
    return r;
  }

  static void expect_bit_equal(const RunResult& a, const RunResult& b, const std::string& what) {
    ASSERT_EQ(a.steps.size(), b.steps.size()) << what;
    for (size_t i = 0; i < a.steps.size(); ++i) {
      EXPECT_EQ(a.steps[i].loss, b.steps[i].loss) << what << " step " << i + 1;
      EXPECT_EQ(a.steps[i].grad_norm, b.steps[i].grad_norm) << what << " step " << i + 1;
      EXPECT_EQ(a.steps[i].lr, b.steps[i].lr) << what << " step " << i + 1;
      EXPECT_EQ(a.steps[i].tokens, b.steps[i].tokens) << what << " step " << i + 1;
    }
    ASSERT_EQ(a.params.size(), b.params.size());
    EXPECT_EQ(std::memcmp(a.params.data(), b.params.data(), a.params.size() * 4), 0) << what << ": parameters differ";
  }

  static std::string* tmp_;
  static Backend* host_be_;
  static RamStore* store_;
  bool preference_ = false, kto_ = false;  // data(): preference pairs or KTO examples
  bool eval_ = false;                      // evaluate on data()'s rows too
  std::function<bool()> stop_;             // the data-parallel runs' stop_requested
  int64_t micro_batch_ = 1;
};
std::string* DataParallel::tmp_ = nullptr;
Backend* DataParallel::host_be_ = nullptr;
RamStore* DataParallel::store_ = nullptr;

// With one micro-batch per device the rank-ordered sum IS the single-device order; the cases
// that need kExact have several micro-batches per device (rank 0 sums g0+g2, rank 1 g1+g3, while
// one device sums ((g0+g1)+g2)+g3).
TEST_F(DataParallel, ExactModeIsBitIdenticalToOneDevice) {
  for (int n : {1, 2, 3}) {
    TrainConfig tc = config(2, Str() << "exact" << n);  // N=2: windows of 4 out of 6 rows, every other cut short
    expect_bit_equal(parallel(tc, n, DpReduction::kExact), single(tc, n), Str() << "exact N=" << n);
  }
  // N = 4 over 6 rows: the second window has 2 micro-batches, ranks 2 and 3 get none.
  TrainConfig tc = config(1, "exact4");
  expect_bit_equal(parallel(tc, 4, DpReduction::kExact), single(tc, 4), "exact N=4");
}

TEST_F(DataParallel, ExactModeMatchesWithDropoutAndMicroBatchNormalisation) {
  TrainConfig tc = config(1, "dropout");
  tc.lora_dropout = 0.25;
  tc.loss_normalization = "micro_batch";
  RunResult one = single(tc, 3);
  expect_bit_equal(parallel(tc, 3, DpReduction::kExact), one, "exact N=3 dropout");
  // The dropout counter matters: a run without it must differ (the oracle can fail).
  TrainConfig no_drop = tc;
  no_drop.lora_dropout = 0;
  EXPECT_NE(single(no_drop, 3).steps[0].loss, one.steps[0].loss);
}

TEST_F(DataParallel, FastModeEqualsOneDeviceUpToSummationOrder) {
  int bitwise_different = 0;
  for (int n : {2, 3}) {
    TrainConfig tc = config(2, Str() << "fast" << n);
    RunResult want = single(tc, n), got = parallel(tc, n, DpReduction::kFast);
    ASSERT_EQ(got.steps.size(), want.steps.size());
    for (size_t i = 0; i < got.steps.size(); ++i) {
      EXPECT_NEAR(got.steps[i].loss, want.steps[i].loss, 1e-6 * want.steps[i].loss) << "N=" << n << " step " << i;
      EXPECT_NEAR(got.steps[i].grad_norm, want.steps[i].grad_norm, 1e-5 * want.steps[i].grad_norm);
    }
    double worst = 0;
    for (size_t i = 0; i < got.params.size(); ++i) worst = std::max(worst, double(std::fabs(got.params[i] - want.params[i])));
    EXPECT_LT(worst, 1e-6) << "N=" << n;
    std::printf("fast N=%d: worst |param - one device| after 4 steps %.3g\n", n, worst);
    bitwise_different += std::memcmp(got.params.data(), want.params.data(), got.params.size() * 4) != 0;
    // Deterministic run to run (fixed rank-order reduction).
    expect_bit_equal(parallel(tc, n, DpReduction::kFast), got, Str() << "fast N=" << n << " rerun");
  }
  // The summation order does change bits here, so the exact-mode test above is a sharp oracle.
  EXPECT_GT(bitwise_different, 0);
  // N = 1 takes the one-device code path: bit-identical.
  TrainConfig tc = config(2, "fast1");
  expect_bit_equal(parallel(tc, 1, DpReduction::kFast), single(tc, 1), "fast N=1");
}

// Preference training over replicas (train/preference_step.h Note [preference window]): each rank
// runs its own micro-batches' references (and KTO's KL forwards) and weighs its rows by the GLOBAL
// window's units; the statistics travel per micro-batch and merge in window order. Exact mode gives
// the one-device run's bits -- losses, the logged rewards, grad norms, parameters -- for DPO with
// rpo_alpha's NLL term (normalized over the window's micro-batches) and for KTO.
TEST_F(DataParallel, PreferenceExactModeIsBitIdenticalToOneDevice) {
  preference_ = true;
  for (bool kto : {false, true}) {
    kto_ = kto;
    micro_batch_ = kto ? 2 : 1;
    for (int n : {2, 3}) {
      TrainConfig tc = config(1, Str() << (kto ? "kto" : "dpo") << n);
      tc.rl = kto ? "kto" : "dpo";
      tc.rl_beta = 0.5;
      if (!kto) tc.rpo_alpha = 0.5;
      tc.micro_batch_size = micro_batch_;
      const std::string what = Str() << tc.rl << " exact N=" << n;
      RunResult one = single(tc, n), dp = parallel(tc, n, DpReduction::kExact);
      expect_bit_equal(dp, one, what);
      ASSERT_EQ(dp.steps.size(), 4u) << what;
      for (size_t i = 0; i < dp.steps.size(); ++i) {
        EXPECT_EQ(dp.steps[i].extra, one.steps[i].extra) << what << " step " << i + 1;
        EXPECT_FALSE(one.steps[i].extra.empty()) << what;
      }
      EXPECT_NE(one.steps[0].loss, one.steps[3].loss) << what;  // it trains
    }
  }
}

static void expect_same_evals(const RunResult& a, const RunResult& b, const std::string& what) {
  ASSERT_EQ(a.evals.size(), b.evals.size()) << what;
  for (size_t i = 0; i < a.evals.size(); ++i) {
    EXPECT_EQ(a.evals[i].step, b.evals[i].step) << what;
    EXPECT_EQ(a.evals[i].loss, b.evals[i].loss) << what << " eval at step " << a.evals[i].step;
    EXPECT_EQ(a.evals[i].extra, b.evals[i].extra) << what << " eval at step " << a.evals[i].step;
  }
}

// Evaluation during training (train/evaluation.h Note [eval figures]): rank r evaluates the eval
// batches i with i % N == r, each rank's through the layers together (the replicas stream), and
// the gathered figures add up in batch order: every eval has the one-device run's bits -- the
// token cross-entropy, DPO's and KTO's losses and logged figures -- for N = 2..4 (N = 4 over 6
// rows: a round leaves ranks without a batch).
TEST_F(DataParallel, EvalsDuringTrainingHaveTheBitsOfOneDevice) {
  eval_ = true;
  for (int n : {2, 3, 4}) {
    TrainConfig tc = config(1, Str() << "eval" << n);
    tc.eval_steps = 2;
    RunResult one = single(tc, n), dp = parallel(tc, n, DpReduction::kExact);
    expect_bit_equal(dp, one, Str() << "eval N=" << n);
    ASSERT_EQ(dp.evals.size(), 2u) << n;  // steps 2 and 4 (the last)
    EXPECT_EQ(dp.evals[1].step, 4);
    expect_same_evals(dp, one, Str() << "eval N=" << n);
    EXPECT_NE(one.evals[0].loss, one.evals[1].loss);  // the adapter changed between them
    auto metrics = read_file_to_string(tc.output_dir + "/metrics.jsonl");
    ASSERT_TRUE(metrics.ok());
    size_t lines = 0;
    for (size_t at = metrics->find("\"eval_loss\""); at != std::string::npos; at = metrics->find("\"eval_loss\"", at + 1))
      ++lines;
    EXPECT_EQ(lines, 2u) << "eval lines written once, by rank 0";
  }
  preference_ = true;
  for (bool kto : {false, true}) {
    kto_ = kto;
    micro_batch_ = kto ? 2 : 1;
    TrainConfig tc = config(1, Str() << (kto ? "kto" : "dpo") << "_eval");
    tc.rl = kto ? "kto" : "dpo";
    tc.rl_beta = 0.5;
    tc.micro_batch_size = micro_batch_;
    tc.eval_steps = 2;
    RunResult one = single(tc, 3), dp = parallel(tc, 3, DpReduction::kExact);
    ASSERT_EQ(dp.evals.size(), 2u) << tc.rl;
    EXPECT_FALSE(dp.evals[0].extra.empty()) << tc.rl;
    expect_same_evals(dp, one, tc.rl + " eval N=3");
  }
}

// early_stopping_patience and load_best_model_at_end over replicas: every rank evaluates, so all
// stop at the one-device run's step, and the final adapter is the best eval's, as one device's.
TEST_F(DataParallel, EarlyStoppingKeepsTheBestAdapterAsOneDevice) {
  eval_ = true;
  TrainConfig tc = config(1, "early");
  tc.max_steps = 6;
  tc.eval_steps = 1;
  tc.early_stopping_patience = 1;
  tc.early_stopping_threshold = 1e6;  // no eval improves on the first by that much: stop after 2
  tc.learning_rate = 0.05;            // so large that the eval loss rises: the best is not the last
  RunResult one = single(tc, 2);
  TrainConfig dtc = tc;
  dtc.output_dir += "_dp";
  RunResult dp = parallel(dtc, 2, DpReduction::kExact);
  ASSERT_EQ(one.steps.size(), 2u);
  expect_bit_equal(dp, one, "early stopping N=2");
  expect_same_evals(dp, one, "early stopping N=2");
  auto be = make_backend(DeviceKind::kCpu).value();
  LoraConfig lc = lora_config_from(tc).value();
  auto want = Lora::create(be.get(), store_->manifest().config, lc).value();
  auto got = Lora::create(be.get(), store_->manifest().config, lc).value();
  ASSERT_TRUE(want->load_peft(tc.output_dir).ok());
  ASSERT_TRUE(got->load_peft(dtc.output_dir).ok());
  const std::vector<float> w = want->params_to_host(), g = got->params_to_host();
  EXPECT_EQ(std::memcmp(w.data(), g.data(), w.size() * 4), 0) << "the final adapters differ";
  int64_t best_step = 0;
  double best_loss = 1e300;
  for (const EvalMetrics& e : dp.evals)
    if (e.loss < best_loss) best_loss = e.loss, best_step = e.step;
  ASSERT_EQ(best_step, 1) << "the second eval is the best: the final adapter would be the trained state";
  auto best = Lora::create(be.get(), store_->manifest().config, lc).value();
  ASSERT_TRUE(best->load_peft(dtc.output_dir + "/checkpoint-" + std::to_string(best_step)).ok());
  const std::vector<float> b1 = best->params_to_host();
  EXPECT_EQ(std::memcmp(b1.data(), g.data(), g.size() * 4), 0) << "the final adapter is the best eval's";
}

// Checkpoints are Trainer's (train/checkpoint.h): a run resumed from one takes the uninterrupted
// run's steps -- the same losses, evals and final adapter, bit for bit -- and a different device
// count is refused by name (the global window would change).
TEST_F(DataParallel, ResumeFromACheckpointIsTheUninterruptedRun) {
  eval_ = true;
  TrainConfig tc = config(2, "whole");
  tc.save_steps = 2;
  tc.eval_steps = 2;
  tc.lora_dropout = 0.25;  // the dropout counter resumes too
  RunResult whole = parallel(tc, 2, DpReduction::kExact);
  ASSERT_EQ(whole.steps.size(), 4u);
  ASSERT_TRUE(file_exists(tc.output_dir + "/checkpoint-2/trainer_state.json"));
  ASSERT_TRUE(file_exists(tc.output_dir + "/checkpoint-2/optimizer.safetensors"));
  TrainConfig re = tc;
  re.output_dir = *tmp_ + "/resumed";
  std::filesystem::remove_all(re.output_dir);
  std::filesystem::create_directories(re.output_dir);
  std::filesystem::copy(tc.output_dir + "/checkpoint-2", re.output_dir + "/checkpoint-2", std::filesystem::copy_options::recursive);
  re.resume_from_checkpoint = "true";  // the latest in output_dir
  RunResult rest = parallel(re, 2, DpReduction::kExact);
  ASSERT_EQ(rest.steps.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(rest.steps[i].step, whole.steps[i + 2].step);
    EXPECT_EQ(rest.steps[i].loss, whole.steps[i + 2].loss) << "step " << i + 3;
    EXPECT_EQ(rest.steps[i].grad_norm, whole.steps[i + 2].grad_norm) << "step " << i + 3;
  }
  ASSERT_EQ(rest.evals.size(), 1u);
  EXPECT_EQ(rest.evals[0].loss, whole.evals[1].loss);
  EXPECT_EQ(std::memcmp(rest.params.data(), whole.params.data(), whole.params.size() * 4), 0);
  auto lines = read_file_to_string(re.output_dir + "/metrics.jsonl");
  ASSERT_TRUE(lines.ok());
  EXPECT_EQ(std::count(lines->begin(), lines->end(), '\n'), 3) << *lines;  // steps 3, 4 and the eval at 4
  // Three devices make a window of 6, not 4: refused, naming the key.
  Status s;
  TrainConfig three = re;
  three.output_dir = *tmp_ + "/resumed3";
  std::filesystem::create_directories(three.output_dir);
  std::filesystem::copy(tc.output_dir + "/checkpoint-2", three.output_dir + "/checkpoint-2", std::filesystem::copy_options::recursive);
  parallel(three, 3, DpReduction::kExact, nullptr, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.to_string().find("devices: checkpoint 2, this run 3"), std::string::npos) << s.to_string();
}

// stop_requested (Ctrl-C) after a step: a checkpoint of that step, then the run returns.
TEST_F(DataParallel, AStopRequestCheckpointsAfterTheStep) {
  TrainConfig tc = config(1, "stopped");
  int polls = 0;
  stop_ = [&] { return ++polls >= 2; };
  RunResult r = parallel(tc, 2, DpReduction::kFast);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_TRUE(file_exists(tc.output_dir + "/checkpoint-2/trainer_state.json"));
  EXPECT_FALSE(file_exists(tc.output_dir + "/adapter_model.safetensors"));
}

TEST_F(DataParallel, RankZeroWritesMetricsAndAdapter) {
  TrainConfig tc = config(1, "outputs");
  tc.save_steps = 2;
  RunResult r = parallel(tc, 3, DpReduction::kFast);
  auto metrics = read_file_to_string(tc.output_dir + "/metrics.jsonl");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(std::count(metrics->begin(), metrics->end(), '\n'), 4);  // once, not once per replica
  EXPECT_TRUE(file_exists(tc.output_dir + "/checkpoint-2/adapter_model.safetensors"));
  auto be = make_backend(DeviceKind::kCpu).value();
  LoraConfig lc = lora_config_from(tc).value();
  auto lora = Lora::create(be.get(), store_->manifest().config, lc).value();
  ASSERT_TRUE(lora->load_peft(tc.output_dir).ok());
  std::vector<float> saved = lora->params_to_host();
  EXPECT_EQ(std::memcmp(saved.data(), r.params.data(), saved.size() * 4), 0);
}

// A LayerSource whose load failed (sticky status) on rank 1 only.
class BrokenSource : public LayerSource {
 public:
  explicit BrokenSource(std::unique_ptr<LayerSource> s) : s_(std::move(s)) {}
  void begin_step(const std::vector<int>& v) override { s_->begin_step(v); }
  LayerWeights acquire(int l) override { return s_->acquire(l); }
  void release(int l) override { s_->release(l); }
  void end_step() override { s_->end_step(); }
  Status status() const override { return IOError("layer_001.safetensors: short read (injected)"); }

 private:
  std::unique_ptr<LayerSource> s_;
};

TEST_F(DataParallel, AFailingReplicaFailsTheRunWithoutHanging) {
  TrainConfig tc = config(1, "broken");
  ReplicaPartsFactory base = shared_ram_store_parts(store_, StreamedSourceOptions(), tc.base_model);
  ReplicaPartsFactory broken = [base](int rank, Backend* be) -> StatusOr<TrainerParts> {
    ASSIGN_OR_RETURN(TrainerParts p, base(rank, be));
    if (rank == 1) {
      auto inner = p.make_layers;
      p.make_layers = [inner](Backend* b, const LayerLayout& l) -> StatusOr<std::unique_ptr<LayerSource>> {
        ASSIGN_OR_RETURN(auto s, inner(b, l));
        return std::unique_ptr<LayerSource>(std::make_unique<BrokenSource>(std::move(s)));
      };
    }
    return p;
  };
  Status s;
  RunResult r = parallel(tc, 3, DpReduction::kFast, &broken, &s);
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s.to_string();
  EXPECT_NE(s.to_string().find("replica 1"), std::string::npos) << s.to_string();
  EXPECT_TRUE(r.steps.empty());
}

}  // namespace
}  // namespace st
