// Checkpoints: a run stopped after step 5 and resumed from its checkpoint must reproduce the
// uninterrupted run bit for bit (every later step's loss / grad norm / lr, metrics.jsonl and the
// final adapter bytes), across an epoch boundary, with shuffling and LoRA dropout on. Plus
// refusal of a different config, save_total_limit, incomplete-dir handling, and the failure
// policy (non-finite loss, base-weight load error) that keeps the last good checkpoint.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/file.h"
#include "core/json.h"
#include "train/checkpoint.h"
#include "train/loader_source.h"
#include "train/trainer.h"

namespace st {
namespace {

namespace fs = std::filesystem;

std::string model_dir() { return std::string(ST_SOURCE_DIR) + "/tests/fixtures/llama_gqa/model"; }

std::string fresh_dir(const std::string& tag) {
  std::string d = Str() << "/tmp/st_ckpt_test_" << getpid() << "_" << tag;
  fs::remove_all(d);
  EXPECT_TRUE(make_dirs(d).ok());
  return d;
}

std::shared_ptr<std::vector<Sample>> samples(int n, uint64_t seed) {
  auto out = std::make_shared<std::vector<Sample>>();
  std::mt19937_64 r(seed);
  for (int i = 0; i < n; ++i) {
    Sample s;
    const int len = 8 + static_cast<int>(r() % 12);
    for (int t = 0; t < len; ++t) s.input_ids.push_back(static_cast<int32_t>(3 + r() % 250));
    s.labels = s.input_ids;
    out->push_back(std::move(s));
  }
  return out;
}

TrainConfig base_config(const std::string& out) {
  TrainConfig tc;
  tc.base_model = model_dir();
  tc.dtype = "float32";
  tc.sequence_len = 32;
  tc.micro_batch_size = 2;
  tc.gradient_accumulation_steps = 2;  // 10 samples -> 5 batches -> 3 steps per epoch
  tc.max_steps = 8;
  tc.lora_r = 4;
  tc.lora_alpha = 8;
  tc.lora_dropout = 0.1;
  tc.lora_target_modules = {"q_proj", "v_proj", "down_proj"};
  tc.learning_rate = 1e-3;
  tc.warmup_steps = 2;
  tc.save_steps = 3;
  tc.logging_steps = 2;  // a logging window open across the checkpoint at step 5
  tc.output_dir = out;
  return tc;
}

LoaderOptions loader_opts(const TrainConfig& tc, bool shuffle) {
  LoaderOptions lo;
  lo.sequence_len = tc.sequence_len;
  lo.micro_batch_size = tc.micro_batch_size;
  lo.shuffle = shuffle;
  lo.seed = tc.seed;
  return lo;
}

struct RunResult {
  Status status;
  std::vector<StepMetrics> steps;
  bool interrupted = false;
};

Backend* cpu() {
  // One thread: with OpenMP spin-waiting, two threads on a loaded 2-core machine are ~50x slower.
  static auto be = make_backend(DeviceKind::kCpu, {.num_threads = 1});
  return be->get();
}

// Trains with `tc` on the fixed samples; stop_after > 0 requests a stop after that step.
RunResult run(const TrainConfig& tc, int64_t stop_after = 0, LayerSourceFactory wrap = nullptr,
        BatchSource* eval = nullptr) {
  RunResult r;
  auto parts = hf_resident_parts(tc.base_model);
  if (!parts.ok()) return RunResult{parts.status(), {}, false};
  if (wrap) parts->make_layers = wrap;
  auto t = Trainer::create(tc, cpu(), std::move(*parts));
  if (!t.ok()) return RunResult{t.status(), {}, false};
  DataLoaderSource data(samples(10, 7), loader_opts(tc, true));
  (*t)->set_eval_data(eval);
  (*t)->on_step = [&](const StepMetrics& m) { r.steps.push_back(m); };
  (*t)->stop_requested = [&] { return stop_after > 0 && (*t)->steps_taken() >= stop_after; };
  r.status = (*t)->train(data);
  r.interrupted = (*t)->interrupted();
  return r;
}

std::string bytes_of(const std::string& p) {
  auto s = read_file_to_string(p);
  EXPECT_TRUE(s.ok()) << p;
  return s.ok() ? *s : std::string();
}

// metrics.jsonl without the timing fields.
std::vector<Json> metric_rows(const std::string& out) {
  std::vector<Json> rows;
  std::string text = bytes_of(out + "/metrics.jsonl");
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    auto j = parse_json(text.substr(pos, nl - pos), "metrics");
    EXPECT_TRUE(j.ok());
    j->erase("tok_s");
    j->erase("elapsed_s");
    rows.push_back(*j);
    pos = nl + 1;
  }
  return rows;
}

TEST(Checkpoint, ResumeReproducesUninterruptedRun) {
  const std::string a = fresh_dir("full"), b = fresh_dir("resumed");
  RunResult full = run(base_config(a));
  ASSERT_TRUE(full.status.ok()) << full.status.to_string();
  ASSERT_EQ(full.steps.size(), 8u);
  EXPECT_TRUE(is_directory(a + "/checkpoint-3") && is_directory(a + "/checkpoint-6"));

  RunResult first = run(base_config(b), /*stop_after=*/5);
  ASSERT_TRUE(first.status.ok()) << first.status.to_string();
  ASSERT_TRUE(first.interrupted);
  ASSERT_EQ(first.steps.size(), 5u);
  ASSERT_TRUE(file_exists(b + "/checkpoint-5/trainer_state.json"));
  EXPECT_FALSE(file_exists(b + "/adapter_model.safetensors")) << "an interrupted run writes no final adapter";

  TrainConfig tc = base_config(b);
  tc.resume_from_checkpoint = "true";
  RunResult rest = run(tc);
  ASSERT_TRUE(rest.status.ok()) << rest.status.to_string();
  ASSERT_EQ(rest.steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const StepMetrics &g = rest.steps[i], &w = full.steps[i + 5];
    EXPECT_EQ(g.step, w.step);
    EXPECT_EQ(g.loss, w.loss) << "step " << w.step;
    EXPECT_EQ(g.grad_norm, w.grad_norm) << "step " << w.step;
    EXPECT_EQ(g.lr, w.lr) << "step " << w.step;
    EXPECT_EQ(g.tokens, w.tokens) << "step " << w.step;
  }
  EXPECT_EQ(metric_rows(a), metric_rows(b));
  EXPECT_EQ(bytes_of(a + "/adapter_model.safetensors"), bytes_of(b + "/adapter_model.safetensors"));
  EXPECT_EQ(bytes_of(a + "/checkpoint-6/optimizer.safetensors"), bytes_of(b + "/checkpoint-6/optimizer.safetensors"));
  auto st = read_json_file(b + "/checkpoint-6/trainer_state.json");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ((*st)["global_step"], 6);
  EXPECT_EQ((*st)["epoch"], 2);  // steps 1-3 epoch 0, 4-6 epoch 1: the window after 6 opens epoch 2
  EXPECT_EQ((*st)["config_fingerprint"]["lora_r"], 4);
  EXPECT_FALSE((*st)["log_history"].empty());
}

TEST(Checkpoint, DifferentConfigIsRefusedNamingTheKeys) {
  const std::string a = fresh_dir("refuse");
  TrainConfig tc = base_config(a);
  tc.max_steps = 3;
  ASSERT_TRUE(run(tc).status.ok());
  TrainConfig other = tc;
  other.lora_r = 8;
  other.sequence_len = 48;
  other.resume_from_checkpoint = a + "/checkpoint-3";
  RunResult r = run(other);
  ASSERT_FALSE(r.status.ok());
  const std::string msg = r.status.message();
  EXPECT_NE(msg.find("lora_r: checkpoint 4, this run 8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sequence_len: checkpoint 32, this run 48"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checkpoint-3"), std::string::npos) << msg;
  EXPECT_TRUE(r.steps.empty());

  other = tc;
  other.resume_from_checkpoint = a + "/nope";
  r = run(other);
  EXPECT_EQ(r.status.code(), StatusCode::kNotFound) << r.status.to_string();
}

// optimizer.safetensors holds the exact parameters and moments a resume continues from; a damaged
// one (a flipped byte keeps it a valid safetensors file) is refused by its checksum, naming it.
TEST(Checkpoint, DamagedOptimizerFileIsRefusedByItsChecksum) {
  const std::string a = fresh_dir("damaged");
  TrainConfig tc = base_config(a);
  tc.max_steps = 3;
  ASSERT_TRUE(run(tc).status.ok());
  const std::string optim = a + "/checkpoint-3/optimizer.safetensors";
  std::string bytes = bytes_of(optim);
  ASSERT_GT(bytes.size(), 64u);
  bytes[bytes.size() - 5] ^= 0x04;  // inside the last tensor's data
  ASSERT_TRUE(write_file_atomic(optim, bytes).ok());
  TrainConfig again = tc;
  again.max_steps = 4;
  again.resume_from_checkpoint = a + "/checkpoint-3";
  RunResult r = run(again);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption) << r.status.to_string();
  EXPECT_NE(r.status.message().find("optimizer.safetensors"), std::string::npos) << r.status.to_string();
  EXPECT_NE(r.status.message().find("checksum"), std::string::npos) << r.status.to_string();
  EXPECT_TRUE(r.steps.empty());
  bytes[bytes.size() - 5] ^= 0x04;  // repaired: resumes
  ASSERT_TRUE(write_file_atomic(optim, bytes).ok());
  EXPECT_TRUE(run(again).status.ok());
}

// Damaged trainer_state.json fields that parse as JSON are refused by name, never thrown past
// the reader (a log_history that is not an array once aborted the resumed run) nor wrapped (a
// negative dropout counter read as uint64) nor followed (a position past the epoch).
TEST(Checkpoint, DamagedTrainerStateFieldsAreRefusedNamingThem) {
  TrainerState good;
  good.global_step = 3;
  good.total_steps = 6;
  good.micro_batches_run = 6;
  good.log_history = Json::array({Json{{"step", 1}, {"loss", 2.5}}});
  good.best.loss = 1.25;
  good.best.step = 2;
  good.best.evals_not_improved = 1;
  const Json j = trainer_state_to_json(good);
  StatusOr<TrainerState> back = trainer_state_from_json(j, "ts");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_TRUE(back->best.loss.has_value());
  EXPECT_EQ(*back->best.loss, 1.25);
  EXPECT_EQ(back->best.step, 2);
  EXPECT_EQ(back->best.evals_not_improved, 1);
  {  // a checkpoint from before best_eval existed: no best yet
    Json old = j;
    old.erase("best_eval");
    StatusOr<TrainerState> o = trainer_state_from_json(old, "ts");
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    EXPECT_FALSE(o->best.loss.has_value());
  }
  struct Case {
    const char* key;
    Json value;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"log_history", Json(3), "log_history must be an array"},
      {"log_history", Json::object(), "log_history must be an array"},
      {"log_history", Json::array({1, "x"}), "log_history holds a number"},
      {"micro_batches_run", Json(-1), "'micro_batches_run' must be a non-negative integer"},
      {"micro_batches_run", Json(1.5), "'micro_batches_run' must be a non-negative integer"},
      {"tokens", Json(-3), "negative"},
      {"total_steps", Json(-1), "negative"},
      {"global_step", Json("x"), "field 'global_step'"},
      {"best_eval", Json(3), "best_eval"},
      {"best_eval", Json{{"eval_loss", "low"}, {"step", 1}, {"evals_not_improved", 0}}, "field 'best_eval.eval_loss'"},
      {"best_eval", Json{{"eval_loss", 1.0}, {"step", 9}, {"evals_not_improved", 0}}, "best_eval: step 9"},
      {"best_eval", Json{{"eval_loss", 1.0}, {"step", 1}, {"evals_not_improved", -2}}, "out of range"},
      {"best_eval", Json{{"eval_loss", 1.0}, {"step", 1}}, "field 'best_eval.evals_not_improved'"},
  };
  for (const Case& c : cases) {
    Json bad = j;
    bad[c.key] = c.value;
    StatusOr<TrainerState> r = trainer_state_from_json(bad, "ts.json");
    ASSERT_FALSE(r.ok()) << c.key << " = " << c.value.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().to_string();
    EXPECT_NE(r.status().message().find("ts.json"), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.key << ": " << r.status().to_string();
  }
}

TEST(Checkpoint, PositionPastTheEpochIsRefused) {
  const std::string a = fresh_dir("past_epoch");
  TrainConfig tc = base_config(a);
  tc.max_steps = 2;  // mid-epoch (3 steps an epoch)
  tc.save_steps = 1;
  ASSERT_TRUE(run(tc).status.ok());
  const std::string state = a + "/checkpoint-2/trainer_state.json";
  Json j = Json::parse(bytes_of(state));
  j["batches_in_epoch"] = 1000000;
  ASSERT_TRUE(write_file_atomic(state, j.dump()).ok());
  TrainConfig again = tc;
  again.max_steps = 4;
  again.resume_from_checkpoint = a + "/checkpoint-2";
  RunResult r = run(again);
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("1000000 micro-batches into epoch"), std::string::npos) << r.status.to_string();
  EXPECT_TRUE(r.steps.empty());
}

// Session 22 audit: a huge global_step made a resume skip to the end and exit 0. It is checked
// against the directory's name, the schedule step beside it, and the optimizer file's own step.
TEST(Checkpoint, DamagedGlobalStepIsRefused) {
  const std::string a = fresh_dir("bad_step");
  TrainConfig tc = base_config(a);
  tc.max_steps = 2;
  tc.save_steps = 1;
  ASSERT_TRUE(run(tc).status.ok());
  const std::string state = a + "/checkpoint-2/trainer_state.json";
  const std::string good = bytes_of(state);
  TrainConfig again = tc;
  again.max_steps = 4;
  // In checkpoint-2, and once copied to a directory whose name says nothing of the step.
  const std::string renamed = a + "/saved";
  std::filesystem::copy(a + "/checkpoint-2", renamed);
  for (const std::string& dir : {a + "/checkpoint-2", renamed}) {
    Json j = Json::parse(good);
    j["global_step"] = 999999999;
    j["lr_schedule_step"] = 999999999;
    ASSERT_TRUE(write_file_atomic(dir + "/trainer_state.json", j.dump()).ok());
    again.resume_from_checkpoint = dir;
    RunResult r = run(again);
    ASSERT_FALSE(r.status.ok()) << dir;
    EXPECT_EQ(r.status.code(), StatusCode::kCorruption) << r.status.to_string();
    EXPECT_NE(r.status.message().find("999999999"), std::string::npos) << r.status.to_string();
    EXPECT_TRUE(r.steps.empty());
  }
  Json j = Json::parse(good);
  j["lr_schedule_step"] = 7;
  ASSERT_TRUE(write_file_atomic(state, j.dump()).ok());
  again.resume_from_checkpoint = a + "/checkpoint-2";
  RunResult r = run(again);
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("lr_schedule_step 7"), std::string::npos) << r.status.to_string();
  ASSERT_TRUE(write_file_atomic(state, good).ok());  // repaired: resumes
  EXPECT_TRUE(run(again).status.ok());
}

// Session 23 audit: train replaced a user's own checkpoint-N directory, and wrote metrics.jsonl
// over a dataset kept in output_dir. check_output_dir refuses both before anything is loaded;
// write_checkpoint refuses the first again when it would replace it.
TEST(Checkpoint, OutputDirNeverReplacesWhatIsNotTheRuns) {
  const std::string a = fresh_dir("outdir");
  std::filesystem::create_directories(a + "/checkpoint-2");
  ASSERT_TRUE(write_file_atomic(a + "/checkpoint-2/notes.txt", "mine").ok());
  TrainConfig tc = base_config(a);
  tc.max_steps = 3;
  tc.save_steps = 1;
  Status s = check_output_dir(tc);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("holds checkpoint-2, which is not a checkpoint"), std::string::npos) << s.to_string();
  RunResult r = run(tc);  // the trainer alone (no up-front check): refused at the save of step 2
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("checkpoint-2 exists and is not a checkpoint"), std::string::npos) << r.status.to_string();
  EXPECT_EQ(bytes_of(a + "/checkpoint-2/notes.txt"), "mine");
  for (const auto& e : std::filesystem::directory_iterator(a))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  std::filesystem::remove_all(a + "/checkpoint-2");
  std::filesystem::create_directories(a + "/checkpoint-7");  // empty: nothing to lose
  EXPECT_TRUE(check_output_dir(tc).ok());

  TrainConfig inside = tc;
  inside.base_model = a + "/model";
  s = check_output_dir(inside);
  EXPECT_NE(s.message().find("holds the base model"), std::string::npos) << s.to_string();
  inside = tc;
  inside.datasets = {DatasetSpec{a + "/data/train.jsonl", "text"}};
  s = check_output_dir(inside);
  EXPECT_NE(s.message().find("holds the dataset " + a + "/data/train.jsonl"), std::string::npos) << s.to_string();
  inside = tc;
  inside.output_dir = a + "/checkpoint-7/../metrics_file";
  ASSERT_TRUE(write_file_atomic(a + "/metrics_file", "x").ok());
  s = check_output_dir(inside);
  EXPECT_NE(s.message().find("exists and is not a directory"), std::string::npos) << s.to_string();
}

TEST(Checkpoint, TotalLimitKeepsNewestAndSkipsIncompleteDirs) {
  const std::string a = fresh_dir("limit");
  TrainConfig tc = base_config(a);
  tc.max_steps = 4;
  tc.save_steps = 1;
  tc.save_total_limit = 2;
  ASSERT_TRUE(make_dirs(a + "/checkpoint-9.tmp.999999").ok());  // a dead writer's leftover
  ASSERT_TRUE(make_dirs(a + "/checkpoint-7").ok());              // no trainer_state.json: incomplete
  ASSERT_TRUE(run(tc).status.ok());
  auto cks = list_checkpoints(a);
  ASSERT_EQ(cks.size(), 2u);
  EXPECT_EQ(cks[0].first, 3);
  EXPECT_EQ(cks[1].first, 4);
  EXPECT_FALSE(is_directory(a + "/checkpoint-9.tmp.999999"));
  auto latest = resolve_resume_checkpoint("true", a);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, a + "/checkpoint-4");
  EXPECT_EQ(resolve_resume_checkpoint("true", fresh_dir("empty")).status().code(), StatusCode::kNotFound);
}

TEST(Checkpoint, NonFiniteLossStopsAndKeepsLastGoodCheckpoint) {
  const std::string a = fresh_dir("nan");
  TrainConfig tc = base_config(a);
  tc.learning_rate = 1e38;  // AdamW moves every weight by ~lr: the next forward overflows
  tc.warmup_steps = 0;
  tc.save_steps = 1;
  RunResult r = run(tc);
  ASSERT_FALSE(r.status.ok());
  const std::string msg = r.status.message();
  EXPECT_NE(msg.find("not finite"), std::string::npos) << msg;
  EXPECT_NE(msg.find("last good checkpoint is " + a + "/checkpoint-1"), std::string::npos) << msg;
  auto cks = list_checkpoints(a);
  ASSERT_EQ(cks.size(), 1u);
  EXPECT_EQ(cks[0].first, 1);
  EXPECT_FALSE(file_exists(a + "/adapter_model.safetensors"));
}

// A LayerSource whose loads start failing after `ok_steps` steps (a disk error in the store).
class FailingSource : public LayerSource {
 public:
  FailingSource(std::unique_ptr<LayerSource> in, int ok_steps) : in_(std::move(in)), ok_steps_(ok_steps) {}
  void begin_step(const std::vector<int>& v) override { in_->begin_step(v); }
  LayerWeights acquire(int l) override { return in_->acquire(l); }
  void release(int l) override { in_->release(l); }
  void end_step() override {
    in_->end_step();
    ++steps_;
  }
  Status status() const override {
    return steps_ > ok_steps_ ? IOError("reading /store/layer-001.bin: Input/output error") : Status::OK();
  }

 private:
  std::unique_ptr<LayerSource> in_;
  int ok_steps_, steps_ = 0;
};

TEST(Checkpoint, BaseWeightLoadErrorFailsTheRunNamingTheFile) {
  const std::string a = fresh_dir("ioerr");
  TrainConfig tc = base_config(a);
  tc.save_steps = 1;
  auto parts = hf_resident_parts(tc.base_model);
  ASSERT_TRUE(parts.ok());
  LayerSourceFactory inner = parts->make_layers;
  RunResult r = run(tc, 0, [inner](Backend* be, const LayerLayout& l) -> StatusOr<std::unique_ptr<LayerSource>> {
    ASSIGN_OR_RETURN(auto s, inner(be, l));
    return std::unique_ptr<LayerSource>(new FailingSource(std::move(s), 2));
  });
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("layer-001.bin"), std::string::npos) << r.status.message();
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(list_checkpoints(a).back().first, 2);
}

TEST(Checkpoint, EvalLinesEveryEvalStepsAndAtTheEnd) {
  const std::string a = fresh_dir("eval");
  TrainConfig tc = base_config(a);
  tc.max_steps = 4;
  tc.eval_steps = 3;
  tc.logging_steps = 1;
  DataLoaderSource eval(samples(3, 99), loader_opts(tc, false));
  RunResult r = run(tc, 0, nullptr, &eval);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  std::vector<int64_t> eval_steps;
  for (const Json& j : metric_rows(a)) {
    if (!j.contains("eval_loss")) continue;
    eval_steps.push_back(j["step"].get<int64_t>());
    const double loss = j["eval_loss"].get<double>();
    EXPECT_GT(loss, 1.0);
    EXPECT_NEAR(j["eval_ppl"].get<double>(), std::exp(loss), 1e-6 * std::exp(loss));
  }
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{3, 4}));
}

}  // namespace
}  // namespace st
