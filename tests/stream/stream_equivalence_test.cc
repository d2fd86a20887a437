// Streaming is bit-identical to resident (design.md §6): Model::forward_backward (embed -> layers
// -> chunked head + CE -> layers in reverse with recompute) run through ResidentLayerSource and
// through StreamedLayerSource over a RamStore / DiskStore with 2, 3 and L buffers and with some
// layers resident gives the same loss bits and the same LoRA gradient/parameter bits, over two
// optimizer steps; so does a code12 store (bf16), whose resident layers are decoded once into the
// dense layout and whose streamed ones each visit. Also: a read error on the disk tier surfaces as an error naming the file,
// without hanging the step. One OpenMP thread: spinning OpenMP workers would starve the copy
// thread on a small loaded CI machine (the test is about bits, not speed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "../store/store_test_util.h"
#include "model/model.h"
#include "model/resident_source.h"
#include "store/disk_store.h"
#include "store/ram_store.h"
#include "stream/streamed_layer_source.h"

namespace st {
namespace {

using testing_util::TempDir;

constexpr int kLayers = 4;
constexpr int64_t kSeq = 12;

struct RunResult {
  std::vector<double> losses;
  std::vector<double> evals;  // run_steps(eval_between): three eval batches' loss sums between the steps
  int eval_group = 0;         // and the model's eval group size over the source
  std::vector<float> params;
  std::vector<float> grads;
};

Batch make_batch(int64_t seed, int64_t vocab) {
  Batch b;
  b.batch = 1;
  b.seq = kSeq;
  for (int64_t t = 0; t < kSeq; ++t) {
    int32_t id = static_cast<int32_t>((seed * 131 + t * 17 + 3) % vocab);
    b.input_ids.push_back(id);
    b.labels.push_back(t == 0 ? kIgnoreIndex : id);
    b.positions.push_back(static_cast<int32_t>(t));
    b.doc_ids.push_back(0);
  }
  b.num_targets = kSeq - 1;
  return b;
}

class Equivalence : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    cfg_ = testing_util::tiny_config(kLayers);
    testing_util::write_model(cfg_, dir_->sub("model"), 11);
    testing_util::shard_or_die(dir_->sub("model"), dir_->sub("store"), DType::kF32);
  }
  static void TearDownTestSuite() { delete dir_; }

  // Two accumulation windows of two micro-batches, an AdamW update between them.
  static LoraConfig lora() {
    LoraConfig lc;
    lc.r = 4;
    lc.alpha = 8;
    lc.targets[static_cast<int>(LoraTarget::kQ)] = true;
    lc.targets[static_cast<int>(LoraTarget::kV)] = true;
    lc.targets[static_cast<int>(LoraTarget::kDown)] = true;
    return lc;
  }

  RunResult run_steps(Backend* be, LayerSource& src, DType act = DType::kF32, Recompute rc = Recompute::kFull,
                      int64_t max_tokens = kSeq, bool eval_between = false) {
    const LoraConfig lc = lora();
    ModelOptions mo;
    mo.act_dtype = act;
    mo.base_quant = act == DType::kBF16 ? BaseQuant::kCode12 : BaseQuant::kNone;
    mo.max_tokens = max_tokens;
    mo.recompute = rc;
    auto model = Model::create(cfg_, be, lc, mo).value();
    Checkpoint ck = Checkpoint::open(dir_->sub("model")).value();
    CHECK_OK(model->load_extras(ck));
    model->lora().init(5);
    RunResult r;
    for (int step = 0; step < 2; ++step) {
      Batch a = make_batch(step * 2, cfg_.vocab_size), b = make_batch(step * 2 + 1, cfg_.vocab_size);
      model->lora().zero_grads();
      StatusOr<std::vector<double>> l = model->forward_backward({&a, &b}, src, {0.1f, 0.1f});
      CHECK_OK(l.status());
      r.losses.insert(r.losses.end(), l->begin(), l->end());
      Tensor g = model->lora().grads();
      be->adamw(model->lora().params(), g, model->lora().adam_m(), model->lora().adam_v(),
                {1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, step + 1});
      if (eval_between && step == 0) {  // model/model.h Note [layer-major evaluation] where src streams
        Batch e0 = make_batch(10, cfg_.vocab_size), e1 = make_batch(11, cfg_.vocab_size), e2 = make_batch(12, cfg_.vocab_size);
        e1.seq = kSeq - 3;  // a shorter batch among them
        e1.input_ids.resize(static_cast<size_t>(e1.seq));
        e1.labels.resize(static_cast<size_t>(e1.seq));
        e1.positions.resize(static_cast<size_t>(e1.seq));
        e1.doc_ids.resize(static_cast<size_t>(e1.seq));
        e1.num_targets = e1.seq - 1;
        StatusOr<std::vector<double>> ev = model->eval_loss_sums({&e0, &e1, &e2}, src);
        CHECK_OK(ev.status());
        r.evals = *ev;
        r.eval_group = model->eval_group_size(src);
      }
    }
    be->sync_all();
    Tensor g = model->lora().grads();
    r.grads.assign(g.ptr<float>(), g.ptr<float>() + g.numel());
    r.params = model->lora().params_to_host();
    return r;
  }

  static void expect_identical(const RunResult& a, const RunResult& b, const std::string& what) {
    ASSERT_EQ(a.losses.size(), b.losses.size());
    for (size_t i = 0; i < a.losses.size(); ++i)
      EXPECT_EQ(0, std::memcmp(&a.losses[i], &b.losses[i], sizeof(double)))
          << what << " loss " << i << ": " << a.losses[i] << " vs " << b.losses[i];
    EXPECT_EQ(a.evals, b.evals) << what << " eval loss sums";
    ASSERT_EQ(a.grads.size(), b.grads.size());
    EXPECT_EQ(0, std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * 4)) << what << " grads";
    EXPECT_EQ(0, std::memcmp(a.params.data(), b.params.data(), a.params.size() * 4)) << what << " params";
  }

  static TempDir* dir_;
  static ModelConfig cfg_;
};

TempDir* Equivalence::dir_ = nullptr;
ModelConfig Equivalence::cfg_;

TEST_F(Equivalence, StreamedEqualsResidentBitForBit) {
  auto be = make_backend(DeviceKind::kCpu, {.device_index = 0, .num_threads = 1}).value();
  Checkpoint ck = Checkpoint::open(dir_->sub("model")).value();
  LayerLayout layout = make_layer_layout(cfg_, DType::kF32);
  auto resident = ResidentLayerSource::from_checkpoint(be.get(), cfg_, layout, ck).value();
  RunResult ref = run_steps(be.get(), *resident);
  ASSERT_EQ(ref.losses.size(), 4u);
  for (double l : ref.losses) EXPECT_GT(l, 0.0);

  auto ram = RamStore::open(dir_->sub("store"), be.get()).value();
  auto disk = DiskStore::open(dir_->sub("store"), be.get()).value();
  struct Case {
    LayerStore* store;
    int slots;
    std::vector<int> resident;
    CopyMode mode;
  };
  std::vector<Case> cases = {
      {ram.get(), 2, {}, CopyMode::kThread},      {ram.get(), 3, {}, CopyMode::kThread},
      {ram.get(), kLayers, {}, CopyMode::kThread}, {ram.get(), 2, {1}, CopyMode::kThread},
      {ram.get(), 2, {0, 2}, CopyMode::kInline},  {disk.get(), 2, {}, CopyMode::kThread},
      {disk.get(), 3, {3}, CopyMode::kThread},    {disk.get(), 1, {}, CopyMode::kInline},
  };
  for (const Case& c : cases) {
    std::string what = Str() << c.store->tier() << " slots " << c.slots << " resident " << c.resident.size()
                             << (c.mode == CopyMode::kThread ? " thread" : " inline");
    StreamedSourceOptions o;
    o.num_slots = c.slots;
    o.resident_layers = c.resident;
    o.copy_mode = c.mode;
    auto src = StreamedLayerSource::create(be.get(), c.store, o).value();
    RunResult r = run_steps(be.get(), *src);
    ASSERT_TRUE(src->status().ok()) << what << ": " << src->status().to_string();
    expect_identical(ref, r, what);
    PrefetchStats s = src->stats();
    int streamed = kLayers - static_cast<int>(c.resident.size());
    // 2 steps x 2 micro-batches x (forward + backward) visits of every streamed layer.
    EXPECT_EQ(s.visits, 8 * streamed) << what;
    EXPECT_EQ(s.loads + s.reuse_hits, s.visits) << what;
    if (c.slots >= streamed) EXPECT_EQ(s.loads, streamed) << what;  // everything fits: loaded once
    else EXPECT_GT(s.reuse_hits, 0) << what;                         // the turn reuses slots
  }
}

// stream/prefetcher.h Note [lent activation memory]: with recompute none and an arena sized for
// 256 tokens each layer's saved region holds a layer blob, so the pool borrows them; the bits stay
// those of the resident run (and of kFull: recompute never changes the numerics), with fewer loads.
// Note [lent region spans]: at 256 tokens a region holds a blob; at 32 / 16 it takes 2 / 4 adjacent ones.
TEST_F(Equivalence, LentActivationMemoryKeepsTheBits) {
  auto be = make_backend(DeviceKind::kCpu, {.device_index = 0, .num_threads = 1}).value();
  Checkpoint ck = Checkpoint::open(dir_->sub("model")).value();
  auto resident = ResidentLayerSource::from_checkpoint(be.get(), cfg_, make_layer_layout(cfg_, DType::kF32), ck).value();
  const RunResult ref = run_steps(be.get(), *resident);
  auto ram = RamStore::open(dir_->sub("store"), be.get()).value();
  auto disk = DiskStore::open(dir_->sub("store"), be.get()).value();
  for (int64_t tokens : {256, 32, 16}) {
    const RunResult ref_none = run_steps(be.get(), *resident, DType::kF32, Recompute::kNone, tokens);
    expect_identical(ref, ref_none, "resident, recompute none");
    const size_t region = (layer_saved_bytes(cfg_, tokens, lora(), DType::kF32, Recompute::kNone) + 255) / 256 * 256;
    const size_t k = (ram->manifest().layer_bytes + region - 1) / region;
    EXPECT_EQ(k, tokens == 256 ? 1u : tokens == 32 ? 2u : 4u) << "regions a blob needs at " << tokens << " tokens";
    for (LayerStore* store : {static_cast<LayerStore*>(ram.get()), static_cast<LayerStore*>(disk.get())})
      for (CopyMode mode : {CopyMode::kThread, CopyMode::kInline})
        for (bool lend : {true, false}) {
          const std::string what = Str() << tokens << " tokens " << store->tier()
                                         << (mode == CopyMode::kThread ? " thread" : " inline")
                                         << (lend ? " lent" : " not lent");
          if (!lend) setenv("STREAMTUNE_LEND_ACTIVATIONS", "0", 1);
          StreamedSourceOptions o;
          o.num_slots = 2;
          o.resident_layers = store == disk.get() ? std::vector<int>{1} : std::vector<int>{};
          o.copy_mode = mode;
          auto src = StreamedLayerSource::create(be.get(), store, o).value();
          RunResult r = run_steps(be.get(), *src, DType::kF32, Recompute::kNone, tokens);
          unsetenv("STREAMTUNE_LEND_ACTIVATIONS");
          ASSERT_TRUE(src->status().ok()) << what << ": " << src->status().to_string();
          expect_identical(ref, r, what);
          const int streamed = kLayers - static_cast<int>(o.resident_layers.size());
          // Runs of consecutive streamed layers: {0, 1, 2, 3}, or {0} and {2, 3} around resident 1.
          const int spans = o.resident_layers.empty() ? kLayers / static_cast<int>(k) : 1 / static_cast<int>(k) + 2 / static_cast<int>(k);
          EXPECT_EQ(src->lent_slots(), lend ? spans : 0) << what;
          // 2 steps x 2 micro-batches: without lending 2 slots reload all but the pair at each turn
          // and boundary; with it the backward's loads stay for the next micro-batch's forward.
          const PrefetchStats s = src->stats();
          if (lend) {
            EXPECT_LT(s.loads, 4 * (2 * streamed - 4) + 4) << what;
          }
          EXPECT_EQ(s.loads + s.reuse_hits, 8 * streamed) << what;
        }
  }
}

// model/model.h Note [layer-major evaluation]: an eval of three batches between two training steps
// goes through the streamed layers in groups (each streamed layer loaded once a group),
// gives the loss sums of the resident run (one batch at a time), and leaves the training after it
// -- lent regions included -- the bits of the resident run.
TEST_F(Equivalence, LayerMajorEvalBetweenStepsKeepsTheBits) {
  auto be = make_backend(DeviceKind::kCpu, {.device_index = 0, .num_threads = 1}).value();
  Checkpoint ck = Checkpoint::open(dir_->sub("model")).value();
  auto resident = ResidentLayerSource::from_checkpoint(be.get(), cfg_, make_layer_layout(cfg_, DType::kF32), ck).value();
  auto ram = RamStore::open(dir_->sub("store"), be.get()).value();
  auto disk = DiskStore::open(dir_->sub("store"), be.get()).value();
  for (Recompute rc : {Recompute::kFull, Recompute::kNone}) {
    const int64_t tokens = rc == Recompute::kNone ? 256 : kSeq;  // none at 256: every region lent
    const RunResult ref = run_steps(be.get(), *resident, DType::kF32, rc, tokens, /*eval_between=*/true);
    ASSERT_EQ(ref.evals.size(), 3u);
    EXPECT_NE(ref.evals[0], ref.evals[1]);
    for (LayerStore* store : {static_cast<LayerStore*>(ram.get()), static_cast<LayerStore*>(disk.get())}) {
      StreamedSourceOptions o;
      o.num_slots = 2;
      o.resident_layers = store == disk.get() ? std::vector<int>{2} : std::vector<int>{};
      auto src = StreamedLayerSource::create(be.get(), store, o).value();
      const std::string what = Str() << store->tier() << " " << recompute_name(rc);
      const RunResult r = run_steps(be.get(), *src, DType::kF32, rc, tokens, /*eval_between=*/true);
      ASSERT_TRUE(src->status().ok()) << what << ": " << src->status().to_string();
      expect_identical(ref, r, what);
      const int streamed = kLayers - static_cast<int>(o.resident_layers.size());
      ASSERT_GE(r.eval_group, 2) << what << ": the evals would not be grouped";
      const int groups = (3 + r.eval_group - 1) / r.eval_group;
      EXPECT_EQ(src->stats().visits, (8 + groups) * streamed) << what << ": 8 training visits a layer, 1 per eval group";
    }
  }
}

TEST_F(Equivalence, Code12StoreEqualsTheDenseBf16BaseResidentOrStreamed) {
  auto be = make_backend(DeviceKind::kCpu, {.device_index = 0, .num_threads = 1}).value();
  Checkpoint ck = Checkpoint::open(dir_->sub("model")).value();
  auto dense = ResidentLayerSource::from_checkpoint(be.get(), cfg_, make_layer_layout(cfg_, DType::kBF16), ck).value();
  const RunResult ref = run_steps(be.get(), *dense, DType::kBF16);
  ShardOptions so;
  so.dtype = DType::kBF16;
  so.quant = BaseQuant::kCode12;
  so.out_dir = dir_->sub("store_code12");
  CHECK_OK(shard_model_path(dir_->sub("model"), so).status());
  auto ram = RamStore::open(so.out_dir, be.get()).value();
  auto disk = DiskStore::open(so.out_dir, be.get()).value();
  for (auto [store, resident] : std::vector<std::pair<LayerStore*, std::vector<int>>>{
           {ram.get(), {}}, {ram.get(), {1, 2}}, {disk.get(), {0}}, {ram.get(), {0, 1, 2, 3}}}) {
    StreamedSourceOptions o;
    o.resident_layers = resident;
    auto src = StreamedLayerSource::create(be.get(), store, o).value();
    const std::string what = Str() << "code12 " << store->tier() << " resident " << resident.size();
    for (int l : resident) {  // Note [resident code12 layers]: decoded once, the dense layout
      LayerWeights w = src->acquire(l);
      EXPECT_EQ(w.quant, BaseQuant::kNone) << what;
      EXPECT_EQ(w.q.dtype, DType::kBF16) << what;
      src->release(l);
    }
    RunResult r = run_steps(be.get(), *src, DType::kBF16);
    ASSERT_TRUE(src->status().ok()) << what << ": " << src->status().to_string();
    expect_identical(ref, r, what);
  }
}

// Fails reads of one layer file (the disk tier's injectable fault).
class FailLayerReader : public RangeReader {
 public:
  Status read(const std::string& path, uint64_t off, size_t len, void* dst) override {
    if (path.find("layer_002") != std::string::npos) return IOError("reading store file " + path + ": injected EIO");
    return real_->read(path, off, len, dst);
  }

 private:
  std::unique_ptr<RangeReader> real_ = make_file_reader();
};

TEST_F(Equivalence, DiskReadErrorSurfacesNamingTheFileWithoutHanging) {
  auto be = make_backend(DeviceKind::kCpu, {.device_index = 0, .num_threads = 1}).value();
  FailLayerReader reader;
  DiskStoreOptions dopts;
  dopts.reader = &reader;
  auto disk = DiskStore::open(dir_->sub("store"), be.get(), dopts).value();
  auto src = StreamedLayerSource::create(be.get(), disk.get(), {}).value();
  (void)run_steps(be.get(), *src);  // completes (values are garbage), must not hang
  Status s = src->status();
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find("layer_002.safetensors"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace st
